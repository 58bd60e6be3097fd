//! Leases: claims that lapse unless their owner renews them (`spec.expiresAt`).
//!
//! - **Claiming.** `allocate --ttl D` (a batch line's `ttl`, the API's) writes `expiresAt`
//!   as the store's clock plus `D` ([`crate::store::Queries::clock`]: this machine's on the
//!   file store, the database server's on PostgreSQL).
//! - **Renewing.** The owner asking again with a TTL gets the same address and a new
//!   `expiresAt` ([`renewed`]), under its claim locks: on the file store the owner's lock,
//!   which every release of the owner takes too, and the file is read again under it; on
//!   PostgreSQL an `UPDATE` guarded by the row's bytes. `ipamctl renew` only renews: a
//!   lease that has lapsed and been released is exit 3 there, never a new claim.
//! - **Lapsing.** A lease whose `expiresAt` plus a grace has passed is released by
//!   `reconcile --expired --apply` (or a server's reaper) through the guarded release
//!   ([`crate::engine::release`]) with the store judging the lapse again at the delete
//!   ([`crate::store::Claims::release`]'s `lapsed`): on the file store under the owner's
//!   lock with the file read again, on PostgreSQL in the `DELETE`'s own condition on the
//!   server's clock. A renewal acknowledged before that moment moved `expiresAt` on, so the
//!   release finds nothing to do; a claim made after the release is another file or row
//!   (a new `expiresAt`, or another owner) and is never deleted by it.
//! - **Clocks.** Hosts that share a state directory through git each judge by their own
//!   clock: the grace ([`DEFAULT_GRACE`]) is the margin for their skew and for a renewal
//!   in flight.

use std::time::Duration;

use crate::engine::list::{Query, collect};
use crate::engine::release::{Released, release_lapsed};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::{AllocationManifest, Namespace, PoolName, PoolRef, Timestamp};
use crate::store::Store;

/// The grace after `expiresAt` before `reconcile --expired` releases a lease: a renewal
/// late by less than this (a slow CI runner, a clock a little behind) still keeps it.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(300);

/// The shortest and longest TTL a claim takes.
const TTL_RANGE: (Duration, Duration) = (
    Duration::from_secs(1),
    Duration::from_secs(10 * 366 * 24 * 3600),
);

/// `--ttl` (or a batch line's `ttl`) as a duration: `90s`, `15m`, `1h 30m`, `7d`; exit 2
/// naming the flag outside one second to ten years.
pub fn parse_ttl(flag: &str, text: &str) -> Result<Duration> {
    let ttl = humantime::parse_duration(text.trim()).map_err(|e| {
        Error::invalid(
            flag,
            format!(
                "`{}` is not a duration ({e}); e.g. `90s`, `15m`, `1h`, `7d`",
                text.escape_debug()
            ),
        )
    })?;
    if ttl < TTL_RANGE.0 || ttl > TTL_RANGE.1 {
        return Err(Error::invalid(
            flag,
            format!("`{text}` is outside 1s to 10 years"),
        ));
    }
    Ok(ttl)
}

/// `--grace` as a duration (`0s` allowed).
pub fn parse_grace(text: &str) -> Result<Duration> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        Error::invalid(
            "--grace",
            format!(
                "`{}` is not a duration ({e}); e.g. `0s`, `5m`",
                text.escape_debug()
            ),
        )
    })
}

/// When a claim made now with `ttl` lapses, by the store's clock; `None` without one.
pub fn expiry(store: &dyn Store, ttl: Option<Duration>) -> Result<Option<Timestamp>> {
    ttl.map(|ttl| Ok(store.clock()?.after(ttl))).transpose()
}

/// `held` (an allocation its owner holds, found under its claim locks) renewed for `ttl`:
/// rewritten with a new `expiresAt` (a dry run writes nothing), or as it is without a TTL.
/// Changed since it was read (an outside writer) is exit 4, asking to try again.
pub fn renewed(
    store: &dyn Store,
    ns: Option<&Namespace>,
    held: AllocationManifest,
    ttl: Option<Duration>,
    dry_run: bool,
) -> Result<AllocationManifest> {
    let Some(at) = expiry(store, ttl)? else {
        return Ok(held);
    };
    let mut updated = held.clone();
    updated.spec.expires_at = Some(at);
    if dry_run || updated == held {
        return Ok(updated);
    }
    if store.renew(ns, &held, &updated)? {
        Ok(updated)
    } else {
        Err(Error::conflict(format!(
            "{} in pool `{}` changed while its lease was renewed; try again",
            held.spec.address, held.spec.pool
        )))
    }
}

/// What `reconcile --expired` did to one lapsed lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaped {
    /// Reported, not released (no `--apply`).
    Lapsed,
    /// Released.
    Released,
    /// `--apply --dry-run`: would be released.
    WouldRelease,
    /// Renewed, released or claimed anew since it was found lapsed: left.
    Skipped,
}

/// A reaper's run: the leases in scope, and each lapsed one with what was done to it.
#[derive(Debug, Default)]
pub struct Reaping {
    /// Leases in scope (lapsed or not).
    pub leases: usize,
    /// The lapsed ones, by address within each scope and pool, with their verdicts.
    pub lapsed: Vec<(AllocationManifest, Reaped)>,
}

/// `reconcile --expired`: the leases of `scopes` (every scope when `None`; `pool` only, if
/// given) whose `expiresAt` plus `grace` has passed by the store's clock, released with
/// `apply` (through the pool's cooldown, as any release), each judged again as it is
/// released. None of `reconcile`'s guards against a wrong live list apply: a lapsed lease
/// is its owner's own statement.
pub fn reap(
    store: &(dyn Store + Sync),
    scopes: Option<&[Option<Namespace>]>,
    pool: Option<&PoolName>,
    grace: Duration,
    (apply, dry_run): (bool, bool),
    warnings: &mut Warnings,
) -> Result<Reaping> {
    let query = Query {
        pool: pool.cloned(),
        ..Query::default()
    };
    let all = collect(store, scopes, &query, warnings)?;
    let now = store.clock()?;
    let mut reaping = Reaping::default();
    for m in all.into_iter().filter(|m| m.spec.expires_at.is_some()) {
        reaping.leases += 1;
        if !m.spec.lapsed(now, grace) {
            continue;
        }
        let verdict = match (apply, dry_run) {
            (false, _) => Reaped::Lapsed,
            (true, true) => Reaped::WouldRelease,
            (true, false) => {
                let pool = PoolRef {
                    namespace: m.metadata.namespace.clone(),
                    name: m.spec.pool.clone(),
                };
                failpoint!("reap-before-release");
                match release_lapsed(store, &pool, &m, grace)? {
                    Released::Deleted(_) => Reaped::Released,
                    Released::NotHeld => Reaped::Skipped,
                }
            }
        };
        reaping.lapsed.push((m, verdict));
    }
    Ok(reaping)
}

/// Which lease `ipamctl renew` renews: its owner's in the pool, or the one at an address.
#[derive(Clone, Debug)]
pub enum Held {
    /// The owner's (kind, name and uid exactly).
    Owner(crate::model::Owner),
    /// The allocation at this address, whoever holds it.
    Address(std::net::IpAddr),
}

/// `ipamctl renew`: the lease `held` in `pool` renewed for `ttl` (a dry run writes
/// nothing), under its owner's claim locks, as `allocate --ttl` renews it. Only renews: no
/// allocation (a lease lapsed and released, or never claimed) is exit 3, never a new
/// claim; an allocation without a lease is exit 4. `scope` needs `claim` in the pool's
/// namespace (checked before any lock; outside it, the pool is not found).
pub fn renew(
    store: &dyn Store,
    scope: &crate::engine::scope::Scope,
    pool: &PoolRef,
    held: &Held,
    ttl: Duration,
    dry_run: bool,
) -> Result<AllocationManifest> {
    let ns = pool.namespace.as_ref();
    scope.check(crate::engine::scope::Verb::Claim, ns, || {
        crate::store::read::pool_missing(pool)
    })?;
    crate::store::read::load_pool(store, pool)?;
    let owner = match held {
        Held::Owner(owner) => owner.clone(),
        Held::Address(address) => {
            let name = crate::model::allocation_name(&pool.name, *address);
            match crate::store::read::read_allocation(store, ns, &name)? {
                Some(Ok(m)) => m.spec.owner,
                Some(Err(why)) => return Err(Error::invalid(name, why)),
                None => return Err(not_held(pool, &format!("{address}"))),
            }
        }
    };
    let work = || {
        let _locks = if dry_run {
            None
        } else {
            Some(store.lock_claim(ns, std::slice::from_ref(&pool.name), &owner)?)
        };
        let found = store.find_owner(ns, &pool.name, &owner)?.held;
        let lease = match (found, held) {
            (Some(m), Held::Address(a)) if m.spec.address != *a => None,
            (found, _) => found,
        };
        let Some(lease) = lease else {
            return Err(not_held(pool, &owner.to_string()));
        };
        if lease.spec.expires_at.is_none() {
            return Err(Error::Conflict {
                message: format!(
                    "`{owner}` holds {} in pool `{pool}` without a lease: it never lapses, and there is nothing to renew",
                    lease.spec.address
                ),
                hint: None,
            });
        }
        renewed(store, ns, lease, Some(ttl), dry_run)
    };
    if dry_run {
        return work();
    }
    crate::store::atomically(store, work)
}

/// Exit 3: nothing holds what `renew` was asked to renew.
fn not_held(pool: &PoolRef, what: &str) -> Error {
    Error::NotFound {
        message: format!(
            "no lease of {what} in pool `{pool}`: it lapsed and was released, or was never claimed; nothing renewed"
        ),
        hint: Some(format!(
            "claim again with `ipamctl allocate {} --owner KIND/NAME --ttl DURATION` (a new claim, perhaps another address)",
            pool.name
        )),
    }
}
