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
//! without the file's current status agreeing. It is a log: what a look-up learns is
//! appended (a later line for an address overrides an earlier one, `<address> -` forgets
//! it), and once most of it is history it is rewritten whole through a temporary file and a
//! rename. Appends racing a rewrite may be lost; that too only costs reads.
//!
//! ```text
//! ipamctl-index 1 <device>
//! <address> <inode> <size> <mtime ns> <ctime ns> <w|-> <owner kind> <owner name> <uid or ->
//! <address> -
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use rustix::fs::Stat;

use crate::model::{Owner, OwnerFilter};

/// First word of an index file, with its format version.
const HEADER: &str = "ipamctl-index 2";

/// How much older than the start of its read a file's ctime must be for the read to be
/// recorded: more than the coarsest clock tick a file system stamps files with (10 ms at
/// `HZ=100`), with room for the clock to advance between the stamp and our reading of it.
pub const RACY_NS: i64 = 100_000_000;

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
    pub fn settled(&self, read_start: i64) -> bool {
        self.ctime < read_start.saturating_sub(RACY_NS)
    }
}

/// Seconds and nanoseconds as nanoseconds since the epoch, saturating.
pub fn nanos(secs: i64, nsec: u64) -> i64 {
    secs.saturating_mul(1_000_000_000)
        .saturating_add(i64::try_from(nsec).unwrap_or(0))
}

/// An owner as the index writes it: `<kind> <name> <uid or ->` (none of the three holds a
/// space: each is validated when its manifest is parsed).
pub fn owner_text(owner: &Owner) -> String {
    format!(
        "{} {} {}",
        owner.kind(),
        owner.name(),
        owner.uid().map_or("-", |u| u.as_str())
    )
}

/// Does the owner in `text` (as [`owner_text`] writes it) pass `filter`?
pub fn text_matches(text: &str, filter: &OwnerFilter) -> bool {
    let mut parts = text.split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(kind), Some(name), Some(uid)) => {
            filter.matches_text(kind, name, (uid != "-").then_some(uid))
        }
        // Unreadable: let the caller read the file.
        _ => true,
    }
}

/// One file's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The file's status when it was read.
    pub stamp: Stamp,
    /// Its owner then, as [`owner_text`].
    pub owner: Box<str>,
    /// The file was exactly the manifest ipamctl writes for its pool, scope, address and
    /// owner (no label, nothing else): a reader may rebuild it instead of reading it.
    pub whole: bool,
}

impl Record {
    fn line(&self, address: Ipv4Addr, out: &mut String) {
        let s = &self.stamp;
        let _ = writeln!(
            out,
            "{address} {} {} {} {} {} {}",
            s.ino,
            s.size,
            s.mtime,
            s.ctime,
            if self.whole { "w" } else { "-" },
            self.owner
        );
    }
}

/// The records of one pool, by address, for one device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Index {
    /// The device the recorded inode numbers belong to.
    pub dev: u64,
    /// Address → record.
    pub records: HashMap<Ipv4Addr, Record>,
    /// Lines in the file, the header aside (records, overridden records and tombstones):
    /// when it outgrows the records, the file is rewritten.
    pub lines: usize,
}

/// A change to an index, as a look-up learnt it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// This address's file now has this record.
    Set(Ipv4Addr, Record),
    /// This address has no file any more.
    Forget(Ipv4Addr),
}

impl Index {
    /// Parses an index file for the device `dev`. A file of another device, another format
    /// or none at all gives an empty index; a malformed line (a torn append) is skipped.
    pub fn parse(text: &[u8], dev: u64) -> Index {
        let mut index = Index {
            dev,
            ..Index::default()
        };
        let mut lines = text.split(|&b| b == b'\n');
        let same_device = lines
            .next()
            .and_then(|h| h.strip_prefix(HEADER.as_bytes()))
            .and_then(|rest| rest.strip_prefix(b" "))
            .and_then(parse_u64)
            == Some(dev);
        if !same_device {
            return index;
        }
        index.records.reserve(text.len() / 100);
        for line in lines.filter(|l| !l.is_empty()) {
            index.lines += 1;
            match parse_line(line) {
                Some(Change::Set(address, record)) => {
                    index.records.insert(address, record);
                }
                Some(Change::Forget(address)) => {
                    index.records.remove(&address);
                }
                None => {}
            }
        }
        index
    }

    /// Is the file mostly history, so that it is worth rewriting whole?
    pub fn wants_rewrite(&self, appended: usize) -> bool {
        self.lines + appended > 2 * self.records.len() + 1024
    }

    /// Applies `changes` in memory.
    pub fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            match change {
                Change::Set(address, record) => {
                    self.records.insert(*address, record.clone());
                }
                Change::Forget(address) => {
                    self.records.remove(address);
                }
            }
        }
    }

    /// The whole file, records in address order.
    pub fn render(&self) -> String {
        let mut records: Vec<_> = self.records.iter().collect();
        records.sort_unstable_by_key(|(a, _)| **a);
        let mut text = String::with_capacity(64 + records.len() * 128);
        let _ = writeln!(text, "{HEADER} {}", self.dev);
        for (address, record) in records {
            record.line(*address, &mut text);
        }
        text
    }

    /// The lines that append `changes` to the file.
    pub fn render_changes(changes: &[Change]) -> String {
        let mut text = String::new();
        for change in changes {
            match change {
                Change::Set(address, record) => record.line(*address, &mut text),
                Change::Forget(address) => {
                    let _ = writeln!(text, "{address} -");
                }
            }
        }
        text
    }
}

// Byte-wise: a look-up parses one line per allocation of the pool, 50,000 at a time.
fn parse_line(line: &[u8]) -> Option<Change> {
    let mut fields = line.splitn(7, |&b| b == b' ');
    let address = parse_address(fields.next()?)?;
    let ino = fields.next()?;
    if ino == b"-" {
        return fields.next().is_none().then_some(Change::Forget(address));
    }
    let stamp = Stamp {
        ino: parse_u64(ino)?,
        size: parse_u64(fields.next()?)?,
        mtime: parse_i64(fields.next()?)?,
        ctime: parse_i64(fields.next()?)?,
    };
    let whole = match fields.next()? {
        b"w" => true,
        b"-" => false,
        _ => return None,
    };
    let owner = std::str::from_utf8(fields.next()?).ok()?;
    if owner.split(' ').filter(|f| !f.is_empty()).count() != 3 {
        return None;
    }
    Some(Change::Set(
        address,
        Record {
            stamp,
            owner: owner.into(),
            whole,
        },
    ))
}

/// The owner in `text` (as [`owner_text`] writes it), validated as a manifest's would be.
pub fn parse_owner(text: &str) -> Option<Owner> {
    let mut parts = text.split(' ');
    let (kind, name, uid) = (parts.next()?, parts.next()?, parts.next()?);
    let uid = match uid {
        "-" => None,
        uid => Some(crate::model::Uid::new(uid).ok()?),
    };
    Owner::new(kind.parse().ok()?, name, uid).ok()
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))
            .flatten()
    })
}

fn parse_i64(digits: &[u8]) -> Option<i64> {
    match digits.strip_prefix(b"-") {
        Some(rest) => i64::try_from(parse_u64(rest)?).ok().map(|n| -n),
        None => i64::try_from(parse_u64(digits)?).ok(),
    }
}

fn parse_address(text: &[u8]) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = text.split(|&b| b == b'.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.len() > 3 || (part.len() > 1 && part[0] == b'0') {
            return None;
        }
        *octet = u8::try_from(parse_u64(part)?).ok()?;
    }
    parts.next().is_none().then_some(Ipv4Addr::from(octets))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ino: u64, owner: &str) -> Record {
        Record {
            stamp: Stamp {
                ino,
                size: 200,
                mtime: 1_700_000_000_123_456_789,
                ctime: 1_700_000_000_123_456_789,
            },
            owner: owner.into(),
            whole: ino.is_multiple_of(2),
        }
    }

    const WEB: &str = "VirtualMachine web-01/0 0f8fad5b-d9cb-469f-a165-70867728950e";

    #[test]
    fn renders_and_parses_back_with_appended_changes() {
        let mut index = Index {
            dev: 2049,
            ..Index::default()
        };
        let a: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let b: Ipv4Addr = "10.0.0.2".parse().unwrap();
        index.records.insert(b, record(12, WEB));
        index.records.insert(a, record(11, "FloatingIP fip-1 -"));
        let mut text = index.render();
        assert!(text.starts_with("ipamctl-index 2 2049\n10.0.0.1 11 "));
        let changes = [Change::Forget(a), Change::Set(b, record(13, WEB))];
        text.push_str(&Index::render_changes(&changes));
        let parsed = Index::parse(text.as_bytes(), 2049);
        index.apply(&changes);
        assert_eq!(parsed.records, index.records);
        assert_eq!(parsed.lines, 4);
    }

    #[test]
    fn another_device_or_a_broken_line_is_ignored() {
        let mut index = Index {
            dev: 1,
            ..Index::default()
        };
        index.records.insert(
            "10.0.0.1".parse().unwrap(),
            record(11, "FloatingIP fip-1 -"),
        );
        let text = index.render();
        assert!(Index::parse(text.as_bytes(), 2).records.is_empty());
        for torn in [
            "10.0.0.2 13 200 17000",
            "10.0.0.2 13 200 1 1 FloatingIP x",
            "10.0.0.1 - x",
        ] {
            let parsed = Index::parse(format!("{text}{torn}\n").as_bytes(), 1);
            assert_eq!(parsed.records, index.records, "{torn}");
        }
    }

    #[test]
    fn owner_text_matches_filters() {
        let owner = Owner::parse("VirtualMachine/web-01/0", None).unwrap();
        let text = owner_text(&owner);
        assert_eq!(text, "VirtualMachine web-01/0 -");
        let prefix = OwnerFilter::new(Some("VirtualMachine/web-01/"), None).unwrap();
        let other = OwnerFilter::new(Some("VirtualMachine/web-011/0"), None).unwrap();
        assert!(text_matches(&text, &prefix));
        assert!(!text_matches(&text, &other));
        assert_eq!(parse_owner(&text), Some(owner));
        assert_eq!(parse_owner("VirtualMachine web-01 -"), None);
    }

    #[test]
    fn numbers_parse_byte_wise_and_strictly() {
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1x"), None);
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_address(b"10.0.0.255"), "10.0.0.255".parse().ok());
        for bad in [
            &b"10.0.0"[..],
            b"10.0.0.256",
            b"10.0.0.01",
            b"10.0.0.1.2",
            b"",
        ] {
            assert_eq!(parse_address(bad), None);
        }
    }

    #[test]
    fn a_change_in_the_same_tick_as_the_read_is_never_recorded() {
        let s = record(1, WEB).stamp;
        assert!(!s.settled(s.ctime));
        assert!(!s.settled(s.ctime + RACY_NS));
        assert!(s.settled(s.ctime + RACY_NS + 1));
    }
}
