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
//! ([`Claim::OwnerHolds`]). A replacement that straddles the whole claim is not seen
//! (`docs/src/guarantees.md`; `check` reports the duplicate owner).
//!
//! # Undoing only under the owner's lock
//!
//! That undo is safe because the owner lock keeps every other ipamctl claim of the owner out
//! for the whole claim, whatever outside tools do to the files meanwhile: the lock file is
//! fenced by the root directory's `flock`, so deleting it (`git clean -fdX`) or replacing
//! the marker (`rsync -a`) lets no second claim in beside this one ([`super::lock`]). The
//! other file is therefore never a concurrent claim's: it came from outside, and it is the
//! owner's answer. (The design before kept a lock on the marker too and lost exclusion when
//! both were replaced at once; it needed a second look, put-backs and relocking after the
//! fact, and still failed the long stress runs: docs/src/evidence.md.)
//!
//! The cost is nothing on the common path: only the names that appeared since the look-up
//! are read.
//!
//! Every race of the owner look-up, and where it is closed: [`crate::store::fs::owner`].

use crate::error::Result;
use crate::model::{AllocationManifest, Namespace};
use crate::store::fs::FsStore;
use crate::store::fs::lock::Target;
use crate::store::read::read_allocation;
use crate::store::{
    Audit, Claim, Claims, LockMode, MacChange, ObjectKind, Objects, Release, Units,
};
use crate::yaml;

impl Claims for FsStore {
    fn claim(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim> {
        failpoint!("claim-before-create");
        let claim = self.claim_copy(ns, manifest)?;
        if let Claim::Claimed = claim
            && let Some(held) = self.yield_to_returned_owner(ns, manifest)?
        {
            // The owner's own file came back: the MAC's record names this owner, and names
            // the returned allocation if that one holds the MAC (else it goes).
            if held.spec.mac.is_some() && held.spec.mac == manifest.spec.mac {
                self.take_mac(ns, &held)?;
            } else {
                self.drop_mac(ns, manifest)?;
            }
            return Ok(Claim::OwnerHolds(Box::new(held)));
        }
        if let Claim::Claimed = claim {
            failpoint!("allocate-before-index");
            // After the claim is made, so that the hint never names an address the owner
            // does not hold (in a batch, its name may not be durable yet: after a crash the
            // hint may name a file that is gone, which a look-up that reads the hint checks,
            // as it checks every hint); best effort, as the hint is only advice.
            let spec = &manifest.spec;
            self.write_hint(ns, &spec.pool, spec.owner.key(), spec.address);
        }
        Ok(claim)
    }

    fn claim_copy(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim> {
        // The MAC's record first, the allocation after (macs.rs): an allocation with a MAC
        // is never without the record that guards it, whatever kills this process.
        if let Some(holder) = self.take_mac(ns, manifest)? {
            return Ok(Claim::MacHeld(Box::new(holder)));
        }
        let bytes = yaml::encode(manifest);
        let name = &manifest.metadata.name;
        failpoint!("claim-after-mac-record");
        let created = self.create_with(
            ObjectKind::Allocation,
            ns,
            name,
            bytes.as_bytes(),
            self.flusher.get(),
        );
        match created {
            Ok(true) => match self.confirm_mac(ns, manifest) {
                Ok(None) => Ok(Claim::Claimed),
                Ok(Some(holder)) => {
                    self.undo_claim(ns, manifest)?;
                    Ok(Claim::MacHeld(Box::new(holder)))
                }
                Err(e) => {
                    self.undo_claim(ns, manifest)?;
                    Err(e)
                }
            },
            // Taken, or not written (a symlink or a FIFO planted at the name, a full disk):
            // the record this claim made goes (only while it still names this claim).
            Ok(false) => {
                self.drop_mac(ns, manifest)?;
                Ok(Claim::AddressTaken)
            }
            Err(e) => {
                self.drop_mac(ns, manifest)?;
                Err(e)
            }
        }
    }

    fn release(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        lapsed: Option<std::time::Duration>,
        before_delete: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Release> {
        let name = &expected.metadata.name;
        // Whoever deletes this file holds this lock, and read the file after taking it:
        // nobody can release the address and claim it again for another owner meanwhile.
        let _owner = Target::owners(ns, &expected.spec.pool, &expected.spec.owner)
            .map(|target| self.lock(target, LockMode::Exclusive))
            .collect::<Result<Vec<_>>>()?;
        match read_allocation(self, ns, name)? {
            // A lease renewed since it was judged lapsed is another file: not `expected`.
            // Judged again here, under the lock, by this machine's clock.
            Some(Ok(now))
                if lapsed.is_some_and(|grace| {
                    !now.spec.lapsed(crate::model::Timestamp::now(), grace)
                }) =>
            {
                Ok(Release::Changed)
            }
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
                let released = match self.delete_if(ObjectKind::Allocation, ns, name, &mut ours)? {
                    // Gone since the read: not by this release, so "changed".
                    Release::Gone => Release::Changed,
                    other => other,
                };
                // The allocation first, its MAC's record after, and only while the record
                // still names this owner (macs.rs).
                if released == Release::Deleted {
                    failpoint!("release-before-mac-drop");
                    self.drop_mac(ns, expected)?;
                }
                Ok(released)
            }
            None => Ok(Release::Gone),
            Some(_) => Ok(Release::Changed),
        }
    }

    fn renew(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        updated: &AllocationManifest,
    ) -> Result<bool> {
        let name = &expected.metadata.name;
        // Under the owner's claim lock (the caller's): no ipamctl release of this owner
        // runs beside it (a release takes that lock and reads the file after), so the file
        // read here is the one replaced below, atomically (readers see one or the other).
        match read_allocation(self, ns, name)? {
            Some(Ok(now)) if now == *expected => {}
            _ => return Ok(false),
        }
        failpoint!("renew-before-replace");
        self.replace(
            ObjectKind::Allocation,
            ns,
            name,
            yaml::encode(updated).as_bytes(),
        )?;
        Ok(true)
    }

    fn claim_mac(
        &self,
        ns: Option<&Namespace>,
        held: &AllocationManifest,
    ) -> Result<Option<AllocationManifest>> {
        self.take_mac(ns, held)
    }

    fn set_mac(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        updated: &AllocationManifest,
    ) -> Result<MacChange> {
        let name = &expected.metadata.name;
        // Under the owner's claim lock (the caller's): no ipamctl release or claim of this
        // owner runs beside it, so the file read here is the one rewritten below, unless an
        // outside writer changes it in between (then that writer's change is lost, as any
        // two writers of one file without a lock lose one).
        match read_allocation(self, ns, name)? {
            Some(Ok(now)) if now == *expected => {}
            _ => return Ok(MacChange::Moved),
        }
        let new_mac = updated.spec.mac.is_some() && updated.spec.mac != expected.spec.mac;
        // The new MAC's record first, as a claim's (macs.rs), then the allocation, then the
        // old MAC's record: a kill between two steps leaves a record naming this owner that
        // its allocation does not bear out, which the next claim of that MAC takes over.
        if new_mac && let Some(holder) = self.take_mac(ns, updated)? {
            return Ok(MacChange::MacHeld(Box::new(holder)));
        }
        failpoint!("mac-set-after-record");
        let replaced = self.replace(
            ObjectKind::Allocation,
            ns,
            name,
            yaml::encode(updated).as_bytes(),
        );
        if let Err(e) = replaced {
            if new_mac {
                self.drop_mac(ns, updated)?;
            }
            return Err(e);
        }
        if new_mac && let Some(holder) = self.confirm_mac(ns, updated)? {
            self.replace(
                ObjectKind::Allocation,
                ns,
                name,
                yaml::encode(expected).as_bytes(),
            )?;
            return Ok(MacChange::MacHeld(Box::new(holder)));
        }
        failpoint!("mac-set-before-drop");
        if expected.spec.mac.is_some() && expected.spec.mac != updated.spec.mac {
            self.drop_mac(ns, expected)?;
        }
        Ok(MacChange::Changed)
    }
}

impl Units for FsStore {
    /// Runs `work` as it is: each write is durable on its own, and the locks `work` takes
    /// keep its steps apart from other processes'.
    fn atomically(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        work()
    }

    /// Watches the allocation directories the batch scans (`owner/watch.rs`), and makes its
    /// claims' names durable behind it (`flush.rs`).
    fn batch(&self, _workers: usize) {
        if !super::owner::skipped(super::owner::Layer::Watch) {
            *self.watch.lock().unwrap_or_else(|e| e.into_inner()) =
                super::owner::watch::Watch::new();
        }
        let _ = self.flusher.set(super::flush::Flusher::default());
    }

    /// In a batch, [`GROUP`] requests at most: the last claim of a group waits for its
    /// directory's `fsync`, the others' run behind the next request.
    fn group_size(&self) -> usize {
        if self.flusher.get().is_some() {
            GROUP
        } else {
            1
        }
    }

    /// Runs `work`, then waits until every claim it made is durable: the group's results
    /// go out only then.
    fn grouped(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let done = work();
        match self.flusher.get() {
            Some(flusher) => flusher.settle().and(done),
            None => done,
        }
    }
}

/// How many of a batch's requests run before their results go out (see [`Units::grouped`]):
/// enough that the one claim of a group whose directory is synced in the open costs little,
/// few enough that results still stream.
const GROUP: usize = 16;

/// A state directory's history is git's: the default answers say so.
impl Audit for FsStore {
    fn changed(&self, scopes: Option<&[Option<Namespace>]>) -> Result<crate::store::Changed> {
        super::changed::changed(self, scopes)
    }
}
