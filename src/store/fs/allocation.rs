//! Reading one allocation file (or another file an owner index serves, [`Kind`]): as it
//! is, or (for a claim's look-up) giving a file that is being rewritten in place the
//! moment it needs to become whole again.

use std::os::fd::OwnedFd;

use crate::error::{Error, Result};
use crate::model::{AllocationManifest, Namespace};
use crate::store::fs::FsStore;
use crate::store::fs::beneath::{self, Refused, refused};
use crate::store::fs::owner::index::Stamp;
use crate::store::fs::owner::kind::{Allocations, Kind};
use crate::yaml::MAX_MANIFEST_BYTES;

/// How long after its last change an allocation file that does not parse may still be a
/// rewrite in progress (see [`FsStore::read_whole`]).
const TORN_WINDOW_NS: i64 = 500_000_000;

/// How long after its last change a file that parses but is not exactly ipamctl's output
/// may still be a rewrite in progress: a writer that stops at a prefix which parses as
/// another owner (`name: fip-web-0` of `name: fip-web-01`) and writes the rest 1.5 s later
/// was taken for that owner after half a second, and the owner was given a second address
/// (issue 31). The stall window, as for an empty file.
const PREFIX_WINDOW_NS: i64 = STALL_WINDOW_NS;

/// The same for an empty file: truncated and not written yet. A writer can be descheduled
/// for a long time between the two: more than half a second was seen on a loaded two-core
/// machine (27 runnable processes), and a claim then took the empty file for a broken one.
const STALL_WINDOW_NS: i64 = 2_000_000_000;

/// Nanoseconds since the epoch, by the clock that stamps files.
pub(super) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// One file as read: what it decodes to, its status, and whether its bytes are exactly
/// what ipamctl writes for that manifest (canonical, ending in a newline).
pub(super) struct ReadFile<M> {
    /// The manifest, or why the file is not one.
    pub(super) parsed: std::result::Result<M, String>,
    /// The status of the bytes decoded.
    pub(super) stamp: Stamp,
    /// The bytes are [`yaml::encode`] of the manifest: no prefix of a longer manifest.
    pub(super) exact: bool,
}

/// One allocation file as read.
pub(super) type ReadAllocation = ReadFile<AllocationManifest>;

impl<M> ReadFile<M> {
    /// May this read be taken for the file's content, at `started` (when the read began)?
    ///
    /// A file rewritten in place (`cp`, an editor, a sync tool, `pv`) passes through
    /// prefixes, and a prefix can be a whole valid manifest of another owner: the owner's
    /// `name:` is the last line, and `name: fip-web-0` is a prefix of `name: fip-web-01`. So
    /// a file that parses is trusted as complete only if its bytes are exactly what ipamctl
    /// writes (a prefix of ipamctl's output that parses lacks its last newline, or a line),
    /// or if it has not changed for [`PREFIX_WINDOW_NS`] (plus its file system's timestamp
    /// granularity). A file that does not parse is judged broken once it has not changed
    /// for [`TORN_WINDOW_NS`] (a claim then fails closed if it names the owner), an empty
    /// one after [`STALL_WINDOW_NS`]. Anything else may be a write in flight.
    pub(super) fn settled(&self, started: i64) -> bool {
        match &self.parsed {
            Ok(_) if self.exact => true,
            Ok(_) => !self.stamp.changed_within(started, PREFIX_WINDOW_NS),
            Err(_) if self.stamp.size == 0 => !self.stamp.changed_within(started, STALL_WINDOW_NS),
            _ => !self.stamp.changed_within(started, TORN_WINDOW_NS),
        }
    }
}

impl FsStore {
    /// Reads and decodes the allocation file `file` (`<name>.yaml`) of `dir`: see
    /// [`FsStore::read_file`].
    pub(super) fn read_allocation(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        file: &str,
    ) -> Result<Option<ReadAllocation>> {
        self.read_file::<Allocations<'_>>(dir, ns, file)
    }

    /// Reads and decodes the `T` file `file` (`<name>.yaml`) of `dir`; `None` if it is
    /// gone. A file with a second name (a hard link) is an error naming it, not a broken
    /// manifest: it is not read at all.
    pub(super) fn read_file<T: Kind>(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        file: &str,
    ) -> Result<Option<ReadFile<T::Manifest>>> {
        match beneath::read(dir, file, MAX_MANIFEST_BYTES) {
            Ok(None) => Ok(None),
            Ok(Some(read)) => {
                let (parsed, exact) = match std::str::from_utf8(&read.bytes) {
                    Ok(text) => T::decode(text),
                    Err(_) => (Err("is not UTF-8 text".to_owned()), false),
                };
                Ok(Some(ReadFile {
                    parsed,
                    stamp: Stamp::of(&read.stat),
                    exact,
                }))
            }
            Err(Refused::Io(e)) => Err(Error::io(self.path(T::OBJECTS, ns, file), e)),
            Err(why @ Refused::HardLink(_)) => Err(refused(self.path(T::OBJECTS, ns, file), why)),
            // A symlink, a FIFO, a huge file under a manifest's name: as broken as a file
            // that does not parse; its key stays taken.
            Err(why) => Ok(Some(ReadFile {
                parsed: Err(why.reason()),
                stamp: Stamp::of_nothing(),
                exact: false,
            })),
        }
    }

    /// [`FsStore::read_allocation`] for a claim's look-up, which must not take a file in
    /// flight for its content: `cp` and editors rewrite a file in place (truncate, then
    /// write), and a read in between sees a file that does not parse, or one that parses
    /// as another owner (see [`ReadAllocation::settled`]).
    ///
    /// A file that is not [settled](ReadAllocation::settled) is read again until it is, or
    /// the window has passed. An empty file seen changing is never taken for a broken one,
    /// whose owner the claim would then not see (its writer may only be stalled between
    /// truncating and writing): if it is still empty half a second after the stall window,
    /// or keeps changing that long, the look-up fails (exit 1, "try again").
    pub(super) fn read_whole(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        file: &str,
    ) -> Result<Option<ReadAllocation>> {
        self.read_whole_of::<Allocations<'_>>(dir, ns, file)
    }

    /// [`FsStore::read_whole`] for a `T` file.
    pub(super) fn read_whole_of<T: Kind>(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        file: &str,
    ) -> Result<Option<ReadFile<T::Manifest>>> {
        let begun = now_ns();
        let mut changing = false;
        loop {
            // The window is measured from each read's start, not from after it: a reader
            // descheduled between its read and this check must not take a fresh rewrite
            // for an old file.
            let started = now_ns();
            let Some(read) = self.read_file::<T>(dir, ns, file)? else {
                return Ok(None);
            };
            let empty = read.parsed.is_err() && read.stamp.size == 0;
            if read.settled(started) {
                if !(changing && empty) {
                    return Ok(Some(read));
                }
            } else {
                changing = true;
            }
            let coarse = read.stamp.margin() - crate::store::fs::owner::index::RACY_NS;
            if started - begun > STALL_WINDOW_NS + 500_000_000 + coarse {
                let why = match &read.parsed {
                    Err(why) => format!("{why}, and it"),
                    Ok(_) => "it".to_owned(),
                };
                return Err(Error::io(
                    self.path(T::OBJECTS, ns, file),
                    std::io::Error::other(format!(
                        "{why} was being changed moments ago: another program may be \
                         rewriting it; nothing was claimed, try again"
                    )),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
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
