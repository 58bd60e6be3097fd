//! The claim loop: the first free candidate of a pool in the pick's order, claimed
//! exclusively, moving on when another claimer wins an address (invariant 1 of
//! [`crate::engine`]), and the error that names who holds an address asked for.

use std::collections::VecDeque;
use std::net::IpAddr;

use super::{Allocated, Request, check_held, pick};
use crate::engine::cooldown;
use crate::engine::identity;
use crate::engine::mac;
use crate::engine::quota;
use crate::error::{Error, Result};
use crate::model::candidates::Candidates;
use crate::model::cooldown::Cooling;
use crate::model::taken::Taken;
use crate::model::{AllocationManifest, Timestamp, allocation_name};
use crate::store::read::read_allocation;
use crate::store::{Claim, FreeIter, ObjectKind, QuotaLock, Store};

/// Where a claim's walk starts and whether it covers the pool whole (see [`claim`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Walk {
    /// The hashed start ([`pick::start`]); `None`: lowest first.
    pub(super) start: Option<u128>,
    /// The candidates are the pool's own (no `--within`, `--reserved`, `--address`, subnet
    /// or cooling address), so that a store may keep a low-water hint from the answer.
    pub(super) whole_pool: bool,
}

/// Claims the first free candidate of `pool` for `req.owner` in the pick's order (`walk`),
/// moving on when another claimer wins an address; `None` when no candidate is left. The
/// caller holds the claim's locks ([`ClaimLock`](crate::store::ClaimLock)), and found that
/// the owner holds nothing here, the pool's allocations holding `taken` as far as its
/// look-up saw. On a store where the owner's constraint arbitrates instead of a lock, a
/// concurrent request for the same owner may win: its allocation is then the answer ([`Claim::OwnerHolds`]).
pub(super) fn claim(
    store: &dyn Store,
    req: &Request,
    candidates: &Candidates,
    taken: &Taken,
    walk: Walk,
    cooling: &Cooling,
) -> Result<Option<Allocated>> {
    let pool = &req.pool;
    let ns = pool.namespace.as_ref();
    let _quota = match admitted(store, req)? {
        Ok(lock) => lock,
        Err(held) => return answer_held(store, req, held).map(Some),
    };
    let free = free_for(store, req, candidates, taken, walk, cooling)?;
    let (mut free, mut put_off, mut lost) = (free, VecDeque::new(), 0u32);
    let expires_at = crate::engine::lease::expiry(store, req.ttl)?;
    loop {
        let addr = match free.next() {
            Some(addr) => addr?,
            None => match put_off.pop_front() {
                Some(addr) => addr,
                None => break,
            },
        };
        let mut manifest = AllocationManifest::new(&pool.name, ns, addr, req.owner.clone());
        manifest.spec.mac = req.mac.and_then(|choice| mac::resolve(choice, addr));
        manifest.spec.expires_at = expires_at;
        // Written once, by the claim: `reconcile` never releases what a live list taken
        // before it could not have named.
        manifest.metadata.creation_timestamp = Some(Timestamp::now());
        if req.dry_run {
            if held_now(store, req, addr)? {
                continue;
            }
            return Ok(Some(Allocated::WouldCreate(manifest)));
        }
        failpoint!("allocate-before-claim");
        match store.claim(ns, &manifest)? {
            Claim::Claimed => {
                // A record left behind (a crash before this) is harmless: its address is
                // held, and the next release of it replaces the record.
                if cooling.own == Some(addr) || cooling.stale.contains(&addr) {
                    cooldown::forget(store, pool, addr)?;
                }
                return Ok(Some(Allocated::Created(manifest)));
            }
            Claim::OwnerHolds(held) => return answer_held(store, req, *held).map(Some),
            // The MAC is the NIC's, whichever address it gets: no other candidate helps.
            Claim::MacHeld(holder) => return Err(mac::held_by(&holder, pool)),
            // A request for the name under another uid won the race (on a database, whose
            // unique index on the name arbitrates it).
            Claim::NameHeld(holder) => {
                return Err(identity::holds_the_name(pool, &req.owner, &holder));
            }
            Claim::AddressTaken if req.address.is_some() => {
                return Err(held_by_other(store, req, addr));
            }
            // Lost the race for this address to another claimer: try the next one. Claimers
            // that lost together would race together for each next address too, every loser
            // paying a durable write for it (64 processes filling a /24 made 3,086 attempts
            // for 254 addresses). So from the second loss on, a random number of free
            // candidates (fewer than 2, 4, … 32) is put off until the others ran out: the
            // first try is still the first free, and nothing free is ever skipped for good.
            Claim::AddressTaken => {
                lost += 1;
                for _ in 0..random_below(1 << (lost - 1).min(5)) {
                    match free.next() {
                        Some(addr) => put_off.push_back(addr?),
                        None => break,
                    }
                }
            }
        }
    }
    Ok(None)
}

/// A new owner's claim counted against its namespace's quotas ([`quota::admit`]): their
/// lock, which the caller holds until its claim is durable; exit 7 at the ceiling, nothing
/// claimed. Or, at the ceiling because a request for the same owner has just claimed (on a
/// database nothing serialises one owner's requests, its unique constraint arbitrates),
/// that claim, which is then the answer (`Err`), as [`Claim::OwnerHolds`] is.
fn admitted(
    store: &dyn Store,
    req: &Request,
) -> Result<std::result::Result<Option<QuotaLock>, AllocationManifest>> {
    match quota::admit_allocation(store, &req.pool, &req.owner, req.dry_run) {
        Ok(lock) => Ok(Ok(lock)),
        Err(over @ Error::QuotaExceeded { .. }) if !req.dry_run => {
            let mut seen = crate::engine::warning::Warnings::default();
            match super::find_owner(store, &req.pool, &req.owner, &mut seen)?.held {
                Some(held) => Ok(Err(held)),
                None => Err(over),
            }
        }
        Err(e) => Err(e),
    }
}

/// The answer to a request whose owner turned out to hold `held` (a concurrent request
/// for it claimed first): checked against the request, its lease renewed.
fn answer_held(store: &dyn Store, req: &Request, held: AllocationManifest) -> Result<Allocated> {
    check_held(&held, req, None)?;
    mac::check_held(store, &held, req.mac, &req.pool, true)?;
    let ns = req.pool.namespace.as_ref();
    let held = crate::engine::lease::renewed(store, ns, held, req.ttl, false)?;
    Ok(Allocated::Existing(held))
}

/// The addresses [`claim`] tries, in order: the address this owner released within the
/// cooldown window (if it may have it), then the free candidates in the pick's order
/// ([`pick::free_in_order`]); with `--address`, that address alone (exit 4 if someone
/// holds it).
fn free_for<'a>(
    store: &'a dyn Store,
    req: &Request,
    candidates: &Candidates,
    taken: &Taken,
    walk: Walk,
    cooling: &Cooling,
) -> Result<FreeIter<'a>> {
    let pool = &req.pool;
    let ns = pool.namespace.as_ref();
    let own = cooling.own.filter(|a| {
        candidates.contains(*a) && !taken.contains(*a) && req.address.is_none_or(|r| r == *a)
    });
    let free: FreeIter<'a> = match req.address {
        // `--address`: that address or nothing, and a holder is a conflict, not exhaustion.
        Some(addr) => {
            let name = allocation_name(&pool.name, addr);
            if taken.contains(addr) || store.get(ObjectKind::Allocation, ns, &name)?.is_some() {
                return Err(held_by_other(store, req, addr));
            }
            Box::new(std::iter::once(Ok(addr)))
        }
        None => {
            // What the look-up saw taken is cut out here; the store finds the rest itself.
            let untaken = candidates
                .clone()
                .without_spans(taken.runs(candidates.is_v6()));
            pick::free_in_order(store, ns, &pool.name, untaken, walk.start, walk.whole_pool)?
        }
    };
    Ok(Box::new(own.map(Ok).into_iter().chain(free)))
}

/// Whether `addr` of the request's pool is held now. A claim's insert checks its address;
/// a dry run inserts nothing, so it asks: a store may hand out an address it has not looked
/// at (a batch's worker on a database tries the lowest one its siblings left, unasked:
/// `siblings.rs`), and "would claim" an address someone holds is no answer.
fn held_now(store: &dyn Store, req: &Request, addr: IpAddr) -> Result<bool> {
    let name = allocation_name(&req.pool.name, addr);
    let ns = req.pool.namespace.as_ref();
    Ok(store.get(ObjectKind::Allocation, ns, &name)?.is_some())
}

/// A random number below `n` (a power of two, at most 256).
fn random_below(n: u32) -> u32 {
    u32::from(uuid::Uuid::new_v4().as_bytes()[0]) % n
}

pub(super) fn held_by_other(store: &dyn Store, req: &Request, addr: IpAddr) -> Error {
    let name = allocation_name(&req.pool.name, addr);
    let holder = match read_allocation(store, req.pool.namespace.as_ref(), &name) {
        Ok(Some(Ok(m))) => format!("by `{}`", m.spec.owner),
        _ => "already".to_owned(),
    };
    Error::conflict(format!("{addr} in pool `{}` is held {holder}", req.pool))
}
