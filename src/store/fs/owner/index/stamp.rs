//! The status a record vouches with ([`Stamp`]), and when a read may be recorded at all: a
//! file whose ctime is within [`RACY_NS`] of the read's start ([`COARSE_NS`] on a file
//! system that stamps whole seconds) is "racily clean" and never recorded.

use rustix::fs::Stat;

/// How much older than the start of its read a file's ctime must be for the read to be
/// recorded: more than the coarsest clock tick a file system stamps files with (10 ms at
/// `HZ=100`), with room for the clock to advance between the stamp and our reading of it.
pub const RACY_NS: i64 = 100_000_000;

/// The margin for a file whose times are whole seconds: its file system stamps files to the
/// second (ext2/3, ext4 with 128-byte inodes, many FUSE and network file systems) or to two
/// (FAT), so a change later in the same second, or the next, can leave its status as it
/// was. Two seconds of granularity and the ordinary margin on top.
pub const COARSE_NS: i64 = 2_000_000_000 + RACY_NS;

/// What a `stat` of an allocation file shows, as far as the index compares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch (saturating past the year 2262).
    pub mtime: i64,
    /// Change time in nanoseconds since the epoch (saturating past the year 2262).
    pub ctime: i64,
}

impl Stamp {
    /// The stamp of a status.
    pub fn of(stat: &Stat) -> Stamp {
        Stamp {
            ino: stat.st_ino,
            size: u64::try_from(stat.st_size).unwrap_or(u64::MAX),
            mtime: nanos(stat.st_mtime, stat.st_mtime_nsec),
            ctime: nanos(stat.st_ctime, stat.st_ctime_nsec),
        }
    }

    /// May a read of this file, begun at `read_start` (ns since the epoch), be recorded?
    /// Only if its last change is older than the read by more than its file system's
    /// timestamp granularity ([`Stamp::margin`]): a change after the read then cannot leave
    /// the status as recorded.
    pub fn settled(&self, read_start: i64) -> bool {
        self.ctime < read_start.saturating_sub(self.margin())
    }

    /// Did the file change within `window` before `at` (ns since the epoch), allowing for
    /// its file system's timestamp granularity? A one-second stamp of 12:00:00 may be a
    /// change at 12:00:00.999.
    pub fn changed_within(&self, at: i64, window: i64) -> bool {
        let extra = self.margin() - RACY_NS;
        self.ctime > at.saturating_sub(window.saturating_add(extra))
    }

    /// How far apart a change and a read must be for the read to vouch for the status: the
    /// coarsest tick of a file system with fine timestamps ([`RACY_NS`]), or, for a file
    /// whose change and modification times are both whole seconds, [`COARSE_NS`]. A file
    /// system with nanosecond stamps gives whole seconds to one file in a billion, which then
    /// only waits longer to be recorded. (Whole seconds is how the stamps look on ext4 with
    /// 128-byte inodes; detecting it per file needs no `statfs` and follows a state directory
    /// copied between file systems.)
    pub fn margin(&self) -> i64 {
        let whole = |ns: i64| ns.rem_euclid(1_000_000_000) == 0;
        if whole(self.ctime) && whole(self.mtime) {
            COARSE_NS
        } else {
            RACY_NS
        }
    }
}

/// Seconds and nanoseconds as nanoseconds since the epoch, saturating.
pub fn nanos(secs: i64, nsec: u64) -> i64 {
    secs.saturating_mul(1_000_000_000)
        .saturating_add(i64::try_from(nsec).unwrap_or(0))
}
