//! Locks that survive `git clean`, `rm`, `git checkout`, `cp -a` and `rsync -a`: byte-range
//! locks on this checkout's lock file, `.index/lock-<inode of the root>`, each generation of
//! which is fenced by a `flock` of the root directory itself.
//!
//! A lock is only as good as the file it locks. A lock file deleted or replaced while held
//! lets a process that opens the path afterwards lock a new inode beside the holder of the
//! old one, and both are inside. No file of a working tree is safe from every tool: `git
//! clean -fdX` (or `rm -rf .index`, `rsync -a --delete`) deletes the git-ignored lock file,
//! and `rsync -a` from another clone replaces tracked files such as the marker with new
//! inodes. The root directory is safe from all of them: `rsync` and `cp -a` update a
//! directory in place, git never removes the directory it works in, and nothing ipamctl is
//! asked to survive replaces it. But a directory carries no byte-range locks (a write lock
//! needs a descriptor open for writing, which a directory cannot have), only one `flock` for
//! the whole. So the two are combined:
//! 1. a process that locks anything first holds the root directory's `flock` *shared*, and
//!    keeps it for as long as it holds any lock; its locks are bytes of the lock file, all
//!    through the one descriptor it opened under that shared hold;
//! 2. the lock file is made only under the root's `flock` held *exclusively*, which is
//!    granted only once no process holds it shared, that is, once nobody holds a byte of any
//!    earlier lock file. Then it goes back to shared, and locks its byte.
//!
//! So a lock file deleted while held is never replaced while a holder of the old one runs:
//! the processes that come after wait until the last holder is done, one of them makes the
//! new file, and every process that holds a byte holds it of the same file as every other,
//! whatever was done to the names meanwhile. Mutual exclusion needs no second look after
//! the fact (the earlier design locked the marker too, and lost exclusion when `rsync -a`
//! replaced the marker while `git clean` deleted the lock file: docs/src/evidence.md). The cost
//! is only there after a deletion: a process that finds no lock file waits for every
//! ipamctl process working in the state directory, not only for those holding its byte.
//!
//! The name carries the root directory's inode number, so another clone's lock file, synced
//! or copied in whole (`rsync -a`, `cp -a`), is another name and locks nothing here. What is
//! left: a lock file deleted while held and then put back under this root's own name by an
//! outside copy (this checkout's `.index/` restored from a backup at that instant) before
//! its holders finish.
//!
//! Where no lock file can be made or opened for writing (a `.index/` that another user owns,
//! something other than a regular file with one name planted at its path), the root's
//! `flock` held exclusively is this process's lock of everything: it keeps out every other
//! process, which is correct, only not concurrent. On a file system without `flock` of
//! directories the lock file is locked without the fence.
//!
//! Locks are open-file-description locks (`F_OFD_SETLK`) and `flock`s, both released by the
//! kernel when the process dies, however it dies.
//!
//! # Offsets, and a process never waiting for itself
//!
//! The byte of a lock is derived from what is locked: a kind (pool, scope, owner) picks one
//! of three disjoint quarters of the offset range, and a hash of the target the byte within
//! it, so locks of different kinds never share a byte. Two targets of one kind may still
//! hash to one byte (FNV-1a, 60 bits: chance, or a crafted name). A process that already
//! holds that byte through this store reuses its hold instead of waiting for itself (OFD
//! locks have no deadlock detection): the two locks become one, which excludes others no
//! less. Such a pair exists and was constructed (`examples/lock_collision.rs`, a birthday
//! search of about a minute): `FloatingIP/c0d869d229a8fe4b` and `FloatingIP/cdf8df1ad2d92236`
//! share a byte in pool `public-zone-a`; a claim of one waits for a claim of the other, and
//! each gets its own address (`tests/adversary.rs`). (Asking exclusively for a byte held
//! shared by the same process is refused, exit 1: no claim does it, and an upgrade could
//! deadlock with another upgrader.)
//!
//! # Waiting is bounded
//!
//! Every wait (for a byte, for the root's shared `flock` while another process makes the
//! lock file, for the exclusive one while others finish) is polled, not waited for in the
//! kernel, for at most [`LOCK_TIMEOUT_VAR`] seconds (default [`DEFAULT_TIMEOUT_SECS`]) in
//! all; then the command fails (exit 1) naming what it waited for and, from `/proc/locks`,
//! the process that holds it. Each round of each wait looks at the deadline and sleeps
//! before the next try, including the round in which a lock file that cannot be used sits
//! at its path while others hold the root shared (the wait for the root exclusively is then
//! never cut short as if the file had just been made: that spun past the deadline). A value
//! of the variable that is no finite number of seconds, 0 or more, is exit 2.
//!
//! Write locks need the lock file opened for writing: on a read-only state directory
//! [`Error::ReadOnly`] says so, and commands that only read do without locks.
//!
//! The file store's [`Locks`]: a pool, a scope, and the locks of a claim, which are the
//! pools' locks (shared) and then, because nothing on disk arbitrates between two requests
//! for one owner, the owner's lock in each pool. The owner's lock is also taken by a release
//! (`claims.rs`). Every guard holds a [`Hold::File`]; the order they are taken in is
//! [`crate::store::guard`]'s.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, fcntl};
use rustix::fs::{Mode, OFlags, openat};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::model::{Namespace, Owner, PoolName};
use crate::store::fs::beneath;
use crate::store::fs::lock_holder::holder;
use crate::store::fs::{FsStore, INDEX_DIR, MARKER};
use crate::store::{ClaimLock, Hold, LockMode, Locks, PoolLock, ScopeLock};

/// The variable that bounds a lock wait, in seconds (a decimal number; `0` waits not at all).
pub const LOCK_TIMEOUT_VAR: &str = "IPAMCTL_LOCK_TIMEOUT";

/// How long a lock is waited for when [`LOCK_TIMEOUT_VAR`] is not set.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

/// Prefix of this checkout's lock file in `.index/`, followed by the root's inode number.
pub const LOCK_FILE_PREFIX: &str = "lock-";

/// What a lock guards, hashed into the byte it locks (see "Offsets" above).
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// A pool: `allocate` shares it, `apply` and `pool delete` hold it alone.
    Pool { scope: &'a str, pool: &'a str },
    /// The set of pools of a scope, while `apply` checks overlaps and writes.
    Scope { scope: &'a str },
    /// One owner's name in one pool (its [`crate::model::Owner::lock_key`]: the name's,
    /// whatever the uid, except a VPC's), or its identity there ([`Target::owners`]).
    Owner {
        scope: &'a str,
        pool: &'a str,
        key: u64,
    },
}

impl<'a> Target<'a> {
    /// The lock of `owner` in `pool` of scope `ns`: its name's ([`Owner::lock_key`]), the one
    /// every claim, release and `mac set` of the owner, and of its name under any other uid,
    /// holds (and a claim judging a MAC record that names the owner waits for).
    pub fn owner(ns: Option<&'a Namespace>, pool: &'a PoolName, owner: &Owner) -> Target<'a> {
        Target::Owner {
            scope: scope_text(ns),
            pool: pool.as_str(),
            key: owner.lock_key(),
        }
    }

    /// The locks a claim, a release and `mac set` of `owner` in `pool` take, in this order:
    /// [`Target::owner`], then, for an owner with a uid, its identity's ([`Owner::key`]), the
    /// one versions before the name's lock took. So a process of such a version and one of
    /// this version, working on one owner in one state directory during an upgrade, still
    /// exclude each other; no process takes the second before the first, so no two wait for
    /// each other.
    pub fn owners(
        ns: Option<&'a Namespace>,
        pool: &'a PoolName,
        owner: &Owner,
    ) -> impl Iterator<Item = Target<'a>> + use<'a> {
        let name = Target::owner(ns, pool, owner);
        let identity =
            (owner.uid().is_some() && owner.key() != owner.lock_key()).then(|| Target::Owner {
                scope: scope_text(ns),
                pool: pool.as_str(),
                key: owner.key(),
            });
        std::iter::once(name).chain(identity)
    }
    /// The locked byte: the kind's quarter of the positive range of `off_t`, and FNV-1a of
    /// the target within it. Public for `examples/lock_collision.rs`, which searches for two
    /// owners that share one.
    pub fn offset(&self) -> i64 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let key;
        let (quarter, parts): (u64, [&[u8]; 4]) = match self {
            Target::Pool { scope, pool } => (0, [b"pool", scope.as_bytes(), pool.as_bytes(), b""]),
            Target::Scope { scope } => (1, [b"scope", scope.as_bytes(), b"", b""]),
            Target::Owner {
                scope,
                pool,
                key: k,
            } => {
                key = k.to_le_bytes();
                (2, [b"owner", scope.as_bytes(), pool.as_bytes(), &key])
            }
        };
        let hash = parts.iter().fold(OFFSET, |hash, part| {
            part.iter()
                .chain(b"\0")
                .fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
        });
        // 60 bits of hash under 2 bits of kind: positive, and far from the end of the range.
        i64::try_from((quarter << 60) | (hash >> 4)).expect("62 bits fit an i64")
    }

    /// The lock as a message names it.
    fn describe(&self) -> String {
        let scope = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!(" in namespace `{s}`")
            }
        };
        match self {
            Target::Pool { scope: s, pool } => format!("the lock of pool `{pool}`{}", scope(s)),
            Target::Scope { scope: s } => format!("the lock of the pools{}", scope(s)),
            Target::Owner {
                scope: s,
                pool,
                key,
            } => format!(
                "the lock of one owner (key {key:016x}) in pool `{pool}`{}",
                scope(s)
            ),
        }
    }
}

/// The locks this store's process holds, by offset (how, and how many holds share each),
/// and its hold on the state directory as a whole while it holds any.
#[derive(Debug, Default)]
pub(super) struct Registry {
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    bytes: HashMap<i64, Shared>,
    /// The hold on the whole while any byte is held: every byte is locked through it.
    whole: std::sync::Weak<Whole>,
}

#[derive(Debug)]
struct Shared {
    mode: LockMode,
    holds: usize,
    whole: Arc<Whole>,
}

/// A store's hold on the state directory as a whole (see the module docs): the root
/// directory's `flock`, and the lock file whose bytes are the locks. Dropped (both
/// descriptors closed, so every lock released) when the last byte held through it goes.
#[derive(Debug)]
struct Whole {
    /// The root directory, opened for its `flock`: held shared, or exclusively when `file`
    /// is `None`.
    _root: OwnedFd,
    /// The lock file, through which every byte is locked; `None` where none can be made or
    /// opened for writing, and the root's `flock` held exclusively is the lock of everything.
    file: Option<OwnedFd>,
    /// The lock file's inode, to find a byte's holder in `/proc/locks`.
    ino: u64,
    /// The lock file's path, for messages.
    path: std::path::PathBuf,
}

/// One hold of a lock ([`Hold::File`]): the byte is unlocked when the last hold of it in
/// this process is dropped (or when the process dies).
#[derive(Debug)]
struct FileHold {
    registry: Arc<Registry>,
    offset: i64,
}

impl Drop for FileHold {
    fn drop(&mut self) {
        let mut held = self.registry.held.lock().unwrap_or_else(|e| e.into_inner());
        let Some(shared) = held.bytes.get_mut(&self.offset) else {
            return;
        };
        shared.holds -= 1;
        if shared.holds == 0
            && let Some(shared) = held.bytes.remove(&self.offset)
            && let Some(file) = &shared.whole.file
        {
            // Other bytes stay locked through the same descriptor: this one is unlocked by
            // hand (closing the descriptor, with the last byte, releases everything).
            let _ = set_lock(file, libc::F_UNLCK, self.offset);
        }
    }
}

impl Registry {
    /// One more hold of every byte this process holds now, kept until the result is
    /// dropped: a batch's claim whose name is made durable later (`flush.rs`) keeps its
    /// locks until then. Never waits: each byte is held already.
    pub(super) fn hold_all(registry: &Arc<Registry>) -> Vec<Hold> {
        let mut held = registry.held.lock().unwrap_or_else(|e| e.into_inner());
        held.bytes
            .iter_mut()
            .map(|(&offset, shared)| {
                shared.holds += 1;
                Hold::File(Box::new(FileHold {
                    registry: Arc::clone(registry),
                    offset,
                }))
            })
            .collect()
    }
}

/// How long a lock is waited for: [`LOCK_TIMEOUT_VAR`] (unset or empty: the default,
/// [`DEFAULT_TIMEOUT_SECS`]). A value that is no finite number of seconds, 0 or more
/// (`abc`, `-5`, `nan`, `inf`) is exit 2 naming it: a wait it meant to bound must not
/// silently become another.
pub fn timeout() -> Result<Duration> {
    let value = match std::env::var(LOCK_TIMEOUT_VAR) {
        Ok(v) if !v.trim().is_empty() => v,
        Ok(_) | Err(std::env::VarError::NotPresent) => {
            return Ok(Duration::from_secs(DEFAULT_TIMEOUT_SECS));
        }
        Err(std::env::VarError::NotUnicode(v)) => v.to_string_lossy().into_owned(),
    };
    match value.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Duration::from_secs_f64(s.min(1e9))),
        _ => Err(Error::Usage {
            message: format!(
                "{LOCK_TIMEOUT_VAR} `{}` is not a number of seconds (a finite decimal, 0 or more)",
                value.escape_debug()
            ),
            hint: Some(format!(
                "e.g. {LOCK_TIMEOUT_VAR}=30, or unset it for the default ({DEFAULT_TIMEOUT_SECS} s)"
            )),
        }),
    }
}

/// Sets (or clears, with `F_UNLCK`) the open-file-description lock of byte `offset` of
/// `fd`, without waiting: `EAGAIN`/`EACCES` when another holds it.
fn set_lock(fd: &OwnedFd, kind: i32, offset: i64) -> nix::Result<()> {
    let range = libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: offset,
        l_len: 1,
        // Must be 0 for open-file-description locks.
        l_pid: 0,
    };
    fcntl(fd.as_fd(), FcntlArg::F_OFD_SETLK(&range)).map(drop)
}

/// The next pause of a polled wait: doubling from 0.5 ms up to 20 ms, never past `deadline`.
fn pause(pause: &mut Duration, deadline: Instant) {
    std::thread::sleep((*pause).min(deadline.saturating_duration_since(Instant::now())));
    *pause = (*pause * 2).min(Duration::from_millis(20));
}

/// Takes the lock of `target` on `fd`, polling until it is granted or `deadline` passes
/// (then exit 1, naming the lock and its holder where `/proc/locks` says).
fn wait_for(
    fd: &OwnedFd,
    path: &Path,
    target: Target<'_>,
    mode: LockMode,
    deadline: Instant,
    ino: u64,
) -> Result<()> {
    let kind = match mode {
        LockMode::Shared => libc::F_RDLCK,
        LockMode::Exclusive => libc::F_WRLCK,
    };
    let mut wait = Duration::from_micros(500);
    loop {
        match set_lock(fd, kind, target.offset()) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {}
            Err(e) => return Err(Error::io(path, e.into())),
        }
        if Instant::now() >= deadline {
            return Err(timed_out(
                path,
                &target.describe(),
                holder(ino, target.offset()),
            ));
        }
        pause(&mut wait, deadline);
    }
}

/// The error of a wait that reached its deadline: what it waited for, and who held it.
fn timed_out(path: &Path, what: &str, holder: Option<String>) -> Error {
    let holder = holder.map(|h| format!(", held by {h}")).unwrap_or_default();
    Error::io(
        path,
        std::io::Error::other(format!(
            "timed out after {} s waiting for {what}{holder}; set {LOCK_TIMEOUT_VAR} \
             (seconds) to wait longer",
            timeout().unwrap_or_default().as_secs_f64(),
        )),
    )
}

/// What [`FsStore::open_lock_file`] found at the lock file's path.
enum LockFile {
    /// Opened for writing: its descriptor and inode.
    Open(OwnedFd, u64),
    /// Nothing there (or no `.index/`).
    Missing,
    /// Something that cannot be the lock file (not a regular file with one name), or one
    /// this user may not make or open for writing.
    Unusable,
}

/// Polls for the root's `flock` in `mode` until it is granted (`Ok(true)`), `stop` says to
/// stop waiting (`Ok(false)`), or `deadline` passes (exit 1, naming what it waited for).
/// `Ok(true)` also where the file system has no `flock` of directories: nothing to wait for.
fn flock_root(
    root: &OwnedFd,
    path: &Path,
    mode: LockMode,
    deadline: Instant,
    mut stop: impl FnMut() -> bool,
) -> Result<bool> {
    use rustix::fs::FlockOperation;
    let op = match mode {
        LockMode::Shared => FlockOperation::NonBlockingLockShared,
        LockMode::Exclusive => FlockOperation::NonBlockingLockExclusive,
    };
    let mut wait = Duration::from_micros(500);
    loop {
        match rustix::fs::flock(root, op) {
            Ok(()) => return Ok(true),
            Err(Errno::INTR) => continue,
            Err(Errno::WOULDBLOCK) => {}
            Err(Errno::NOLCK | Errno::OPNOTSUPP | Errno::INVAL | Errno::BADF) => return Ok(true),
            Err(e) => return Err(Error::io(path, e.into())),
        }
        if stop() {
            return Ok(false);
        }
        if Instant::now() >= deadline {
            let ino = rustix::fs::fstat(root).map(|s| s.st_ino).unwrap_or(0);
            let what = match mode {
                LockMode::Shared => {
                    "the state directory, held whole by an ipamctl process making its lock \
                     file (or one that cannot use it)"
                }
                LockMode::Exclusive => {
                    "the ipamctl processes working in the state directory to finish: its lock \
                     file was removed while they ran, and a new one is made only after them"
                }
            };
            return Err(timed_out(path, what, holder(ino, 0)));
        }
        pause(&mut wait, deadline);
    }
}

impl FsStore {
    /// Locks `target` through this store's hold on the whole (see the module docs), or
    /// reuses this process's hold of the same byte.
    ///
    /// In a batch, the locks of the requests whose names are not durable yet are held too
    /// (`flush.rs`): a request must not wait for a lock while they are, or it would wait
    /// holding an earlier request's locks, out of the order every process takes them in
    /// (a process that holds what it waits for, and waits for what the batch holds, would
    /// stall both until the timeout), nor take exclusively a byte they hold shared (an undo
    /// of a dual-stack claim locks a pool with `reuseAfter` exclusively). So a lock granted
    /// at once is taken; any other is taken only once those names are durable and their
    /// locks gone.
    pub(super) fn lock(&self, target: Target<'_>, mode: LockMode) -> Result<Hold> {
        if let Some(flusher) = self.flusher.get() {
            if let Ok(hold) = self.lock_by(target, mode, Instant::now()) {
                return Ok(hold);
            }
            flusher.wait_synced()?;
        }
        self.lock_by(target, mode, Instant::now() + timeout()?)
    }

    /// [`FsStore::lock`], waiting until `deadline` at most.
    fn lock_by(&self, target: Target<'_>, mode: LockMode, deadline: Instant) -> Result<Hold> {
        let offset = target.offset();
        let mut held = self.locks.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = held.bytes.get_mut(&offset) {
            if shared.mode == LockMode::Shared && mode == LockMode::Exclusive {
                return Err(Error::io(
                    self.root().join(MARKER),
                    std::io::Error::other(format!(
                        "{} shares its byte with a lock this process holds shared; nothing \
                         was changed (rename the pool or owner)",
                        target.describe()
                    )),
                ));
            }
            shared.holds += 1;
        } else {
            let whole = match held.whole.upgrade() {
                Some(whole) => whole,
                None => {
                    let whole = Arc::new(self.hold_whole(deadline)?);
                    held.whole = Arc::downgrade(&whole);
                    whole
                }
            };
            if let Some(file) = &whole.file {
                wait_for(file, &whole.path, target, mode, deadline, whole.ino)?;
            }
            held.bytes.insert(
                offset,
                Shared {
                    mode,
                    holds: 1,
                    whole,
                },
            );
        }
        Ok(Hold::File(Box::new(FileHold {
            registry: Arc::clone(&self.locks),
            offset,
        })))
    }

    /// How many holds of `target`'s byte this process has through this store.
    #[cfg(test)]
    fn holds(&self, target: Target<'_>) -> usize {
        let held = self.locks.held.lock().unwrap_or_else(|e| e.into_inner());
        held.bytes.get(&target.offset()).map_or(0, |s| s.holds)
    }

    /// Takes the hold on the whole: the root's `flock` shared and the lock file there, or,
    /// where there is none, the `flock` exclusively (once every other holder is done) to make
    /// one; where none can be made, the `flock` exclusively is the hold.
    fn hold_whole(&self, deadline: Instant) -> Result<Whole> {
        let root_path = self.root();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let root = openat(self.root_fd(), ".", flags, Mode::empty())
            .map_err(|e| Error::io(root_path, e.into()))?;
        let root_ino = rustix::fs::fstat(&root)
            .map_err(|e| Error::io(root_path, e.into()))?
            .st_ino;
        let name = format!("{LOCK_FILE_PREFIX}{root_ino}");
        let path = root_path.join(INDEX_DIR).join(&name);
        let whole = |root, file: Option<(OwnedFd, u64)>| {
            let (file, ino) = file.map_or((None, 0), |(fd, ino)| (Some(fd), ino));
            Whole {
                _root: root,
                file,
                ino,
                path: path.clone(),
            }
        };
        let mut wait = Duration::from_micros(500);
        loop {
            // Shared: no lock file can be made meanwhile, so the one there, if any, is the
            // one every holder locks, even if it is deleted the next instant.
            flock_root(&root, root_path, LockMode::Shared, deadline, || false)?;
            let missing = match self.open_lock_file(&name, &path, false)? {
                LockFile::Open(fd, ino) => return Ok(whole(root, Some((fd, ino)))),
                LockFile::Missing => true,
                LockFile::Unusable => false,
            };
            // Exclusively, granted once nobody holds a byte of an earlier lock file. A lock
            // file made meanwhile by another waiter ends this wait: lock that one, shared.
            // Only where there was none: an unusable one (another user's, a second name, a
            // FIFO) is there all along, and counting it as made ended every wait at once,
            // so the process spun past its deadline (issue 31).
            rustix::fs::flock(&root, rustix::fs::FlockOperation::Unlock)
                .map_err(|e| Error::io(root_path, e.into()))?;
            let made = || {
                missing
                    && matches!(
                        beneath::open_dir(self.root_fd(), Path::new(INDEX_DIR))
                            .map(|index| beneath::look(&index, &name)),
                        Ok(Ok(Some(_)))
                    )
            };
            if !flock_root(&root, root_path, LockMode::Exclusive, deadline, made)? {
                // Round again, as every other wait does: past the deadline, give up;
                // else sleep first.
                if Instant::now() >= deadline {
                    return Err(timed_out(
                        root_path,
                        "the state directory's lock file, made meanwhile by another process",
                        None,
                    ));
                }
                pause(&mut wait, deadline);
                continue;
            }
            match self.open_lock_file(&name, &path, true)? {
                LockFile::Open(fd, ino) => {
                    // Back to shared, which others waiting to make the file now take too.
                    flock_root(&root, root_path, LockMode::Shared, deadline, || false)?;
                    return Ok(whole(root, Some((fd, ino))));
                }
                LockFile::Missing | LockFile::Unusable => return Ok(whole(root, None)),
            }
        }
    }

    /// Opens this checkout's lock file `name` in `.index/` for writing, making it (and
    /// `.index/`) with `create`. Looked at before it is opened, like every file ipamctl
    /// opens: a symlink, a FIFO, a device or a file with a second name there is never
    /// opened, only reported [`LockFile::Unusable`].
    fn open_lock_file(&self, name: &str, path: &Path, create: bool) -> Result<LockFile> {
        let read_only = |e: Errno| Error::ReadOnly {
            path: path.to_owned(),
            source: e.into(),
        };
        let index = if create {
            beneath::subdir(self.root_fd(), INDEX_DIR)
        } else {
            beneath::open_dir(self.root_fd(), Path::new(INDEX_DIR))
        };
        let index = match index {
            Ok(index) => index,
            Err(e) if e.is_not_found() => return Ok(LockFile::Missing),
            Err(beneath::Refused::Io(e))
                if e.raw_os_error() == Some(Errno::ROFS.raw_os_error()) =>
            {
                return Err(read_only(Errno::ROFS));
            }
            Err(_) => return Ok(LockFile::Unusable),
        };
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match beneath::look(&index, name) {
            Ok(Some(looked)) => {
                if beneath::regular_with_one_name(&looked).is_err() {
                    return Ok(LockFile::Unusable);
                }
                openat(&index, name, flags, Mode::empty())
            }
            Ok(None) if create => openat(
                &index,
                name,
                flags | OFlags::CREATE | OFlags::EXCL,
                Mode::from_raw_mode(0o666),
            ),
            Ok(None) => return Ok(LockFile::Missing),
            Err(_) => return Ok(LockFile::Unusable),
        };
        let fd = match fd {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(LockFile::Missing),
            Err(e @ Errno::ROFS) => return Err(read_only(e)),
            Err(_) => return Ok(LockFile::Unusable),
        };
        match rustix::fs::fstat(&fd) {
            Ok(stat) if beneath::regular_with_one_name(&stat).is_ok() => {
                Ok(LockFile::Open(fd, stat.st_ino))
            }
            _ => Ok(LockFile::Unusable),
        }
    }
}

impl Locks for FsStore {
    fn lock_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<PoolLock> {
        let target = Target::Pool {
            scope: scope_text(ns),
            pool: pool.as_str(),
        };
        Ok(PoolLock::new(self.lock(target, mode)?))
    }

    fn lock_scope(&self, ns: Option<&Namespace>) -> Result<ScopeLock> {
        let target = Target::Scope {
            scope: scope_text(ns),
        };
        Ok(ScopeLock::new(self.lock(target, LockMode::Exclusive)?))
    }

    fn lock_claim(
        &self,
        ns: Option<&Namespace>,
        pools: &[PoolName],
        owner: &Owner,
    ) -> Result<ClaimLock> {
        let scope = scope_text(ns);
        let mut held = Vec::with_capacity(pools.len());
        for pool in pools {
            let pool = pool.as_str();
            held.push(self.lock(Target::Pool { scope, pool }, LockMode::Shared)?);
        }
        // After every pool's lock (the order of `crate::store::guard`): the owner's lock
        // serialises requests for one owner, which no file name arbitrates (invariant 2).
        // It is the name's, whatever the uid: a request for the name under another
        // identity waits too, and then finds this one's allocation (`engine::identity`).
        let mut owners = Vec::with_capacity(pools.len());
        for pool in pools {
            for target in Target::owners(ns, pool, owner) {
                owners.push(self.lock(target, LockMode::Exclusive)?);
            }
        }
        Ok(ClaimLock::new(held, owners))
    }
}

/// The scope part of a lock's target: the namespace, or `""` for the cluster scope.
pub(super) fn scope_text(ns: Option<&Namespace>) -> &str {
    ns.map_or("", Namespace::as_str)
}

#[cfg(test)]
mod tests;
