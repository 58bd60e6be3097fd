//! The owner-index journal of one allocations directory (`.index/journal`): an append-only
//! text log that says which owner holds which allocation file, and for which states of the
//! directory that knowledge is complete. Pure parsing and reasoning; `fs.rs` does the I/O.
//!
//! Lines (each ends in `\n`; anything else, a torn tail included, is skipped):
//!
//! ```text
//! F <pool> <address> <inode> <owner key, 16 hex>   the file of <pool>-<address> with that inode is that owner's
//! F <pool> <address> 0 -                           that file was deleted: forget what was known of it
//! V <pool> <version>                               after reading every file of <pool>, the directory was at <version>
//! E <before> <after>                               ipamctl changed the directory from <before> to <after>
//! ```
//!
//! A *version* is the directory's change time (ctime, in nanoseconds), which every create,
//! rename and unlink of an entry moves forward and which no user-space call can set. The
//! facts of a pool are trusted for the directory's current version only if that version is
//! reachable from one of the pool's `V` roots through `E` edges: every change since the pool
//! was last read in full was made by ipamctl, which logged what it did. Any other change (a
//! `git pull`, a hand edit, a crashed ipamctl that did not log its edge) breaks the chain;
//! the next look-up then reads every file changed since the latest version the journal was
//! complete for ([`Journal::settled`]), and logs a new root.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use crate::store::{IndexEntry, IndexMap, Version};

/// What a journal says.
#[derive(Debug, Default)]
pub struct Journal {
    facts: HashMap<String, IndexMap>,
    roots: HashMap<String, HashSet<Version>>,
    edges: HashMap<Version, Vec<Version>>,
    /// Lines read, valid or not.
    pub lines: usize,
    /// `F` lines read, of every pool.
    pub fact_lines: usize,
    /// `E` lines read: history that compaction folds away.
    pub edge_lines: usize,
}

impl Journal {
    /// Reads a journal; later lines win, malformed lines are skipped.
    pub fn parse(text: &str) -> Journal {
        Journal::parse_for(text, None)
    }

    /// Reads a journal, keeping the facts and roots of `pool` only (all of them if `None`):
    /// a look-up needs one pool, and skipping the others' lines unparsed is most of its speed.
    pub fn parse_for(text: &str, pool: Option<&str>) -> Journal {
        let mut journal = Journal::default();
        // A final line without its newline may be torn: it is not read at all.
        let complete = match text.rfind('\n') {
            Some(end) => &text[..=end],
            None => "",
        };
        if let Some(pool) = pool {
            let facts = IndexMap::with_capacity(complete.len() / 48);
            journal.facts.insert(pool.to_owned(), facts);
        }
        for line in complete.split_terminator('\n') {
            journal.lines += 1;
            if line.starts_with("F ") {
                journal.fact_lines += 1;
            } else if line.starts_with("E ") {
                journal.edge_lines += 1;
            }
            match pool {
                // The hot case: a fact of the wanted pool goes straight into its map.
                Some(pool) if line.starts_with("F ") => {
                    if let Some(rest) = line[2..].strip_prefix(pool)
                        && let Some(fields) = rest.strip_prefix(' ')
                        && let Some(facts) = journal.facts.get_mut(pool)
                    {
                        read_fact(facts, fields);
                    }
                }
                Some(pool) if line.starts_with("V ") => {
                    if line[2..]
                        .strip_prefix(pool)
                        .is_some_and(|r| r.starts_with(' '))
                    {
                        journal.read_line(line);
                    }
                }
                _ => {
                    journal.read_line(line);
                }
            }
        }
        journal
    }

    fn read_line(&mut self, line: &str) -> Option<()> {
        let mut fields = line.split(' ');
        match fields.next()? {
            "F" => {
                let pool = fields.next()?;
                if pool.is_empty() {
                    return None;
                }
                if !self.facts.contains_key(pool) {
                    self.facts.insert(pool.to_owned(), IndexMap::new());
                }
                let facts = self.facts.get_mut(pool)?;
                read_fact(facts, line.get(2 + pool.len() + 1..)?);
            }
            "V" => {
                let (pool, version) = (fields.next()?, version(fields.next()?)?);
                if fields.next().is_some() || pool.is_empty() {
                    return None;
                }
                self.roots
                    .entry(pool.to_owned())
                    .or_default()
                    .insert(version);
            }
            "E" => {
                let (before, after) = (version(fields.next()?)?, version(fields.next()?)?);
                if fields.next().is_some() {
                    return None;
                }
                self.edges.entry(before).or_default().push(after);
            }
            _ => {}
        }
        Some(())
    }

    /// What is known of `pool`'s allocations: address → (inode, owner key).
    pub fn facts(&mut self, pool: &str) -> IndexMap {
        self.facts.remove(pool).unwrap_or_default()
    }

    /// Is what the journal knows of `pool` complete for the directory at `version`?
    pub fn trusted(&self, pool: &str, version: Version) -> bool {
        self.reachable(pool).contains(&version)
    }

    /// The latest directory version for which what the journal knows of `pool` was
    /// complete: a file not changed since then is as its fact says.
    pub fn settled(&self, pool: &str) -> Option<Version> {
        self.reachable(pool).into_iter().max()
    }

    /// Every version reachable from `pool`'s roots through logged changes.
    fn reachable(&self, pool: &str) -> HashSet<Version> {
        let mut seen: HashSet<Version> = self.roots.get(pool).cloned().unwrap_or_default();
        let mut todo: Vec<Version> = seen.iter().copied().collect();
        while let Some(v) = todo.pop() {
            for &next in self.edges.get(&v).into_iter().flatten() {
                if seen.insert(next) {
                    todo.push(next);
                }
            }
        }
        seen
    }

    /// The same knowledge in as few lines as possible: every fact, and a root at `version`
    /// for each pool trusted there. Untrusted pools lose their roots (they were useless).
    pub fn compacted(&self, version: Version) -> String {
        let mut text = String::new();
        let mut pools: Vec<&String> = self.facts.keys().chain(self.roots.keys()).collect();
        pools.sort();
        pools.dedup();
        for pool in pools {
            let mut facts: Vec<_> = self.facts.get(pool).into_iter().flatten().collect();
            facts.sort();
            for (&address, &(stamp, key)) in facts {
                text.push_str(&fact_line(
                    pool,
                    &IndexEntry {
                        address,
                        stamp,
                        key,
                    },
                ));
            }
            if self.trusted(pool, version) {
                text.push_str(&root_line(pool, version));
            }
        }
        text
    }
}

/// The fields of an `F` line after its pool: `<address> <inode> <key>` or `<address> 0 -`.
/// One byte-wise pass: a look-up reads one of these per allocation of the pool.
fn read_fact(facts: &mut IndexMap, fields: &str) -> Option<()> {
    let mut bytes = fields.as_bytes();
    let mut octets = [0u8; 4];
    for (i, octet) in octets.iter_mut().enumerate() {
        let end = if i < 3 { b'.' } else { b' ' };
        let (value, rest) = number(bytes, end, 3)?;
        *octet = u8::try_from(value).ok()?;
        bytes = rest;
    }
    let address = Ipv4Addr::from(octets);
    let (stamp, key) = number(bytes, b' ', 20)?;
    match key {
        b"-" if stamp == 0 => {
            facts.remove(&address);
        }
        _ if key.len() == 16 && stamp != 0 => {
            let key = key.iter().try_fold(0u64, |k, &b| {
                Some(k << 4 | u64::from(char::from(b).to_digit(16)?))
            })?;
            facts.insert(address, (stamp, key));
        }
        _ => return None,
    }
    Some(())
}

/// Decimal digits up to `end` (at most `max` of them, no leading zero but a lone `0`), and
/// the bytes after `end`.
fn number(bytes: &[u8], end: u8, max: usize) -> Option<(u64, &[u8])> {
    let len = bytes.iter().position(|&b| b == end)?;
    let digits = &bytes[..len];
    if digits.is_empty() || digits.len() > max || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let value = digits.iter().try_fold(0u64, |n, &b| {
        let digit = char::from(b).to_digit(10)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })?;
    Some((value, &bytes[len + 1..]))
}

/// `F` line of a fact; a `stamp` of 0 writes the deletion form.
pub fn fact_line(pool: &str, e: &IndexEntry) -> String {
    if e.stamp == 0 {
        format!("F {pool} {} 0 -\n", e.address)
    } else {
        format!("F {pool} {} {} {:016x}\n", e.address, e.stamp, e.key)
    }
}

/// `V` line.
pub fn root_line(pool: &str, version: Version) -> String {
    format!("V {pool} {version}\n")
}

/// `E` line.
pub fn edge_line(before: Version, after: Version) -> String {
    format!("E {before} {after}\n")
}

fn version(s: &str) -> Option<Version> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn later_facts_win_and_deletions_forget() {
        let key = "00000000000000ff";
        let text = format!(
            "F p 10.0.0.1 5 {key}\nF p 10.0.0.2 6 {key}\nF p 10.0.0.1 0 -\nF q 10.0.0.1 7 {key}\n"
        );
        let mut j = Journal::parse(&text);
        let p = j.facts("p");
        assert_eq!(p.len(), 1);
        assert_eq!(p.get(&addr("10.0.0.2")), Some(&(6, 255)));
        assert_eq!(j.facts("q").get(&addr("10.0.0.1")), Some(&(7, 255)));
    }

    #[test]
    fn malformed_and_torn_lines_are_skipped() {
        let key = "00000000000000ff";
        let text = format!(
            "F p 10.0.0.01 5 {key}\nF p 10.0.0.1 +5 {key}\nF p 10.0.0.1 5 {key} x\nF p 10.0.0.1 5 {key}F p 10.0.0.3 1 {key}\ngarbage\nF p 10.0.0.4 3 {key}"
        );
        let mut j = Journal::parse(&text);
        assert!(j.facts("p").is_empty());
        assert_eq!(j.lines, 5);
    }

    #[test]
    fn a_pool_filter_skips_other_pools_and_prefixes() {
        let key = "00000000000000ff";
        let text = format!("F p 10.0.0.1 5 {key}\nF pq 10.0.0.2 6 {key}\nV pq 9\nV p 8\nE 8 9\n");
        let mut j = Journal::parse_for(&text, Some("p"));
        assert_eq!(j.facts("p").len(), 1);
        assert!(j.facts("pq").is_empty());
        assert!(j.trusted("p", 9) && !j.trusted("pq", 9));
        assert_eq!((j.lines, j.fact_lines, j.edge_lines), (5, 2, 1));
    }

    #[test]
    fn trust_needs_a_chain_of_logged_changes_from_a_root() {
        let j = Journal::parse("V p 100\nE 100 200\nE 200 300\nE 500 600\n");
        assert!(j.trusted("p", 100));
        assert!(j.trusted("p", 300));
        assert!(!j.trusted("p", 250), "a change nobody logged");
        assert!(
            !j.trusted("p", 600),
            "a chain that starts at an unverified state"
        );
        assert!(!j.trusted("q", 100), "roots are per pool");
        assert_eq!(j.settled("p"), Some(300));
        assert_eq!(j.settled("q"), None);
    }

    #[test]
    fn compaction_keeps_facts_and_roots_of_trusted_pools() {
        let key = "00000000000000ff";
        let text = format!(
            "F p 10.0.0.1 5 {key}\nF p 10.0.0.1 6 {key}\nV p 1\nE 1 2\nV q 7\nF q 10.0.0.9 3 {key}\n"
        );
        let j = Journal::parse(&text);
        let compact = j.compacted(2);
        assert_eq!(
            compact,
            format!("F p 10.0.0.1 6 {key}\nV p 2\nF q 10.0.0.9 3 {key}\n")
        );
        let mut again = Journal::parse(&compact);
        assert!(again.trusted("p", 2) && !again.trusted("q", 2));
        assert_eq!(again.facts("p").len(), 1);
    }
}
