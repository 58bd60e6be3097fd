//! The tokens file on disk (`ipamctl token --tokens FILE`, read by a server): read through
//! its directory's handle with `O_NOFOLLOW` (a symlink or a FIFO at its path is refused,
//! never followed or opened for long), refused when its mode lets group or others read it,
//! and changed only under an exclusive `flock` of a lock file beside it, by writing a new
//! file (mode 0600, created with `O_EXCL`), `fsync`ing it, renaming it over the old one and
//! `fsync`ing the directory. A reader therefore sees the old file or the new one, whole;
//! two writers never lose each other's change.
//!
//! The lock file (`.<name>.lock`) is never removed by ipamctl; one removed by hand while a
//! writer holds it lets the next writer lock a new file beside it, so a writer that locked a
//! file no longer linked at that name (link count 0, or another inode there) locks again.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, openat, statat};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::model::token::TokenFile;

/// How long a writer waits for another's lock before giving up (exit 1, naming the file).
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// What identifies one version of the file: a changed file differs in one of these (git's
/// index keeps the same to tell a changed file from an unchanged one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub size: i64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub mode: u32,
}

impl Stamp {
    fn of(st: &rustix::fs::Stat) -> Stamp {
        Stamp {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mtime: (st.st_mtime, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime, st.st_ctime_nsec as i64),
            mode: st.st_mode,
        }
    }

    /// The later of its modification and change times, in seconds since the epoch.
    pub fn changed_secs(&self) -> i64 {
        self.mtime.0.max(self.ctime.0)
    }
}

/// The directory a path is in (`.` for a bare name) and its last component.
fn split(path: &Path) -> Result<(PathBuf, String)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| *n != "." && *n != "..")
        .ok_or_else(|| Error::usage(format!("{}: not a file name", path.display())))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_owned()))
}

fn open_dir(dir: &Path) -> Result<OwnedFd> {
    rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::io(dir, e.into()))
}

/// Refuses what is no plain private file: a symlink, a FIFO, a directory, a file group or
/// others may read.
fn refuse(path: &Path, st: &rustix::fs::Stat) -> Result<()> {
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind == FileType::Symlink {
        return Err(Error::Usage {
            message: format!(
                "{}: is a symbolic link; a tokens file is never read or written through one",
                path.display()
            ),
            hint: Some("give the path of the file itself".into()),
        });
    }
    if kind != FileType::RegularFile {
        return Err(Error::usage(format!(
            "{}: is not a regular file ({kind:?}); a tokens file must be one",
            path.display()
        )));
    }
    let mode = st.st_mode & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::Usage {
            message: format!(
                "{}: group or others may read or write it (mode {mode:04o}); a tokens file must be readable by its owner only",
                path.display()
            ),
            hint: Some(format!("chmod 600 {}", path.display())),
        });
    }
    Ok(())
}

/// The file's stamp, without following a symlink (`None`: there is no file).
pub fn stamp(path: &Path) -> Result<Option<Stamp>> {
    let (dir, name) = split(path)?;
    match statat(open_dir(&dir)?, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(Stamp::of(&st))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(Error::io(path, e.into())),
    }
}

/// Reads the tokens file with the stamp of what was read; `None` when there is none. A
/// symlink, a FIFO or anything not a plain file at the path, or a file others may read, is
/// exit 2; a file that is no tokens file is exit 2 naming it.
pub fn load(path: &Path) -> Result<Option<(TokenFile, Stamp)>> {
    let (dir, name) = split(path)?;
    let dir = open_dir(&dir)?;
    load_in(&dir, &name, path)
}

fn load_in(dir: &OwnedFd, name: &str, path: &Path) -> Result<Option<(TokenFile, Stamp)>> {
    // O_NONBLOCK: a FIFO planted at the path opens at once (and is then refused) instead of
    // waiting for a writer.
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => {
            let st = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| Error::io(path, e.into()))?;
            refuse(path, &st)?;
            return Err(Error::io(path, Errno::LOOP.into()));
        }
        Err(e) => return Err(Error::io(path, e.into())),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| Error::io(path, e.into()))?;
    refuse(path, &st)?;
    let mut text = String::new();
    std::fs::File::from(fd)
        .read_to_string(&mut text)
        .map_err(|e| Error::io(path, e))?;
    let file = if text.trim().is_empty() {
        TokenFile::default()
    } else {
        crate::yaml::decode_tokens(&text)
            .map_err(|message| Error::invalid(path.display().to_string(), message))?
    };
    Ok(Some((file, Stamp::of(&st))))
}

/// Changes the tokens file under its lock: `change` gets what it holds now (an empty list
/// when there is no file yet) and returns what to answer; the changed list is then written
/// atomically. An error from `change` writes nothing.
pub fn update<T>(path: &Path, change: impl FnOnce(&mut TokenFile) -> Result<T>) -> Result<T> {
    let (dir_path, name) = split(path)?;
    let dir = open_dir(&dir_path)?;
    let _lock = lock(&dir, &name, path)?;
    let mut file = load_in(&dir, &name, path)?
        .map(|(f, _)| f)
        .unwrap_or_default();
    let answer = change(&mut file)?;
    file.tokens.sort_by(|a, b| a.name.cmp(&b.name));
    write(&dir, &dir_path, &name, path, &crate::yaml::encode(&file))?;
    Ok(answer)
}

/// Takes the exclusive lock of the tokens file, waiting at most [`LOCK_WAIT`].
fn lock(dir: &OwnedFd, name: &str, path: &Path) -> Result<OwnedFd> {
    let lock_name = format!(".{name}.lock");
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = openat(dir, lock_name.as_str(), flags, Mode::from_raw_mode(0o600))
            .map_err(|e| Error::io(path.with_file_name(&lock_name), e.into()))?;
        let mut wait = Duration::from_millis(1);
        loop {
            match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(Errno::INTR) => continue,
                Err(Errno::WOULDBLOCK) if Instant::now() < deadline => {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_millis(50));
                }
                Err(Errno::WOULDBLOCK) => {
                    return Err(Error::conflict(format!(
                        "{}: another `ipamctl token` held its lock for {}s; try again",
                        path.display(),
                        LOCK_WAIT.as_secs()
                    )));
                }
                Err(e) => return Err(Error::io(path.with_file_name(&lock_name), e.into())),
            }
        }
        // Still the file at that name? (Removed, or replaced, while we waited for it.)
        let held = rustix::fs::fstat(&fd).map_err(|e| Error::io(path, e.into()))?;
        let there = statat(dir, lock_name.as_str(), AtFlags::SYMLINK_NOFOLLOW).ok();
        if held.st_nlink > 0 && there.is_some_and(|t| t.st_ino == held.st_ino) {
            return Ok(fd);
        }
    }
}

/// Writes `text` as the new tokens file: a private temporary file beside it, synced, renamed
/// over the name (which replaces whatever is there, a symlink included, never following
/// it), then the directory synced so the rename survives a crash.
fn write(dir: &OwnedFd, dir_path: &Path, name: &str, path: &Path, text: &str) -> Result<()> {
    let tmp = format!(".{name}.tmp-{}", uuid::Uuid::new_v4().simple());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = openat(dir, tmp.as_str(), flags, Mode::from_raw_mode(0o600))
        .map_err(|e| Error::io(dir_path.join(&tmp), e.into()))?;
    let written = (|| -> std::io::Result<()> {
        // The umask can only narrow 0600; set it anyway, so the mode is exactly that.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        rustix::fs::renameat(dir, tmp.as_str(), dir, name)?;
        rustix::fs::fsync(dir.as_fd())?;
        Ok(())
    })();
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
        return Err(Error::io(path, e));
    }
    Ok(())
}
