//! Claims and guarded releases on the filesystem ([`Claims`]), and the file store's unit of
//! work and (absent) audit log.
//!
//! A claim is a create-only write of the allocation's file: the file name is the arbiter
//! between claimers of one address. Nothing on disk arbitrates between two requests for one
//! owner, so the owner's lock does: [`crate::store::Locks::lock_claim`] takes it, and a
//! claim's caller holds it from its look-up until this write is durable, so a claim here
//! never answers [`Claim::OwnerHolds`]. A release takes the same lock itself, for the owner
//! the caller read in the file, and reads the file again under it (invariant 5 of
//! [`crate::engine`]); its delete then removes only the file it read, whatever happened to
//! the name meanwhile ([`crate::store::Objects::delete_if`]).
//!
//! The owner lock keeps ipamctl's own claims for one owner apart, not an outside writer: a
//! `git checkout` that relabels the owner's file unlinks it and creates it again, and a
//! claim whose look-up falls between the two finds nothing. So after its create a claim
//! lists the pool again and reads the files that appeared since its look-up: if one is the
//! same owner's, the claim undoes its own file and answers that one
//! ([`Claim::OwnerHolds`]). A replacement that straddles the whole claim is not seen (README's
//! Guarantees; `check` reports the duplicate owner).
//!
//! # Undoing only under a lock that still excludes
//!
//! That undo is safe only while the owner lock keeps every other ipamctl claim of the owner
//! out. It does not once the lock file was replaced while held and the marker too
//! (`git clean -fdX` deletes the lock file, `rsync -a` from another clone replaces
//! `.ipamctl`: [`super::lock`]): a second claim then locks the new files, both create a
//! file, and each may see the other's. Were both to undo, the owner would hold nothing
//! after both printed an address (the long SIGKILL run with the outside world found this
//! once in 10,002 kills; `tests/outside_world.rs` replays it with fail points). So:
//! 1. a claim that found another file of its owner undoes its own file, then checks that
//!    the lock file it holds is still the one at its path; if so, it answers the other
//!    file. The files at a path only ever get newer, and a held one keeps its inode number:
//!    a claim inside at the same time on a newer lock file locked it after this check, so
//!    it listed after this undo and sees no file of this claim's (if it locked it before
//!    its look-up, the look-up found the other file and it created none). Of two claims
//!    that saw each other, at most one gives way. If the lock file was replaced meanwhile,
//!    the claim puts its file back (exclusively: if its address was taken in that instant,
//!    it fails, exit 1, having printed nothing) and goes on to 2. The marker alone being
//!    replaced (`rsync -a`) changes nothing: the lock file still excludes;
//! 2. a claim whose lock file was replaced (or that holds the marker alone, no lock file
//!    having been made) locks the one at the path now, waiting until a claim inside on it
//!    has decided, then lists again and goes back to 1 (three times at most). It waits only for a lock file newer than its own and holds no newer one, and a
//!    claim inside never waits for a marker, so no two claims wait for each other;
//! 3. a claim that could not decide under a lock that excludes keeps its file. The owner
//!    may then hold two addresses (`check` reports it); every address printed is held.
//!
//! Two attempts before this one failed the long stress run on the one-second-timestamp file
//! system: locking every replaced anchor again, marker included, made a claim whose marker
//! alone was replaced wait 30 s for its own hold on the lock file; trying the new lock file
//! once without waiting kept a second file whenever the claim inside on it had not yet
//! finished (29 violations, owners with two addresses, in 34,689 runs).
//!
//! The cost is nothing on the common path: the lock file is looked at only when a returned
//! file was found.

use std::net::IpAddr;
use std::os::fd::OwnedFd;

use crate::error::Result;
use crate::model::{AllocationManifest, Namespace};
use crate::store::fs::FsStore;
use crate::store::fs::lock::{Target, scope_text};
use crate::store::read::read_allocation;
use crate::store::{Audit, Claim, Claims, LockMode, ObjectKind, Objects, Release, Units};
use crate::yaml;

/// How many times a claim whose lock file was replaced under it locks the one at the path
/// again before it gives up deciding and keeps its file.
const RELOCKS: usize = 3;

impl Claims for FsStore {
    fn claim(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim> {
        failpoint!("claim-before-create");
        let claim = self.claim_copy(ns, manifest)?;
        if let Claim::Claimed = claim
            && let Some(held) = self.yield_to_returned_owner(ns, manifest)?
        {
            return Ok(Claim::OwnerHolds(Box::new(held)));
        }
        if let Claim::Claimed = claim {
            failpoint!("allocate-before-index");
            // After the claim is durable, so that the hint never names an address the owner
            // does not hold; best effort, as the hint is only advice.
            let spec = &manifest.spec;
            self.write_hint(ns, &spec.pool, spec.owner.key(), spec.address);
        }
        Ok(claim)
    }

    fn claim_copy(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim> {
        let created = self.create(
            ObjectKind::Allocation,
            ns,
            &manifest.metadata.name,
            yaml::encode(manifest).as_bytes(),
        )?;
        Ok(if created {
            Claim::Claimed
        } else {
            Claim::AddressTaken
        })
    }

    fn release(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        before_delete: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Release> {
        let name = &expected.metadata.name;
        // Whoever deletes this file holds this lock, and read the file after taking it:
        // nobody can release the address and claim it again for another owner meanwhile.
        let _owner = self.lock(
            Target::Owner {
                scope: scope_text(ns),
                pool: expected.spec.pool.as_str(),
                key: expected.spec.owner.key(),
            },
            LockMode::Exclusive,
        )?;
        match read_allocation(self, ns, name)? {
            Some(Ok(now)) if now == *expected => {
                before_delete()?;
                // The name may have changed hands since that read (an outside `rm` or `git
                // pull`, then a claim for another owner, who holds another owner lock): only
                // the file taken from the name and found to be this one is deleted.
                let mut ours = |bytes: &[u8]| {
                    std::str::from_utf8(bytes)
                        .ok()
                        .and_then(|text| yaml::decode_allocation(text).ok())
                        .is_some_and(|m| m == *expected)
                };
                Ok(
                    match self.delete_if(ObjectKind::Allocation, ns, name, &mut ours)? {
                        // Gone since the read: not by this release, so "changed".
                        Release::Gone => Release::Changed,
                        other => other,
                    },
                )
            }
            None => Ok(Release::Gone),
            Some(_) => Ok(Release::Changed),
        }
    }
}

impl FsStore {
    /// Records what an owner look-up that found nothing saw taken, for the claim after it.
    pub(super) fn remember_looked(
        &self,
        ns: Option<&Namespace>,
        pool: &crate::model::PoolName,
        key: u64,
        taken: &[IpAddr],
    ) {
        let mut looked = self.looked.lock().unwrap_or_else(|e| e.into_inner());
        let at = (scope_text(ns).to_owned(), pool.as_str().to_owned(), key);
        looked.insert(at, taken.to_vec());
    }

    /// After a claim's create (the claim's owner lock held): if the owner's file came back
    /// while the claim ran, undoes the claim and returns that file's allocation. Decides
    /// only under a lock whose anchors are intact; see "A returned owner file" in the module
    /// docs for why, and why a claim whose anchors were replaced locks again first.
    fn yield_to_returned_owner(
        &self,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
    ) -> Result<Option<AllocationManifest>> {
        let spec = &manifest.spec;
        let at = (
            scope_text(ns).to_owned(),
            spec.pool.as_str().to_owned(),
            spec.owner.key(),
        );
        let looked = self
            .looked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&at);
        // Without a look-up to compare with (a claim made without one), nothing is read.
        let Some(taken) = looked else {
            return Ok(None);
        };
        let target = Target::Owner {
            scope: scope_text(ns),
            pool: spec.pool.as_str(),
            key: spec.owner.key(),
        };
        let Some(held) = self.holding(target) else {
            return Ok(None);
        };
        // Locks taken again on the lock file at the path, held until the decision is carried
        // out; the last one is what the decision rests on.
        let mut relocked: Vec<OwnedFd> = Vec::new();
        let bytes = yaml::encode(manifest);
        let name = &manifest.metadata.name;
        loop {
            let Some(other) = self.appeared_for_owner(ns, manifest, &taken)? else {
                return Ok(None);
            };
            // The lock file held: the marker's descriptor comes first, then the lock file's,
            // if one could be made.
            if let Some(file) = relocked.last().or(held.get(1)) {
                failpoint!("claim-before-undo");
                let mut ours = |now: &[u8]| now == bytes.as_bytes();
                self.delete_if(ObjectKind::Allocation, ns, name, &mut ours)?;
                // Checked after the undo: a claim that locks a newer lock file than this
                // one's then lists after the undo, and does not see this claim's file.
                if self.still_excludes(file) {
                    return Ok(Some(other));
                }
                // Replaced meanwhile: put this claim back and decide again under the new one.
                if !self.create(ObjectKind::Allocation, ns, name, bytes.as_bytes())? {
                    return Err(crate::error::Error::io(
                        self.locate(ObjectKind::Allocation, ns, name),
                        std::io::Error::other(
                            "the claim was interrupted by a lock file replaced under it and its \
                             address taken meanwhile; nothing was printed, run it again",
                        ),
                    ));
                }
            }
            if relocked.len() == RELOCKS {
                break;
            }
            // The lock file was replaced (`git clean -fdX`), or none was held: the other file
            // may be a claim of another ipamctl process that locked the one at the path now.
            // Lock that one too, which waits until such a claim has decided, and look again.
            match self.lock_file_now(target) {
                Some(fd) => relocked.push(fd),
                None => break,
            }
        }
        // Not decided under a lock that excludes: keep this claim. The owner may hold two
        // addresses, which `check` reports; every claimer printed one that is held.
        Ok(None)
    }

    /// An allocation of the same owner in the pool that was not there when the claim's
    /// look-up ran (a file the look-up, which saw `taken`, did not see), settled, if any.
    /// Only the names that appeared since are read, so this costs one listing.
    fn appeared_for_owner(
        &self,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
        taken: &[IpAddr],
    ) -> Result<Option<AllocationManifest>> {
        failpoint!("claim-before-recheck");
        let spec = &manifest.spec;
        let Some(dir) = self.dir(ObjectKind::Allocation, ns, false)? else {
            return Ok(None);
        };
        let pool = spec.pool.as_str();
        let listed = self
            .pool_names(&dir, Some(pool))?
            .remove(pool)
            .unwrap_or_default();
        for address in listed {
            if address == spec.address || taken.binary_search(&address).is_ok() {
                continue;
            }
            let file = format!(
                "{}.yaml",
                crate::model::allocation_name(&spec.pool, address)
            );
            if let Some(read) = self.read_whole(&dir, ns, &file)?
                && let Ok(m) = read.parsed
                && m.spec.owner == spec.owner
                && m.spec.address == address
            {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }
}

impl Units for FsStore {
    /// Runs `work` as it is: each write is durable on its own, and the locks `work` takes
    /// keep its steps apart from other processes'.
    fn atomically(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        work()
    }
}

/// A state directory's history is git's: the default answer says so.
impl Audit for FsStore {}
