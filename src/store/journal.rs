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
//! `git pull`, a hand edit, a crashed ipamctl that did not log its edge) breaks the chain,
//! and the next look-up reads every file of the pool again.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use crate::store::{IndexEntry, IndexMap, Version};

/// What a journal says.
#[derive(Debug, Default)]
pub struct Journal {
    facts: HashMap<String, IndexMap>,
    roots: HashMap<String, HashSet<Version>>,
    edges: HashMap<Version, Vec<Version>>,
    /// Lines read, valid or not: the measure of when to compact.
    pub lines: usize,
}

impl Journal {
    /// Reads a journal; later lines win, malformed lines are skipped.
    pub fn parse(text: &str) -> Journal {
        let mut journal = Journal::default();
        // A final line without its newline may be torn: it is not read at all.
        let complete = match text.rfind('\n') {
            Some(end) => &text[..=end],
            None => "",
        };
        for line in complete.split_terminator('\n') {
            journal.lines += 1;
            journal.read_line(line);
        }
        journal
    }

    fn read_line(&mut self, line: &str) -> Option<()> {
        let mut fields = line.split(' ');
        match fields.next()? {
            "F" => {
                let (pool, address, stamp, key) = (
                    fields.next()?,
                    fields.next()?,
                    fields.next()?,
                    fields.next()?,
                );
                if fields.next().is_some() || pool.is_empty() {
                    return None;
                }
                let address = strict_addr(address)?;
                let stamp = decimal(stamp)?;
                let facts = self.facts.entry(pool.to_owned()).or_default();
                if stamp == 0 && key == "-" {
                    facts.remove(&address);
                } else if key.len() == 16 && stamp != 0 {
                    facts.insert(address, (stamp, u64::from_str_radix(key, 16).ok()?));
                }
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
        let Some(roots) = self.roots.get(pool) else {
            return false;
        };
        let mut seen: HashSet<Version> = roots.clone();
        let mut todo: Vec<Version> = roots.iter().copied().collect();
        while let Some(v) = todo.pop() {
            if v == version {
                return true;
            }
            for &next in self.edges.get(&v).into_iter().flatten() {
                if seen.insert(next) {
                    todo.push(next);
                }
            }
        }
        false
    }

    /// Number of facts held, over all pools.
    pub fn fact_count(&self) -> usize {
        self.facts.values().map(|f| f.len()).sum()
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

/// An address as `Ipv4Addr` displays it (no leading zeros, nothing else).
fn strict_addr(s: &str) -> Option<Ipv4Addr> {
    let addr: Ipv4Addr = s.parse().ok()?;
    (addr.to_string() == s).then_some(addr)
}

/// ASCII digits only, no sign; `None` on overflow.
fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
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
