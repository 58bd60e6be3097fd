//! File system calls confined to the state directory: every path is resolved beneath a
//! directory handle and no symlink is ever followed, so nothing a user plants inside the root
//! (a symlink at a manifest, an index file or a directory of the layout) can lead a read or a
//! write outside it.
//!
//! Directories are opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, one call the
//! kernel resolves atomically; on a kernel without `openat2` they are opened one component at
//! a time with `O_NOFOLLOW | O_DIRECTORY`, which confines just as well because every
//! component is a single validated name (never `..`). Files are opened relative to their
//! directory's handle with `O_NOFOLLOW`. There is no check followed by a separate open.
//!
//! Writes never open an existing file: a new file is created under a fresh temporary name
//! with `O_CREAT | O_EXCL | O_NOFOLLOW` and renamed into place, so even a hard link planted
//! at a path (to a file elsewhere on the same file system) is replaced, never written into.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{
    AtFlags, Dir, FileType, Mode, OFlags, RenameFlags, ResolveFlags, Stat, mkdirat, openat,
    openat2, renameat_with, statat, unlinkat,
};
use rustix::io::Errno;

/// Prefix of temporary files (git-ignored, removed by `check --fix` when stale).
pub const TMP_PREFIX: &str = ".tmp-";

/// Largest file this module reads: a manifest or an index file. Anything larger is refused
/// rather than read into memory.
pub const MAX_READ: u64 = 64 << 20;

/// What went wrong with a confined call: the I/O error, or the path is not what the layout
/// allows (a symlink, or not a directory where one is expected).
#[derive(Debug)]
pub enum Refused {
    /// A symlink where the layout has a file or a directory.
    Symlink,
    /// Something other than a directory where the layout has a directory.
    NotADirectory,
    /// Something other than a regular file where the layout has a file.
    NotAFile(&'static str),
    /// Larger than [`MAX_READ`] (or the caller's bound).
    TooLarge(u64),
    /// A regular file with this many names: another name may be a file outside the state
    /// directory (a hard link planted here), so it is neither read nor written.
    HardLink(u64),
    /// Any other error.
    Io(io::Error),
}

impl From<Errno> for Refused {
    fn from(e: Errno) -> Refused {
        match e {
            Errno::LOOP => Refused::Symlink,
            Errno::NOTDIR => Refused::NotADirectory,
            e => Refused::Io(e.into()),
        }
    }
}

impl From<io::Error> for Refused {
    fn from(e: io::Error) -> Refused {
        match e.raw_os_error().map(Errno::from_raw_os_error) {
            Some(Errno::LOOP) => Refused::Symlink,
            Some(Errno::NOTDIR) => Refused::NotADirectory,
            _ => Refused::Io(e),
        }
    }
}

impl Refused {
    /// True for "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        matches!(self, Refused::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }

    /// A one-line reason, for messages about the path it concerns.
    pub fn reason(&self) -> String {
        match self {
            Refused::Symlink => {
                "is a symlink or lies below one; ipamctl never follows symlinks inside the state directory"
                    .into()
            }
            Refused::NotADirectory => "is not a directory".into(),
            Refused::NotAFile(what) => format!("is {what}, not a regular file"),
            Refused::TooLarge(limit) => format!("is larger than {limit} bytes; not a manifest"),
            Refused::HardLink(n) => format!(
                "has {n} names (hard links); ipamctl neither reads nor writes a file that has a \
                 name elsewhere: remove the other links, or replace it with a copy"
            ),
            Refused::Io(e) => e.to_string(),
        }
    }
}

/// A refusal of a confined call, as the error about `path` that the commands report: an I/O
/// error as such, anything the layout does not allow as a corrupt state directory.
pub fn refused(path: impl Into<std::path::PathBuf>, why: Refused) -> crate::error::Error {
    match why {
        Refused::Io(source) => crate::error::Error::io(path, source),
        other => crate::error::Error::Corrupt {
            path: path.into(),
            message: other.reason(),
        },
    }
}

/// The result of a confined call.
pub type Confined<T> = std::result::Result<T, Refused>;

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens the directory at `rel` (relative, made of plain names) beneath `root`, following no
/// symlink on the way.
pub fn open_dir(root: impl AsFd, rel: &Path) -> Confined<OwnedFd> {
    if rel.as_os_str().is_empty() {
        return Ok(openat(root, ".", DIR_FLAGS, Mode::empty())?);
    }
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match openat2(root.as_fd(), rel, DIR_FLAGS, Mode::empty(), resolve) {
        // No openat2 (kernel before 5.6, or a sandbox that filters it): walk the components.
        Err(Errno::NOSYS | Errno::PERM) => walk(root, rel, false),
        // openat2 says EXDEV when a path would leave the root, ELOOP for any symlink.
        Err(Errno::XDEV) => Err(Refused::Symlink),
        // O_NOFOLLOW | O_DIRECTORY on a symlink says ENOTDIR: tell the two apart for the
        // message (a look only; nothing is opened through it).
        Err(Errno::NOTDIR) => match statat(root, rel, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) if FileType::from_raw_mode(s.st_mode) == FileType::Symlink => {
                Err(Refused::Symlink)
            }
            _ => Err(Refused::NotADirectory),
        },
        other => Ok(other?),
    }
}

/// Opens the directory at `rel` beneath `root`, creating missing components (mode 0777 less
/// the umask). Each created directory's
/// parent is `fsync`ed, so a name written into it later survives a crash with it.
pub fn open_or_create_dir(root: impl AsFd, rel: &Path) -> Confined<OwnedFd> {
    match open_dir(root.as_fd(), rel) {
        Err(e) if e.is_not_found() => walk(root, rel, true),
        other => other,
    }
}

/// Opens `rel` one plain component at a time with `O_NOFOLLOW`, creating components if asked.
fn walk(root: impl AsFd, rel: &Path, create: bool) -> Confined<OwnedFd> {
    let mut dir = openat(root, ".", DIR_FLAGS, Mode::empty())?;
    for component in rel.components() {
        let Component::Normal(name) = component else {
            // The layout's paths are built from validated names only.
            return Err(Refused::Symlink);
        };
        let next = match openat(&dir, name, DIR_FLAGS, Mode::empty()) {
            Err(Errno::NOENT) if create => {
                match mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                // The new name must survive a crash along with what is written below it.
                rustix::fs::fsync(&dir)?;
                openat(&dir, name, DIR_FLAGS, Mode::empty())?
            }
            other => other?,
        };
        dir = next;
    }
    Ok(dir)
}

/// Splits `rel` (relative, made of plain names, at least one) into the handle of its parent
/// directory, opened beneath `root` as [`open_dir`] does, and its last name, for a call that
/// acts on that name relative to the handle ([`stat`], [`read`], [`remove`]). Calls made on the
/// one handle act in the one directory, whatever is renamed or planted on the way meanwhile.
pub fn open_parent(root: impl AsFd, rel: &Path) -> Confined<(OwnedFd, &OsStr)> {
    let plain = rel
        .components()
        .all(|component| matches!(component, Component::Normal(_)));
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(not_plain(rel));
    };
    if !plain {
        return Err(not_plain(rel));
    }
    Ok((open_dir(root, parent)?, name))
}

fn not_plain(rel: &Path) -> Refused {
    Refused::Io(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("`{}` is not a relative path of plain names", rel.display()),
    ))
}

/// A file as read: its bytes and the `fstat` of the descriptor they were read from.
pub struct ReadFile {
    /// The whole content.
    pub bytes: Vec<u8>,
    /// The file's status when it was opened.
    pub stat: Stat,
}

/// Reads the regular file `name` in `dir`, at most `limit` bytes; `None` if it does not
/// exist.
///
/// Nothing is opened for reading before its type is known: the name is first opened with
/// `O_PATH` (which opens no device, wakes no FIFO writer and follows no symlink), its type
/// and link count are taken from that handle, and only a regular file with one name is then
/// opened for reading, by its name through the same directory handle, with
/// `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`. That second open is checked to be the same file (device
/// and inode): something swapped in between is refused, and what it reads is re-checked
/// the same way, so the status returned is the status of the bytes returned. A symlink, a
/// FIFO, a device, a socket or a directory is refused without being opened; so is a regular
/// file with a second name ([`Refused::HardLink`]): a hard link planted here to a file
/// elsewhere on the file system (another user's secret) is never read through.
pub fn read(dir: impl AsFd, name: impl AsRef<OsStr>, limit: u64) -> Confined<Option<ReadFile>> {
    let (dir, name) = (dir.as_fd(), name.as_ref());
    let mut turns = 0;
    loop {
        match read_once(dir, name, limit) {
            Err(Refused::Io(e)) if e.kind() == io::ErrorKind::Interrupted && turns < 3 => {
                turns += 1;
            }
            other => return other,
        }
    }
}

fn read_once(dir: BorrowedFd<'_>, name: &OsStr, limit: u64) -> Confined<Option<ReadFile>> {
    let Some(looked) = look(dir, name)? else {
        return Ok(None);
    };
    regular_with_one_name(&looked)?;
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    if (stat.st_dev, stat.st_ino) != (looked.st_dev, looked.st_ino) {
        // Replaced between the look and the open: what was opened is not what was checked.
        // Refused like a file being rewritten; it was only opened, never read (a FIFO opened
        // non-blocking for reading does not block, a device is a risk only in this race).
        regular_with_one_name(&stat)?;
        return Err(Refused::Io(io::Error::new(
            io::ErrorKind::Interrupted,
            "was replaced while it was being opened; try again",
        )));
    }
    regular_with_one_name(&stat)?;
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    let mut bytes = Vec::with_capacity(size.min(limit) as usize + 1);
    std::fs::File::from(fd)
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(Refused::TooLarge(limit));
    }
    Ok(Some(ReadFile { bytes, stat }))
}

/// The status of `name` in `dir` through an `O_PATH` handle: nothing is opened for reading
/// or writing, no symlink is followed (the handle is of the link itself). `None` if absent.
pub fn look(dir: impl AsFd, name: impl AsRef<OsStr>) -> Confined<Option<Stat>> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match openat(dir, name.as_ref(), flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(Some(rustix::fs::fstat(&fd)?))
}

/// Refuses anything but a regular file with exactly one name.
pub fn regular_with_one_name(stat: &Stat) -> Confined<()> {
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Symlink => return Err(Refused::Symlink),
        FileType::Directory => return Err(Refused::NotAFile("a directory")),
        FileType::Fifo => return Err(Refused::NotAFile("a FIFO")),
        FileType::Socket => return Err(Refused::NotAFile("a socket")),
        _ => return Err(Refused::NotAFile("a device")),
    }
    if stat.st_nlink > 1 {
        return Err(Refused::HardLink(stat.st_nlink));
    }
    Ok(())
}

/// The status of `name` in `dir` without following a symlink; `None` if it does not exist.
pub fn stat(dir: impl AsFd, name: impl AsRef<OsStr>) -> Confined<Option<Stat>> {
    match statat(dir, name.as_ref(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Calls `each` with every name in `dir` (without `.` and `..`) and its type as the
/// directory entry gives it (`Unknown` on file systems that do not say).
pub fn each_name(dir: impl AsFd, mut each: impl FnMut(&[u8], FileType)) -> Confined<()> {
    for entry in Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            each(name, entry.file_type());
        }
    }
    Ok(())
}

/// The names in `dir`, without `.` and `..`, with their types.
pub fn names(dir: impl AsFd) -> Confined<Vec<(Vec<u8>, FileType)>> {
    let mut out = Vec::new();
    each_name(dir, |name, file_type| out.push((name.to_vec(), file_type)))?;
    Ok(out)
}

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

/// A name as text, if it is UTF-8.
pub fn utf8(name: &[u8]) -> Option<&str> {
    std::str::from_utf8(name).ok()
}

/// A byte name as an `OsStr`.
pub fn os(name: &[u8]) -> &OsStr {
    OsStr::from_bytes(name)
}

#[cfg(test)]
mod tests {
    // By its path, not `super::*`: the same items, named as the layer check reads paths.
    use crate::store::fs::beneath::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_symlinked_directory_on_the_way_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("a")).unwrap();
        symlink(outside.path(), root.path().join("a/b")).unwrap();
        let fd = std::fs::File::open(root.path()).unwrap();
        for rel in ["a/b", "a/b/c"] {
            assert!(matches!(
                open_or_create_dir(&fd, Path::new(rel)),
                Err(Refused::Symlink | Refused::NotADirectory)
            ));
            assert!(matches!(
                walk(&fd, Path::new(rel), true),
                Err(Refused::Symlink | Refused::NotADirectory)
            ));
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn open_parent_opens_the_directory_and_names_the_last_component() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("a/b")).unwrap();
        std::fs::write(root.path().join("a/b/f"), "in").unwrap();
        std::fs::write(outside.path().join("f"), "out").unwrap();
        symlink(outside.path(), root.path().join("a/l")).unwrap();
        let fd = std::fs::File::open(root.path()).unwrap();

        let (dir, name) = open_parent(&fd, Path::new("a/b/f")).unwrap();
        assert_eq!(name, "f");
        assert_eq!(read(&dir, name, 10).unwrap().unwrap().bytes, b"in");
        let (dir, name) = open_parent(&fd, Path::new("f")).unwrap();
        assert_eq!(name, "f");
        assert!(stat(&dir, "a").unwrap().is_some());

        // A symlinked directory on the way is refused, never entered.
        assert!(matches!(
            open_parent(&fd, Path::new("a/l/f")),
            Err(Refused::Symlink | Refused::NotADirectory)
        ));
        for rel in ["", "/a/b/f", "../f", "a/../a/b/f"] {
            assert!(
                matches!(open_parent(&fd, Path::new(rel)), Err(Refused::Io(ref e)) if e.kind() == io::ErrorKind::InvalidInput),
                "{rel}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("f")).unwrap(),
            "out"
        );
    }

    #[test]
    fn a_write_replaces_a_planted_link_instead_of_writing_through_it() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        symlink(&victim, root.path().join("f")).unwrap();
        let fd = std::fs::File::open(root.path()).unwrap();
        assert!(matches!(read(&fd, "f", 10), Err(Refused::Symlink)));
        assert!(!write(&fd, "f", b"new", WriteMode::CreateOnly, false, &beside).unwrap());
        assert!(write(&fd, "f", b"new", WriteMode::Replace, false, &beside).unwrap());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(root.path().join("f")).unwrap(),
            "new"
        );
    }
}
