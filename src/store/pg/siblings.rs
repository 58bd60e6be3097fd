//! The workers of one batch on several connections (`allocate -f --jobs N`), keeping out
//! of each other's way: the addresses each has handed out, shared in the process.
//!
//! # Why
//!
//! A claim picks the lowest address its gap query sees free, and a row another transaction
//! inserted but has not committed looks free. Two processes that pick the same address
//! meet at the primary key: the second waits for the first's `COMMIT`, then moves on. A
//! batch's workers run their claims in groups (`group.rs`), so a worker that picked its
//! sibling's uncommitted address would wait for a whole group, and two that each picked
//! the other's would deadlock until the server broke one group. They are one process, so
//! they need not guess: each address a worker hands out is noted here, and its siblings
//! hand out the next one no worker has.
//!
//! # What it is and is not
//!
//! - Advice, like the pool's hint: the database's constraints still decide every claim. An
//!   address noted here may be taken by another process, or left free by a unit that
//!   failed; noted addresses stay noted until the batch ends (a hole left by a failed unit
//!   is filled by a later claim, not by this batch).
//! - Never a wrong exhaustion: a search that finds nothing free but noted addresses tries
//!   those last, and the database arbitrates (waiting for the sibling's `COMMIT` if need be).
//! - A worker's first try is the lowest address no worker has handed out, from the pool's
//!   hint, without a gap query: the claim's own insert checks it. Only after a lost try
//!   does the search read the pool again ([`super::free::Free`]).
//! - Claims of a batch with siblings never move the pool's hint: an address a sibling has
//!   not committed may lie below theirs, so a claim proves nothing about the addresses
//!   below it. The first claim after the batch moves it past the batch's addresses.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::model::candidates::Span;

/// The addresses the workers of one batch handed out, by (namespace, pool).
#[derive(Debug, Default)]
pub struct Siblings {
    pools: Mutex<HashMap<(String, String), Handed>>,
}

impl Siblings {
    /// Notes and returns the lowest candidate of `spans` at or above `from` that no worker
    /// has handed out.
    pub(super) fn next_unhanded(
        &self,
        ns: &str,
        pool: &str,
        spans: &[Span],
        from: u128,
    ) -> Option<u128> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        let handed = pools.entry((ns.to_owned(), pool.to_owned())).or_default();
        let found = spans
            .iter()
            .filter(|s| s.1 >= from)
            .find_map(|&(lo, hi)| handed.first_gap(lo.max(from)).filter(|&a| a <= hi))?;
        handed.note(found);
        Some(found)
    }

    /// Notes `address` as handed out; `false` if a worker already had it, with the first
    /// address above it none has.
    pub(super) fn note(&self, ns: &str, pool: &str, address: u128) -> Result<(), Option<u128>> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        let handed = pools.entry((ns.to_owned(), pool.to_owned())).or_default();
        match handed.first_gap(address) {
            Some(a) if a == address => {
                handed.note(address);
                Ok(())
            }
            above => Err(above),
        }
    }
}

impl Siblings {
    /// Notes `first..=last`, which a gap query found taken: no sibling tries them again.
    pub(super) fn taken(&self, ns: &str, pool: &str, first: u128, last: u128) {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        let handed = pools.entry((ns.to_owned(), pool.to_owned())).or_default();
        let mut at = Some(first);
        while let Some(a) = at.and_then(|a| handed.first_gap(a)).filter(|&a| a <= last) {
            handed.note(a);
            at = a.checked_add(1);
        }
    }
}

/// Addresses (ordinals) handed out, as runs: first → last of each, no two touching.
#[derive(Debug, Default)]
struct Handed(BTreeMap<u128, u128>);

impl Handed {
    /// The first address at or above `at` not in a run (`None` past the last address).
    fn first_gap(&self, at: u128) -> Option<u128> {
        match self.0.range(..=at).next_back() {
            Some((_, &last)) if last >= at => last.checked_add(1),
            _ => Some(at),
        }
    }

    /// Adds `a`, which is in no run, joining the runs it touches.
    fn note(&mut self, a: u128) {
        let before = a
            .checked_sub(1)
            .and_then(|p| self.0.range(..=p).next_back().filter(|r| *r.1 == p))
            .map(|r| *r.0);
        let after = a.checked_add(1).and_then(|n| self.0.remove(&n));
        let first = before.unwrap_or(a);
        self.0.insert(first, after.unwrap_or(a));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_is_handed_out_once_lowest_first_within_the_spans() {
        let s = Siblings::default();
        let spans = [(10, 12), (20, 21)];
        let got: Vec<_> = (0..6)
            .map(|_| s.next_unhanded("", "p", &spans, 0))
            .collect();
        assert_eq!(
            got,
            [Some(10), Some(11), Some(12), Some(20), Some(21), None]
        );
        // Another pool, or another namespace, is its own.
        assert_eq!(s.next_unhanded("ns", "p", &spans, 11), Some(11));
        assert_eq!(s.next_unhanded("", "q", &spans, 21), Some(21));
    }

    #[test]
    fn a_noted_address_is_refused_with_the_first_free_one_above_its_run() {
        let s = Siblings::default();
        assert_eq!(s.note("", "p", 5), Ok(()));
        assert_eq!(s.note("", "p", 7), Ok(()));
        assert_eq!(s.note("", "p", 6), Ok(()));
        assert_eq!(s.note("", "p", 5), Err(Some(8)));
        assert_eq!(s.note("", "p", 7), Err(Some(8)));
        assert_eq!(s.next_unhanded("", "p", &[(0, 100)], 4), Some(4));
        assert_eq!(s.next_unhanded("", "p", &[(0, 100)], 4), Some(8));
        assert_eq!(s.note("", "p", u128::MAX), Ok(()));
        assert_eq!(s.note("", "p", u128::MAX), Err(None));
    }

    #[test]
    fn runs_join_whatever_order_addresses_come_in() {
        let mut h = Handed::default();
        for a in [3, 1, 2, 7, 5, 6, 0] {
            h.note(a);
        }
        assert_eq!(h.0.into_iter().collect::<Vec<_>>(), [(0, 3), (5, 7)]);
    }
}
