//! Confined opens and reads: directories resolved beneath a handle (`openat2`, or one
//! `O_NOFOLLOW` component at a time), files opened relative to their directory with
//! `O_NOFOLLOW`, the look at a name before anything is opened, and the refusals.

use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{
    AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags, Stat, mkdirat, openat, openat2, statat,
};
use rustix::io::Errno;

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

pub(super) const DIR_FLAGS: OFlags = OFlags::RDONLY
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
pub(super) fn walk(root: impl AsFd, rel: &Path, create: bool) -> Confined<OwnedFd> {
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
/// acts on that name relative to the handle ([`stat`], [`read`], [`remove`](super::remove)). Calls made on the
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

/// A name as text, if it is UTF-8.
pub fn utf8(name: &[u8]) -> Option<&str> {
    std::str::from_utf8(name).ok()
}

/// A byte name as an `OsStr`.
pub fn os(name: &[u8]) -> &OsStr {
    OsStr::from_bytes(name)
}
