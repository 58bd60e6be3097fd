//! The fenced lock-file protocol: byte-range locks on this checkout's lock file,
//! `.index/lock-<inode of the root>`, each generation of which is fenced by a `flock` of the
//! root directory itself.
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
//! Write locks need the lock file opened for writing: on a read-only state directory
//! [`Error::ReadOnly`] says so, and commands that only read do without locks.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags, openat};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::store::LockMode;
use crate::store::fs::beneath;
use crate::store::fs::lock::wait::{flock_root, pause, timed_out};
use crate::store::fs::{FsStore, INDEX_DIR};

/// Prefix of this checkout's lock file in `.index/`, followed by the root's inode number.
pub const LOCK_FILE_PREFIX: &str = "lock-";

/// A store's hold on the state directory as a whole (see the module docs): the root
/// directory's `flock`, and the lock file whose bytes are the locks. Dropped (both
/// descriptors closed, so every lock released) when the last byte held through it goes.
#[derive(Debug)]
pub(super) struct Whole {
    /// The root directory, opened for its `flock`: held shared, or exclusively when `file`
    /// is `None`.
    _root: OwnedFd,
    /// The lock file, through which every byte is locked; `None` where none can be made or
    /// opened for writing, and the root's `flock` held exclusively is the lock of everything.
    pub(super) file: Option<OwnedFd>,
    /// The lock file's inode, to find a byte's holder in `/proc/locks`.
    pub(super) ino: u64,
    /// The lock file's path, for messages.
    pub(super) path: std::path::PathBuf,
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

impl FsStore {
    /// Takes the hold on the whole: the root's `flock` shared and the lock file there, or,
    /// where there is none, the `flock` exclusively (once every other holder is done) to make
    /// one; where none can be made, the `flock` exclusively is the hold.
    pub(super) fn hold_whole(&self, deadline: Instant) -> Result<Whole> {
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
