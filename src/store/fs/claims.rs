//! Claims and guarded releases on the filesystem ([`Claims`]), and the file store's unit of
//! work and (absent) audit log.
//!
//! A claim is a create-only write of the allocation's file: the file name is the arbiter
//! between claimers of one address. Nothing on disk arbitrates between two requests for one
//! owner, so the owner's lock does: [`crate::store::Locks::lock_claim`] takes it, and a
//! claim's caller holds it from its look-up until this write is durable, so a claim here
//! never answers [`Claim::OwnerHolds`]. A release takes the same lock itself, for the owner
//! the caller read in the file, and reads the file again under it (invariant 5 of
//! [`crate::engine`]).

use crate::error::Result;
use crate::model::{AllocationManifest, Namespace};
use crate::store::fs::FsStore;
use crate::store::fs::lock::{Target, scope_text};
use crate::store::read::read_allocation;
use crate::store::{Audit, Claim, Claims, LockMode, ObjectKind, Objects, Release, Units};
use crate::yaml;

impl Claims for FsStore {
    fn claim(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim> {
        let claim = self.claim_copy(ns, manifest)?;
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
                Ok(if self.delete(ObjectKind::Allocation, ns, name)? {
                    Release::Deleted
                } else {
                    Release::Changed
                })
            }
            None => Ok(Release::Gone),
            Some(_) => Ok(Release::Changed),
        }
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
