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
//!   failed (a dual-stack claim whose second pool was full, a group the server broke and
//!   ran again unit by unit); noted addresses stay noted until the batch ends.
//! - Never a wrong exhaustion: a search that finds nothing free but noted addresses tries
//!   those last, and the database arbitrates (waiting for the sibling's `COMMIT` if need
//!   be). A search jumps past a run of noted addresses without looking at them, so before
//!   it answers "nothing" it walks the pool once more from the bottom without this advice,
//!   trying each address the database sees free (`free.rs`). Without that walk, a batch
//!   of `--jobs 4` filling two pools answered exit 5 while a pair was still free, in 5 of
//!   48 runs of `tests/pg_batch_group.rs` on a loaded machine.
//! - A worker's first try is the lowest address no worker has handed out, from the pool's
//!   hint, without a gap query: the claim's own insert checks it (a dry run, which inserts
//!   nothing, asks whether it is held: `engine/allocate/claim_loop.rs`). Only after a lost try
//!   does the search read the pool again ([`super::free::Free`]).
//! - In a pool with `pick: hashed` a worker searches from its owner's start up, then from the
//!   bottom up to it (two ranges, neither the whole pool): its first try is the lowest
//!   address at or above the start that no worker has handed out, and the rest as above.
//!   Owners' starts are spread over the pool, so workers seldom meet there at all.
//! - Claims of a batch with siblings never move the pool's hint: an address a sibling has
//!   not committed may lie below theirs, so a claim proves nothing about the addresses
//!   below it. Once every worker is done, the batch moves it itself
//!   ([`super::free::settle_hint`]): one gap query from the hint, over rows that are all
//!   committed by then, for each pool the batch claimed from. Without that, a pool filled
//!   only by `--jobs` batches would keep its hint where it was, and every later batch's
//!   workers would each walk every row above it (a stale hint under 100,000 rows cost each
//!   worker's first claim 45-70 ms).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::model::candidates::Span;

/// The addresses the workers of one batch handed out, by (namespace, pool).
#[derive(Debug, Default)]
pub struct Siblings {
    pools: Mutex<HashMap<(String, String), Handed>>,
    /// The pools the workers searched whole, with the first and last candidate (ordinals)
    /// and the family (IPv6 or not), and whether a worker claimed from each since the
    /// batch's end last looked: those hints move at the batch's end.
    searched: Mutex<HashMap<(String, String), Searched>>,
}

/// A pool the workers searched whole ([`Siblings::searched`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Searched {
    pub first: u128,
    pub last: u128,
    pub v6: bool,
    pub claimed: bool,
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
        handed.cover(first, last);
    }

    /// Notes that a worker searches pool (`ns`, `pool`) whole, whose candidates run from
    /// `spans`' first to its last.
    pub(super) fn searching(&self, ns: &str, pool: &str, spans: &[Span], v6: bool) {
        let (Some(&(first, _)), Some(&(_, last))) = (spans.first(), spans.last()) else {
            return;
        };
        let mut searched = self.searched.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ns.to_owned(), pool.to_owned());
        searched.entry(key).or_insert(Searched {
            first,
            last,
            v6,
            claimed: false,
        });
    }

    /// Notes that a worker claimed an address of pool (`ns`, `pool`).
    pub(super) fn claimed(&self, ns: &str, pool: &str) {
        let mut searched = self.searched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = searched.get_mut(&(ns.to_owned(), pool.to_owned())) {
            s.claimed = true;
        }
    }

    /// The pools searched whole and claimed from since the last call, by (namespace, pool).
    pub(super) fn take_claimed(&self) -> Vec<((String, String), Searched)> {
        let mut searched = self.searched.lock().unwrap_or_else(|e| e.into_inner());
        let mut claimed = Vec::new();
        for (key, s) in searched.iter_mut().filter(|(_, s)| s.claimed) {
            claimed.push((key.clone(), *s));
            s.claimed = false;
        }
        claimed
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

    /// Adds `first..=last` whole, joining every run it overlaps or touches: one change of
    /// the map, however long the range (a gap query may pass over 100,000 rows).
    fn cover(&mut self, first: u128, last: u128) {
        let mut lo = first;
        let mut hi = last;
        // The run that starts at or below `first` and reaches it (or the address before it).
        if let Some((&f, &l)) = self.0.range(..=first).next_back()
            && l.checked_add(1).is_none_or(|n| n >= first)
        {
            lo = f;
            hi = hi.max(l);
        }
        // Every run that starts inside the range or right after it.
        let end = last.saturating_add(1);
        let inside: Vec<u128> = self.0.range(lo..=end).map(|(&f, _)| f).collect();
        for f in inside {
            if let Some(l) = self.0.remove(&f) {
                hi = hi.max(l);
            }
        }
        self.0.insert(lo, hi);
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
    fn a_covered_range_joins_the_runs_it_overlaps_or_touches_and_no_others() {
        let mut h = Handed::default();
        for a in [1, 2, 5, 9, 10, 20] {
            h.note(a);
        }
        h.cover(3, 8);
        assert_eq!(
            h.0.iter().map(|(&f, &l)| (f, l)).collect::<Vec<_>>(),
            [(1, 10), (20, 20)]
        );
        h.cover(12, 13);
        h.cover(30, 40);
        h.cover(35, 50);
        assert_eq!(
            h.0.iter().map(|(&f, &l)| (f, l)).collect::<Vec<_>>(),
            [(1, 10), (12, 13), (20, 20), (30, 50)]
        );
        h.cover(0, u128::MAX);
        assert_eq!(h.0.into_iter().collect::<Vec<_>>(), [(0, u128::MAX)]);
        // What a covered range holds is what noting each address would hold.
        let (mut one, mut each) = (Handed::default(), Handed::default());
        for a in [4, 6, 15] {
            one.note(a);
            each.note(a);
        }
        one.cover(5, 14);
        for a in 5..=14 {
            if each.first_gap(a) == Some(a) {
                each.note(a);
            }
        }
        assert_eq!(one.0, each.0);
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
