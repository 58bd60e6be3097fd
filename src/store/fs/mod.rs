//! The filesystem store: one YAML file per object, at a path derived from (kind, namespace,
//! name) alone, so the path is the unique index. The directories' names are
//! [`crate::model::layout`]'s, which no namespace segment may take: each directory below
//! holds one thing.
//!
//! ```text
//! <root>/.ipamctl                                 marker: identifies the root, layout version
//! <root>/.index/lock-<inode of the root>          every lock is a byte range of it, fenced by a
//!                                                 flock of the root directory (lock/)
//! <root>/.gitignore                               keeps the dot-files below out of git
//! <root>/cluster/ipampools/<pool>.yaml            public pools
//! <root>/cluster/ipallocations/<pool>-<a-b-c-d>.yaml
//! <root>/namespaces/<ns segments>/ipampools/<pool>.yaml
//! <root>/namespaces/<ns segments>/ipallocations/<pool>-<a-b-c-d>.yaml
//! <root>/{cluster,namespaces/<ns segments>}/subnets/<subnet>.yaml    subnets of the scope's pools
//! <root>/{cluster,namespaces/<ns segments>}/cooldown/<pool>-<a-b-c-d>.yaml   recent releases
//! <root>/{cluster,namespaces/<ns segments>}/ipprefixclaims/<pool>-<a-b-c-d>-<len>.yaml   child prefixes of supernets
//! <root>/{cluster,namespaces/<ns segments>}/macs/<pool>-<12 hex digits>   who holds a MAC in a pool (macs.rs)
//! <root>/.index/<allocations dir>/<pool>.idx     owner index, stat-validated (owner/index.rs)
//! <root>/.index/<allocations dir>/<pool>.owners/<key>   owner key -> address hint
//! <root>/.index/<ipprefixclaims dir>/<pool>.idx  a supernet's owner index, keyed by prefix
//! <root>/.index/.tmp-*                            temporary files of writes in flight
//! <dir>/.ipamctl-deleting-*                        a file being deleted, for an instant
//! ```
//!
//! Everything derived or in flight lives in the one git-ignored `.index/` at the root, never
//! beside the manifests: a directory holding nothing but ignored entries is removed whole by
//! `git clean -fdX`, and a claim renamed into it at that moment would go with it, after
//! ipamctl printed it. An object directory holds manifests only.
//!
//! Everything below the root is opened beneath the root's handle without following a
//! symlink ([`beneath`]): nothing planted in the state directory can make ipamctl read
//! or write outside it. Everything ipamctl writes goes through a new temporary file and a
//! rename, so no existing file (or hard link) is ever written into; the one exception, an
//! append to a pool's index, refuses a file that has a second name, as every read does.
//!
//! The protocols live with their code: the write protocol, and the crash window each step
//! closes, in `objects.rs`; owner look-ups, and why an outside writer cannot fool them, in
//! [`owner`] (the look-up itself in `owner/queries.rs`, the scan behind it in
//! `owner/scan.rs`, the format of the owner index in [`owner::index`]); claims and guarded releases
//! in `claims.rs`; MACs held once per pool (MAC records, the window each step closes and
//! what an outside writer can still do) in `macs.rs`; locks in [`lock`]; the walk `check`
//! reads, and the rest of what makes the file store a state directory
//! ([`crate::store::StateDir`]), in `inspect/`.
//!
//! # Prefix claims of supernet pools
//!
//! Names alone cannot arbitrate prefixes (a /60 and a /64 inside it have different names),
//! so a prefix claim (`engine::prefix`) is decided under the pool's lock, taken exclusively
//! and held only for the claim:
//! 1. take the pool's lock exclusively ([`lock`]): no other ipamctl claim, release or
//!    change of the pool runs until step 4; like every lock, it survives `git clean` and
//!    `rsync` (`tests/adversary.rs` holds a prefix claim inside it while both run);
//! 2. list `ipprefixclaims/` and find the owner's claim, if any (then it is the answer),
//!    by the owner index keyed by prefix (`owner/prefix_claims.rs`): only the files whose status
//!    differs from their record, and the owner's own, are read;
//! 3. choose the prefix from the listed names and the pool's excludes (best fit);
//! 4. create the claim's file exclusively (temporary file, fsync, link without replacing,
//!    fsync of the directory: `objects.rs`), then drop the lock. A link refused (a file of
//!    that name appeared: only an outside writer can) makes the claim decide again.
//!
//! Step 1 closes the window between the read of the claims and the create: two ipamctl
//! processes never decide on the same listing. Step 4's exclusive create closes the
//! same-name race against a writer that takes no lock. A kill at any instant leaves no file
//! or a complete one (a `.tmp-*` at worst, which blocks nothing) and the kernel drops the
//! lock. What an outside writer can still do: bring an overlapping claim from another clone
//! (`git pull`, `cp`) or rewrite a claim's file; `ipamctl check` then reports overlapping
//! claims, claims outside their pool and claims on an exclude.
//!
//! # Windows, and what closes each
//!
//! Outside writers take no lock, so every step that reads a file and then acts on it has a
//! window in which the file can change. Each one, and what closes it:
//! - *a delete after a check* (a release, `check --fix`, cooldown pruning, `pool delete`,
//!   `vpc delete`): an `unlink` by name removes whatever is under the name when it runs,
//!   perhaps a claim made after an outside `rm`. Closed by deleting through a private name
//!   ([`beneath::remove_if`]): the name is renamed away in one step, what was taken is
//!   judged, and it is unlinked only if it is the file checked, else renamed back without
//!   replacing anything (objects.rs);
//! - *the owner look-up's windows* (a stamp that repeats, a file in flight, a file that
//!   names the owner but is no manifest, an owner's file replaced while a claim for it runs,
//!   a change during a batch): each, and where it is closed, in [`owner`];
//! - *a special file or a hard link at a manifest's path*: closed by looking before
//!   opening (`O_PATH`, `fstat`) and refusing anything but a regular file with one name
//!   ([`beneath::read`]);
//! - *a lock file replaced while held* (`git clean -fdX` deletes the ignored lock file,
//!   `rsync -a` from another clone replaces the marker): closed by locking bytes of a lock
//!   file that is made only while no process holds a byte of an earlier one, which the root
//!   directory's `flock` (shared by every holder, exclusive to make the file) fences; no
//!   tool replaces the root directory ([`lock`]). A lock wait is bounded, and a process
//!   never waits for a byte it holds.
//!
//! # In a batch
//!
//! `allocate -f` and `release -f` run many requests in one process, each as its own claim
//! or release, with every lock and re-check above. What one process keeps between them (the
//! listing, statuses and owners of the allocation files, kept true by an inotify watch) is
//! the batch view and the watch of the owner look-up ([`owner`]): an outside write during a batch
//! (`git pull`, `git checkout`, `git clean`, `cp` over a file, `rsync`, `rm`, `touch`, an
//! editor) raises an event before it returns, and the next request reads what it named, so
//! it can do no more than between two single commands. What a batch cannot see that a
//! single command would: a write through a second hard link made from another directory,
//! or through a shared `mmap`, during the batch; a directory on a file system that is not
//! local (NFS, CIFS, FUSE, overlay) is never remembered, and an overflowing event queue
//! drops the memory.
//!
//! A batch's claim also does not wait for its directory's `fsync` (`flush.rs`): its bytes
//! are synced before its name is made, as always, and the directory is synced on a thread
//! of its own while the next request runs. The claim's locks are held until then, so no
//! other process can act on the claim sooner than when it waited; the batch prints a group
//! of results (up to 16 requests) only once every name made in it is durable, so nothing is
//! printed that a crash could still take back. A claim that takes a MAC is no exception: its
//! record was made durable before its file (`macs.rs`).
//!
//! # What an outside writer can still do
//!
//! `git pull`, `checkout`, `clean -fdX`, `cp` over a file, `cp -a` or `rsync -a` from another
//! clone, `rm`, `touch`, a stepped clock: each changes a file's status (or removes the index,
//! which is only a cost), so the next look-up reads what changed. What is left:
//! - an outside change that itself gives an owner a second address (a merge of two clones
//!   that claimed for one owner): ipamctl's look-up then returns one of them; `ipamctl check`
//!   reports the duplicate owner;
//! - an outside delete is a release: a claim for the owner while its file is gone (a `git
//!   checkout` replacing it, unlink then create, around the whole claim) takes a second
//!   address, which `check` reports; while the name is free any claimer may take it;
//! - a rewrite that stalls for more than 2 s at a prefix that parses as another owner's
//!   manifest, or for any time at a prefix that is byte for byte ipamctl's output for
//!   another owner (such a prefix is trusted at once);
//! - a change that keeps a file's inode, size, mtime and ctime to the nanosecond (a clock
//!   stepped back onto the very instant of an earlier write of the same length);
//! - an edit of an index line that also makes its seal again (an edit of the owner alone
//!   voids the line: [`owner::index`]);
//! - deleting the lock file while it is held and putting it back by an outside copy of
//!   this very checkout's `.index/` before its holders finish ([`lock`]);
//! - an allocation written by hand under a name that does not match its address: its name's
//!   address stays taken, but it is not taken for its owner's allocation (the owner may be
//!   given another); `check` reports the mismatch;
//! - a MAC record removed or replaced while its claim is killed between its record and its
//!   allocation, or a MAC given to a second allocation by hand or by a merge: the MAC is then on two
//!   allocations of a pool, which `check` reports (`macs.rs`); `check` warns of a MAC
//!   without its record, and `check --fix` makes it.

mod allocation;
pub mod beneath;
mod changed;
mod claims;
mod flush;
mod inspect;
pub mod lock;
pub mod macs;
mod objects;
pub mod owner;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::model::Namespace;
use crate::model::layout::{self, ScopeDir};
use crate::store::ObjectKind;
use crate::store::fs::beneath::{WriteMode, refused};

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
    /// What the last owner look-up of each (scope, pool, owner key) saw taken: a claim that
    /// follows it reads only the files that appeared since (see `claims.rs`).
    looked: Mutex<HashMap<(String, String, u64), owner::Looked>>,
    /// The locks this process holds through this store ([`lock`]).
    locks: Arc<lock::Registry>,
    /// In a batch, what the scans saw of each allocation directory, kept true by inotify
    /// (`owner/watch.rs`); `None` outside a batch.
    watch: Mutex<Option<owner::watch::Watch>>,
    /// In a batch, the claims whose names are made durable behind it (`flush.rs`); unset
    /// outside a batch, where every claim waits for its own.
    flusher: std::sync::OnceLock<flush::Flusher>,
}

impl FsStore {
    /// Opens the state directory at `root`, which must hold the marker. Exit 2 for an
    /// invalid [`lock::LOCK_TIMEOUT_VAR`], whether or not the command waits for a lock.
    pub fn open(root: &Path) -> Result<FsStore> {
        lock::timeout()?;
        owner::check_skip()?;
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
                hint: format!(
                    "`ipamctl init {}` makes it one; a database is `--store URL` (or IPAMCTL_STORE)",
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
            hint: "run `ipamctl init` to create one here, name one with `-d DIR` (or IPAMCTL_STATE_DIR), or use a database with `--store URL` (or IPAMCTL_STORE)".into(),
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
                // Named by `-d` or IPAMCTL_STATE_DIR: a typo, most likely, so no advice to
                // name a directory the user just named.
                std::io::ErrorKind::NotFound => Error::NoStateDir {
                    message: format!("`{}` does not exist", root.display()),
                    hint: format!(
                        "check the path given by `-d` or IPAMCTL_STATE_DIR; `ipamctl init {}` creates a state directory there, and `--store URL` (or IPAMCTL_STORE) uses a database instead",
                        root.display()
                    ),
                },
                _ => Error::io(root, e),
            })?
            .into();
        Ok(FsStore {
            root: root.to_owned(),
            fd,
            dirs: Mutex::new(HashMap::new()),
            looked: Mutex::new(HashMap::new()),
            locks: Arc::default(),
            watch: Mutex::new(None),
            flusher: std::sync::OnceLock::new(),
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

    /// Directory of `kind` objects in scope `ns`, relative to the root
    /// ([`crate::model::layout`]).
    pub fn relative_dir(kind: ObjectKind, ns: Option<&Namespace>) -> PathBuf {
        PathBuf::from(layout::dir_path(ScopeDir::Objects(kind), ns))
    }

    /// The directory of `kind` objects in scope `ns`, opened beneath the root (created with
    /// `create`); `None` if it does not exist and `create` is false.
    fn dir(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        create: bool,
    ) -> Result<Option<Arc<OwnedFd>>> {
        self.dir_at(FsStore::relative_dir(kind, ns), create)
    }

    /// The directory `rel` (relative to the root), opened beneath the root as
    /// [`FsStore::dir`] opens an object directory.
    fn dir_at(&self, rel: PathBuf, create: bool) -> Result<Option<Arc<OwnedFd>>> {
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

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use crate::model::{AllocationManifest, Owner, PoolName};
    use crate::store::fs::FsStore;
    use crate::store::{ObjectKind, Objects, Queries};
    use crate::yaml;

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
