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
//! out. It does not once both of its files were replaced while held (`git clean -fdX`
//! deletes the lock file, `rsync -a` from another clone replaces `.ipamctl`:
//! [`super::lock`]): a second claim then locks the new files, both create a file, and each
//! may see the other's. Were both to undo, the owner would hold nothing after both printed
//! an address (the long SIGKILL run with the outside world found this once in 10,002 kills;
//! `tests/outside_world.rs` replays it with fail points). So:
//! 1. a claim that found another file of its owner undoes its own, then checks that the
//!    marker or the lock file it holds is still the one at its path; if so, it answers the
//!    other file. Every lock takes both files, so a claim that locked after that check
//!    waits on it; one replaced alone (`rsync -a` of the marker, `git clean` of the lock
//!    file) changes nothing, as before;
//! 2. if both were replaced, the claim puts its file back (exclusively: if its address was
//!    taken in that instant it fails, exit 1, having printed nothing), locks the lock file
//!    at the path now, waiting until a claim inside on it has decided, lists again and goes
//!    back to 1, now on that lock file (three times at most). It waits only for a lock file
//!    newer than its own, and a claim inside never waits for a marker, so no two claims
//!    wait for each other;
//! 3. a claim that could not decide keeps its file. The owner may then hold two addresses
//!    (`check` reports it); every address printed is held.
//!
//! What is left: two claims each of whose files was replaced, one each (one's marker and
//! the other's lock file, at interleaved instants), both see an anchor in place and both
//! give way. Before this, any two claims inside at once did.
//!
//! Three attempts before this one failed the long stress run on the one-second-timestamp
//! file system, with `rsync -a` and `git clean -fdX` both in loops: locking every replaced
//! file again, marker included, made a claim whose marker alone was replaced wait 30 s for
//! its own hold on the lock file; deciding on the lock file alone, trying a new one once
//! without waiting, kept a second file whenever the claim inside on it had not finished (29
//! violations in 34,689 runs); deciding on the lock file alone and waiting kept one whenever
//! a lock file could not be made as `git clean` removed it (24 violations).
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
        // The marker's descriptor comes first, then the lock file's, if one could be made.
        let Some(marker) = held.first() else {
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
            let file = relocked.last().or(held.get(1));
            failpoint!("claim-before-undo");
            let mut ours = |now: &[u8]| now == bytes.as_bytes();
            self.delete_if(ObjectKind::Allocation, ns, name, &mut ours)?;
            // Checked after the undo: a claim that locks a file newer than this one's then
            // lists after the undo, and does not see this claim's file.
            if self.still_excludes(marker, file) {
                return Ok(Some(other));
            }
            // Both replaced meanwhile: put this claim back, and decide again under the lock
            // file at the path now.
            if !self.create(ObjectKind::Allocation, ns, name, bytes.as_bytes())? {
                return Err(crate::error::Error::io(
                    self.locate(ObjectKind::Allocation, ns, name),
                    std::io::Error::other(
                        "the claim was interrupted by its lock files being replaced under it \
                         and its address taken meanwhile; nothing was printed, run it again",
                    ),
                ));
            }
            if relocked.len() == RELOCKS {
                break;
            }
            // The other file may be a claim of another ipamctl process that locked the lock
            // file at the path now. Lock that one too, which waits until such a claim has
            // decided, and look again.
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
