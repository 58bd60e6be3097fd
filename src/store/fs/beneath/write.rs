//! Confined writes and removals.
//!
//! Writes never open an existing file: a new file is created under a fresh temporary name
//! with `O_CREAT | O_EXCL | O_NOFOLLOW` and renamed into place, so even a hard link planted
//! at a path (to a file elsewhere on the same file system) is replaced, never written into.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, mkdirat, openat, renameat_with, unlinkat};
use rustix::io::Errno;

use crate::store::fs::beneath::read::{
    Confined, DIR_FLAGS, MAX_READ, ReadFile, Refused, look, read, regular_with_one_name,
};

/// Prefix of temporary files (git-ignored, removed by `check --fix` when stale).
pub const TMP_PREFIX: &str = ".tmp-";

/// How [`write`] treats a file already under the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Keep it and report that the name was taken: the create-only claim.
    CreateOnly,
    /// Replace it atomically: readers see the old bytes or the new, never a mix.
    Replace,
}

/// Fail points inside [`write`], named for the step just done. Only the state's own writes
/// (manifests) carry them; index writes pass `false`.
macro_rules! step {
    ($on:expr, $name:literal) => {
        if $on {
            failpoint!($name);
        }
    };
}

/// Writes `bytes` as `name` in `dir` through a new temporary file (mode 0666 less the
/// umask, like any file: the state is shared by every user and job that runs ipamctl on it,
/// and by git), created in the directory `scratch` returns (else in `dir` itself, when it
/// returns `None` or a directory it could not open for another reason than "not found",
/// which is retried; either
/// way on the same file system, or the rename would fail and `dir` is used). With
/// `durable`, the data is `fsync`ed before the name is made, and the directory after, so the
/// name never points at incomplete bytes and survives a power loss. Returns `false` (and
/// writes nothing) when `CreateOnly` finds the name taken.
pub fn write(
    dir: impl AsFd,
    name: &str,
    bytes: &[u8],
    mode: WriteMode,
    durable: bool,
    scratch: &dyn Fn() -> Option<Confined<OwnedFd>>,
) -> Confined<bool> {
    let content = &|w: &mut dyn Write| w.write_all(bytes);
    write_with(
        dir.as_fd(),
        name,
        content,
        mode,
        (durable, durable),
        scratch,
    )
}

/// [`write`] of what `content` writes, a piece at a time, instead of bytes held whole in
/// memory (a large index). `content` may be called again if an attempt has to start over.
pub fn write_streamed(
    dir: impl AsFd,
    name: &str,
    content: &dyn Fn(&mut dyn Write) -> io::Result<()>,
    mode: WriteMode,
    durable: bool,
    scratch: &dyn Fn() -> Option<Confined<OwnedFd>>,
) -> Confined<bool> {
    let buffered = |file: &mut dyn Write| {
        let mut out = io::BufWriter::with_capacity(64 * 1024, file);
        content(&mut out)?;
        out.flush()
    };
    write_with(
        dir.as_fd(),
        name,
        &buffered,
        mode,
        (durable, durable),
        scratch,
    )
}

/// [`write`] of a new name whose bytes are durable before the name is made, as there, but
/// whose directory is not `fsync`ed: the caller makes the name durable (`flush.rs`), and
/// says nothing of it until then.
pub fn create_unsynced(
    dir: impl AsFd,
    name: &str,
    bytes: &[u8],
    scratch: &dyn Fn() -> Option<Confined<OwnedFd>>,
) -> Confined<bool> {
    let (mode, content) = (WriteMode::CreateOnly, &|w: &mut dyn Write| {
        w.write_all(bytes)
    });
    write_with(dir.as_fd(), name, content, mode, (true, false), scratch)
}

/// [`write`], with the bytes made durable (`durable.0`) and the name (`durable.1`) or not.
fn write_with(
    dir: BorrowedFd<'_>,
    name: &str,
    content: &dyn Fn(&mut dyn Write) -> io::Result<()>,
    mode: WriteMode,
    durable: (bool, bool),
    scratch: &dyn Fn() -> Option<Confined<OwnedFd>>,
) -> Confined<bool> {
    let mut beside = false;
    // `git clean -fdX` may delete the temporary file (it is git-ignored) before the rename
    // that would have given it its name: write it again. A `git clean` in a tight loop beside
    // a busy state directory caught three attempts in a row in 55 of 34,124 runs, so ten,
    // each a little later than the last.
    for attempt in 0..10u64 {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(attempt));
        }
        let tmp_dir = if beside {
            None
        } else {
            match scratch() {
                None => None,
                Some(Ok(scratch)) => Some(scratch),
                // The scratch directory was removed (`git clean`) between its `mkdir` and
                // its open. Never fall back to `dir` then: a temporary file there can make
                // `dir` hold nothing but ignored entries when `git clean -fdX` scans it, and
                // git then removes `dir` whole, with the name renamed into it meanwhile.
                Some(Err(e)) if e.is_not_found() => continue,
                // Anything else (a symlink planted at the scratch directory): beside.
                Some(Err(_)) => None,
            }
        };
        let tmp_dir = tmp_dir.as_ref().map_or(dir, |d| d.as_fd());
        match write_once(tmp_dir, dir, name, content, mode, durable)? {
            Attempt::Done(done) => return Ok(done),
            Attempt::Vanished => {}
            Attempt::OtherFileSystem => beside = true,
        }
    }
    Err(Refused::Io(io::Error::other(
        "temporary files keep vanishing before they can be renamed (is something deleting `.tmp-*` files?)",
    )))
}

/// How one attempt of [`write`] ended.
enum Attempt {
    /// Written (`true`), or the name was taken (`false`).
    Done(bool),
    /// The temporary file (or the directory it was to be made in) vanished before the
    /// rename.
    Vanished,
    /// The scratch directory is on another file system than the target.
    OtherFileSystem,
}

fn write_once(
    tmp_dir: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    name: &str,
    content: &dyn Fn(&mut dyn Write) -> io::Result<()>,
    mode: WriteMode,
    (durable, name_durable): (bool, bool),
) -> Confined<Attempt> {
    // A random name created exclusively: nothing planted can be opened in its place.
    let tmp = format!("{TMP_PREFIX}{}", uuid::Uuid::new_v4().simple());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match openat(tmp_dir, tmp.as_str(), flags, Mode::from_raw_mode(0o666)) {
        Ok(fd) => fd,
        // The scratch directory itself was removed (`git clean`) after it was opened.
        Err(Errno::NOENT) => return Ok(Attempt::Vanished),
        Err(e) => return Err(e.into()),
    };
    let written = (|| -> Confined<Attempt> {
        let mut file = std::fs::File::from(fd);
        content(&mut file)?;
        step!(durable, "write-after-temp-written");
        if durable {
            file.sync_all()?;
        }
        step!(durable, "write-after-temp-synced");
        let flags = match mode {
            WriteMode::CreateOnly => RenameFlags::NOREPLACE,
            WriteMode::Replace => RenameFlags::empty(),
        };
        match renameat_with(tmp_dir, tmp.as_str(), dir, name, flags) {
            Ok(()) => Ok(Attempt::Done(true)),
            Err(Errno::EXIST) => Ok(Attempt::Done(false)),
            Err(Errno::NOENT) => Ok(Attempt::Vanished),
            Err(Errno::XDEV) => Ok(Attempt::OtherFileSystem),
            // A file system without RENAME_NOREPLACE: link(2) also refuses an existing name.
            Err(Errno::INVAL) if mode == WriteMode::CreateOnly => {
                match rustix::fs::linkat(tmp_dir, tmp.as_str(), dir, name, AtFlags::empty()) {
                    Ok(()) => Ok(Attempt::Done(true)),
                    Err(Errno::EXIST) => Ok(Attempt::Done(false)),
                    Err(Errno::NOENT) => Ok(Attempt::Vanished),
                    Err(Errno::XDEV) => Ok(Attempt::OtherFileSystem),
                    Err(e) => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    })();
    // Gone already after a rename; after a link, or a failure, the temporary name goes.
    let _ = unlinkat(tmp_dir, tmp.as_str(), AtFlags::empty());
    let written = written?;
    if !matches!(written, Attempt::Done(true)) {
        return Ok(written);
    }
    step!(durable, "write-after-name-claimed");
    if name_durable {
        rustix::fs::fsync(dir)?;
        step!(durable, "write-after-dir-synced");
    }
    Ok(Attempt::Done(true))
}

/// No scratch directory: [`write`] makes its temporary file beside the target.
pub fn beside() -> Option<Confined<OwnedFd>> {
    None
}

/// Appends `bytes` to the existing regular file `name` in `dir` in one `write`; `false` if
/// there is no such file. A file with another name elsewhere (a hard link planted here, to a
/// file outside the root on the same file system) is refused: only a file whose one name is
/// this one is written into.
pub fn append(dir: impl AsFd, name: &str, bytes: &[u8]) -> Confined<bool> {
    let dir = dir.as_fd();
    match look(dir, name)? {
        Some(looked) => regular_with_one_name(&looked)?,
        None => return Ok(false),
    }
    let flags =
        OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    regular_with_one_name(&stat)?;
    // One write of an O_APPEND file: concurrent appenders do not interleave within it.
    std::fs::File::from(fd).write_all(bytes)?;
    Ok(true)
}

/// Removes `name` from `dir` (never a directory, never through a symlink: unlink removes the
/// link itself); `false` if it did not exist. With `durable`, the directory is `fsync`ed.
pub fn remove(dir: impl AsFd, name: impl AsRef<OsStr>, durable: bool) -> Confined<bool> {
    let dir = dir.as_fd();
    match unlinkat(dir, name.as_ref(), AtFlags::empty()) {
        Ok(()) => {}
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    if durable {
        failpoint!("delete-after-unlink");
        rustix::fs::fsync(dir)?;
    }
    Ok(true)
}

/// Prefix of the private name a file is renamed to while it is deleted ([`remove_if`]).
/// Not git-ignored on purpose: `git clean -fdX` neither deletes it nor takes its directory
/// for one holding only ignored entries. `check` reports one left by a crash.
pub const DELETING_PREFIX: &str = ".ipamctl-deleting-";

/// What [`remove_if`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removed {
    /// The file under the name was the one `ours` accepted, and it is gone.
    Deleted,
    /// Nothing was under the name.
    Gone,
    /// Something else was under the name: it was put back, untouched.
    Kept,
}

/// Removes `name` from `dir` only if the file under it is one `ours` accepts, whatever
/// happens to the name meanwhile. A plain `unlink` removes whatever is under the name when
/// it runs, which need not be the file just checked (an outside `rm` and another claim in
/// between); so the file is first renamed to a private name ([`DELETING_PREFIX`], random),
/// one atomic step that takes whatever the name held, and only what was taken is read and
/// judged: ours, it is unlinked; not ours (or not a regular file with one name), it is
/// renamed back without replacing anything (`RENAME_NOREPLACE`, or `link(2)`). If the name
/// was taken again in that instant, both are kept: the one taken stays under its private
/// name, which the error names. With `durable`, the directory is `fsync`ed after a delete.
pub fn remove_if(
    dir: impl AsFd,
    name: &str,
    durable: bool,
    ours: &mut dyn FnMut(&ReadFile) -> bool,
) -> Confined<Removed> {
    let dir = dir.as_fd();
    let private = format!("{DELETING_PREFIX}{}", uuid::Uuid::new_v4().simple());
    match renameat_with(dir, name, dir, private.as_str(), RenameFlags::NOREPLACE) {
        Ok(()) => {}
        Err(Errno::NOENT) => return Ok(Removed::Gone),
        // No RENAME_NOREPLACE here: the private name is fresh and random.
        Err(Errno::INVAL) => {
            match renameat_with(dir, name, dir, private.as_str(), RenameFlags::empty()) {
                Ok(()) => {}
                Err(Errno::NOENT) => return Ok(Removed::Gone),
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    }
    failpoint!("delete-after-private-rename");
    let taken = read(dir, private.as_str(), MAX_READ);
    if let Ok(Some(file)) = &taken
        && ours(file)
    {
        unlinkat(dir, private.as_str(), AtFlags::empty())?;
        if durable {
            failpoint!("delete-after-unlink");
            rustix::fs::fsync(dir)?;
        }
        return Ok(Removed::Deleted);
    }
    let back = match renameat_with(dir, private.as_str(), dir, name, RenameFlags::NOREPLACE) {
        Err(Errno::INVAL) => rustix::fs::linkat(dir, private.as_str(), dir, name, AtFlags::empty())
            .and_then(|()| unlinkat(dir, private.as_str(), AtFlags::empty())),
        other => other,
    };
    match back {
        Ok(()) => {
            if durable {
                rustix::fs::fsync(dir)?;
            }
            Ok(Removed::Kept)
        }
        Err(Errno::EXIST) => Err(Refused::Io(io::Error::other(format!(
            "was replaced while ipamctl was deleting it: the new file is kept under the name, \
             and the one that was there is kept as `{private}` beside it; nothing was deleted, \
             see which one to keep"
        )))),
        Err(e) => Err(e.into()),
    }
}

/// Creates the directory `name` in `dir` if missing and opens it, without following a symlink.
pub fn subdir(dir: impl AsFd, name: &str) -> Confined<OwnedFd> {
    let dir = dir.as_fd();
    match openat(dir, name, DIR_FLAGS, Mode::empty()) {
        Err(Errno::NOENT) => {
            match mkdirat(dir, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            Ok(openat(dir, name, DIR_FLAGS, Mode::empty())?)
        }
        other => Ok(other?),
    }
}
