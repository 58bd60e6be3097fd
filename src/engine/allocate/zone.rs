//! A floating IP claimed from a zone: the public pools of the zone in name order, each
//! through [`super`]'s claim loop, under one claim lock over all of them.

use crate::engine::cooldown;
use crate::engine::identity;
use crate::engine::lease;
use crate::engine::subnet;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::subnet::pool_candidates;
use crate::model::{Owner, PoolName, PoolRef};
use crate::store::read::load_pool;
use crate::store::{self, ClaimLock, ObjectKind, Store};

use super::claim_loop::{Walk, claim};
use super::{Allocated, Request, find_owner, pick, refuse_if_broken_names};

/// Claims a floating IP from the public pools of `zone`, in name order, moving to the next
/// pool when one is exhausted. Idempotent across the zone: an owner holding an address in
/// any of its pools gets that one back. Broken allocation files met on the way are added to
/// `warnings`, whatever the result.
///
/// One [`ClaimLock`] for every pool of the zone: every pool lock, then every owner lock, in
/// pool-name order (the order of [`crate::store::guard`]), so two requests for one owner
/// cannot claim in two different pools, and no lock order can deadlock.
pub fn allocate_zone(
    store: &dyn Store,
    zone: &str,
    owner: &Owner,
    (dry_run, ttl): (bool, Option<std::time::Duration>),
    warnings: &mut Warnings,
) -> Result<Allocated> {
    if dry_run {
        return allocate_zone_now(store, zone, owner, (dry_run, ttl), warnings);
    }
    store::atomically(store, || {
        allocate_zone_now(store, zone, owner, (dry_run, ttl), warnings)
    })
}

/// The public pools of `zone`, in name order; `NotFound` (exit 3) if it has none.
fn zone_pools(store: &dyn Store, zone: &str) -> Result<Vec<PoolRef>> {
    let mut names = store.list(ObjectKind::Pool, None)?;
    names.sort();
    let mut pools = Vec::new();
    for name in names {
        let Ok(name) = PoolName::new(&name) else {
            continue;
        };
        let pool = PoolRef {
            namespace: None,
            name,
        };
        let Ok(spec) = load_pool(store, &pool) else {
            continue;
        };
        if spec.spec.zone.as_deref() == Some(zone)
            && spec.spec.kind == crate::model::PoolKind::Public
        {
            pools.push(pool);
        }
    }
    if pools.is_empty() {
        return Err(Error::NotFound {
            message: format!("no public pool in zone `{zone}`"),
            hint: Some("`ipamctl pool list` shows each pool's zone".into()),
        });
    }
    Ok(pools)
}

/// The locks of a zone's claim (none for a dry run): the claim lock over every pool; on a
/// read-only store the error a claim would meet, for after the look-up.
type ZoneLocks = (Option<ClaimLock>, Option<Error>);

fn zone_locks(
    store: &dyn Store,
    names: &[PoolName],
    owner: &Owner,
    dry_run: bool,
) -> Result<ZoneLocks> {
    if dry_run {
        return Ok((None, None));
    }
    match store.lock_claim(None, names, owner) {
        Ok(locks) => Ok((Some(locks), None)),
        Err(e @ Error::ReadOnly { .. }) => Ok((None, Some(e))),
        Err(e) => Err(e),
    }
}

/// [`allocate_zone`] inside its unit of work.
fn allocate_zone_now(
    store: &dyn Store,
    zone: &str,
    owner: &Owner,
    (dry_run, ttl): (bool, Option<std::time::Duration>),
    warnings: &mut Warnings,
) -> Result<Allocated> {
    let pools = zone_pools(store, zone)?;
    let names: Vec<PoolName> = pools.iter().map(|p| p.name.clone()).collect();
    // Only a look-up is possible on a read-only store: an owner holding an address still
    // gets it.
    let (_locks, read_only) = zone_locks(store, &names, owner, dry_run)?;
    let mut listings = Vec::new();
    let mut namesake = None;
    for pool in &pools {
        let lookup = find_owner(store, pool, owner, warnings)?;
        if let Some(held) = lookup.held {
            let held = lease::renewed(store, pool.namespace.as_ref(), held, ttl, dry_run)?;
            return Ok(Allocated::Existing(held));
        }
        if namesake.is_none() {
            namesake = lookup.namesake.map(|m| (pool, m));
        }
        refuse_if_broken_names(store, pool, owner, &lookup.broken, warnings)?;
        listings.push(lookup.taken);
    }
    // The name held in one pool of the zone under another identity: a claim in another
    // would be a second address for it.
    if let Some((pool, holder)) = namesake {
        return Err(identity::holds_the_name(pool, owner, &holder));
    }
    if let Some(e) = read_only {
        return Err(e);
    }
    for (pool, entries) in pools.iter().zip(&listings) {
        // Re-read under the lock: a pool deleted or changed meanwhile is skipped or current.
        let Ok(spec) = load_pool(store, pool) else {
            continue;
        };
        if spec.metadata.deletion_timestamp.is_some() {
            continue; // being deleted: no claim in it
        }
        let cooling = cooldown::cooling(store, pool, &spec, owner)?;
        let subnets = subnet::of_pool(store, pool)?;
        let candidates = pool_candidates(&spec, &subnets);
        let whole_pool = cooling.blocked.is_empty() && cooling.own.is_none();
        let req = Request {
            pool: pool.clone(),
            owner: owner.clone(),
            within: None,
            subnet: None,
            reserved: Vec::new(),
            address: None,
            dry_run,
            mac: None,
            ttl,
        };
        let walk = Walk {
            start: pick::start(&spec, &req, &candidates),
            whole_pool,
        };
        let candidates = candidates.without(cooling.blocked.iter().copied());
        if let Some(allocated) = claim(store, &req, &candidates, entries, walk, &cooling)? {
            return Ok(allocated);
        }
    }
    let names: Vec<String> = pools.iter().map(|p| format!("`{}`", p.name)).collect();
    Err(Error::Exhausted {
        what: format!("zone `{zone}`"),
        range: format!("any of its pools ({})", names.join(", ")),
    })
}
