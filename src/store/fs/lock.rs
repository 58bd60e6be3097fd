//! Locks that survive `git clean`, `rm` and `git checkout`: byte-range locks on the marker
//! file `.ipamctl`.
//!
//! A lock is only as good as the file it locks. Lock files of their own (git-ignored, so
//! `git clean -fdX` deletes them) let a process that opens the path after a deletion lock a
//! new inode beside a holder of the old one, and both are inside. The marker is a file git
//! tracks and ipamctl never rewrites, so nothing in the ordinary life of a working tree
//! removes or replaces it; every lock is a one-byte range of it, at an offset derived from
//! what is locked (a pool, a scope, an owner), taken with an open-file-description lock
//! (`F_OFD_SETLKW`): per open, so two locks of one process exclude each other as two
//! processes' do, and released by the kernel when the process dies, however it dies.
//!
//! After the lock is granted the marker at the path is checked to be the file locked (same
//! device and inode, still linked). Someone who replaced the marker before we locked it is
//! caught and we lock the new one; replacing it *while* locks are held (a branch whose marker
//! differs, or `rm .ipamctl && ipamctl init`) lets a new process lock the new file beside
//! the holders, and is the one way left to break mutual exclusion.
//!
//! Write locks need the marker opened for writing: on a read-only state directory (or a
//! marker the user may not write) [`Error::ReadOnly`] says so, and commands that only read
//! do without locks.
//!
//! The file store's [`Locks`]: a pool, a scope, and the locks of a claim, which are the
//! pools' locks (shared) and then, because nothing on disk arbitrates between two requests
//! for one owner, the owner's lock in each pool. The owner's lock is also taken by a release
//! (`claims.rs`). Every guard holds a [`Hold::File`]; the order they are taken in is
//! [`crate::store::guard`]'s.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{FcntlArg, fcntl};
use rustix::fs::{Mode, OFlags, openat};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::model::{Namespace, Owner, PoolName};
use crate::store::fs::beneath::{self, refused};
use crate::store::fs::{FsStore, MARKER};
use crate::store::{ClaimLock, Hold, LockMode, Locks, PoolLock, ScopeLock};

/// What a lock guards, hashed into the byte it locks. Distinct targets collide only with
/// probability 2^-62 per pair; a collision would make two locks one (a wait, or a process
/// waiting on itself), never let two holders in.
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
    /// The locked byte: FNV-1a of the target, in the positive range of `off_t`.
    fn offset(&self) -> i64 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let key;
        let parts: [&[u8]; 5] = match self {
            Target::Pool { scope, pool } => [b"pool", scope.as_bytes(), pool.as_bytes(), b"", b""],
            Target::Scope { scope } => [b"scope", scope.as_bytes(), b"", b"", b""],
            Target::Owner {
                scope,
                pool,
                key: k,
            } => {
                key = k.to_le_bytes();
                [b"owner", scope.as_bytes(), pool.as_bytes(), &key, b""]
            }
        };
        let hash = parts.iter().fold(OFFSET, |hash, part| {
            part.iter()
                .chain(b"\0")
                .fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
        });
        // 62 bits: positive, and far from the end of the file offset range.
        i64::try_from(hash >> 2).expect("62 bits fit an i64")
    }
}

/// Locks `target` on the marker `marker` in the directory `root`, blocking until granted:
/// the open file description that holds the lock (closing it releases the lock).
pub fn lock(
    root: impl AsFd,
    marker: &str,
    path: &Path,
    target: Target<'_>,
    mode: LockMode,
) -> Result<OwnedFd> {
    let root = root.as_fd();
    // A few turns: each one catches a marker replaced before it was locked.
    for _ in 0..8 {
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match openat(root, marker, flags, Mode::empty()) {
            Ok(fd) => fd,
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
            return Err(refused(
                path.to_owned(),
                beneath::Refused::NotAFile("a special file"),
            ));
        }
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
        loop {
            match fcntl(fd.as_fd(), FcntlArg::F_OFD_SETLKW(&range)) {
                Ok(_) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(Error::io(path, e.into())),
            }
        }
        // Still the marker at the path? If it was replaced or removed before we locked it,
        // others lock the new file: go round and lock that one.
        match beneath::stat(root, marker) {
            Ok(Some(now)) if now.st_ino == stat.st_ino && now.st_dev == stat.st_dev => {
                return Ok(fd);
            }
            Ok(None) => {
                return Err(Error::NoStateDir {
                    message: format!("`{}` was removed while ipamctl ran", path.display()),
                });
            }
            Ok(Some(_)) => continue,
            Err(e) => return Err(refused(path.to_owned(), e)),
        }
    }
    Err(Error::Corrupt {
        path: path.to_owned(),
        message: "kept being replaced while ipamctl tried to lock it".into(),
    })
}

impl FsStore {
    /// Locks `target` on this store's marker.
    pub(super) fn lock(&self, target: Target<'_>, mode: LockMode) -> Result<Hold> {
        let path = self.root().join(MARKER);
        Ok(Hold::File(lock(
            self.root_fd(),
            MARKER,
            &path,
            target,
            mode,
        )?))
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
