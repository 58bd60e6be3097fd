//! An owner look-up and a claim's re-check from the batch's view of a pool (`view.rs`):
//! the files that changed, and the owner's own, instead of the whole pool.

use std::net::IpAddr;
use std::os::fd::OwnedFd;

use crate::error::Result;
use crate::model::taken::Taken;
use crate::model::{Namespace, Owner};
use crate::store::fs::FsStore;
use crate::store::fs::allocation::now_ns;
use crate::store::fs::beneath::refused;
use crate::store::fs::owner::index::{name_text, owner_text};
use crate::store::fs::owner::kind::Allocations;
use crate::store::fs::owner::scan::Hit;
use crate::store::fs::owner::watch::DirId;

impl FsStore {
    /// An owner look-up's scan of `pool` in the batch's watched `dir`, from the pool's view:
    /// the addresses the pool's listing holds, and as hits the files among the unknown ones
    /// and the owner's that may be `owner`'s (read now, as a scan's hits are). `None` when
    /// the batch has no view of the pool (not in a batch, not watched, or not scanned yet):
    /// the caller scans.
    pub(in crate::store::fs) fn scan_view(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: &crate::model::PoolName,
        owner: &Owner,
    ) -> Result<Option<(Taken, Vec<Hit>)>> {
        // The owner's files and its namesakes' (`index::name_text`).
        let mine = owner_text(owner);
        let wanted = name_text(&mine);
        let (id, generation, files, taken) = {
            let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
            let Some(w) = watch.as_mut() else {
                return Ok(None);
            };
            let Some(id) = w.watched(dir) else {
                return Ok(None);
            };
            let Some(view) = w.view(id, pool.as_str()) else {
                return Ok(None);
            };
            let files = view.to_read(wanted);
            let generation = w.generation();
            let taken = w
                .pool_addresses(id, pool.as_str(), || super::scan::list_names(dir))
                .map_err(|e| refused(self.root.clone(), e))?;
            (id, generation, files, taken)
        };
        let (mut taken, mut hits) = (taken, Vec::new());
        let mut learnt = Vec::with_capacity(files.len());
        for address in files {
            let name = crate::model::allocation_name(pool, address);
            let started = now_ns();
            let Some(read) = self.read_file::<Allocations<'_>>(dir, ns, &format!("{name}.yaml"))?
            else {
                learnt.push((address, None));
                taken.remove(address);
                continue;
            };
            let in_flight = !read.settled(started);
            let hit = match &read.parsed {
                Ok(m) => {
                    let text = owner_text(&m.spec.owner);
                    let hit = in_flight || name_text(&text) == wanted;
                    if !in_flight && m.spec.address == address {
                        learnt.push((address, Some(text.into())));
                    }
                    hit
                }
                Err(_) => true,
            };
            if hit {
                hits.push((address, name, read.parsed.map(Box::new), in_flight));
            }
        }
        self.learn(id, pool.as_str(), generation, learnt);
        Ok(Some((taken, hits)))
    }

    /// Keeps what a look-up begun at `generation` learnt of `pool`'s files, unless the
    /// watch's queue was read since.
    fn learn(
        &self,
        id: DirId,
        pool: &str,
        generation: u64,
        learnt: Vec<(IpAddr, Option<Box<str>>)>,
    ) {
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(view) = watch
            .as_mut()
            .and_then(|w| w.view_since(id, pool, generation))
        {
            view.learn(learnt);
        }
    }

    /// The files of `pool` in the batch's watched `dir` whose owner changed or was never
    /// known, after reading the watch's queue; `None` without a view of the pool.
    pub(in crate::store::fs) fn changed_in_view(
        &self,
        dir: &OwnedFd,
        pool: &str,
    ) -> Option<Vec<IpAddr>> {
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let w = watch.as_mut()?;
        let id = w.watched(dir)?;
        Some(w.view(id, pool)?.unknown())
    }
}
