//! The owner index of one pool, `.index/<objects dir>/<pool>.idx`: for each allocation file
//! (or prefix claim file of a supernet pool), who its owner was when ipamctl last read it,
//! and what a `stat` of the file showed then. Records are keyed by what the file's name
//! spells ([`Key`]): an address for an allocation, a prefix for a prefix claim.
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
//! rename. Appends racing a rewrite may be lost; that too only costs reads. An append cut
//! short (a crash, a full disk) leaves a last line without its newline, which is skipped; an
//! append after it joins it into one line that no longer parses, or whose owner has more
//! than three fields and so vouches for nothing (the file is read).
//!
//! ```text
//! ipamctl-index 4 <device>
//! <key> <inode> <size> <mtime ns> <ctime ns> <w|w<secs>|-> <seal> <owner kind> <owner name> <uid or ->
//! <key> -
//! ```
//!
//! `<seal>` is 16 hexadecimal digits of a hash of the rest of the line: a line whose owner
//! was edited by hand (to make one owner's file look like another's) no longer matches its
//! seal and vouches for nothing, so the file is read. An index never vouches for an owner
//! it did not read from the file; what is left is an edit that also makes the seal again.
//!
//! `<key>` is an address (`10.0.0.1`) in an allocations index, a prefix (`2001:db8::/64`)
//! in a prefix claims index.
//!
//! The status a record vouches with, and when a read is racily clean, are in
//! `index/stamp.rs`; reading a line of the file in `index/line.rs`.
//!
//! `w` marks a file that is exactly the manifest ipamctl writes for its pool, address and
//! owner, so a reader may rebuild it unread; `w<secs>` the same with that
//! `metadata.creationTimestamp` (seconds since the epoch), as every claim now writes.
//!
//! Every race of the owner look-up, and where it is closed: [`crate::store::fs::owner`].

mod file;
mod line;
mod seal;
mod stamp;

use std::fmt::{Display, Write as _};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::model::{Owner, OwnerFilter};
use crate::store::fs::owner::index::seal::seal;

pub use line::parse_owner;
use line::{owner_fields, parse_address, parse_line, parse_u64};
pub use stamp::{COARSE_NS, RACY_NS, Stamp, nanos};

/// First word of an index file, with its format version.
/// Format 4 changed the seal's hash (`index/seal.rs`); a file of format 3 reads as no
/// index and is made again by the next look-up that reads its pool.
const HEADER: &str = "ipamctl-index 4";

/// What an index keys its records by: what a file's name spells, written as `Display`
/// writes it and read back byte-wise by [`Key::parse`] (which accepts only that spelling).
pub trait Key: Copy + Ord + Display + Send + Sync {
    /// The key a record's first field spells, if it is one.
    fn parse(text: &[u8]) -> Option<Self>;
}

impl Key for IpAddr {
    fn parse(text: &[u8]) -> Option<Self> {
        parse_address(text)
    }
}

/// A prefix claim's key: its prefix, without host bits.
impl Key for IpNet {
    fn parse(text: &[u8]) -> Option<Self> {
        let slash = text.iter().rposition(|&b| b == b'/')?;
        let len = u8::try_from(parse_u64(&text[slash + 1..])?).ok()?;
        let net = IpNet::new(parse_address(&text[..slash])?, len).ok()?;
        (net.trunc() == net).then_some(net)
    }
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

/// The part of an owner's text ([`owner_text`]) that says which name it holds: the kind
/// and name, for a kind that is one identity per name in a pool
/// ([`crate::model::OwnerKind::one_per_name`]); the whole text, uid and all, for a `VPC`,
/// whose name is always `router`. An owner look-up reads the files whose text has the
/// owner's: its own, and its namesakes' (the same name under another uid, or none).
pub fn name_text(text: &str) -> &str {
    if text.starts_with("VPC ") {
        return text;
    }
    text.rsplit_once(' ')
        .map_or(text, |(kind_and_name, _)| kind_and_name)
}

/// Does the owner in `text` (as [`owner_text`] writes it) pass `filter`?
pub fn text_matches(text: &str, filter: &OwnerFilter) -> bool {
    match owner_fields(text) {
        Some((kind, name, uid)) => filter.matches_text(kind, name, (uid != "-").then_some(uid)),
        // Unreadable: let the caller read the file.
        None => true,
    }
}

/// One file's record, as a look-up learnt it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The file's status when it was read.
    pub stamp: Stamp,
    /// Its owner then, as [`owner_text`].
    pub owner: Box<str>,
    /// The file was exactly the manifest ipamctl writes for its pool, scope, address and
    /// owner (no label, nothing else): a reader may rebuild it instead of reading it.
    pub whole: bool,
    /// With `whole`: the file's `metadata.creationTimestamp`, in seconds since the epoch
    /// (`None`: it has none, as files written by older versions).
    pub created: Option<u64>,
}

/// One file's record as the index holds it: [`Record`], its owner borrowed from the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The file's status when it was read.
    pub stamp: Stamp,
    /// Its owner then, as [`owner_text`] (not validated: see [`text_matches`]).
    pub owner: &'a str,
    /// See [`Record::whole`].
    pub whole: bool,
    /// See [`Record::created`].
    pub created: Option<u64>,
}

impl Record {
    fn as_ref(&self) -> RecordRef<'_> {
        RecordRef {
            stamp: self.stamp,
            owner: &self.owner,
            whole: self.whole,
            created: self.created,
        }
    }
}

impl RecordRef<'_> {
    fn line(&self, address: impl Display, out: &mut String) {
        let s = &self.stamp;
        // `w<seconds>` for a whole file with a creation time: a version that knows only `w`
        // and `-` skips the line, which costs it a read, never a wrong rebuild.
        let whole = match (self.whole, self.created) {
            (false, _) => String::from("-"),
            (true, None) => String::from("w"),
            (true, Some(secs)) => format!("w{secs}"),
        };
        let head = format!(
            "{address} {} {} {} {} {whole}",
            s.ino, s.size, s.mtime, s.ctime
        );
        let seal = seal(head.as_bytes(), self.owner.as_bytes());
        let _ = writeln!(out, "{head} {seal:016x} {}", self.owner);
    }
}

/// A record in the index: the owner is a range of the index's text.
#[derive(Clone, Copy, Debug)]
struct Entry<K> {
    address: K,
    stamp: Stamp,
    owner: (u32, u32),
    whole: bool,
    created: Option<u64>,
}

impl<K: Key> Entry<K> {
    /// A tombstone while the file is parsed: `key` has no file any more. No record has an
    /// empty owner (a line without one vouches for nothing), so the empty range says it.
    fn gone(address: K) -> Entry<K> {
        Entry {
            address,
            stamp: Stamp {
                ino: 0,
                size: 0,
                mtime: 0,
                ctime: 0,
            },
            owner: (0, 0),
            whole: false,
            created: None,
        }
    }

    fn is_gone(&self) -> bool {
        self.owner.0 == self.owner.1
    }
}

/// The records of one pool, in key order (address order for allocations), for one device.
///
/// Kept as the file's bytes and a sorted array into them rather than a map of owned
/// strings: a look-up parses one record per allocation of the pool, 50,000 at a time, and
/// an allocation per record was most of its cost.
#[derive(Clone, Debug)]
pub struct Index<K = IpAddr> {
    /// The device the recorded inode numbers belong to.
    pub dev: u64,
    /// The index file as read; records' owners point into it. Shared, as are the entries,
    /// so that a batch hands each request its pool's index for two reference counts
    /// instead of a copy of the file (5 MB at 50,000 allocations).
    text: Arc<Vec<u8>>,
    /// At most one record per key, in key order.
    entries: Arc<Vec<Entry<K>>>,
    /// Lines in the file, the header aside (records, overridden records and tombstones):
    /// when it outgrows the records, the file is rewritten.
    pub lines: usize,
}

/// Where a record is in its index ([`Index::join`]): four bytes a listed file where its
/// [`RecordRef`] is seventy-two, made when it is looked at (issue 47: a claim's peak).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At(u32);

/// A change to an index, as a look-up learnt it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change<K = IpAddr> {
    /// This key's file now has this record.
    Set(K, Record),
    /// This key has no file any more.
    Forget(K),
}

impl<K: Key> Change<K> {
    fn address(&self) -> K {
        match self {
            Change::Set(address, _) | Change::Forget(address) => *address,
        }
    }
}

impl<K: Key> Index<K> {
    /// An empty index for the device `dev`.
    pub fn empty(dev: u64) -> Index<K> {
        Index {
            dev,
            text: Arc::new(Vec::new()),
            entries: Arc::new(Vec::new()),
            lines: 0,
        }
    }

    /// Parses an index file for the device `dev`. A file of another device, another format
    /// or none at all gives an empty index; a malformed line, or a last line without its
    /// newline (a torn append), is skipped.
    pub fn parse(text: Vec<u8>, dev: u64) -> Index<K> {
        let mut index = Index::empty(dev);
        let Some(header_end) = memchr::memchr(b'\n', &text) else {
            return index;
        };
        let same_device = text[..header_end]
            .strip_prefix(HEADER.as_bytes())
            .and_then(|rest| rest.strip_prefix(b" "))
            .and_then(parse_u64)
            == Some(dev);
        if !same_device {
            return index;
        }
        // Every line as an entry, a tombstone as one with no owner ([`Entry::gone`]), in
        // one vector that is then sorted and compacted in place and kept: the entries are
        // never copied, and the file's bytes are kept as read (issue 47: a copy of each,
        // beside the list of lines, had a new owner's claim at 37 MB at 50,000).
        let body = header_end + 1;
        let mut entries: Vec<Entry<K>> =
            Vec::with_capacity(memchr::memchr_iter(b'\n', &text[body..]).count());
        let mut start = body;
        // A last line without its newline (a torn append) is not among them.
        for end in memchr::memchr_iter(b'\n', &text[body..]).map(|at| body + at) {
            let line = &text[start..end];
            if !line.is_empty() {
                index.lines += 1;
                if let Some((address, entry)) = parse_line(line, start) {
                    entries.push(entry.unwrap_or(Entry::gone(address)));
                }
            }
            start = end + 1;
        }
        // Stable: lines of one key stay in file order, and the last one counts. A rewritten
        // file is already in order, and appends are few, so this is close to linear.
        entries.sort_by_key(|e| e.address);
        let mut kept = 0;
        for i in 0..entries.len() {
            let last_of_key = entries
                .get(i + 1)
                .is_none_or(|next| next.address != entries[i].address);
            if last_of_key && !entries[i].is_gone() {
                entries[kept] = entries[i];
                kept += 1;
            }
        }
        entries.truncate(kept);
        entries.shrink_to_fit();
        index.entries = Arc::new(entries);
        index.text = Arc::new(text);
        index
    }

    /// How many files the index has records for.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Does the index hold no record?
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The record of `address`, if any.
    pub fn get(&self, address: K) -> Option<RecordRef<'_>> {
        let i = self
            .entries
            .binary_search_by_key(&address, |e| e.address)
            .ok()?;
        Some(self.record(&self.entries[i]))
    }

    /// Where the record of each of `addresses` (ascending) is ([`Index::at`] reads it), and
    /// the recorded addresses that are not among them: one merge of two sorted lists, no
    /// look-up per address.
    pub fn join(&self, addresses: &[K]) -> (Vec<Option<At>>, Vec<K>) {
        let mut records = Vec::with_capacity(addresses.len());
        let mut unlisted = Vec::new();
        let mut entries = self.entries.iter().enumerate().peekable();
        for &address in addresses {
            while let Some((_, gone)) = entries.next_if(|(_, e)| e.address < address) {
                unlisted.push(gone.address);
            }
            records.push(
                entries
                    .next_if(|(_, e)| e.address == address)
                    .and_then(|(at, _)| u32::try_from(at).ok().map(At)),
            );
        }
        unlisted.extend(entries.map(|(_, e)| e.address));
        (records, unlisted)
    }

    /// The record at `at`, as [`Index::join`] found it.
    pub fn at(&self, at: At) -> RecordRef<'_> {
        self.record(&self.entries[at.0 as usize])
    }

    fn record(&self, entry: &Entry<K>) -> RecordRef<'_> {
        let (start, end) = (entry.owner.0 as usize, entry.owner.1 as usize);
        RecordRef {
            stamp: entry.stamp,
            // Not UTF-8 (the index was edited): an owner that matches no filter's text, so
            // that `text_matches` asks for the file to be read.
            owner: std::str::from_utf8(&self.text[start..end]).unwrap_or(""),
            whole: entry.whole,
            created: entry.created,
        }
    }

    /// Is the file mostly history, so that it is worth rewriting whole?
    pub fn wants_rewrite(&self, appended: usize) -> bool {
        self.lines + appended > 2 * self.len() + 1024
    }

    /// The whole file with `changes` applied, records in address order (the tests' view of
    /// [`Index::render_to`]).
    #[cfg(test)]
    pub fn render_with(&self, changes: &[Change<K>]) -> String {
        let mut text = String::new();
        let _ = self.render_to(changes, &mut |chunk| {
            text.push_str(chunk);
            Ok(())
        });
        text
    }

    /// [`Index::render_with`], handed to `sink` a piece at a time (64 KiB or so): a pool of
    /// 50,000 files' index is written without the whole of it in memory at once.
    pub fn render_to(
        &self,
        changes: &[Change<K>],
        sink: &mut dyn FnMut(&str) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        const PIECE: usize = 64 * 1024;
        let mut changes: Vec<&Change<K>> = changes.iter().collect();
        changes.sort_by_key(|c| c.address());
        let mut text = String::with_capacity(PIECE + 1024);
        let _ = writeln!(text, "{HEADER} {}", self.dev);
        let mut entries = self.entries.iter().peekable();
        let mut changes = changes.into_iter().peekable();
        loop {
            if text.len() >= PIECE {
                sink(&text)?;
                text.clear();
            }
            let next_entry = entries.peek().map(|e| e.address);
            let next_change = changes.peek().map(|c| c.address());
            let change = match (next_entry, next_change) {
                (None, None) => break,
                (Some(a), Some(b)) if b <= a => {
                    if a == b {
                        entries.next();
                    }
                    changes.next().expect("peeked")
                }
                (Some(_), _) => {
                    let entry = entries.next().expect("peeked");
                    self.record(entry).line(entry.address, &mut text);
                    continue;
                }
                (None, Some(_)) => changes.next().expect("peeked"),
            };
            // The last change of an address wins.
            let mut change = change;
            while let Some(later) = changes.next_if(|c| c.address() == change.address()) {
                change = later;
            }
            if let Change::Set(address, record) = change {
                record.as_ref().line(*address, &mut text);
            }
        }
        sink(&text)
    }

    /// The lines that append `changes` to the file.
    pub fn render_changes(changes: &[Change<K>]) -> String {
        let mut text = String::new();
        for change in changes {
            match change {
                Change::Set(address, record) => record.as_ref().line(*address, &mut text),
                Change::Forget(address) => {
                    let _ = writeln!(text, "{address} -");
                }
            }
        }
        text
    }
}

/// Does the recorded `record` say exactly what `learnt` does?
pub fn same(record: Option<RecordRef<'_>>, learnt: &Record) -> bool {
    record == Some(learnt.as_ref())
}

#[cfg(test)]
mod tests;
