//! The scan behind every owner look-up and owner-filter query: list a pool's allocation
//! files, rule out without reading those whose status matches their index record, read the
//! rest, and record what was learnt (see "Owner look-ups" in [`crate::store::fs::queries`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::fd::OwnedFd;

use crate::error::Result;
use crate::model::{AllocationManifest, Namespace, PoolName, Timestamp, parse_allocation_name};
use crate::store::fs::FsStore;
use crate::store::fs::allocation::now_ns;
use crate::store::fs::beneath::{self, refused};
use crate::store::fs::index::{self, Change, Index, Record, RecordRef, Stamp};
use crate::store::parallel::parallel_map;

/// One allocation file as a scan's first pass saw it.
enum Look {
    /// Its status matches its index record, whose owner is not wanted.
    Known,
    /// Its status matches its index record, whose owner is wanted, and the record says the
    /// file is exactly the manifest ipamctl writes for it: this is that manifest, and its
    /// object name (made here, on the scan's threads, rather than after them).
    Rebuilt(String, Box<AllocationManifest>),
    /// Read now, with its status and whether it may be in flight (boxed: most files are
    /// `Known`).
    Read(Boxed, Stamp, InFlight),
    /// Removed since the listing.
    Gone,
}

/// A file read by a scan that may be a write in flight (see
/// [`crate::store::fs::allocation::ReadAllocation::settled`]): whatever it parsed as, it is a
/// hit, for the caller to read again as a whole.
pub(super) type InFlight = bool;

/// A manifest as a scan returns it: boxed, so that tens of thousands of them move through
/// the scan's vectors as pointers.
pub(super) type Boxed = std::result::Result<Box<AllocationManifest>, String>;

/// What a scan found.
#[derive(Default)]
pub(super) struct Scanned {
    /// The addresses the pool's allocations hold.
    pub(super) taken: Vec<IpAddr>,
    /// The files whose owner may be wanted, every file that does not parse, and every file
    /// that may be in flight, read now (the flag: in flight).
    pub(super) hits: Vec<(IpAddr, String, Boxed, InFlight)>,
}

impl FsStore {
    /// The allocations of `pool` among `addresses` (ascending, as listed): the addresses
    /// they hold, and the files whose owner may pass `wanted` (given an owner as
    /// [`index::owner_text`]), read now. A file is ruled out without being read only when
    /// its status matches its index record. Records what it learnt (best effort).
    pub(super) fn scan(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: &str,
        (addresses, index): (Vec<IpAddr>, Index),
        wanted: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Scanned> {
        let read_start = now_ns();
        let pool_name = PoolName::new(pool).ok();
        let (records, unlisted) = index.join(&addresses);
        let listed: Vec<_> = addresses.iter().copied().zip(records).collect();
        let looked = parallel_map(&listed, |&(address, record)| {
            self.look(dir, ns, pool, pool_name.as_ref(), (address, record), wanted)
        });
        let mut scanned = Scanned::default();
        let mut changes: Vec<Change> = unlisted.into_iter().map(Change::Forget).collect();
        for (&(address, record), look) in listed.iter().zip(looked) {
            let look = look?;
            if !matches!(look, Look::Gone) {
                scanned.taken.push(address);
            }
            match look {
                Look::Gone | Look::Known => {}
                Look::Rebuilt(name, m) => scanned.hits.push((address, name, Ok(m), false)),
                Look::Read(parsed, stamp, in_flight) => {
                    let learnt = match &parsed {
                        Ok(m)
                            if m.spec.address == address
                                && !in_flight
                                && stamp.settled(read_start) =>
                        {
                            Some(learn(pool_name.as_ref(), ns, m, stamp))
                        }
                        _ => None,
                    };
                    match learnt {
                        Some(r) if !index::same(record, &r) => {
                            changes.push(Change::Set(address, r));
                        }
                        Some(_) => {}
                        None if record.is_some() => changes.push(Change::Forget(address)),
                        None => {}
                    }
                    // A file in flight may be anyone's once whole: the caller reads it again.
                    let hit = match &parsed {
                        Ok(m) => in_flight || wanted(&index::owner_text(&m.spec.owner)),
                        Err(_) => true,
                    };
                    if hit {
                        let name = stem(&allocation_file(pool, address)).to_owned();
                        scanned.hits.push((address, name, parsed, in_flight));
                    }
                }
            }
        }
        if !changes.is_empty() {
            // Best effort: a lost index only costs reads (and a read-only directory has none).
            let _ = self.save_index(ns, pool, &index, &changes);
        }
        Ok(scanned)
    }

    /// A scan's first pass over one listed file: ruled out or rebuilt by its record when
    /// its status matches it, else read now.
    fn look(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: &str,
        pool_name: Option<&PoolName>,
        (address, record): (IpAddr, Option<RecordRef<'_>>),
        wanted: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Look> {
        let file = allocation_file(pool, address);
        if let Some(record) = record {
            match beneath::stat(dir, &file) {
                Ok(Some(stat)) if Stamp::of(&stat) == record.stamp => {
                    if !wanted(record.owner) {
                        return Ok(Look::Known);
                    }
                    // A file that is exactly the manifest ipamctl writes for this owner
                    // and address need not be read to be returned: it is rebuilt.
                    if record.whole
                        && let Some(pool) = pool_name
                        && let Some(owner) = index::parse_owner(record.owner)
                    {
                        let mut m = AllocationManifest::new(pool, ns, address, owner);
                        m.metadata.creation_timestamp = record.created.map(Timestamp::from_secs);
                        return Ok(Look::Rebuilt(m.metadata.name.clone(), Box::new(m)));
                    }
                }
                Ok(None) => return Ok(Look::Gone),
                _ => {}
            }
        }
        let started = now_ns();
        Ok(match self.read_allocation(dir, ns, &file)? {
            Some(read) => {
                let in_flight = !read.settled(started);
                Look::Read(read.parsed.map(Box::new), read.stamp, in_flight)
            }
            None => Look::Gone,
        })
    }

    /// The allocations of `pool` in `dir` by address (ascending), and the pool's index:
    /// both at once, the index read while the directory is listed.
    pub(super) fn names_and_index(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: &str,
    ) -> Result<(Vec<IpAddr>, Index)> {
        std::thread::scope(|s| {
            let index = s.spawn(|| self.load_index(dir, ns, pool));
            let addresses = self
                .pool_names(dir, Some(pool))
                .map(|mut by_pool| by_pool.remove(pool).unwrap_or_default());
            let index = index
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            Ok((addresses?, index))
        })
    }

    /// The addresses of the allocations in `dir`, ascending, by pool (only `pool`'s if
    /// given). Only names of the canonical form count (see [`parse_allocation_name`]), so
    /// [`allocation_file`] gives each one's file name back.
    pub(super) fn pool_names(
        &self,
        kind_dir: &OwnedFd,
        pool: Option<&str>,
    ) -> Result<BTreeMap<String, Vec<IpAddr>>> {
        let mut by_pool: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        beneath::each_name(kind_dir, |file, _| {
            let Some(name) = file.strip_suffix(b".yaml").and_then(beneath::utf8) else {
                return;
            };
            if let Some((p, address)) = parse_allocation_name(name)
                && pool.is_none_or(|want| want == p)
            {
                match by_pool.get_mut(p) {
                    Some(addresses) => addresses.push(address),
                    None => {
                        by_pool.insert(p.to_owned(), vec![address]);
                    }
                }
            }
        })
        .map_err(|e| refused(self.root.clone(), e))?;
        for addresses in by_pool.values_mut() {
            addresses.sort_unstable();
        }
        Ok(by_pool)
    }

    /// Manifest names (`<name>.yaml`, not dot-files) in an object directory.
    pub(super) fn names(&self, dir: &OwnedFd) -> Result<Vec<String>> {
        let mut names = Vec::new();
        beneath::each_name(dir, |name, _| {
            if let Some(stem) = name.strip_suffix(b".yaml").and_then(beneath::utf8)
                && !stem.starts_with('.')
            {
                names.push(stem.to_owned());
            }
        })
        .map_err(|e| refused(self.root.clone(), e))?;
        Ok(names)
    }
}

/// The record a scan learnt from the settled file `m` (read with status `stamp`): its owner,
/// and whether it is exactly the manifest ipamctl writes for it (then a reader may rebuild
/// it from the record instead of reading it).
fn learn(
    pool: Option<&PoolName>,
    ns: Option<&Namespace>,
    m: &AllocationManifest,
    stamp: Stamp,
) -> Record {
    Record {
        stamp,
        owner: index::owner_text(&m.spec.owner).into(),
        whole: pool.is_some_and(|pool| {
            let mut canonical =
                AllocationManifest::new(pool, ns, m.spec.address, m.spec.owner.clone());
            canonical.metadata.creation_timestamp = m.metadata.creation_timestamp;
            *m == canonical
        }),
        created: m.metadata.creation_timestamp.map(Timestamp::secs),
    }
}

/// An object name from its file name (`<name>.yaml`).
fn stem(file: &str) -> &str {
    file.strip_suffix(".yaml").unwrap_or(file)
}

/// The file name of the allocation of `address` in `pool` (`<pool>-a-b-c-d.yaml`).
fn allocation_file(pool: &str, address: IpAddr) -> String {
    let mut file = String::with_capacity(pool.len() + 21);
    crate::model::push_allocation_name(&mut file, pool, address);
    file.push_str(".yaml");
    file
}
