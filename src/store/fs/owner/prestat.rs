//! A look-up's `stat`s, begun while its pool's owner index is still being read.
//!
//! A scan outside a batch lists the pool's directory on one thread while another reads and
//! parses the owner index; at 50,000 files the index took longer than the listing, and the
//! `stat` of every file (split over the scan's threads) could only begin once both were
//! done, leaving a core idle between. Nothing in a `stat` needs the index: what it vouches
//! for is only compared with the index's record afterwards ([`super::scan`]'s look). So the
//! listing thread `stat`s the listed files as soon as it has them, from the front, and the
//! index thread joins it from the back once its index is parsed (issue 47: the claim's
//! second core was idle for the difference).
//!
//! A status taken here is the one the file had then, as a status taken by the look would
//! be the one it had a moment later; either is compared with the record, and a file that
//! does not match is read. A `stat` that fails is left to the look, which takes it again and
//! reports what it finds.

use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::{Mutex, OnceLock};

use crate::error::Result;
use crate::model::{Namespace, PoolName};
use crate::store::ObjectKind;
use crate::store::fs::FsStore;
use crate::store::fs::beneath;
use crate::store::fs::owner::index::{Index, Stamp};
use crate::store::fs::owner::kind::{Allocations, Kind};

/// Each listed file's status, taken ahead (`Some(None)`: it was gone), by position in the
/// listing, in chunks of [`CHUNK`] files as the threads took them (kept as taken, not
/// copied into one vector: 2 MB at 50,000 files); empty when none were taken.
#[derive(Debug, Default)]
pub(in crate::store::fs) struct Prestat {
    chunks: Vec<Option<Vec<Option<Option<Stamp>>>>>,
}

impl Prestat {
    /// The status of the file at position `i`, if one was taken: `Some(None)` if it was
    /// gone.
    pub(in crate::store::fs) fn get(&self, i: usize) -> Option<Option<Stamp>> {
        *self.chunks.get(i / CHUNK)?.as_ref()?.get(i % CHUNK)?
    }
}

/// How many files a thread takes from the shared range at a time.
const CHUNK: usize = 256;

impl FsStore {
    /// The allocations of `pool` in `dir` by address (ascending), its index and each
    /// file's status: the listing and the index at once, on two threads, and the `stat`s
    /// on both as each becomes free (see the module docs).
    pub(in crate::store::fs) fn list_index_and_stat(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: &str,
    ) -> Result<(Vec<IpAddr>, Index, Prestat)> {
        let kind = Allocations {
            pool,
            pool_name: PoolName::new(pool).ok(),
            ns,
        };
        let listed: OnceLock<Vec<IpAddr>> = OnceLock::new();
        // The chunks not yet taken, as a range of chunk numbers: the front from the
        // listing's thread, the back from the index's.
        let left = Mutex::new((0usize, 0usize));
        let stat_some = |from_back: bool| -> Vec<(usize, Vec<Option<Option<Stamp>>>)> {
            let Some(addresses) = listed.get() else {
                return Vec::new();
            };
            let mut done = Vec::new();
            loop {
                let chunk = {
                    let mut left = left.lock().unwrap_or_else(|e| e.into_inner());
                    if left.0 >= left.1 {
                        break;
                    }
                    if from_back {
                        left.1 -= 1;
                        left.1
                    } else {
                        left.0 += 1;
                        left.0 - 1
                    }
                };
                let range = chunk * CHUNK..addresses.len().min((chunk + 1) * CHUNK);
                let stamps = addresses[range]
                    .iter()
                    .map(|&address| {
                        let mut file = kind.name(address);
                        file.push_str(".yaml");
                        let stat = beneath::stat(dir, &file).ok()?;
                        Some(stat.map(|s| Stamp::of(&s)))
                    })
                    .collect();
                done.push((chunk, stamps));
            }
            done
        };
        let (listing, index, theirs, mine) = std::thread::scope(|s| {
            let index = s.spawn(|| {
                let index = self.load_index(ObjectKind::Allocation, dir, ns, pool);
                (index, stat_some(true))
            });
            let listing = self
                .pool_names(dir, Some(pool))
                .map(|mut by_pool| by_pool.remove(pool).unwrap_or_default())
                .map(|addresses| {
                    *left.lock().unwrap_or_else(|e| e.into_inner()) =
                        (0, addresses.len().div_ceil(CHUNK));
                    let _ = listed.set(addresses);
                });
            let mine = stat_some(false);
            let (index, theirs) = index
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (listing, index, theirs, mine)
        });
        listing?;
        let addresses = listed.into_inner().unwrap_or_default();
        let mut prestat = Prestat {
            chunks: vec![None; addresses.len().div_ceil(CHUNK)],
        };
        for (chunk, stamps) in theirs.into_iter().chain(mine) {
            prestat.chunks[chunk] = Some(stamps);
        }
        Ok((addresses, index, prestat))
    }
}
