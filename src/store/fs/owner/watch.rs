//! A batch's memory of the allocation directories it scanned, kept true by inotify
//! ([`crate::store::Units::batch`]): each look-up after the first in a directory lists and
//! `stat`s only the names the kernel reported changed since, instead of every file.
//!
//! # Why a remembered status is the status now
//!
//! A scan ([`super::scan`]) trusts a file's index record only while the file's status
//! (inode, size, mtime, ctime) equals the recorded one. In a batch, the status of each file
//! is remembered from the last real `stat`, and used as the status now while no inotify
//! event has named the file since. The watch is added before the directory is first listed
//! or any file in it is looked at, and every change made through the directory reaches its
//! queue before the call that made it returns: a create, `unlink`, `rename` in or out
//! (`git pull`, `git checkout`, `git clean`, `cp`, `rsync`, `rm`), a write or truncate
//! (`cp` over a file, an editor), a `chmod`, `touch` or `utimes`. Each look-up first reads
//! the whole queue and forgets what each event names (a listing is updated event by event,
//! in the queue's order, which ends in the state the last event left). A status read with
//! a real `stat` is remembered only if no queue read ran meanwhile, so an event that
//! raced the `stat` is never lost. When the queue overflows, every memory is dropped; when
//! the directory itself is removed or moved, its memory is dropped and it is no longer
//! watched, and the batch goes on with real listings and `stat`s.
//!
//! # What inotify does not report, and so a batch does not see
//!
//! Only on a local file system (ext2/3/4, XFS, Btrfs, tmpfs, ZFS, F2FS) is the memory
//! used; on any other (NFS, CIFS, FUSE, overlay, 9p), where another host's or layer's change
//! raises no event, every look-up is a real one. Even locally, three changes raise no event
//! on the directory: a write through a second hard link made from another directory, a
//! write through a shared `mmap`, and a change to the block device underneath. A file
//! changed that way during a batch is taken for what it was when last seen, until an event
//! names it: a claim for its new owner may then take a second address (which `ipamctl
//! check` reports), as after an outside change that straddles a single claim
//! (`docs/src/guarantees.md`). No tool that works on a state directory (git, cp, rsync, editors) writes
//! that way, and a file with a second name is refused by every read anyway.
//!
//! Every race of the owner look-up, and where it is closed: [`crate::store::fs::owner`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use crate::model::parse_allocation_name;
use crate::model::taken::Taken;
use crate::store::fs::beneath;
use crate::store::fs::owner::index::{Index, Stamp};
use crate::store::fs::owner::view::View;

/// `statfs` magic numbers of the file systems whose every change inotify reports.
const LOCAL: &[u64] = &[
    0xEF53,      // ext2, ext3, ext4
    0x5846_5342, // XFS
    0x9123_683E, // Btrfs
    0x0102_1994, // tmpfs
    0x2FC1_2FC1, // ZFS
    0xF2F5_2010, // F2FS
];

/// Is `dir` on a file system whose every change inotify reports ([`LOCAL`])?
pub(in crate::store::fs) fn is_local(dir: &OwnedFd) -> bool {
    rustix::fs::fstatfs(dir).is_ok_and(|fs| LOCAL.contains(&(fs.f_type as u64)))
}

/// A directory, by device and inode.
pub(in crate::store::fs) type DirId = (u64, u64);

/// What the batch remembers of one watched directory.
#[derive(Debug, Default)]
struct Seen {
    wd: i32,
    /// The directory's names, once listed.
    names: Option<BTreeSet<Box<[u8]>>>,
    /// The last real status of each file looked at (`None`: it did not exist).
    stats: HashMap<Box<[u8]>, Option<Stamp>>,
    /// The statuses of `stats` that are allocations' files, by pool and address: the same
    /// memory in the order a pool is listed, so that a look at a whole pool walks it instead
    /// of looking each file up in `stats` (a cache miss a file: most of a request's time at
    /// 50,000 files).
    by_address: HashMap<String, BTreeMap<IpAddr, Option<Stamp>>>,
    /// The allocations among `names`, by pool: kept with `names`, once asked for (as runs,
    /// which a request copies at the cost of a few).
    pools: Option<HashMap<String, Taken>>,
    /// What the batch knows of each pool's files' owners (see [`View`]).
    views: HashMap<String, View>,
    /// The owner index of each pool as last read. Any index is sound (a record is trusted
    /// only while its file's status is the recorded one), so a batch reads it again only
    /// when it lacks many of the pool's files, rather than once per request.
    indexes: HashMap<String, Index>,
}

/// The pool and address an allocation's file name stands for.
fn allocation(name: &[u8]) -> Option<(&str, IpAddr)> {
    let stem = name.strip_suffix(b".yaml").and_then(beneath::utf8)?;
    parse_allocation_name(stem)
}

/// How many of a pool's files its index may lack before a batch reads the index again.
const INDEX_SLACK: usize = 64;

/// The watches of one batch.
#[derive(Debug)]
pub(in crate::store::fs) struct Watch {
    inotify: OwnedFd,
    dirs: HashMap<DirId, Seen>,
    /// Directories that cannot be watched (not local, limits, removed): real look-ups.
    refused: BTreeSet<DirId>,
    /// How many times the queue was read: a `stat` remembered only if none ran meanwhile.
    generation: u64,
}

impl Watch {
    /// A new set of watches; `None` when inotify is not available.
    pub(in crate::store::fs) fn new() -> Option<Watch> {
        let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        Some(Watch {
            inotify,
            dirs: HashMap::new(),
            refused: BTreeSet::new(),
            generation: 0,
        })
    }

    /// Reads the queue, then returns `dir`'s id if it is watched (adding the watch if it is
    /// the first look), `None` if its look-ups must be real.
    pub(in crate::store::fs) fn watched(&mut self, dir: &OwnedFd) -> Option<DirId> {
        self.drain();
        let stat = rustix::fs::fstat(dir).ok()?;
        let id = (stat.st_dev, stat.st_ino);
        if self.dirs.contains_key(&id) {
            return Some(id);
        }
        if self.refused.contains(&id) {
            return None;
        }
        let local = is_local(dir);
        let mask = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        // The handle's own directory, whatever has become of its path since it was opened.
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        match local.then(|| inotify::add_watch(&self.inotify, path.as_str(), mask)) {
            Some(Ok(wd)) => {
                let seen = Seen {
                    wd,
                    ..Seen::default()
                };
                self.dirs.insert(id, seen);
                Some(id)
            }
            _ => {
                self.refused.insert(id);
                None
            }
        }
    }

    /// The names of `id`, listing the directory with `list` the first time.
    pub(in crate::store::fs) fn names<E>(
        &mut self,
        id: DirId,
        list: impl FnOnce() -> Result<BTreeSet<Box<[u8]>>, E>,
    ) -> Result<&BTreeSet<Box<[u8]>>, E> {
        let seen = self.dirs.get_mut(&id).expect("a watched directory");
        if seen.names.is_none() {
            // Listed after the watch was added: whatever changes during the listing is in
            // the queue, and the next read of it applies it.
            seen.names = Some(list()?);
        }
        Ok(seen.names.as_ref().expect("listed just now"))
    }

    /// The addresses of `pool`'s allocations in `id`, ascending (the names listed with
    /// `list` the first time).
    pub(in crate::store::fs) fn pool_addresses<E>(
        &mut self,
        id: DirId,
        pool: &str,
        list: impl FnOnce() -> Result<BTreeSet<Box<[u8]>>, E>,
    ) -> Result<Taken, E> {
        self.names(id, list)?;
        let seen = self.dirs.get_mut(&id).expect("a watched directory");
        let pools = seen.pools.get_or_insert_with(|| {
            let mut pools: HashMap<String, Vec<IpAddr>> = HashMap::new();
            for name in seen.names.iter().flatten() {
                if let Some((p, address)) = allocation(name) {
                    pools.entry(p.to_owned()).or_default().push(address);
                }
            }
            pools
                .into_iter()
                .map(|(pool, addresses)| (pool, addresses.into_iter().collect()))
                .collect()
        });
        Ok(pools.get(pool).cloned().unwrap_or_default())
    }

    /// `pool`'s index as last read, unless it lacks more than [`INDEX_SLACK`] of the
    /// `listed` files; else `load`'s, kept for the next request.
    pub(in crate::store::fs) fn index(
        &mut self,
        id: DirId,
        pool: &str,
        listed: usize,
        load: impl FnOnce() -> Index,
    ) -> Index {
        let seen = self.dirs.get_mut(&id).expect("a watched directory");
        if let Some(index) = seen.indexes.get(pool)
            && listed <= index.len() + INDEX_SLACK
        {
            return index.clone();
        }
        let index = load();
        seen.indexes.insert(pool.to_owned(), index.clone());
        index
    }

    /// How many times the queue was read: what is learnt by a look that began at this
    /// generation is kept only if it is still the generation.
    pub(in crate::store::fs) fn generation(&self) -> u64 {
        self.generation
    }

    /// The batch's view of `pool`'s owners in `id` (`view.rs`), if it has one.
    pub(in crate::store::fs) fn view(&self, id: DirId, pool: &str) -> Option<&View> {
        self.dirs.get(&id)?.views.get(pool)
    }

    /// The view of `pool` in `id`, to keep what a look begun at `generation` learnt: only if
    /// the queue was not read since.
    pub(in crate::store::fs) fn view_since(
        &mut self,
        id: DirId,
        pool: &str,
        generation: u64,
    ) -> Option<&mut View> {
        if generation != self.generation {
            return None;
        }
        self.dirs.get_mut(&id)?.views.get_mut(pool)
    }

    /// Starts the view of `pool` in `id` from a whole scan begun at `generation` (see
    /// [`Watch::view_since`]).
    pub(in crate::store::fs) fn seed(
        &mut self,
        id: DirId,
        pool: &str,
        generation: u64,
        view: View,
    ) {
        if generation != self.generation {
            return;
        }
        if let Some(seen) = self.dirs.get_mut(&id) {
            seen.views.insert(pool.to_owned(), view);
        }
    }

    /// The remembered status of `name` in `id`, if there is one; and the generation to give
    /// [`Watch::remember`] with a status read now.
    pub(in crate::store::fs) fn status(
        &self,
        id: DirId,
        name: &[u8],
    ) -> (Option<Option<Stamp>>, u64) {
        let known = self.statuses(id).and_then(|stats| stats.get(name).copied());
        (known, self.generation)
    }

    /// Every remembered status of `id`'s files (see [`Watch::status`]), for a look at many.
    pub(in crate::store::fs) fn statuses(
        &self,
        id: DirId,
    ) -> Option<&HashMap<Box<[u8]>, Option<Stamp>>> {
        self.dirs.get(&id).map(|seen| &seen.stats)
    }

    /// The remembered statuses of `pool`'s allocation files in `id`, by address (see
    /// [`Watch::status`]): the same as [`Watch::statuses`] holds for them.
    pub(in crate::store::fs) fn pool_statuses(
        &self,
        id: DirId,
        pool: &str,
    ) -> Option<&BTreeMap<IpAddr, Option<Stamp>>> {
        self.dirs.get(&id)?.by_address.get(pool)
    }

    /// Remembers the status of `name`, read with a real `stat` when the generation was
    /// `generation`: only if the queue was not read since (an event it held may have
    /// raced that `stat`).
    pub(in crate::store::fs) fn remember(
        &mut self,
        id: DirId,
        name: &[u8],
        status: Option<Stamp>,
        generation: u64,
    ) {
        if generation != self.generation {
            return;
        }
        if let Some(seen) = self.dirs.get_mut(&id) {
            seen.stats.insert(name.into(), status);
            if let Some((pool, address)) = allocation(name) {
                match seen.by_address.get_mut(pool) {
                    Some(statuses) => {
                        statuses.insert(address, status);
                    }
                    None => {
                        let statuses = BTreeMap::from([(address, status)]);
                        seen.by_address.insert(pool.to_owned(), statuses);
                    }
                }
            }
        }
    }

    /// Reads every queued event and forgets what each names.
    fn drain(&mut self) {
        self.generation += 1;
        let mut buf = [MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                // Empty (EAGAIN), or anything else: nothing more to read now. An error that
                // is not emptiness drops every memory, as an overflow does.
                Err(rustix::io::Errno::AGAIN) => break,
                Err(_) => {
                    self.dirs.clear();
                    break;
                }
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                for seen in self.dirs.values_mut() {
                    seen.names = None;
                    seen.pools = None;
                    seen.stats.clear();
                    seen.by_address.clear();
                    seen.views.clear();
                }
                continue;
            }
            let wd = event.wd();
            let Some((&id, seen)) = self.dirs.iter_mut().find(|(_, s)| s.wd == wd) else {
                continue;
            };
            if flags.intersects(
                ReadFlags::DELETE_SELF
                    | ReadFlags::MOVE_SELF
                    | ReadFlags::IGNORED
                    | ReadFlags::UNMOUNT,
            ) {
                self.dirs.remove(&id);
                self.refused.insert(id);
                continue;
            }
            let Some(name) = event.file_name().map(|n| n.to_bytes()) else {
                continue;
            };
            seen.stats.remove(name);
            if let Some((pool, address)) = allocation(name) {
                if let Some(statuses) = seen.by_address.get_mut(pool) {
                    statuses.remove(&address);
                }
                if let Some(view) = seen.views.get_mut(pool) {
                    view.forget(address);
                }
            }
            let added = flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO);
            let removed = flags.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM);
            if let Some(names) = &mut seen.names {
                if added {
                    names.insert(name.into());
                } else if removed {
                    names.remove(name);
                }
            }
            if let Some(pools) = &mut seen.pools
                && let Some((pool, address)) = allocation(name)
            {
                let addresses = pools.entry(pool.to_owned()).or_default();
                if added {
                    addresses.insert(address);
                } else if removed {
                    addresses.remove(address);
                }
            }
        }
    }
}
