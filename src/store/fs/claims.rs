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
//! 1. a claim undoes its file only if, after the listing that found the other file, the
//!    lock file it holds is still the one at its path (for a hold on the marker alone: the
//!    marker is, and no lock file exists). The files at a path only ever get newer, and a
//!    held one keeps its inode number: a claim inside at the same time on another lock
//!    file locked that one later, after this claim's check, so its look-up found this
//!    claim's file and it created none; of two claims that saw each other, at most one
//!    undoes. The marker alone being replaced (`rsync -a`) changes nothing: the lock file
//!    still excludes, so a returned file is undone as before;
//! 2. a claim whose lock file was replaced tries once, without waiting, to lock the one at
//!    the path now (a claim holding it may be waiting for the marker this one holds: a
//!    wait could be a deadlock), and if it gets it, lists again and goes back to 1;
//! 3. a claim that could not decide under a lock that excludes keeps its file. The owner
//!    may then hold two addresses (`check` reports it); every address printed is held.
//!
//! (A first attempt locked every replaced anchor again and waited for it: a claim whose
//! marker alone was replaced then waited for its own hold on the lock file, and the long
//! stress run on the one-second-timestamp file system timed out on it, 30 s.)
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
        let Some(marker) = held.first() else {
            return Ok(None);
        };
        // A lock taken again on the lock file now at the path, held until the decision is
        // carried out.
        let mut relocked: Option<OwnedFd> = None;
        loop {
            let Some(other) = self.appeared_for_owner(ns, manifest, &taken)? else {
                return Ok(None);
            };
            let file = relocked.as_ref().or(held.get(1));
            if self.still_excludes(marker, file) {
                failpoint!("claim-before-undo");
                let bytes = yaml::encode(manifest);
                let mut ours = |now: &[u8]| now == bytes.as_bytes();
                self.delete_if(
                    ObjectKind::Allocation,
                    ns,
                    &manifest.metadata.name,
                    &mut ours,
                )?;
                return Ok(Some(other));
            }
            if relocked.is_some() {
                break;
            }
            // The lock file was replaced (`git clean -fdX`): the other file may be a claim of
            // another ipamctl process that locked the new one. Lock that one too, without
            // waiting (a claim holding it may be waiting for a file this one holds), and
            // look again.
            match self.try_lock_file(target) {
                Some(fd) => relocked = Some(fd),
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
