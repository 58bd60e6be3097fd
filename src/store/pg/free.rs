//! The lowest free address without reading the pool: an indexed gap query per candidate
//! span, starting at the pool's low-water hint.
//!
//! The hint says "every candidate below this address was taken when I was written". It is
//! advice: a claim still has to win its insert. It stays true because every release lowers
//! it in the release's own statement and bumps the pool's `epoch`, and a claim moves it up
//! in its own statement (so never ahead of a claim that rolls back) only if the epoch it
//! read is unchanged, i.e. no address was freed since its gap query looked, and only past
//! the address the gap query handed out, none passed over ([`super::HintRead`]). A hint
//! that is wrong anyway (rows deleted by hand) costs at most a higher address than the
//! lowest for a while, never a wrong exhaustion: when the query from the hint finds
//! nothing, it looks again from the bottom.
//! `pg_store::the_hint_never_passes_a_free_address_while_claims_and_releases_race` checks
//! it with claims and releases racing (without the epoch check it fails).
//!
//! A pool with `pick: hashed` asks for two ranges, from the owner's start up and from the
//! bottom up to it (`engine/allocate/pick.rs`), neither of them the whole pool: such a
//! search starts at its range's first candidate, and neither reads nor moves the hint. The
//! hint stays true under it: a hashed claim only takes addresses, and its releases lower
//! the hint as any release does.
//!
//! Both families alike: `inet` orders and adds (`address + 1`) IPv6 addresses as it does
//! IPv4 ones, so the gap query walks the same index and never enumerates a prefix; the
//! cursor is an ordinal ([`crate::model::candidates::ordinal`]).

use std::net::IpAddr;

use super::siblings::{Searched, Siblings};
use super::typed::Typed;
use super::{HintRead, PgStore};
use crate::error::Result;
use crate::model::candidates::{Candidates, Span, address, ordinal};

/// The first free address in `[$3, $4]` of pool ($1, $2): `$3` itself if free, else the
/// address after the first allocation from `$3` on whose successor is not allocated. One
/// ordered walk of the primary key from `$3`, which stops at the first gap.
const GAP_QUERY: &str = "
SELECT CASE
    WHEN NOT EXISTS (SELECT 1 FROM ipamctl.allocations
                     WHERE namespace = $1 AND pool = $2 AND address = $3)
    THEN $3
    ELSE (SELECT s.address + 1
          FROM (SELECT address, lead(address) OVER (ORDER BY address) AS next
                FROM ipamctl.allocations
                WHERE namespace = $1 AND pool = $2 AND address >= $3 AND address <= $4) s
          WHERE s.address < $4 AND (s.next IS NULL OR s.next <> s.address + 1)
          ORDER BY s.address
          LIMIT 1)
END";

/// Is `$3` free in pool ($1, $2)? The gap query's first question alone: a fresh backend
/// plans it in a fifth of the time (0.2 ms against 1 ms). Asked of the address after one a
/// claim lost; of the hint, [`HINT_QUERY`] asks it.
const FREE_QUERY: &str = "
SELECT NOT EXISTS (SELECT 1 FROM ipamctl.allocations
                   WHERE namespace = $1 AND pool = $2 AND address = $3)";

/// The pool's hint (`$1`, `$2`), and whether its address is free: [`FREE_QUERY`] for the
/// hint, asked in the same statement (it is the whole answer after a release or a claim).
const HINT_QUERY: &str = "
SELECT h.low_water, h.epoch,
       NOT EXISTS (SELECT 1 FROM ipamctl.allocations a
                   WHERE a.namespace = h.namespace AND a.pool = h.pool
                     AND a.address = h.low_water)
FROM ipamctl.pool_hints h
WHERE h.namespace = $1 AND h.pool = $2";

/// Moves the hint up to the first address from it on that no row holds, if no release
/// bumped its epoch in between: what a claim that passed none over does in its own
/// statement.
const SETTLE_QUERY: &str = "
UPDATE ipamctl.pool_hints SET low_water = $3
WHERE namespace = $1 AND pool = $2 AND epoch = $4 AND low_water IS NOT DISTINCT FROM $5
  AND (low_water IS NULL OR low_water < $3)";

/// Moves the hint of pool (`ns`, `pool`), whose candidates run from `searched.first` to
/// `searched.last`, past the rows above it: a batch with siblings does it once every worker
/// is done (`siblings.rs`), since none of its claims moved it. One gap query from the hint
/// over the whole range (cooling addresses and others' holes count as free, so the hint
/// never passes an address a claim might get), and the update only if the epoch read with
/// the hint is unchanged: a release in between leaves the hint as it put it. The reads
/// share the reading transaction; the update commits on its own. The hint is advice, so a failure only leaves it where it
/// was.
pub(super) fn settle_hint(store: &PgStore, ns: &str, pool: &str, searched: Searched) -> Result<()> {
    let Some(row) = store.single(|c| c.opt(HINT_QUERY, &[&ns, &pool]))? else {
        return Ok(());
    };
    let (low_water, epoch, free): (Option<IpAddr>, i64, bool) =
        (row.get(0), row.get(1), row.get(2));
    // (A hint of no address is "free" to the query: there is no row at NULL.)
    if free && low_water.is_some() {
        return Ok(());
    }
    let from = match low_water {
        Some(h) if h.is_ipv6() != searched.v6 => return Ok(()),
        Some(h) => ordinal(h).max(searched.first),
        None => searched.first,
    };
    if from > searched.last {
        return Ok(());
    }
    let (start, end) = (
        address(searched.v6, from),
        address(searched.v6, searched.last),
    );
    let row = store.single(|c| c.one(GAP_QUERY, &[&ns, &pool, &start, &end]))?;
    let Some(to) = row.get::<_, Option<IpAddr>>(0) else {
        return Ok(());
    };
    store.run(|c| c.exec(SETTLE_QUERY, &[&ns, &pool, &to, &epoch, &low_water]))?;
    Ok(())
}

/// Free candidates of one pool, lowest first, each found by a query when asked for.
pub struct Free<'a> {
    store: &'a PgStore,
    namespace: String,
    pool: String,
    spans: Vec<Span>,
    /// The next address to look from, as an ordinal; `None` once past the last span.
    cursor: Option<u128>,
    /// IPv6 (else IPv4).
    v6: bool,
    whole_pool: bool,
    /// The hint has not been read yet.
    fresh: bool,
    /// The hint's address, as an ordinal, when the statement that read it found it free:
    /// the first scan from it needs no question of its own.
    hint_free: Option<u128>,
    /// The current pass started at the hint, above the first candidate: when it finds
    /// nothing, look again from the bottom.
    from_hint: bool,
    /// With siblings (`siblings.rs`): the first try, the lowest address none of them
    /// handed out, is made.
    guessed: bool,
    /// With siblings: free addresses found that a sibling had handed out, tried once
    /// nothing else is left.
    skipped: std::collections::BTreeSet<u128>,
    /// With siblings: the last walk, from the bottom without their advice, is under way.
    last_walk: bool,
}

impl<'a> Free<'a> {
    pub fn new(
        store: &'a PgStore,
        namespace: &str,
        pool: &str,
        candidates: &Candidates,
        whole_pool: bool,
    ) -> Free<'a> {
        let spans = candidates.spans();
        Free {
            store,
            namespace: namespace.to_owned(),
            pool: pool.to_owned(),
            cursor: spans.first().map(|s| s.0),
            v6: candidates.is_v6(),
            spans,
            whole_pool,
            fresh: true,
            hint_free: None,
            from_hint: false,
            guessed: false,
            skipped: Default::default(),
            last_walk: false,
        }
    }

    /// Reads the pool's hint, and whether its address is free, and remembers the hint for
    /// the claim that follows.
    fn start_at_hint(&mut self) -> Result<()> {
        let (ns, pool) = (self.namespace.as_str(), self.pool.as_str());
        if let Some(siblings) = &self.store.siblings {
            siblings.searching(ns, pool, &self.spans, self.v6);
        }
        let row = match self.store.prefetched_hint(ns, pool) {
            Some(row) => row,
            None => self
                .store
                .single(|c| c.opt(HINT_QUERY, &[&ns, &pool]))?
                .map(|r| (r.get(0), r.get(1), r.get(2))),
        };
        let Some((low_water, epoch, free)) = row else {
            return Ok(());
        };
        let read = HintRead {
            low_water,
            epoch,
            untried: None,
            passed_over: false,
        };
        if let (Some(h), Some(first)) = (read.low_water, self.cursor)
            && h.is_ipv6() == self.v6
        {
            let h = ordinal(h);
            if h > first {
                self.cursor = Some(h);
                self.from_hint = true;
            }
            if h >= first && free {
                self.hint_free = Some(h);
            }
        }
        self.store
            .session()
            .hints_read
            .insert((self.namespace.clone(), self.pool.clone()), read);
        Ok(())
    }

    /// Notes `free` as handed out in the pool's hint record (if the hint was read), for
    /// the claim that tries it: see [`HintRead::passed_over`].
    fn handed_out(&self, free: IpAddr) {
        let mut session = self.store.session();
        let key = (self.namespace.clone(), self.pool.clone());
        if let Some(read) = session.hints_read.get_mut(&key) {
            // A sibling's address below this one may not be committed (`siblings.rs`).
            read.passed_over |= read.untried.is_some() || self.store.siblings.is_some();
            read.untried = Some(free);
        }
    }

    /// Hands out `free` (an ordinal): the cursor moves past it, and the hint record notes it.
    fn hand_out(&mut self, free: u128) -> IpAddr {
        self.cursor = free.checked_add(1);
        let free = address(self.v6, free);
        self.handed_out(free);
        free
    }

    /// The next candidate of a worker with siblings (`siblings.rs`): first the lowest
    /// address none of them handed out, unasked (the claim's insert checks it); then the
    /// free ones the queries find, each only if no sibling has it; last, those a sibling
    /// had, which the database then arbitrates.
    fn beside(&mut self, siblings: &Siblings) -> Option<Result<IpAddr>> {
        let (ns, pool) = (self.namespace.clone(), self.pool.clone());
        if !self.guessed {
            self.guessed = true;
            if let Some(from) = self.cursor
                && let Some(first) = siblings.next_unhanded(&ns, &pool, &self.spans, from)
            {
                return Some(Ok(self.hand_out(first)));
            }
        }
        loop {
            let from = self.cursor;
            match self.scan() {
                Err(e) => return Some(Err(e)),
                Ok(Some(free)) if self.last_walk => return Some(Ok(self.hand_out(free))),
                Ok(Some(free)) => match siblings.note(&ns, &pool, free) {
                    Ok(()) => {
                        // What the queries passed over is taken: no sibling asks again.
                        if let Some(from) = from.filter(|&f| f < free) {
                            siblings.taken(&ns, &pool, from, free - 1);
                        }
                        return Some(Ok(self.hand_out(free)));
                    }
                    Err(above) => {
                        self.skipped.insert(free);
                        self.cursor = above;
                    }
                },
                Ok(None) if self.from_hint => {
                    self.from_hint = false;
                    self.cursor = self.spans.first().map(|s| s.0);
                }
                Ok(None) => {
                    if let Some(last) = self.skipped.pop_first() {
                        return Some(Ok(address(self.v6, last)));
                    }
                    if self.last_walk {
                        return None;
                    }
                    // A jump past addresses siblings handed out (`Err(above)`) never looked
                    // at them, and a sibling's unit that failed, or a group run again unit
                    // by unit, leaves some of them free: before an exhaustion, one walk
                    // from the bottom, each free address the database's to arbitrate.
                    self.last_walk = true;
                    self.cursor = self.spans.first().map(|s| s.0);
                }
            }
        }
    }

    /// The lowest free candidate at or above the cursor, by one query per span.
    fn scan(&mut self) -> Result<Option<u128>> {
        let Some(cursor) = self.cursor else {
            return Ok(None);
        };
        let (ns, pool) = (self.namespace.as_str(), self.pool.as_str());
        if self.spans.iter().any(|s| s.0 <= cursor && cursor <= s.1) {
            if self.hint_free.take() == Some(cursor) {
                return Ok(Some(cursor));
            }
            let at = address(self.v6, cursor);
            let row = self
                .store
                .single(|c| c.one(FREE_QUERY, &[&ns, &pool, &at]))?;
            if row.get::<_, bool>(0) {
                return Ok(Some(cursor));
            }
        }
        for &(lo, hi) in self.spans.iter().filter(|s| s.1 >= cursor) {
            let start = address(self.v6, lo.max(cursor));
            let end = address(self.v6, hi);
            let row = self
                .store
                .single(|c| c.one(GAP_QUERY, &[&ns, &pool, &start, &end]))?;
            if let Some(free) = row.get::<_, Option<IpAddr>>(0) {
                return Ok(Some(ordinal(free)));
            }
        }
        Ok(None)
    }
}

impl Iterator for Free<'_> {
    type Item = Result<IpAddr>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.fresh {
            self.fresh = false;
            if self.whole_pool
                && let Err(e) = self.start_at_hint()
            {
                return Some(Err(e));
            }
        }
        if let Some(siblings) = self.store.siblings.clone() {
            return self.beside(&siblings);
        }
        loop {
            match self.scan() {
                Err(e) => return Some(Err(e)),
                Ok(Some(free)) => return Some(Ok(self.hand_out(free))),
                Ok(None) if self.from_hint => {
                    // Nothing above the hint: make sure nothing below it was freed unseen.
                    self.from_hint = false;
                    self.cursor = self.spans.first().map(|s| s.0);
                }
                Ok(None) => return None,
            }
        }
    }
}
