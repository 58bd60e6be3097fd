//! Owner look-ups and owner-filter queries on the filesystem ([`Queries`]).
//!
//! # Owner look-ups
//!
//! A look-up for owner O in pool P ([`Queries::find_owner`]) asks the layers of [`super`] in
//! its order, each answer resting on files as they are now or on records that the files'
//! present status vouches for:
//! 1. *Hint:* read O's hint, then the one allocation file it names; if that file (read now)
//!    names O at that address, settled, that is O's allocation. Two small reads, whatever
//!    the pool's size: the idempotent path. A wrong or stale hint only costs the next step.
//! 2. *View* (in a batch that has scanned P): the addresses taken, and as hits the files no
//!    event named since the batch saw them whose owner it does not know or knows as O or a
//!    namesake of O ([`OwnerLookup::namesake`]).
//! 3. *Scan* (otherwise): list the directory and `stat` each of P's files; a file whose
//!    status equals its index record exactly is known to belong to the recorded owner
//!    ([`crate::store::fs::owner::index`]); every other file is read (and recorded if it
//!    is old enough), and so are the files that may be O's or a namesake's.
//!
//! Every hit that does not parse or may be in flight is then read again whole. A found
//! allocation is written as O's hint; a look-up that found none leaves what it saw taken
//! for the claim's re-check (`recheck.rs`).
//!
//! A supernet pool's prefix claims have step 3 alone, keyed by prefix
//! ([`Queries::find_prefix_owner`], `prefix_claims.rs`).
//!
//! The uid and owner-filter queries ([`Queries::find_allocations`]) are the same scan over the
//! pools of a scope, reading only the files they return.

use crate::error::Result;
use crate::model::candidates::Candidates;
use crate::model::{Namespace, Owner, OwnerFilter, PoolName};
use crate::store::fs::FsStore;
use crate::store::fs::owner::index;
use crate::store::{Found, FreeIter, ObjectKind, OwnerLookup, PrefixLookup, Queries};

impl Queries for FsStore {
    fn find_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<OwnerLookup> {
        let mut lookup = OwnerLookup::default();
        let Some(dir) = self.dir(ObjectKind::Allocation, ns, false)? else {
            return Ok(lookup);
        };
        let key = owner.key();
        if let Some(address) = self.hint(ns, pool, key) {
            let name = crate::model::allocation_name(pool, address);
            let started = crate::store::fs::allocation::now_ns();
            if let Some(read) = self.read_allocation(&dir, ns, &format!("{name}.yaml"))?
                && read.settled(started)
                && let Ok(m) = read.parsed
                && m.spec.owner == *owner
                && m.spec.address == address
            {
                lookup.held = Some(m);
                return Ok(lookup);
            }
        }
        // A batch's re-check reads what its view saw change since (`view.rs`), not a listing
        // against what this saw taken: nothing to remember. (Were the view dropped
        // meanwhile, the re-check would read every file: slow, never wrong.)
        let mut appeared = None;
        let (hits, listed_taken) = match self.scan_view(&dir, ns, pool, owner)? {
            Some((taken, hits)) => {
                lookup.taken = taken;
                (hits, Vec::new())
            }
            None => {
                // Before the listing, for the re-check.
                appeared = self.watch_for_recheck(&dir);
                let listed = self.names_and_index(&dir, ns, pool.as_str())?;
                let text = index::owner_text(owner);
                // The owner's files and its namesakes': the name is one identity per pool.
                let name = index::name_text(&text);
                let scanned = self.scan(&dir, ns, pool.as_str(), listed, &|t| {
                    index::name_text(t) == name
                })?;
                lookup.taken = scanned.taken.iter().copied().collect();
                (scanned.hits, scanned.taken)
            }
        };
        for (address, name, mut parsed, in_flight) in hits {
            if parsed.is_err() || in_flight {
                match self.read_whole(&dir, ns, &format!("{name}.yaml"))? {
                    Some(again) => parsed = again.parsed.map(Box::new),
                    // Removed meanwhile: nobody's.
                    None => continue,
                }
            }
            match parsed {
                Ok(m) if m.spec.owner == *owner && m.spec.address == address => {
                    lookup.held.get_or_insert(*m);
                }
                Ok(m) if m.spec.owner.is_namesake(owner) && m.spec.address == address => {
                    lookup.namesake.get_or_insert(*m);
                }
                Ok(_) => {}
                Err(why) => lookup.broken.push((name, why)),
            }
        }
        if lookup.held.is_some() {
            lookup.namesake = None;
        }
        if let Some(held) = &lookup.held {
            self.write_hint(ns, pool, key, held.spec.address);
        } else {
            self.remember_looked(ns, pool, key, listed_taken, appeared);
        }
        Ok(lookup)
    }

    fn find_allocations(
        &self,
        ns: Option<&Namespace>,
        pool: Option<&PoolName>,
        filter: &OwnerFilter,
    ) -> Result<Vec<Found>> {
        let Some(dir) = self.dir(ObjectKind::Allocation, ns, false)? else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        let wanted = |text: &str| index::text_matches(text, filter);
        // The pools' indexes are read while the directory is listed, as for an owner look-up.
        let (by_pool, mut indexes) = std::thread::scope(|s| {
            let indexes = s.spawn(|| self.load_indexes(&dir, ns, pool));
            let by_pool = self.pool_names(&dir, pool.map(PoolName::as_str));
            let indexes = indexes
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (by_pool, indexes)
        });
        for (pool, addresses) in by_pool? {
            let index = match indexes.remove(&pool) {
                Some(index) => index,
                None => self.load_index(ObjectKind::Allocation, &dir, ns, &pool),
            };
            let hits = self
                .scan(
                    &dir,
                    ns,
                    &pool,
                    (addresses, index, Default::default()),
                    &wanted,
                )?
                .hits;
            found.reserve(hits.len());
            for (_, name, parsed, _) in hits {
                match parsed {
                    Ok(m) if !filter.matches(&m.spec.owner) => {}
                    parsed => found.push(Found {
                        name,
                        parsed: parsed.map(|m| *m),
                    }),
                }
            }
        }
        Ok(found)
    }

    fn find_prefix_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<PrefixLookup> {
        self.find_prefix_claim(ns, pool, owner)
    }

    fn free_candidates<'a>(
        &'a self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        candidates: &Candidates,
        whole_pool: bool,
    ) -> Result<FreeIter<'a>> {
        // The caller cut out what the look-up saw taken; each address is still arbitrated by
        // its claim's create-only write. No low-water hint: a listing is this store's index.
        let _ = (ns, pool, whole_pool);
        let v6 = candidates.is_v6();
        // Lazy over the free spans: a /64's first free address costs no more than a /24's.
        Ok(Box::new(candidates.spans().into_iter().flat_map(
            move |(lo, hi)| (lo..=hi).map(move |a| Ok(crate::model::candidates::address(v6, a))),
        )))
    }
}
