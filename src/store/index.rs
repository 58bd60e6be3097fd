//! The owner index of one pool, `ipallocations/.index/<pool>.idx`: for each allocation file,
//! who its owner was when ipamctl last read it, and what a `stat` of the file showed then.
//!
//! It works the way git's index does. A record vouches for a file only while the file's
//! status is exactly the recorded one (inode, size, and modification and change times to the
//! nanosecond); any other status means the file was replaced, rewritten, touched or copied
//! over since, and it is read again. The change time (ctime) cannot be set from user space:
//! every write, rename, link or chmod sets it to the clock's *now*. So a file's status can
//! repeat only when a change lands in the same clock tick as the read that recorded it
//! ("racily clean"); records are therefore made only for files whose ctime is at least
//! [`RACY_NS`] older than the moment the read began, and a change after that read gets a
//! later ctime than the recorded one. What is left is a clock stepped back by more than the
//! file's age that lands a later change on the very same nanosecond, inode and size.
//!
//! The index is derived and local (git-ignored): lost, truncated, stale, copied from another
//! clone or edited, it costs reads, never a wrong answer, because nothing in it is believed
//! without the file's current status agreeing. Records are written whole through a temporary
//! file and a rename; two writers racing lose one's records, which are read again later.
//!
//! ```text
//! ipamctl-index 1 <device>
//! <address> <inode> <size> <mtime ns> <ctime ns> <owner kind> <owner name> <uid or ->
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use rustix::fs::Stat;

use crate::model::Owner;

/// First word of an index file, with its format version.
const HEADER: &str = "ipamctl-index 1";

/// How much older than the start of its read a file's ctime must be for the read to be
/// recorded: more than the coarsest clock tick a file system stamps files with (10 ms at
/// `HZ=100`), with room for the clock to advance between the stamp and our reading of it.
pub const RACY_NS: i128 = 100_000_000;

/// What a `stat` of an allocation file shows, as far as the index compares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime: i128,
    /// Change time in nanoseconds since the epoch.
    pub ctime: i128,
}

impl Stamp {
    /// The stamp of a status.
    pub fn of(stat: &Stat) -> Stamp {
        Stamp {
            ino: stat.st_ino,
            size: u64::try_from(stat.st_size).unwrap_or(u64::MAX),
            mtime: i128::from(stat.st_mtime) * 1_000_000_000 + i128::from(stat.st_mtime_nsec),
            ctime: i128::from(stat.st_ctime) * 1_000_000_000 + i128::from(stat.st_ctime_nsec),
        }
    }

    /// May a read of this file, begun at `read_start` (ns since the epoch), be recorded?
    pub fn settled(&self, read_start: i128) -> bool {
        self.ctime < read_start - RACY_NS
    }
}

/// The owner recorded for a file, as its three fields (`-` for no uid).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerText {
    /// `VirtualMachine`, `FloatingIP`, ...
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The uid, if any.
    pub uid: Option<String>,
}

impl OwnerText {
    /// The text form of an owner.
    pub fn of(owner: &Owner) -> OwnerText {
        OwnerText {
            kind: owner.kind().to_string(),
            name: owner.name().to_owned(),
            uid: owner.uid().map(|u| u.as_str().to_owned()),
        }
    }

    /// Is this `owner`?
    pub fn is(&self, owner: &Owner) -> bool {
        self.kind == owner.kind().as_str()
            && self.name == owner.name()
            && self.uid.as_deref() == owner.uid().map(|u| u.as_str())
    }
}

/// One file's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The file's status when it was read.
    pub stamp: Stamp,
    /// Its owner then.
    pub owner: OwnerText,
}

/// The records of one pool, by address, for one device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Index {
    /// The device the recorded inode numbers belong to.
    pub dev: u64,
    /// Address → record.
    pub records: HashMap<Ipv4Addr, Record>,
}

impl Index {
    /// Parses an index file for the device `dev`. A file of another device, another format
    /// or none at all gives an empty index; a malformed line is skipped.
    pub fn parse(text: &str, dev: u64) -> Index {
        let mut index = Index {
            dev,
            records: HashMap::new(),
        };
        let mut lines = text.lines();
        let same_device = lines
            .next()
            .and_then(|h| h.strip_prefix(HEADER))
            .and_then(|rest| rest.trim().parse::<u64>().ok())
            == Some(dev);
        if !same_device {
            return index;
        }
        for line in lines {
            if let Some((address, record)) = parse_line(line) {
                index.records.insert(address, record);
            }
        }
        index
    }

    /// The file's text, records in address order so that rewrites are easy to compare.
    pub fn render(&self) -> String {
        let mut records: Vec<_> = self.records.iter().collect();
        records.sort_unstable_by_key(|(a, _)| **a);
        let mut text = format!("{HEADER} {}\n", self.dev);
        for (address, r) in records {
            let s = &r.stamp;
            let _ = writeln!(
                text,
                "{address} {} {} {} {} {} {} {}",
                s.ino,
                s.size,
                s.mtime,
                s.ctime,
                r.owner.kind,
                r.owner.name,
                r.owner.uid.as_deref().unwrap_or("-")
            );
        }
        text
    }
}

fn parse_line(line: &str) -> Option<(Ipv4Addr, Record)> {
    let mut fields = line.split(' ');
    let address = fields.next()?.parse().ok()?;
    let stamp = Stamp {
        ino: fields.next()?.parse().ok()?,
        size: fields.next()?.parse().ok()?,
        mtime: fields.next()?.parse().ok()?,
        ctime: fields.next()?.parse().ok()?,
    };
    let kind = fields.next()?.to_owned();
    let name = fields.next()?.to_owned();
    let uid = match fields.next()? {
        "-" => None,
        uid => Some(uid.to_owned()),
    };
    if fields.next().is_some() || kind.is_empty() || name.is_empty() {
        return None;
    }
    Some((
        address,
        Record {
            stamp,
            owner: OwnerText { kind, name, uid },
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ino: u64, name: &str) -> Record {
        Record {
            stamp: Stamp {
                ino,
                size: 200,
                mtime: 1_700_000_000_123_456_789,
                ctime: 1_700_000_000_123_456_789,
            },
            owner: OwnerText {
                kind: "VirtualMachine".into(),
                name: name.into(),
                uid: Some("0f8fad5b-d9cb-469f-a165-70867728950e".into()),
            },
        }
    }

    #[test]
    fn renders_and_parses_back() {
        let mut index = Index {
            dev: 2049,
            records: HashMap::new(),
        };
        index.records.insert("10.0.0.2".parse().unwrap(), record(12, "web-01/0"));
        index.records.insert("10.0.0.1".parse().unwrap(), record(11, "web-02/1"));
        let text = index.render();
        assert!(text.starts_with("ipamctl-index 1 2049\n10.0.0.1 11 "));
        assert_eq!(Index::parse(&text, 2049), index);
    }

    #[test]
    fn another_device_or_a_broken_line_is_ignored() {
        let mut index = Index {
            dev: 1,
            records: HashMap::new(),
        };
        index.records.insert("10.0.0.1".parse().unwrap(), record(11, "web-02/1"));
        let text = index.render();
        assert!(Index::parse(&text, 2).records.is_empty());
        let torn = format!("{text}10.0.0.2 13 200 17000");
        assert_eq!(Index::parse(&torn, 1).records.len(), 1);
    }

    #[test]
    fn a_change_in_the_same_tick_as_the_read_is_never_recorded() {
        let s = record(1, "a/0").stamp;
        assert!(!s.settled(s.ctime));
        assert!(!s.settled(s.ctime + RACY_NS));
        assert!(s.settled(s.ctime + RACY_NS + 1));
    }
}
