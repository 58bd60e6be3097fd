//! Reading one allocation file: as it is, or (for a claim's look-up) giving a file that
//! is being rewritten in place the moment it needs to become whole again.

use std::os::fd::OwnedFd;

use crate::error::{Error, Result};
use crate::model::Namespace;
use crate::store::fs::FsStore;
use crate::store::fs::beneath::{self, Refused};
use crate::store::fs::index::Stamp;
use crate::store::{ObjectKind, Parsed};
use crate::yaml::{self, MAX_MANIFEST_BYTES};

/// How long after its last change an allocation file that does not parse may still be a
/// rewrite in progress (see [`FsStore::read_whole`]).
const TORN_WINDOW_NS: i64 = 500_000_000;

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

impl FsStore {
    /// Reads and decodes the allocation file `file` (`<name>.yaml`) of `dir`; `None` if it
    /// is gone.
    pub(super) fn read_allocation(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        file: &str,
    ) -> Result<Option<(Parsed, Stamp)>> {
        match beneath::read(dir, file, MAX_MANIFEST_BYTES) {
            Ok(None) => Ok(None),
            Ok(Some(read)) => {
                let parsed = std::str::from_utf8(&read.bytes)
                    .map_err(|_| "is not UTF-8 text".to_owned())
                    .and_then(yaml::decode_allocation);
                Ok(Some((parsed, Stamp::of(&read.stat))))
            }
            // A symlink, a FIFO, a huge file under a manifest's name: as broken as a file
            // that does not parse; its address stays taken.
            Err(Refused::Io(e)) => Err(Error::io(self.path(ObjectKind::Allocation, ns, file), e)),
            Err(why) => Ok(Some((Err(why.reason()), Stamp::of_nothing()))),
        }
    }

    /// [`FsStore::read_allocation`] for a claim's look-up, which must not take a torn file
    /// for "no owner here": `cp` and editors rewrite a file in place (truncate, then write),
    /// and a read in between sees a file that does not parse.
    ///
    /// A file that does not parse and had changed less than [`TORN_WINDOW_NS`] before a read
    /// began ([`STALL_WINDOW_NS`] if it is empty) may be such a rewrite: it is read again
    /// until it parses or the window has passed. An empty file seen changing is never taken
    /// for a broken one, whose owner the claim would then not see (its writer may only be
    /// stalled between truncating and writing): if it is still empty half a second after the
    /// stall window, the look-up fails (exit 1, "try again").
    pub(super) fn read_whole(
        &self,
        dir: &OwnedFd,
        ns: Option<&Namespace>,
        file: &str,
    ) -> Result<Option<(Parsed, Stamp)>> {
        let begun = now_ns();
        let mut changing = false;
        loop {
            // The window is measured from each read's start, not from after it: a reader
            // descheduled between its read and this check must not take a fresh rewrite
            // for an old broken file.
            let started = now_ns();
            let read = self.read_allocation(dir, ns, file)?;
            let Some((Err(why), stamp)) = &read else {
                return Ok(read);
            };
            let empty = stamp.size == 0;
            let window = if empty {
                STALL_WINDOW_NS
            } else {
                TORN_WINDOW_NS
            };
            if stamp.ctime > started - window {
                changing = true;
            } else if !(changing && empty) {
                return Ok(read);
            }
            if started - begun > STALL_WINDOW_NS + 500_000_000 {
                return Err(Error::io(
                    self.path(ObjectKind::Allocation, ns, file),
                    std::io::Error::other(format!(
                        "{why}, and it was being changed moments ago: another program may be \
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
