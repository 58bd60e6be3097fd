//! The scan behind every owner look-up and owner-filter query: list a pool's files, rule
//! out without reading those whose status matches their index record, read the rest, and
//! record what was learnt (see "Owner look-ups" in [`crate::store::fs::owner::queries`]). One scan
//! serves every kind of object that has an owner index ([`Kind`]): allocations, keyed by
//! address, and prefix claims of supernet pools, keyed by prefix.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::fd::OwnedFd;

use crate::error::{Error, Result};
use crate::model::{AllocationManifest, Namespace, PoolName, Timestamp, parse_allocation_name};
use crate::store::ObjectKind;
use crate::store::fs::FsStore;
use crate::store::fs::allocation::now_ns;
use crate::store::fs::beneath::{self, refused};
use crate::store::fs::owner::index::{self, At, Change, Index, Record, RecordRef, Stamp};
use crate::store::fs::owner::kind::{Allocations, Kind};
use crate::store::fs::owner::prestat::Prestat;
use crate::store::fs::owner::watch::DirId;
use crate::store::parallel::parallel_map_iter;

/// One file as a scan's first pass saw it.
enum Look<M, K> {
    /// Its status matches its index record, whose owner is not wanted.
    Known,
    /// Its status matches its index record, whose owner is wanted, and the record says the
    /// file is exactly the manifest ipamctl writes for it: its object name (made here, on the
    /// scan's threads, rather than after them) and that manifest.
    Rebuilt(Box<(String, Box<M>)>),
    /// Read now, with its status and whether it may be in flight.
    Read(Box<(Boxed<M>, Stamp, InFlight)>),
    /// Read now, whole (not in flight), and its owner not wanted: only what the index and the
    /// view keep of it (its record's change, [`seen_owner`]), so that the first scan of a
    /// pool without an index holds no parsed manifest per file (43 MB at 50,000 files).
    Learnt(Option<Box<Change<K>>>, Option<Box<str>>),
    /// Removed since the listing.
    Gone,
}

/// A listed file's key and its index record, if any.
type Listed<'a, K> = (K, Option<RecordRef<'a>>);

/// The listed keys, where each one's record is in the index, and the index.
type Joined<'a, K> = (&'a [K], &'a [Option<At>], &'a Index<K>);

/// A file read by a scan that may be a write in flight (see
/// [`crate::store::fs::allocation::ReadFile::settled`]): whatever it parsed as, it is a
/// hit, for the caller to read again as a whole.
pub(in crate::store::fs) type InFlight = bool;

/// A manifest as a scan returns it: boxed, so that tens of thousands of them move through
/// the scan's vectors as pointers.
pub(in crate::store::fs) type Boxed<M = AllocationManifest> = std::result::Result<Box<M>, String>;

/// What a scan found.
pub(in crate::store::fs) struct Scanned<K = IpAddr, M = AllocationManifest> {
    /// The keys (addresses) the pool's files hold.
    pub(in crate::store::fs) taken: Vec<K>,
    /// The files whose owner may be wanted, every file that does not parse, and every file
    /// that may be in flight, read now (the flag: in flight).
    pub(in crate::store::fs) hits: Vec<Hit<K, M>>,
}

/// A file a scan read ([`Scanned::hits`]): its key, its object name, what it parsed as, and
/// whether it may be in flight.
pub(in crate::store::fs) type Hit<K = IpAddr, M = AllocationManifest> =
    (K, String, Boxed<M>, InFlight);

impl<K, M> Default for Scanned<K, M> {
    fn default() -> Self {
        Scanned {
            taken: Vec::new(),
            hits: Vec::new(),
        }
    }
}

impl FsStore {
    /// The allocations of `pool` among `addresses` (ascending, as listed): the addresses
    /// they hold, and the files whose owner may pass `wanted` (given an owner as
    /// [`index::owner_text`]), read now: [`FsStore::scan_of`] for allocations.
    pub(in crate::store::fs) fn scan(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: &str,
        (addresses, index, prestat): (Vec<IpAddr>, Index, Prestat),
        wanted: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Scanned> {
        let kind = Allocations {
            pool,
            pool_name: PoolName::new(pool).ok(),
            ns,
        };
        self.scan_of(&kind, dir, ns, pool, (addresses, index, &prestat), wanted)
    }

    /// The files of `pool` among `keys` (ascending, as listed) in `kind`'s directory `dir`:
    /// the keys they hold, and the files whose owner may pass `wanted` (given an owner as
    /// [`index::owner_text`]), read now. A file is ruled out without being read only when
    /// its status (taken now, or ahead in `prestat`, by position) matches its index
    /// record. Records what it learnt (best effort).
    pub(in crate::store::fs) fn scan_of<T: Kind>(
        &self,
        kind: &T,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: &str,
        (keys, index, prestat): (Vec<T::Key>, Index<T::Key>, &Prestat),
        wanted: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Scanned<T::Key, T::Manifest>> {
        let read_start = now_ns();
        // The keys and their records side by side, not zipped into a third vector: at
        // 50,000 files that vector was 4.8 MB of a claim's peak (issue 47).
        let (records, unlisted) = index.join(&keys);
        let listed = |i: usize| (keys[i], records[i].map(|at| index.at(at)));
        let (watched, generation) = match self.watched_at(dir) {
            Some((id, generation)) => (Some(id), generation),
            None => (None, 0),
        };
        // A batch's first whole scan of a pool's allocations seeds its view (`view.rs`).
        let mut seed = watched
            .filter(|&id| self.needs_view::<T>(id, pool, &keys))
            .map(|_| Vec::with_capacity(keys.len()));
        // In a batch, the files whose remembered status matches their record, and whose
        // owner is not wanted, are ruled out here, in one pass under the watch's lock: most
        // of a pool, which then costs no thread, no lock and no `stat` per file.
        // (A flag a file, not a `Look`: no pool's worth of enum values to fill and drop per
        // request.)
        let known = match watched {
            Some(id) => self.ruled_out(kind, (id, pool), (&keys, &records, &index), wanted),
            None => Vec::new(),
        };
        let is_known = |i: usize| known.get(i).copied().unwrap_or(false);
        let rest: Vec<usize> = (0..keys.len()).filter(|&i| !is_known(i)).collect();
        // Each look is kept until the walk below: its error is boxed (see the size asserted
        // at the end of this file).
        let mut read = parallel_map_iter(&rest, |&i| {
            let look = self.look(
                kind,
                (dir, watched),
                ns,
                (listed(i), prestat.get(i)),
                wanted,
            );
            look.map(|look| learnt(kind, listed(i), look, read_start, wanted))
                .map_err(Box::new)
        });
        let mut scanned = Scanned::default();
        let mut changes: Vec<Change<T::Key>> = unlisted.into_iter().map(Change::Forget).collect();
        for i in 0..keys.len() {
            let (key, record) = listed(i);
            let look = if is_known(i) {
                Look::Known
            } else {
                read.next()
                    .expect("every listed file looked at")
                    .map_err(|e| *e)?
            };
            if !matches!(look, Look::Gone) {
                scanned.taken.push(key);
            }
            if let Some(seed) = &mut seed
                && let Some(address) = T::address(key)
                && !matches!(look, Look::Gone)
            {
                seed.push((address, seen_owner::<T>(key, record, &look)));
            }
            match look {
                Look::Gone | Look::Known => {}
                Look::Learnt(change, _) => changes.extend(change.map(|c| *c)),
                Look::Rebuilt(rebuilt) => {
                    let (name, m) = *rebuilt;
                    scanned.hits.push((key, name, Ok(m), false));
                }
                Look::Read(read) => {
                    let (parsed, stamp, in_flight) = *read;
                    let settled = !in_flight && stamp.settled(read_start);
                    changes.extend(change(kind, (key, record), &parsed, stamp, settled));
                    // A file in flight may be anyone's once whole: the caller reads it again.
                    let hit = match &parsed {
                        Ok(m) => in_flight || wanted(&index::owner_text(T::key_and_owner(m).1)),
                        Err(_) => true,
                    };
                    if hit {
                        scanned.hits.push((key, kind.name(key), parsed, in_flight));
                    }
                }
            }
        }
        if let (Some(id), Some(seed)) = (watched, seed) {
            self.seed_view(id, pool, generation, seed);
        }
        if !changes.is_empty() {
            // Best effort: a lost index only costs reads (and a read-only directory has none).
            let _ = self.save_index(T::OBJECTS, ns, pool, &index, &changes);
        }
        Ok(scanned)
    }

    /// Which listed files of a watched directory `id` need no look at all (`true`): their
    /// remembered status ([`FsStore::status`]) equals their record, whose owner `wanted`
    /// refuses ([`Look::Known`]); empty when none can be. One lock of the watch for the
    /// whole listing.
    fn ruled_out<T: Kind>(
        &self,
        kind: &T,
        (id, pool): (DirId, &str),
        (keys, records, index): Joined<'_, T::Key>,
        wanted: &(dyn Fn(&str) -> bool + Sync),
    ) -> Vec<bool> {
        let listed = || {
            let records = records.iter().map(|r| r.map(|at| index.at(at)));
            keys.iter().copied().zip(records)
        };
        let watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let Some(w) = watch.as_ref() else {
            return Vec::new();
        };
        let rule = |stamp: Option<&Option<Stamp>>, record: Option<RecordRef<'_>>| {
            matches!((stamp, record), (Some(Some(stamp)), Some(record))
                if *stamp == record.stamp && !wanted(record.owner))
        };
        // Allocations: one walk of the pool's statuses in address order, beside the listing.
        if let Some(statuses) = w.pool_statuses(id, pool)
            && keys.iter().all(|&key| T::address(key).is_some())
        {
            let mut known = statuses.iter().peekable();
            return listed()
                .map(|(key, record)| {
                    let Some(address) = T::address(key) else {
                        return false;
                    };
                    while known.next_if(|&(&a, _)| a < address).is_some() {}
                    let stamp = known.next_if(|&(&a, _)| a == address).map(|(_, s)| s);
                    rule(stamp, record)
                })
                .collect();
        }
        let Some(stats) = w.statuses(id) else {
            return Vec::new();
        };
        let mut file = String::new();
        listed()
            .map(|(key, record)| {
                if record.is_none() {
                    return false;
                }
                file.clear();
                file.push_str(&kind.name(key));
                file.push_str(".yaml");
                rule(stats.get(file.as_bytes()), record)
            })
            .collect()
    }

    /// A scan's first pass over one listed file: ruled out or rebuilt by its record when
    /// its status matches it, else read now.
    fn look<T: Kind>(
        &self,
        kind: &T,
        (dir, watched): (&OwnedFd, Option<DirId>),
        ns: Option<&Namespace>,
        ((key, record), taken): (Listed<'_, T::Key>, Option<Option<Stamp>>),
        wanted: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Look<T::Manifest, T::Key>> {
        let mut file = kind.name(key);
        file.push_str(".yaml");
        if let Some(record) = record {
            let status = match taken {
                Some(stamp) => Ok(stamp),
                None => self.status(dir, watched, &file),
            };
            match status {
                Ok(Some(stamp)) if stamp == record.stamp => {
                    if !wanted(record.owner) {
                        return Ok(Look::Known);
                    }
                    // A file that is exactly the manifest ipamctl writes for this owner
                    // and key need not be read to be returned: it is rebuilt.
                    if record.whole
                        && let Some(owner) = index::parse_owner(record.owner)
                        && let Some(m) =
                            kind.canonical(key, owner, record.created.map(Timestamp::from_secs))
                    {
                        return Ok(Look::Rebuilt(Box::new((
                            stem(&file).to_owned(),
                            Box::new(m),
                        ))));
                    }
                }
                Ok(None) => return Ok(Look::Gone),
                _ => {}
            }
        }
        let started = now_ns();
        Ok(match self.read_file::<T>(dir, ns, &file)? {
            Some(read) => {
                let in_flight = !read.settled(started);
                Look::Read(Box::new((read.parsed.map(Box::new), read.stamp, in_flight)))
            }
            None => Look::Gone,
        })
    }

    /// The allocations of `pool` in `dir` by address (ascending), and the pool's index:
    /// both at once, the index read while the directory is listed.
    pub(in crate::store::fs) fn names_and_index(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: &str,
    ) -> Result<(Vec<IpAddr>, Index, Prestat)> {
        {
            let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(w) = watch.as_mut()
                && let Some(id) = w.watched(dir)
            {
                let addresses: Vec<IpAddr> = w
                    .pool_addresses(id, pool, || list_names(dir))
                    .map_err(|e| refused(self.root.clone(), e))?
                    .iter()
                    .collect();
                let index = w.index(id, pool, addresses.len(), || {
                    self.load_index(ObjectKind::Allocation, dir, ns, pool)
                });
                return Ok((addresses, index, Prestat::default()));
            }
        }
        self.list_index_and_stat(dir, ns, pool)
    }

    /// The addresses of the allocations in `dir`, ascending, by pool (only `pool`'s if
    /// given). Only names of the canonical form count (see [`parse_allocation_name`]), so
    /// [`Allocations`]' `name` gives each one's file name back.
    pub(in crate::store::fs) fn pool_names(
        &self,
        kind_dir: &OwnedFd,
        pool: Option<&str>,
    ) -> Result<BTreeMap<String, Vec<IpAddr>>> {
        let mut by_pool: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        if let Some(pool) = pool {
            let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(w) = watch.as_mut()
                && let Some(id) = w.watched(kind_dir)
            {
                let addresses = w
                    .pool_addresses(id, pool, || list_names(kind_dir))
                    .map_err(|e| refused(self.root.clone(), e))?;
                by_pool.insert(pool.to_owned(), addresses.iter().collect());
                return Ok(by_pool);
            }
        }
        self.each_listed(kind_dir, |file| {
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
    pub(in crate::store::fs) fn names(&self, dir: &OwnedFd) -> Result<Vec<String>> {
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
fn learn<T: Kind>(kind: &T, m: &T::Manifest, stamp: Stamp) -> Record {
    let (key, owner) = T::key_and_owner(m);
    Record {
        stamp,
        owner: index::owner_text(owner).into(),
        whole: kind
            .canonical(key, owner.clone(), T::created(m))
            .is_some_and(|canonical| canonical == *m),
        created: T::created(m).map(Timestamp::secs),
    }
}

/// The change to the index that a read of the file of `key` (with index record `record`)
/// makes: its record, if the file was `settled` (not in flight, and older than the racy
/// margin) and is not recorded so already; else forgetting the record, if there is one.
fn change<T: Kind>(
    kind: &T,
    (key, record): (T::Key, Option<RecordRef<'_>>),
    parsed: &Boxed<T::Manifest>,
    stamp: Stamp,
    settled: bool,
) -> Option<Change<T::Key>> {
    let learnt = match parsed {
        Ok(m) if T::key_and_owner(m).0 == key && settled => Some(learn(kind, m, stamp)),
        _ => None,
    };
    match learnt {
        Some(r) if !index::same(record, &r) => Some(Change::Set(key, r)),
        Some(_) => None,
        None => record.map(|_| Change::Forget(key)),
    }
}

/// `look` as the scan keeps it: a file read whole (not in flight) whose owner `wanted`
/// refuses becomes [`Look::Learnt`], on the scan's thread, its manifest dropped there.
fn learnt<T: Kind>(
    kind: &T,
    (key, record): (T::Key, Option<RecordRef<'_>>),
    look: Look<T::Manifest, T::Key>,
    read_start: i64,
    wanted: &(dyn Fn(&str) -> bool + Sync),
) -> Look<T::Manifest, T::Key> {
    match look {
        Look::Read(read) if matches!(*read, (Ok(_), _, false)) => {
            let (Ok(m), stamp, _) = *read else {
                unreachable!("matched above")
            };
            if wanted(&index::owner_text(T::key_and_owner(&m).1)) {
                return Look::Read(Box::new((Ok(m), stamp, false)));
            }
            let seen = read_owner::<T>(key, &m);
            let change = change(
                kind,
                (key, record),
                &Ok(m),
                stamp,
                stamp.settled(read_start),
            );
            Look::Learnt(change.map(Box::new), seen)
        }
        look => look,
    }
}

/// The owner a scan's look at the file of `key` (with index record `record`) vouches for,
/// for the batch's view (`view.rs`): the record's, when the file's status matched it; the
/// file's, when it was read whole and settled; else none (unknown).
fn seen_owner<T: Kind>(
    key: T::Key,
    record: Option<RecordRef<'_>>,
    look: &Look<T::Manifest, T::Key>,
) -> Option<Box<str>> {
    match look {
        Look::Known | Look::Rebuilt(..) => record.map(|r| r.owner.into()),
        Look::Read(read) => match &**read {
            (Ok(m), _, false) => read_owner::<T>(key, m),
            _ => None,
        },
        Look::Learnt(_, owner) => owner.clone(),
        Look::Gone => None,
    }
}

/// The owner of `m`, read whole from the file of `key`, if it is that key's.
fn read_owner<T: Kind>(key: T::Key, m: &T::Manifest) -> Option<Box<str>> {
    let (at, owner) = T::key_and_owner(m);
    (at == key).then(|| index::owner_text(owner).into())
}

/// An object name from its file name (`<name>.yaml`).
fn stem(file: &str) -> &str {
    file.strip_suffix(".yaml").unwrap_or(file)
}

impl FsStore {
    /// `dir`'s id when the batch watches it (`watch.rs`), after reading the watch's queue,
    /// and the watch's generation then.
    /// Is this store running a batch (which keeps its watch, `watch.rs`)?
    pub(in crate::store::fs) fn batching(&self) -> bool {
        self.watch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn watched_at(&self, dir: &OwnedFd) -> Option<(DirId, u64)> {
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let w = watch.as_mut()?;
        Some((w.watched(dir)?, w.generation()))
    }

    /// Starts the batch's view of `pool` in `id` from a whole scan begun at `generation`.
    fn seed_view(
        &self,
        id: DirId,
        pool: &str,
        generation: u64,
        seed: Vec<(IpAddr, Option<Box<str>>)>,
    ) {
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = watch.as_mut() {
            w.seed(
                id,
                pool,
                generation,
                crate::store::fs::owner::view::View::seeded(seed),
            );
        }
    }

    /// The batch watches `id`, has no view of `pool` there yet, and `keys` are allocations'.
    fn needs_view<T: Kind>(&self, id: DirId, pool: &str, keys: &[T::Key]) -> bool {
        if super::skip::skipped(super::skip::Layer::View) {
            return false;
        }
        let watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        watch.as_ref().is_some_and(|w| w.view(id, pool).is_none())
            && keys.iter().all(|&k| T::address(k).is_some())
    }

    /// The status of `file` in `dir`: remembered by the batch's watch of `dir` while no
    /// event named the file since it was read, else read now (and remembered).
    fn status(
        &self,
        dir: &OwnedFd,
        watched: Option<DirId>,
        file: &str,
    ) -> beneath::Confined<Option<Stamp>> {
        let name = file.as_bytes();
        let generation = match watched {
            Some(id) => {
                let watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
                match watch.as_ref().map(|w| w.status(id, name)) {
                    Some((Some(known), _)) => return Ok(known),
                    Some((None, generation)) => Some((id, generation)),
                    None => None,
                }
            }
            None => None,
        };
        let stamp = beneath::stat(dir, file)?.map(|s| Stamp::of(&s));
        if let Some((id, generation)) = generation {
            let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(w) = watch.as_mut() {
                w.remember(id, name, stamp, generation);
            }
        }
        Ok(stamp)
    }

    /// Calls `each` with every name in `dir`: from the batch's memory when it watches
    /// `dir` (`watch.rs`), else listed now.
    pub(in crate::store::fs) fn each_listed(
        &self,
        dir: &OwnedFd,
        mut each: impl FnMut(&[u8]),
    ) -> beneath::Confined<()> {
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = watch.as_mut()
            && let Some(id) = w.watched(dir)
        {
            let names = w.names(id, || list_names(dir))?;
            for name in names {
                each(name);
            }
            return Ok(());
        }
        drop(watch);
        beneath::each_name(dir, |name, _| each(name))
    }
}

/// Every name in `dir`, listed now.
pub(in crate::store::fs) fn list_names(
    dir: &OwnedFd,
) -> beneath::Confined<std::collections::BTreeSet<Box<[u8]>>> {
    let mut names = std::collections::BTreeSet::new();
    beneath::each_name(dir, |name, _| {
        names.insert(name.into());
    })?;
    Ok(names)
}

// A look per listed file is kept until the scan's walk: 32 bytes, its rare variants and its
// error boxed (an unboxed `Error` made it 88, 4.4 MB of a claim at 50,000 files; issue 47).
const _: () = assert!(size_of::<Result<Look<AllocationManifest, IpAddr>, Box<Error>>>() == 32);
