//! The filesystem store: one YAML file per object, at a path derived from (kind, namespace,
//! name) alone, so the path is the unique index.
//!
//! ```text
//! <root>/.ipamctl                                 marker: identifies the root, layout version;
//!                                                 every lock is a byte range of it (super::lock)
//! <root>/.gitignore                               keeps the dot-files below out of git
//! <root>/cluster/ipampools/<pool>.yaml            public pools
//! <root>/cluster/ipallocations/<pool>-<a-b-c-d>.yaml
//! <root>/namespaces/<ns segments>/ipampools/<pool>.yaml
//! <root>/namespaces/<ns segments>/ipallocations/<pool>-<a-b-c-d>.yaml
//! <root>/{cluster,namespaces/<ns segments>}/subnets/<subnet>.yaml    subnets of the scope's pools
//! <root>/{cluster,namespaces/<ns segments>}/cooldown/<pool>-<a-b-c-d>.yaml   recent releases
//! <root>/.index/<allocations dir>/<pool>.idx     owner index, stat-validated (super::index)
//! <root>/.index/<allocations dir>/<pool>.owners/<key>   owner key -> address hint
//! <root>/.index/.tmp-*                            temporary files of writes in flight
//! ```
//!
//! Everything derived or in flight lives in the one git-ignored `.index/` at the root, never
//! beside the manifests: a directory holding nothing but ignored entries is removed whole by
//! `git clean -fdX`, and a claim renamed into it at that moment would go with it, after
//! ipamctl printed it. An object directory holds manifests only.
//!
//! Everything below the root is opened beneath the root's handle without following a
//! symlink ([`super::beneath`]): nothing planted in the state directory can make ipamctl read
//! or write outside it. Everything ipamctl writes goes through a new temporary file and a
//! rename, so no existing file (or hard link) is ever written into; the one exception, an
//! append to a pool's index, refuses a file that has a second name.
//!
//! # Write protocol, and the crash window each step closes
//!
//! `create` (every claim):
//! 1. write the manifest to a new `.index/.tmp-<random>` and `fsync` it: a crash leaves only
//!    a git-ignored dot-file that no reader takes for a manifest (`check --fix` removes it
//!    once it is old);
//! 2. rename it to `<dir>/<name>.yaml` without replacing (`renameat2(RENAME_NOREPLACE)`, or
//!    `link(2)` where the file system lacks it): the single atomic step that claims the
//!    name. It fails if the name exists, which is how concurrent claimers of one address are
//!    arbitrated. The data was synced first, so the name never points at incomplete bytes,
//!    even after a power loss;
//! 3. `fsync` the directory, so the name survives a power loss before the caller reports the
//!    claim. A crash before this step may lose the claim, but nothing was printed.
//!
//! `git clean -fdX` may delete the temporary file between steps 1 and 2 (it is git-ignored):
//! the rename then fails with "no such file" and the write starts again (three times). After
//! step 3 the caller writes the owner's hint (best effort): a crash before it only makes the
//! owner's next look-up scan.
//!
//! `replace` is the same with a plain rename (readers see the old or the new bytes);
//! `delete` is `unlink`, then a directory `fsync`. No index is written on these paths: the
//! owner index learns of a change by reading the file, so no crash between a change and an
//! index update can leave the index vouching for something false.
//!
//! # Owner look-ups, and why an outside writer cannot fool them
//!
//! The allocation files are the only truth. A look-up for owner O in pool P ([`Store::find_owner`]):
//! 1. *Hint:* read O's hint, then the one allocation file it names; if that file (read now)
//!    names O at that address, that is O's allocation. Two small reads, whatever the pool's
//!    size: the idempotent path. A wrong or stale hint only costs the next step.
//! 2. *Scan:* list the directory and `stat` each of P's files; a file whose status equals
//!    its index record exactly is known to belong to the recorded owner; every other file
//!    is read (and recorded if it is old enough, see [`super::index`]). Files that may be
//!    O's are read. So the answer always rests on files as they are now, or on records that
//!    the files' present status vouches for.
//!
//! The uid and owner-filter queries ([`Store::find_allocations`]) are the same scan over the
//! pools of a scope, reading only the files they return.
//!
//! # What an outside writer can still do
//!
//! `git pull`, `checkout`, `clean -fdX`, `cp` over a file, `rm`, `touch`, a stepped clock:
//! each changes a file's status (or removes the index, which is only a cost), so the next
//! look-up reads what changed. Mutual exclusion holds because the locks are byte ranges of
//! the tracked marker, which none of those commands removes. What is left:
//! - an outside change that itself gives an owner a second address (a merge of two clones
//!   that claimed for one owner): ipamctl's look-up then returns one of them; `ipamctl check`
//!   reports the duplicate owner;
//! - a change that keeps a file's inode, size, mtime and ctime to the nanosecond (a clock
//!   stepped back onto the very instant of an earlier write of the same length);
//! - replacing `.ipamctl` while locks are held (see [`super::lock`]);
//! - an allocation written by hand under a name that does not match its address: its name's
//!   address stays taken, but it is not taken for its owner's allocation (the owner may be
//!   given another); `check` reports the mismatch.

pub mod beneath;
pub mod index;
pub mod lock;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::model::{
    AllocationManifest, Namespace, Owner, OwnerFilter, PoolName, Timestamp, parse_allocation_name,
};
use crate::store::fs::beneath::{Refused, WriteMode, refused};
use crate::store::fs::index::{Change, Index, Record, Stamp};
use crate::store::fs::lock::Target;
use crate::store::parallel::parallel_map;
use crate::store::{Found, LockGuard, LockMode, ObjectKind, OwnerLookup, Parsed, Store};
use crate::yaml::{self, MAX_MANIFEST_BYTES};

pub use crate::store::fs::beneath::TMP_PREFIX;

/// The marker file that identifies a state directory.
pub const MARKER: &str = ".ipamctl";
/// The layout version written into the marker.
pub const LAYOUT_VERSION: u32 = 1;
/// Directory of the derived owner index, inside each `ipallocations/`.
pub const INDEX_DIR: &str = ".index";
/// Suffix of a pool's index file in [`INDEX_DIR`].
pub const INDEX_SUFFIX: &str = ".idx";
/// Suffix of a pool's owner-hint directory in [`INDEX_DIR`].
pub const HINTS_SUFFIX: &str = ".owners";

/// The contents of `.gitignore` written by `init`.
pub const GITIGNORE: &str = "\
# Written by `ipamctl init`: locks, the derived owner index and temporary files are
# local to each checkout and never committed.
.tmp-*
.lock
.*.lock
.index/
";

/// A state directory on the local filesystem.
#[derive(Debug)]
pub struct FsStore {
    root: PathBuf,
    /// The root directory, opened once: every other path is resolved beneath it.
    fd: OwnedFd,
    /// Object directories opened so far, by path relative to the root.
    dirs: Mutex<HashMap<PathBuf, Arc<OwnedFd>>>,
}

fn kind_dir(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Pool => "ipampools",
        ObjectKind::Allocation => "ipallocations",
        ObjectKind::Subnet => "subnets",
        ObjectKind::Cooldown => "cooldown",
    }
}

/// How long after its last change an allocation file that does not parse may still be a
/// rewrite in progress (see [`FsStore::read_whole`]).
const TORN_WINDOW_NS: i64 = 500_000_000;

/// The same for an empty file: truncated and not written yet. A writer can be descheduled
/// for a long time between the two: more than half a second was seen on a loaded two-core
/// machine (27 runnable processes), and a claim then took the empty file for a broken one.
const STALL_WINDOW_NS: i64 = 2_000_000_000;

/// Nanoseconds since the epoch, by the clock that stamps files.
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl FsStore {
    /// Opens the state directory at `root`, which must hold the marker.
    pub fn open(root: &Path) -> Result<FsStore> {
        let store = FsStore::at(root)?;
        let marker = root.join(MARKER);
        match beneath::read(&store.fd, MARKER, 4096) {
            Ok(Some(file)) => {
                check_marker(&marker, &String::from_utf8_lossy(&file.bytes))?;
                Ok(store)
            }
            Ok(None) => Err(Error::NoStateDir {
                message: format!(
                    "`{}` is not an ipamctl state directory (no `{MARKER}` file)",
                    root.display()
                ),
            }),
            Err(e) => Err(refused(marker, e)),
        }
    }

    /// Finds the state directory: `root` itself if given, else the nearest ancestor of the
    /// current directory that holds the marker, as git finds `.git`.
    pub fn discover(root: Option<&Path>) -> Result<FsStore> {
        if let Some(root) = root {
            return FsStore::open(root);
        }
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        for dir in cwd.ancestors() {
            if dir.join(MARKER).is_file() {
                return FsStore::open(dir);
            }
        }
        Err(Error::NoStateDir {
            message: format!(
                "no ipamctl state directory found in `{}` or any parent directory",
                cwd.display()
            ),
        })
    }

    /// Makes `root` a state directory (creating it if needed). Idempotent; returns whether
    /// it was new.
    pub fn init(root: &Path) -> Result<bool> {
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        if let Ok(store) = FsStore::open(root) {
            drop(store);
            return Ok(false);
        }
        let store = FsStore::at(root)?;
        let marker = root.join(MARKER);
        if let Ok(Some(file)) = beneath::read(&store.fd, MARKER, 4096) {
            // A marker of another layout version: say so rather than overwrite it.
            check_marker(&marker, &String::from_utf8_lossy(&file.bytes))?;
        }
        let marker_text = format!(
            "# This directory is an ipamctl state directory. Do not remove this file.\nlayout: {LAYOUT_VERSION}\n"
        );
        beneath::write(
            &store.fd,
            ".gitignore",
            GITIGNORE.as_bytes(),
            WriteMode::Replace,
            false,
            &beneath::beside,
        )
        .map_err(|e| refused(root.join(".gitignore"), e))?;
        beneath::write(
            &store.fd,
            MARKER,
            marker_text.as_bytes(),
            WriteMode::CreateOnly,
            true,
            &beneath::beside,
        )
        .map_err(|e| refused(marker, e))?;
        Ok(true)
    }

    fn at(root: &Path) -> Result<FsStore> {
        // The root itself is the user's choice (it may be a symlink); nothing below it is.
        let fd = std::fs::File::open(root)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::NoStateDir {
                    message: format!("`{}` does not exist", root.display()),
                },
                _ => Error::io(root, e),
            })?
            .into();
        Ok(FsStore {
            root: root.to_owned(),
            fd,
            dirs: Mutex::new(HashMap::new()),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The handle of the root directory, opened once: resolve every path of the state
    /// beneath it (see [`beneath`]), never through [`FsStore::root`].
    pub fn root_fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Directory of `kind` objects in scope `ns`, relative to the root.
    pub fn relative_dir(kind: ObjectKind, ns: Option<&Namespace>) -> PathBuf {
        let mut dir = PathBuf::new();
        match ns {
            None => dir.push("cluster"),
            Some(ns) => {
                dir.push("namespaces");
                dir.extend(ns.as_str().split('/'));
            }
        }
        dir.push(kind_dir(kind));
        dir
    }

    /// The directory of `kind` objects in scope `ns`, opened beneath the root (created with
    /// `create`); `None` if it does not exist and `create` is false.
    fn dir(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        create: bool,
    ) -> Result<Option<Arc<OwnedFd>>> {
        let rel = FsStore::relative_dir(kind, ns);
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(fd) = dirs.get(&rel) {
            return Ok(Some(Arc::clone(fd)));
        }
        let opened = if create {
            beneath::open_or_create_dir(&self.fd, &rel)
        } else {
            beneath::open_dir(&self.fd, &rel)
        };
        match opened {
            Ok(fd) => {
                let fd = Arc::new(fd);
                dirs.insert(rel, Arc::clone(&fd));
                Ok(Some(fd))
            }
            Err(e) if e.is_not_found() && !create => Ok(None),
            Err(e) => Err(refused(self.root.join(rel), e)),
        }
    }

    fn path(&self, kind: ObjectKind, ns: Option<&Namespace>, file: &str) -> PathBuf {
        self.root.join(FsStore::relative_dir(kind, ns)).join(file)
    }

    /// Reads and decodes the allocation file `file` (`<name>.yaml`) of `dir`; `None` if it
    /// is gone.
    fn read_allocation(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        file: &str,
    ) -> Result<Option<(Parsed, Stamp)>> {
        match beneath::read(dir, file, MAX_MANIFEST_BYTES) {
            Ok(None) => Ok(None),
            Ok(Some(read)) => {
                let parsed = std::str::from_utf8(&read.bytes)
                    .map_err(|_| "is not UTF-8 text".to_owned())
                    .and_then(yaml::decode_allocation);
                Ok(Some((parsed, Stamp::of(&read.stat))))
            }
            // A symlink, a FIFO, a huge file under a manifest's name: as broken as a file
            // that does not parse; its address stays taken.
            Err(Refused::Io(e)) => Err(Error::io(self.path(ObjectKind::Allocation, ns, file), e)),
            Err(why) => Ok(Some((Err(why.reason()), Stamp::of_nothing()))),
        }
    }

    /// [`FsStore::read_allocation`] for a claim's look-up, which must not take a torn file
    /// for "no owner here": `cp` and editors rewrite a file in place (truncate, then write),
    /// and a read in between sees a file that does not parse.
    ///
    /// A file that does not parse and had changed less than [`TORN_WINDOW_NS`] before a read
    /// began ([`STALL_WINDOW_NS`] if it is empty) may be such a rewrite: it is read again
    /// until it parses or the window has passed. An empty file seen changing is never taken
    /// for a broken one, whose owner the claim would then not see (its writer may only be
    /// stalled between truncating and writing): if it is still empty half a second after the
    /// stall window, the look-up fails (exit 1, "try again").
    fn read_whole(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        file: &str,
    ) -> Result<Option<(Parsed, Stamp)>> {
        let begun = now_ns();
        let mut changing = false;
        loop {
            // The window is measured from each read's start, not from after it: a reader
            // descheduled between its read and this check must not take a fresh rewrite
            // for an old broken file.
            let started = now_ns();
            let read = self.read_allocation(dir, ns, file)?;
            let Some((Err(why), stamp)) = &read else {
                return Ok(read);
            };
            let empty = stamp.size == 0;
            let window = if empty {
                STALL_WINDOW_NS
            } else {
                TORN_WINDOW_NS
            };
            if stamp.ctime > started - window {
                changing = true;
            } else if !(changing && empty) {
                return Ok(read);
            }
            if started - begun > STALL_WINDOW_NS + 500_000_000 {
                return Err(Error::io(
                    self.path(ObjectKind::Allocation, ns, file),
                    std::io::Error::other(format!(
                        "{why}, and it was being changed moments ago: another program may be \
                         rewriting it; nothing was claimed, try again"
                    )),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The allocations of `pool` among `addresses` (ascending, as listed): the addresses
    /// they hold, and the files whose owner may pass `wanted` (given an owner as
    /// [`index::owner_text`]), read now. A file is ruled out without being read only when
    /// its status matches its index record. Records what it learnt (best effort).
    fn scan(
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
        let looked = parallel_map(&listed, |&(address, record)| -> Result<Look> {
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
                            && let Some(pool) = &pool_name
                            && let Some(owner) = index::parse_owner(record.owner)
                        {
                            let mut m = AllocationManifest::new(pool, ns, address, owner);
                            m.metadata.creation_timestamp =
                                record.created.map(Timestamp::from_secs);
                            return Ok(Look::Rebuilt(m.metadata.name.clone(), Box::new(m)));
                        }
                    }
                    Ok(None) => return Ok(Look::Gone),
                    _ => {}
                }
            }
            Ok(match self.read_allocation(dir, ns, &file)? {
                Some((parsed, stamp)) => Look::Read(parsed.map(Box::new), stamp),
                None => Look::Gone,
            })
        });
        let mut scanned = Scanned::default();
        let mut changes: Vec<Change> = unlisted.into_iter().map(Change::Forget).collect();
        for (&(address, record), look) in listed.iter().zip(looked) {
            let look = look?;
            if !matches!(look, Look::Gone) {
                scanned.taken.push(address);
            }
            let name = || stem(&allocation_file(pool, address)).to_owned();
            match look {
                Look::Gone | Look::Known => {}
                Look::Rebuilt(name, m) => scanned.hits.push((address, name, Ok(m))),
                Look::Read(parsed, stamp) => {
                    let learnt = match &parsed {
                        Ok(m) if m.spec.address == address && stamp.settled(read_start) => {
                            Some(Record {
                                stamp,
                                owner: index::owner_text(&m.spec.owner).into(),
                                whole: pool_name.as_ref().is_some_and(|pool| {
                                    let mut canonical = AllocationManifest::new(
                                        pool,
                                        ns,
                                        address,
                                        m.spec.owner.clone(),
                                    );
                                    canonical.metadata.creation_timestamp =
                                        m.metadata.creation_timestamp;
                                    **m == canonical
                                }),
                                created: m.metadata.creation_timestamp.map(Timestamp::secs),
                            })
                        }
                        _ => None,
                    };
                    match learnt {
                        Some(r) if !index::same(record, &r) => {
                            changes.push(Change::Set(address, r));
                        }
                        Some(_) => {}
                        None if record.is_some() => {
                            changes.push(Change::Forget(address));
                        }
                        None => {}
                    }
                    let hit = match &parsed {
                        Ok(m) => wanted(&index::owner_text(&m.spec.owner)),
                        Err(_) => true,
                    };
                    if hit {
                        scanned.hits.push((address, name(), parsed));
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

    /// The allocations of `pool` in `dir` by address (ascending), and the pool's index:
    /// both at once, the index read while the directory is listed.
    fn names_and_index(
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

    fn load_index(&self, dir: &OwnedFd, ns: Option<&Namespace>, pool: &str) -> Index {
        let dev = rustix::fs::fstat(dir).map_or(0, |s| s.st_dev);
        self.index_dir(ns, false)
            .ok()
            .and_then(|index_dir| {
                beneath::read(
                    &index_dir,
                    format!("{pool}{INDEX_SUFFIX}"),
                    beneath::MAX_READ,
                )
                .ok()
                .flatten()
            })
            .map_or_else(|| Index::empty(dev), |file| Index::parse(file.bytes, dev))
    }

    /// The indexes of `pool`, or of every pool of `ns` that has one, by pool name.
    fn load_indexes(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        pool: Option<&PoolName>,
    ) -> HashMap<String, Index> {
        let mut pools = Vec::new();
        match pool {
            Some(pool) => pools.push(pool.as_str().to_owned()),
            None => {
                if let Ok(index_dir) = self.index_dir(ns, false) {
                    let _ = beneath::each_name(&index_dir, |name, _| {
                        if let Some(pool) =
                            beneath::utf8(name).and_then(|n| n.strip_suffix(INDEX_SUFFIX))
                        {
                            pools.push(pool.to_owned());
                        }
                    });
                }
            }
        }
        pools
            .into_iter()
            .map(|pool| {
                let index = self.load_index(dir, ns, &pool);
                (pool, index)
            })
            .collect()
    }

    /// Appends `changes` to the pool's index, or rewrites it whole when it is missing or
    /// mostly history.
    fn save_index(
        &self,
        ns: Option<&Namespace>,
        pool: &str,
        index: &Index,
        changes: &[Change],
    ) -> std::result::Result<(), Refused> {
        failpoint!("index-before-write");
        let index_dir = self.index_dir(ns, true)?;
        let file = format!("{pool}{INDEX_SUFFIX}");
        if index.lines > 0
            && !index.wants_rewrite(changes.len())
            && beneath::append(&index_dir, &file, Index::render_changes(changes).as_bytes())?
        {
            return Ok(());
        }
        beneath::write(
            &index_dir,
            &file,
            index.render_with(changes).as_bytes(),
            WriteMode::Replace,
            false,
            &beneath::beside,
        )?;
        Ok(())
    }

    /// The index directory of the allocations of `ns`: `.index/<allocations dir>` (created
    /// with `create`).
    fn index_dir(
        &self,
        ns: Option<&Namespace>,
        create: bool,
    ) -> std::result::Result<OwnedFd, Refused> {
        let rel = Path::new(INDEX_DIR).join(FsStore::relative_dir(ObjectKind::Allocation, ns));
        if create {
            beneath::open_or_create_dir(&self.fd, &rel)
        } else {
            beneath::open_dir(&self.fd, &rel)
        }
    }

    /// Where writes make their temporary files: `.index/` at the root, made again if `git
    /// clean` removed it.
    fn scratch(&self) -> Option<std::result::Result<OwnedFd, Refused>> {
        Some(beneath::subdir(&self.fd, INDEX_DIR))
    }

    /// The address `key`'s hint names in `pool`, if any.
    fn hint(&self, ns: Option<&Namespace>, pool: &PoolName, key: u64) -> Option<IpAddr> {
        let index_dir = self.index_dir(ns, false).ok()?;
        let hints =
            beneath::open_dir(&index_dir, Path::new(&format!("{pool}{HINTS_SUFFIX}"))).ok()?;
        let file = beneath::read(&hints, format!("{key:016x}"), 64).ok()??;
        std::str::from_utf8(&file.bytes)
            .ok()?
            .strip_suffix('\n')?
            .parse()
            .ok()
    }

    /// Records `address` as `key`'s hint (best effort).
    fn write_hint(&self, ns: Option<&Namespace>, pool: &PoolName, key: u64, address: IpAddr) {
        failpoint!("index-before-hint");
        let _ = self
            .index_dir(ns, true)
            .and_then(|index_dir| beneath::subdir(index_dir, &format!("{pool}{HINTS_SUFFIX}")))
            .and_then(|hints| {
                beneath::write(
                    hints,
                    &format!("{key:016x}"),
                    format!("{address}\n").as_bytes(),
                    WriteMode::Replace,
                    false,
                    &beneath::beside,
                )
            });
    }

    /// The addresses of the allocations in `dir`, ascending, by pool (only `pool`'s if
    /// given). Only names of the canonical form count (see [`parse_allocation_name`]), so
    /// [`allocation_file`] gives each one's file name back.
    fn pool_names(
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
    fn names(&self, dir: &OwnedFd) -> Result<Vec<String>> {
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

    fn lock(&self, target: Target<'_>, mode: LockMode) -> Result<LockGuard> {
        let held = lock::lock(&self.fd, MARKER, &self.root.join(MARKER), target, mode)?;
        Ok(Box::new(held))
    }
}

/// One allocation file as a scan's first pass saw it.
enum Look {
    /// Its status matches its index record, whose owner is not wanted.
    Known,
    /// Its status matches its index record, whose owner is wanted, and the record says the
    /// file is exactly the manifest ipamctl writes for it: this is that manifest, and its
    /// object name (made here, on the scan's threads, rather than after them).
    Rebuilt(String, Box<AllocationManifest>),
    /// Read now, with its status (boxed: most files are `Known`).
    Read(Boxed, Stamp),
    /// Removed since the listing.
    Gone,
}

/// A manifest as a scan returns it: boxed, so that tens of thousands of them move through
/// the scan's vectors as pointers.
type Boxed = std::result::Result<Box<AllocationManifest>, String>;

/// What a scan found.
#[derive(Default)]
struct Scanned {
    /// The addresses the pool's allocations hold.
    taken: Vec<IpAddr>,
    /// The files whose owner may be wanted, and every file that does not parse, read now.
    hits: Vec<(IpAddr, String, Boxed)>,
}

impl Stamp {
    /// The stamp of a file that could not be read as a manifest (a symlink, a FIFO): matches
    /// no record, and is not a rewrite in progress.
    fn of_nothing() -> Stamp {
        Stamp {
            ino: 0,
            size: 0,
            mtime: 0,
            ctime: i64::MIN,
        }
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

fn scope_text(ns: Option<&Namespace>) -> &str {
    ns.map_or("", |n| n.as_str())
}

fn check_marker(path: &Path, text: &str) -> Result<()> {
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("layout:"))
        .and_then(|v| v.trim().parse::<u32>().ok());
    match version {
        Some(LAYOUT_VERSION) => Ok(()),
        Some(v) => Err(Error::Corrupt {
            path: path.to_owned(),
            message: format!(
                "layout version {v} is not supported by this ipamctl (it reads version {LAYOUT_VERSION})"
            ),
        }),
        None => Err(Error::Corrupt {
            path: path.to_owned(),
            message: "has no `layout: N` line".into(),
        }),
    }
}

impl Store for FsStore {
    fn locate(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> String {
        FsStore::relative_dir(kind, ns)
            .join(format!("{name}.yaml"))
            .display()
            .to_string()
    }

    fn get(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<Option<Vec<u8>>> {
        let Some(dir) = self.dir(kind, ns, false)? else {
            return Ok(None);
        };
        let file = format!("{name}.yaml");
        match beneath::read(&*dir, &file, MAX_MANIFEST_BYTES) {
            Ok(read) => Ok(read.map(|r| r.bytes)),
            Err(e) => Err(refused(self.path(kind, ns, &file), e)),
        }
    }

    fn create(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<bool> {
        let dir = self.dir(kind, ns, true)?.expect("created");
        let file = format!("{name}.yaml");
        // A name already taken needs no temporary file and no fsync to find out: when many
        // processes claim at once, each one that lost an address moves on without paying a
        // durable write for it. The rename below still arbitrates claims made after this.
        if let Ok(Some(_)) = beneath::stat(&*dir, &file) {
            return Ok(false);
        }
        beneath::write(&*dir, &file, bytes, WriteMode::CreateOnly, true, &|| {
            self.scratch()
        })
        .map_err(|e| write_error(self.path(kind, ns, &file), e))
    }

    fn replace(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<()> {
        let dir = self.dir(kind, ns, true)?.expect("created");
        let file = format!("{name}.yaml");
        beneath::write(&*dir, &file, bytes, WriteMode::Replace, true, &|| {
            self.scratch()
        })
        .map_err(|e| write_error(self.path(kind, ns, &file), e))?;
        Ok(())
    }

    fn delete(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<bool> {
        let Some(dir) = self.dir(kind, ns, false)? else {
            return Ok(false);
        };
        let file = format!("{name}.yaml");
        beneath::remove(&*dir, &file, true).map_err(|e| write_error(self.path(kind, ns, &file), e))
    }

    fn list(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<Vec<String>> {
        match self.dir(kind, ns, false)? {
            Some(dir) => self.names(&dir),
            None => Ok(Vec::new()),
        }
    }

    fn scopes(&self) -> Result<Vec<Option<Namespace>>> {
        let mut scopes = vec![None];
        let base = match beneath::open_dir(&self.fd, Path::new("namespaces")) {
            Ok(fd) => fd,
            Err(e) if e.is_not_found() => return Ok(scopes),
            Err(e) => return Err(refused(self.root.join("namespaces"), e)),
        };
        let mut stack = vec![(base, String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            let listed = beneath::names(&dir)
                .map_err(|e| refused(self.root.join("namespaces").join(&prefix), e))?;
            let mut is_scope = false;
            for (name, file_type) in listed {
                let Some(name) = beneath::utf8(&name) else {
                    continue;
                };
                // The type from the directory entry: a symlink is seen, never followed.
                let is_dir = match file_type {
                    rustix::fs::FileType::Directory => true,
                    rustix::fs::FileType::Unknown => {
                        beneath::stat(&dir, name).ok().flatten().is_some_and(|s| {
                            rustix::fs::FileType::from_raw_mode(s.st_mode)
                                == rustix::fs::FileType::Directory
                        })
                    }
                    _ => false,
                };
                if !is_dir || name.starts_with('.') {
                    continue;
                }
                if name == "ipampools" || name == "ipallocations" {
                    is_scope = true;
                    continue;
                }
                let child = if prefix.is_empty() {
                    name.to_owned()
                } else {
                    format!("{prefix}/{name}")
                };
                // A segment that is no valid namespace label cannot be part of a scope.
                if Namespace::new(&child).is_err() {
                    continue;
                }
                if let Ok(fd) = beneath::open_dir(&dir, Path::new(name)) {
                    stack.push((fd, child));
                }
            }
            if is_scope && let Ok(ns) = Namespace::new(&prefix) {
                scopes.push(Some(ns));
            }
        }
        scopes.sort();
        Ok(scopes)
    }

    fn lock_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<LockGuard> {
        let scope = scope_text(ns);
        self.lock(
            Target::Pool {
                scope,
                pool: pool.as_str(),
            },
            mode,
        )
    }

    fn lock_scope(&self, ns: Option<&Namespace>) -> Result<LockGuard> {
        let scope = scope_text(ns);
        self.lock(Target::Scope { scope }, LockMode::Exclusive)
    }

    fn lock_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<LockGuard> {
        let scope = scope_text(ns);
        self.lock(
            Target::Owner {
                scope,
                pool: pool.as_str(),
                key: owner.key(),
            },
            LockMode::Exclusive,
        )
    }

    fn find_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<OwnerLookup> {
        let mut lookup = OwnerLookup::default();
        let Some(dir) = self.dir(ObjectKind::Allocation, ns, false)? else {
            return Ok(lookup);
        };
        let key = owner.key();
        if let Some(address) = self.hint(ns, pool, key) {
            let name = crate::model::allocation_name(pool, address);
            if let Some((Ok(m), _)) = self.read_allocation(&dir, ns, &format!("{name}.yaml"))?
                && m.spec.owner == *owner
                && m.spec.address == address
            {
                lookup.held = Some(m);
                return Ok(lookup);
            }
        }
        let listed = self.names_and_index(&dir, ns, pool.as_str())?;
        let text = index::owner_text(owner);
        let scanned = self.scan(&dir, ns, pool.as_str(), listed, &|t| t == text)?;
        lookup.taken = scanned.taken;
        for (address, name, mut parsed) in scanned.hits {
            if parsed.is_err()
                && let Some((again, _)) = self.read_whole(&dir, ns, &format!("{name}.yaml"))?
            {
                parsed = again.map(Box::new);
            }
            match parsed {
                Ok(m) if m.spec.owner == *owner && m.spec.address == address => {
                    lookup.held.get_or_insert(*m);
                }
                Ok(_) => {}
                Err(why) => lookup.broken.push((name, why)),
            }
        }
        if let Some(held) = &lookup.held {
            self.write_hint(ns, pool, key, held.spec.address);
        }
        Ok(lookup)
    }

    fn record_claim(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
        address: IpAddr,
    ) {
        self.write_hint(ns, pool, owner.key(), address);
    }

    fn find_allocations(
        &self,
        ns: Option<&Namespace>,
        pool: Option<&PoolName>,
        filter: &OwnerFilter,
    ) -> Result<Vec<Found>> {
        let Some(dir) = self.dir(ObjectKind::Allocation, ns, false)? else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        let wanted = |text: &str| index::text_matches(text, filter);
        // The pools' indexes are read while the directory is listed, as for an owner look-up.
        let (by_pool, mut indexes) = std::thread::scope(|s| {
            let indexes = s.spawn(|| self.load_indexes(&dir, ns, pool));
            let by_pool = self.pool_names(&dir, pool.map(PoolName::as_str));
            let indexes = indexes
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (by_pool, indexes)
        });
        for (pool, addresses) in by_pool? {
            let index = match indexes.remove(&pool) {
                Some(index) => index,
                None => self.load_index(&dir, ns, &pool),
            };
            let hits = self
                .scan(&dir, ns, &pool, (addresses, index), &wanted)?
                .hits;
            found.reserve(hits.len());
            for (_, name, parsed) in hits {
                match parsed {
                    Ok(m) if !filter.matches(&m.spec.owner) => {}
                    parsed => found.push(Found {
                        name,
                        parsed: parsed.map(|m| *m),
                    }),
                }
            }
        }
        Ok(found)
    }
}

/// A failed write: a read-only directory is its own error (exit 1, "read-only").
fn write_error(path: PathBuf, why: Refused) -> Error {
    match why {
        Refused::Io(source)
            if matches!(
                source
                    .raw_os_error()
                    .map(rustix::io::Errno::from_raw_os_error),
                Some(rustix::io::Errno::ROFS | rustix::io::Errno::ACCESS | rustix::io::Errno::PERM)
            ) =>
        {
            Error::ReadOnly { path, source }
        }
        other => refused(path, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index vouches for a file only while its status is unchanged: a file rewritten in
    /// place (as `cp` does: same inode, same size) is read again.
    #[test]
    fn a_file_rewritten_in_place_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        FsStore::init(dir.path()).unwrap();
        let store = FsStore::open(dir.path()).unwrap();
        let pool = PoolName::new("p").unwrap();
        let a = Owner::parse("FloatingIP/a", None).unwrap();
        let b = Owner::parse("FloatingIP/b", None).unwrap();
        let address: IpAddr = "10.0.0.1".parse().unwrap();
        let manifest = |owner: &Owner| {
            yaml::encode(&AllocationManifest::new(
                &pool,
                None,
                address,
                owner.clone(),
            ))
        };
        let name = crate::model::allocation_name(&pool, address);
        let created = store.create(ObjectKind::Allocation, None, &name, manifest(&a).as_bytes());
        assert!(created.unwrap());
        // Old enough to be recorded by the next look-up.
        std::thread::sleep(std::time::Duration::from_millis(150));
        assert!(store.find_owner(None, &pool, &b).unwrap().held.is_none());
        let index = std::fs::read_to_string(dir.path().join(".index/cluster/ipallocations/p.idx"));
        assert!(index.unwrap().contains(" FloatingIP a -\n"));

        let file = dir
            .path()
            .join("cluster/ipallocations")
            .join(format!("{name}.yaml"));
        std::fs::write(&file, manifest(&b)).unwrap();
        let held = store.find_owner(None, &pool, &b).unwrap().held;
        assert_eq!(held.map(|m| m.spec.address), Some(address));
    }
}
