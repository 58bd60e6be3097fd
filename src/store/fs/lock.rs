//! Locks that survive `git clean`, `rm`, `git checkout`, `cp -a` and `rsync -a`: byte-range
//! locks on two anchors at once, the marker file `.ipamctl` and this checkout's lock file
//! `.index/lock-<inode of the root>`.
//!
//! A lock is only as good as the file it locks. A lock file deleted or replaced while held
//! lets a process that opens the path afterwards lock a new inode beside the holder of the
//! old one, and both are inside. No single file in a working tree is safe from every tool:
//! - the marker is tracked by git and never rewritten by ipamctl, so `git clean -fdX`,
//!   `checkout`, `pull` and `rm` of ignored files leave it, and `cp -a` over it writes into
//!   the same inode; but `rsync -a` from another clone (whose marker has another mtime)
//!   replaces it with a new inode;
//! - the lock file is git-ignored, so `git clean -fdX` deletes it; but no sync *from another
//!   clone* replaces it, because its name carries this root directory's inode number (a
//!   directory no tool replaces: `rsync` and `cp` update a directory in place), which the
//!   other clone's differs from, and no tracked file is under `.index/`.
//!
//! Every lock is therefore the same one-byte range of both, taken in that order; two
//! processes exclude each other as long as *either* anchor is the same file for both, so
//! breaking mutual exclusion takes both at once while locks are held (`rm -rf .index` or
//! `git clean -fdX` *and* an `rsync -a`, or `rsync -a --delete` of `.index/` too). Where the
//! lock file cannot be made (a directory the user may not write), the marker alone is used.
//!
//! Locks are open-file-description locks (`F_OFD_SETLK`): per open, so two locks of one
//! process exclude each other as two processes' do, and released by the kernel when the
//! process dies, however it dies. After a lock is granted the anchor at its path is checked
//! to be the file locked (same device and inode): one replaced before we locked it is
//! caught, and we lock the new one.
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
//! each gets its own address (`tests/adversary.rs`). (Asking exclusively for a byte held shared by the same process is refused, exit 1:
//! no claim does it, and an upgrade could deadlock with another upgrader.)
//!
//! # Waiting is bounded
//!
//! A busy lock is polled, not waited for in the kernel, for at most [`LOCK_TIMEOUT_VAR`]
//! seconds (default [`DEFAULT_TIMEOUT_SECS`]); then the command fails (exit 1) naming the
//! lock and, from `/proc/locks`, the process that holds it.
//!
//! Write locks need the anchors opened for writing: on a read-only state directory (or a
//! marker the user may not write) [`Error::ReadOnly`] says so, and commands that only read
//! do without locks.
//!
//! The file store's [`Locks`]: a pool, a scope, and the locks of a claim, which are the
//! pools' locks (shared) and then, because nothing on disk arbitrates between two requests
//! for one owner, the owner's lock in each pool. The owner's lock is also taken by a release
//! (`claims.rs`). Every guard holds a [`Hold::File`]; the order they are taken in is
//! [`crate::store::guard`]'s.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, fcntl};
use rustix::fs::{Mode, OFlags, openat};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::model::{Namespace, Owner, PoolName};
use crate::store::fs::beneath::{self, refused};
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
    /// One owner identity in one pool (its [`crate::model::Owner::key`]).
    Owner {
        scope: &'a str,
        pool: &'a str,
        key: u64,
    },
}

impl Target<'_> {
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

/// The locks this store's process holds, by offset: how, how many holds share them, and
/// the descriptors that hold them (closed when the last hold goes).
#[derive(Debug, Default)]
pub(super) struct Registry {
    held: Mutex<HashMap<i64, Shared>>,
}

#[derive(Debug)]
struct Shared {
    mode: LockMode,
    holds: usize,
    fds: Arc<Vec<OwnedFd>>,
}

/// One hold of a lock ([`Hold::File`]): the lock goes when the last hold of its byte in
/// this process is dropped, or when the process dies.
#[derive(Debug)]
struct FileHold {
    registry: Arc<Registry>,
    offset: i64,
    _fds: Arc<Vec<OwnedFd>>,
}

impl Drop for FileHold {
    fn drop(&mut self) {
        let mut held = self.registry.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = held.get_mut(&self.offset) {
            shared.holds -= 1;
            if shared.holds == 0 {
                held.remove(&self.offset);
            }
        }
    }
}

/// How long a lock is waited for: [`LOCK_TIMEOUT_VAR`], else [`DEFAULT_TIMEOUT_SECS`].
pub fn timeout() -> Duration {
    std::env::var(LOCK_TIMEOUT_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::from_secs(DEFAULT_TIMEOUT_SECS), |s| {
            Duration::from_secs_f64(s.min(1e9))
        })
}

/// Where one anchor is: its directory's handle, its name there, and its path for messages.
struct Anchor<'a> {
    dir: BorrowedFd<'a>,
    name: &'a str,
    path: &'a Path,
    /// Made if missing (the lock file); else it must exist (the marker).
    create: bool,
}

/// Locks `target` on `anchor` (mode `mode`), waiting until `deadline`: the open file
/// description that holds the lock. `None` when a lock file cannot be made or kept (not
/// writable, or deleted as fast as it is made): the caller then does without it.
fn lock_anchor(
    anchor: &Anchor<'_>,
    target: Target<'_>,
    mode: LockMode,
    deadline: Instant,
) -> Result<Option<OwnedFd>> {
    let path = anchor.path;
    // A few turns: each one catches an anchor replaced before it was locked.
    for _ in 0..8 {
        let mut flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        if anchor.create {
            flags |= OFlags::CREATE;
        }
        let fd = match openat(anchor.dir, anchor.name, flags, Mode::from_raw_mode(0o666)) {
            Ok(fd) => fd,
            Err(_) if anchor.create => return Ok(None),
            Err(e @ (Errno::ROFS | Errno::ACCESS | Errno::PERM)) => {
                return Err(Error::ReadOnly {
                    path: path.to_owned(),
                    source: e.into(),
                });
            }
            Err(e) => return Err(refused(path.to_owned(), e.into())),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| Error::io(path, e.into()))?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            if anchor.create {
                return Ok(None);
            }
            return Err(refused(
                path.to_owned(),
                beneath::Refused::NotAFile("a special file"),
            ));
        }
        wait_for(&fd, path, target, mode, deadline, stat.st_ino)?;
        // Still the anchor at the path? If it was replaced or removed before we locked it,
        // others lock the new file: go round and lock that one.
        match beneath::stat(anchor.dir, anchor.name) {
            Ok(Some(now)) if now.st_ino == stat.st_ino && now.st_dev == stat.st_dev => {
                return Ok(Some(fd));
            }
            Ok(None) if !anchor.create => {
                return Err(Error::NoStateDir {
                    message: format!("`{}` was removed while ipamctl ran", path.display()),
                });
            }
            Ok(_) => continue,
            Err(e) => return Err(refused(path.to_owned(), e)),
        }
    }
    if anchor.create {
        return Ok(None);
    }
    Err(Error::Corrupt {
        path: path.to_owned(),
        message: "kept being replaced while ipamctl tried to lock it".into(),
    })
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
    let range = libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: target.offset(),
        l_len: 1,
        // Must be 0 for open-file-description locks.
        l_pid: 0,
    };
    let mut pause = Duration::from_micros(500);
    loop {
        match fcntl(fd.as_fd(), FcntlArg::F_OFD_SETLK(&range)) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {}
            Err(e) => return Err(Error::io(path, e.into())),
        }
        let now = Instant::now();
        if now >= deadline {
            let holder = holder(ino, target.offset())
                .map(|h| format!(", held by {h}"))
                .unwrap_or_default();
            return Err(Error::io(
                path,
                std::io::Error::other(format!(
                    "timed out after {} s waiting for {}{holder}; set {LOCK_TIMEOUT_VAR} \
                     (seconds) to wait longer",
                    timeout().as_secs_f64(),
                    target.describe(),
                )),
            ));
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Does a line of `/proc/locks` (or a `lock:` line of a `/proc/PID/fdinfo` file) cover byte
/// `offset` of inode `ino`? Its pid field, if so (`-1` for open-file-description locks).
fn lock_line(line: &str, ino: u64, offset: i64) -> Option<i64> {
    // `1: OFDLCK ADVISORY WRITE -1 08:01:5678 100 100`
    let fields: Vec<&str> = line.split_whitespace().collect();
    let at = fields.iter().position(|f| f.matches(':').count() == 2)?;
    let file_ino = fields[at].rsplit(':').next()?.parse::<u64>().ok()?;
    let start = fields.get(at + 1)?.parse::<i64>().ok()?;
    let end = fields.get(at + 2)?;
    let covers = start <= offset && (*end == "EOF" || end.parse::<i64>().ok()? >= offset);
    (file_ino == ino && covers).then(|| fields.get(at.checked_sub(1)?)?.parse::<i64>().ok())?
}

/// Who holds byte `offset` of inode `ino`: `process P (`command`)`. `/proc/locks` gives no
/// pid for open-file-description locks, so the descriptors of every process this user may
/// look at are searched (`/proc/PID/fdinfo` lists the locks held through each); only on a
/// timeout, so its cost does not matter.
fn holder(ino: u64, offset: i64) -> Option<String> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let mut pid = locks
        .lines()
        .find_map(|line| lock_line(line, ino, offset))?;
    if pid <= 0 {
        let me = i64::from(std::process::id());
        pid = std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .filter_map(|p| p.file_name().to_str()?.parse::<i64>().ok())
            .filter(|&p| p != me)
            .find(|p| {
                let Ok(fds) = std::fs::read_dir(format!("/proc/{p}/fdinfo")) else {
                    return false;
                };
                fds.flatten().any(|fd| {
                    std::fs::read_to_string(fd.path()).is_ok_and(|info| {
                        info.lines()
                            .filter_map(|l| l.strip_prefix("lock:"))
                            .any(|l| lock_line(l, ino, offset).is_some())
                    })
                })
            })
            .unwrap_or(-1);
    }
    if pid <= 0 {
        return Some("another process".into());
    }
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            let text: String = String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .trim()
                .to_owned();
            text.chars().take(80).collect::<String>()
        })
        .unwrap_or_default();
    Some(if command.is_empty() {
        format!("process {pid}")
    } else {
        format!("process {pid} (`{command}`)")
    })
}

impl FsStore {
    /// Locks `target` on this store's anchors (see the module docs), or reuses this
    /// process's hold of the same byte.
    pub(super) fn lock(&self, target: Target<'_>, mode: LockMode) -> Result<Hold> {
        let offset = target.offset();
        {
            let mut held = self.locks.held.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(shared) = held.get_mut(&offset) {
                if shared.mode == LockMode::Shared && mode == LockMode::Exclusive {
                    return Err(Error::io(
                        self.root().join(MARKER),
                        std::io::Error::other(format!(
                            "{} shares its byte with a lock this process holds shared; \
                             nothing was changed (rename the pool or owner)",
                            target.describe()
                        )),
                    ));
                }
                shared.holds += 1;
                return Ok(Hold::File(Box::new(FileHold {
                    registry: Arc::clone(&self.locks),
                    offset,
                    _fds: Arc::clone(&shared.fds),
                })));
            }
        }
        let fds = Arc::new(self.lock_anchors(target, mode)?);
        let mut held = self.locks.held.lock().unwrap_or_else(|e| e.into_inner());
        // Another thread of this process may have been granted the same byte (shared) since
        // the look above: count this hold with it.
        held.entry(offset)
            .and_modify(|shared| shared.holds += 1)
            .or_insert_with(|| Shared {
                mode,
                holds: 1,
                fds: Arc::clone(&fds),
            });
        Ok(Hold::File(Box::new(FileHold {
            registry: Arc::clone(&self.locks),
            offset,
            _fds: fds,
        })))
    }

    /// Locks `target` on the anchors at their paths now, whatever this process holds: the
    /// descriptors that hold the lock (the marker's first). [`FsStore::lock`] goes through
    /// this process's holds first; a claim that found its anchors replaced calls this
    /// directly to lock the files others lock now (`claims.rs`).
    pub(super) fn lock_anchors(&self, target: Target<'_>, mode: LockMode) -> Result<Vec<OwnedFd>> {
        let deadline = Instant::now() + timeout();
        let marker_path = self.root().join(MARKER);
        let marker = Anchor {
            dir: self.root_fd().as_fd(),
            name: MARKER,
            path: &marker_path,
            create: false,
        };
        let mut fds = Vec::with_capacity(2);
        fds.extend(lock_anchor(&marker, target, mode, deadline)?);
        fds.extend(self.lock_on_file(target, mode, deadline)?);
        Ok(fds)
    }

    /// The descriptors through which this process holds `target`'s byte, if it does.
    pub(super) fn holding(&self, target: Target<'_>) -> Option<Arc<Vec<OwnedFd>>> {
        let held = self.locks.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(&target.offset())
            .map(|shared| Arc::clone(&shared.fds))
    }

    /// The status of this checkout's lock file now (`.index/lock-<root inode>`), if there is
    /// one.
    fn lock_file_stat(&self) -> Option<rustix::fs::Stat> {
        let index = beneath::open_dir(self.root_fd(), Path::new(INDEX_DIR)).ok()?;
        let root = rustix::fs::fstat(self.root_fd()).ok()?;
        beneath::stat(&index, format!("{LOCK_FILE_PREFIX}{}", root.st_ino)).ok()?
    }

    /// Does a hold on `marker` and the lock file `file` (the descriptors of
    /// [`FsStore::lock_anchors`]: none for the lock file when none could be made) still keep
    /// out every ipamctl process that locks the same byte from now on? It does while either
    /// file is still the one at its path (the same device and inode): every lock takes both,
    /// so a later one waits on that file. An anchor that cannot be looked at counts as
    /// replaced. See "Undoing only under a lock that still excludes" in `claims.rs` for what
    /// this rules out and what it leaves.
    pub(super) fn still_excludes(&self, marker: &OwnedFd, file: Option<&OwnedFd>) -> bool {
        let same = |fd: &OwnedFd, now: Option<rustix::fs::Stat>| {
            now.is_some_and(|now| {
                rustix::fs::fstat(fd)
                    .is_ok_and(|held| (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino))
            })
        };
        file.is_some_and(|file| same(file, self.lock_file_stat()))
            || same(marker, beneath::stat(self.root_fd(), MARKER).ok().flatten())
    }

    /// Locks `target` exclusively on the lock file at its path now, waiting as any lock does
    /// ([`LOCK_TIMEOUT_VAR`]): its descriptor, or `None` if none can be made or the wait
    /// times out. For a claim whose own lock file was replaced: the one it waits for holds a
    /// newer lock file than its own, and a process inside waits only for a newer one still,
    /// never for a marker, so no two wait for each other (`claims.rs`).
    pub(super) fn lock_file_now(&self, target: Target<'_>) -> Option<OwnedFd> {
        let deadline = Instant::now() + timeout();
        self.lock_on_file(target, LockMode::Exclusive, deadline)
            .ok()
            .flatten()
    }

    /// Locks `target` on this checkout's lock file, `.index/lock-<root inode>` (made if
    /// missing), waiting until `deadline`; `None` when it cannot be made or kept.
    fn lock_on_file(
        &self,
        target: Target<'_>,
        mode: LockMode,
        deadline: Instant,
    ) -> Result<Option<OwnedFd>> {
        let (Ok(index), Ok(root)) = (
            beneath::subdir(self.root_fd(), INDEX_DIR),
            rustix::fs::fstat(self.root_fd()),
        ) else {
            return Ok(None);
        };
        let name = format!("{LOCK_FILE_PREFIX}{}", root.st_ino);
        let path = self.root().join(INDEX_DIR).join(&name);
        let file = Anchor {
            dir: index.as_fd(),
            name: &name,
            path: &path,
            create: true,
        };
        lock_anchor(&file, target, mode, deadline)
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
        let mut owners = Vec::with_capacity(pools.len());
        for pool in pools {
            let key = owner.key();
            let target = Target::Owner {
                scope,
                pool: pool.as_str(),
                key,
            };
            owners.push(self.lock(target, LockMode::Exclusive)?);
        }
        Ok(ClaimLock::new(held, owners))
    }
}

/// The scope part of a lock's target: the namespace, or `""` for the cluster scope.
pub(super) fn scope_text(ns: Option<&Namespace>) -> &str {
    ns.map_or("", Namespace::as_str)
}

#[cfg(test)]
mod tests {
    // By its path, not `super::*`: the same items, named as the layer check reads paths.
    use crate::store::fs::lock::*;

    /// The offset of `owner`'s lock in pool `public-zone-a` of the cluster scope.
    fn owner_offset(owner: &str) -> i64 {
        let owner = crate::model::Owner::parse(owner, None).expect("a valid owner");
        Target::Owner {
            scope: "",
            pool: "public-zone-a",
            key: owner.key(),
        }
        .offset()
    }

    /// Two owners whose locks in pool `public-zone-a` share a byte: found by
    /// `cargo run --release --example lock_collision` (a birthday search, about a minute),
    /// and used by `tests/adversary.rs`.
    const COLLIDING: [&str; 2] = ["FloatingIP/c0d869d229a8fe4b", "FloatingIP/cdf8df1ad2d92236"];

    /// The constructed pair does collide, by the real hashes: different owners, different
    /// keys, one byte. One process holds both owners' locks at once through one hold (an
    /// OFD lock would wait for the process itself), and the byte stays held, in the file,
    /// until the last of the two goes.
    #[test]
    fn two_owners_whose_locks_share_a_byte_share_one_hold_in_a_process() {
        let [a, b] = COLLIDING.map(|o| crate::model::Owner::parse(o, None).unwrap());
        assert_ne!(a, b);
        assert_ne!(a.key(), b.key());
        assert_eq!(owner_offset(COLLIDING[0]), owner_offset(COLLIDING[1]));
        let dir = tempfile::tempdir().unwrap();
        FsStore::init(dir.path()).unwrap();
        let store = FsStore::open(dir.path()).unwrap();
        let target = |o: &crate::model::Owner| Target::Owner {
            scope: "",
            pool: "public-zone-a",
            key: o.key(),
        };
        let first = store.lock(target(&a), LockMode::Exclusive).unwrap();
        let second = store.lock(target(&b), LockMode::Exclusive).unwrap();
        let held = store.holding(target(&a)).expect("held");
        assert!(Arc::ptr_eq(
            &held,
            &store.holding(target(&b)).expect("held")
        ));
        drop(first);
        assert!(
            store.holding(target(&b)).is_some(),
            "the second hold keeps the byte"
        );
        drop(second);
        assert!(store.holding(target(&a)).is_none());
    }

    /// Locks of different kinds never share a byte, whatever the names: each kind has its
    /// own quarter of the offset range.
    #[test]
    fn kinds_lie_in_disjoint_quarters_of_the_offset_range() {
        for i in 0..2000u64 {
            let (scope, pool) = (format!("ns-{}", i % 7), format!("p{i}"));
            let quarter = |t: Target<'_>| t.offset() >> 60;
            assert_eq!(
                quarter(Target::Pool {
                    scope: &scope,
                    pool: &pool
                }),
                0
            );
            assert_eq!(quarter(Target::Scope { scope: &scope }), 1);
            let owner = Target::Owner {
                scope: &scope,
                pool: &pool,
                key: i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            };
            assert_eq!(quarter(owner), 2);
            assert!(owner.offset() > 0);
        }
    }

    /// A byte this process holds is reused, not waited for (an OFD lock would wait for the
    /// process itself, for ever): the same target twice is the extreme of two targets that
    /// hash to one byte. Asking exclusively for a byte held shared is refused.
    #[test]
    fn a_byte_the_process_holds_is_reused_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        FsStore::init(dir.path()).unwrap();
        let store = FsStore::open(dir.path()).unwrap();
        let pool = Target::Pool {
            scope: "",
            pool: "p",
        };
        let first = store.lock(pool, LockMode::Exclusive).unwrap();
        let second = store.lock(pool, LockMode::Exclusive).unwrap();
        drop(first);
        // Still held through `second`: another store (another open) cannot have it.
        let other = FsStore::open(dir.path()).unwrap();
        let shared = Target::Scope { scope: "" };
        let _s = other.lock(shared, LockMode::Shared).unwrap();
        assert!(matches!(
            other.lock(shared, LockMode::Exclusive),
            Err(Error::Io { .. })
        ));
        drop(second);
        let _again = other.lock(pool, LockMode::Exclusive).unwrap();
    }
}
