//! The claim's re-check after its create, and the memory it compares with (the `looked`
//! map): what the owner's last look-up that found nothing saw taken, and the watch that
//! look-up set on the directory (`appeared.rs`), so that the re-check reads only the names
//! that appeared since, learnt from the watch's queue or, without one, from a listing. Why
//! the re-check exists, and why its undo is safe: `claims.rs`.

use std::net::IpAddr;
use std::os::fd::OwnedFd;

use crate::error::Result;
use crate::model::{AllocationManifest, Namespace};
use crate::store::ObjectKind;
use crate::store::fs::FsStore;
use crate::store::fs::lock::scope_text;
use crate::store::fs::owner::appeared::Appeared;
use crate::store::fs::owner::index;
use crate::store::fs::owner::skip::{Layer, skipped};

/// What an owner look-up that found nothing leaves for the claim after it.
#[derive(Debug)]
pub(in crate::store::fs) struct Looked {
    /// The addresses it saw taken, ascending.
    taken: Vec<IpAddr>,
    /// The names made in the directory since it began, when that can be known.
    appeared: Option<Appeared>,
}

impl FsStore {
    /// Records what an owner look-up that found nothing saw taken, for the claim after it.
    pub(in crate::store::fs) fn remember_looked(
        &self,
        ns: Option<&Namespace>,
        pool: &crate::model::PoolName,
        key: u64,
        mut taken: Vec<IpAddr>,
        appeared: Option<Appeared>,
    ) {
        if skipped(Layer::Looked) {
            // Only that a look-up ran is kept: the re-check then scans (`by_scan`).
            taken = Vec::new();
        }
        let mut looked = self.looked.lock().unwrap_or_else(|e| e.into_inner());
        let at = (scope_text(ns).to_owned(), pool.as_str().to_owned(), key);
        looked.insert(at, Looked { taken, appeared });
    }

    /// A watch for the re-check of the claim that follows a look-up in `dir`, set before
    /// the look-up lists it (`appeared.rs`); none in a batch. One at a time: a claim follows
    /// its own look-up, and a command whose look-ups leave no claim (a zone's pools tried
    /// one by one, each exhausted) would otherwise hold an inotify instance a pool, of the
    /// user's 128. An earlier look-up's re-check, should it come, lists the directory.
    pub(in crate::store::fs) fn watch_for_recheck(&self, dir: &OwnedFd) -> Option<Appeared> {
        if self.batching() {
            return None;
        }
        let mut looked = self.looked.lock().unwrap_or_else(|e| e.into_inner());
        for earlier in looked.values_mut() {
            earlier.appeared = None;
        }
        drop(looked);
        Appeared::watch(dir)
    }

    /// After a claim's create (the claim's owner lock held): if the owner's file came back
    /// while the claim ran, undoes the claim and returns that file's allocation (see the
    /// module docs for why no other ipamctl claim can have made it).
    pub(in crate::store::fs) fn yield_to_returned_owner(
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
        let Some(looked) = looked else {
            return Ok(None);
        };
        let Some(other) = self.appeared_for_owner(ns, manifest, &looked)? else {
            return Ok(None);
        };
        failpoint!("claim-before-undo");
        self.undo_claim(ns, manifest)?;
        Ok(Some(other))
    }

    /// An allocation of the same owner in the pool that was not there when the claim's
    /// look-up ran (a file the look-up, which saw `taken`, did not see), settled, if any.
    /// Only the names that appeared since are read: those the look-up's watch reported, or
    /// without it, those of one listing that the look-up did not see.
    fn appeared_for_owner(
        &self,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
        looked: &Looked,
    ) -> Result<Option<AllocationManifest>> {
        failpoint!("claim-before-recheck");
        let spec = &manifest.spec;
        let Some(dir) = self.dir(ObjectKind::Allocation, ns, false)? else {
            return Ok(None);
        };
        let pool = spec.pool.as_str();
        // In a batch, the files that changed since the look-up are the view's unknown ones.
        if let Some(changed) = self.changed_in_view(&dir, pool) {
            for address in changed {
                if address != spec.address
                    && let Some(m) = self.owners_file(&dir, ns, manifest, address)?
                {
                    return Ok(Some(m));
                }
            }
            return Ok(None);
        }
        if skipped(Layer::Looked) {
            return self.by_scan(&dir, ns, manifest);
        }
        if let Some(made) = looked.appeared.as_ref().and_then(|a| a.in_pool(pool)) {
            for address in made {
                if address != spec.address
                    && let Some(m) = self.owners_file(&dir, ns, manifest, address)?
                {
                    return Ok(Some(m));
                }
            }
            return Ok(None);
        }
        let listed = self
            .pool_names(&dir, Some(pool))?
            .remove(pool)
            .unwrap_or_default();
        // Both ascending (a scan's `taken` is in listing order): one merge, not a search of
        // `taken` per listed file (which was a tenth of a batch's time at 50,000). Were
        // `taken` out of order, a name would only be read needlessly, never skipped.
        let mut seen = looked.taken.iter().peekable();
        for address in listed {
            while seen.next_if(|&&t| t < address).is_some() {}
            if address == spec.address || seen.next_if_eq(&&address).is_some() {
                continue;
            }
            if let Some(m) = self.owners_file(&dir, ns, manifest, address)? {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    /// Without the `looked` map (a benchmark's bypass, [`skipped`]): another allocation of
    /// `manifest`'s owner in its pool, found as a look-up finds one, by a scan of the pool.
    fn by_scan(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
    ) -> Result<Option<AllocationManifest>> {
        let spec = &manifest.spec;
        let pool = spec.pool.as_str();
        let listed = self.names_and_index(dir, ns, pool)?;
        let name = index::name_text(&index::owner_text(&spec.owner)).to_owned();
        let scanned = self.scan(dir, ns, pool, listed, &|t| index::name_text(t) == name)?;
        for (address, ..) in scanned.hits {
            if address != spec.address
                && let Some(m) = self.owners_file(dir, ns, manifest, address)?
            {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    /// The allocation at `address` of `manifest`'s pool, read whole, if it is of the same
    /// owner.
    fn owners_file(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
        address: IpAddr,
    ) -> Result<Option<AllocationManifest>> {
        let spec = &manifest.spec;
        let file = format!(
            "{}.yaml",
            crate::model::allocation_name(&spec.pool, address)
        );
        Ok(match self.read_whole(dir, ns, &file)? {
            Some(read)
                if read
                    .parsed
                    .as_ref()
                    .is_ok_and(|m| m.spec.owner == spec.owner && m.spec.address == address) =>
            {
                read.parsed.ok()
            }
            _ => None,
        })
    }
}
