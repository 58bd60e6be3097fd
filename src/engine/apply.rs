//! `apply`: creating or updating pools and subnets from manifests, all or nothing. Every
//! scope written to is locked while public pools are checked for overlaps, and every pool
//! written to (or holding a subnet written to) is locked exclusively while its allocations
//! are checked and it changes (invariant 6 of [`crate::engine`]).

use std::collections::{BTreeSet, HashSet};

use serde::Serialize;

use crate::engine::subnet::{self, Put};
use crate::engine::warning::Warnings;
use crate::engine::{created, holders, subnet_ids};
use crate::error::{Error, Result};
use crate::model::quota::QuotaManifest;
use crate::model::subnet::SubnetManifest;
use crate::model::{Namespace, PoolKind, PoolManifest, PoolName, PoolRef};
use crate::store::read::load_pool;
use crate::store::{self, LockMode, ObjectKind, Store};
use crate::yaml;

/// The documents of an `apply` input, validated and without duplicates: pools, then subnets.
#[derive(Clone, Debug, Default)]
pub struct Manifests {
    /// The pools, in input order.
    pub pools: Vec<PoolManifest>,
    /// The subnets, in input order; applied after every pool.
    pub subnets: Vec<SubnetManifest>,
    /// The namespaces' quotas, in input order; applied last.
    pub quotas: Vec<QuotaManifest>,
}

/// A pool or a subnet of the input, as `apply` reports it.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(untagged)]
pub enum Applied<'a> {
    /// A pool manifest.
    Pool(&'a PoolManifest),
    /// A subnet manifest.
    Subnet(&'a SubnetManifest),
    /// A quota manifest.
    Quota(&'a QuotaManifest),
}

/// Applies `input` as one unit of work (one transaction on a database): each pool, then
/// each subnet, with what was (or, in a dry run, would be) done to it. Exit 4 and nothing
/// applied when a public pool overlaps another, a changed pool would break what it holds
/// ([`holders::refuse_breaking`]: an allocation, a subnet or a prefix claim left outside,
/// a kind changed under any of them, a VPC's pool leaving its range claim), or a subnet
/// does not fit. A dry run writes nothing and takes no
/// lock, so that it also answers on a read-only state directory.
pub fn apply<'m>(
    store: &dyn Store,
    input: &'m Manifests,
    dry_run: bool,
    warnings: &mut Warnings,
) -> Result<Vec<(Applied<'m>, Put)>> {
    if dry_run {
        apply_locked(store, input, true, warnings)
    } else {
        store::atomically(store, || {
            // A unit run again starts with no warnings of the run before.
            let mut run = Warnings::default();
            let plan = apply_locked(store, input, false, &mut run)?;
            *warnings = run;
            Ok(plan)
        })
    }
}

/// [`apply`] inside its unit of work: locks (unless `dry_run`), checks, then writes.
fn apply_locked<'m>(
    store: &dyn Store,
    input: &'m Manifests,
    dry_run: bool,
    warnings: &mut Warnings,
) -> Result<Vec<(Applied<'m>, Put)>> {
    let pools = &input.pools;
    // Lock every scope written to, then every pool, in a fixed order (no deadlock between
    // concurrent applies). Held until all writes are done.
    let mut scope_locks = Vec::new();
    let mut pool_locks = Vec::new();
    if !dry_run {
        let scopes: BTreeSet<Option<Namespace>> =
            pools.iter().map(|p| p.metadata.namespace.clone()).collect();
        for ns in &scopes {
            scope_locks.push(store.lock_scope(ns.as_ref())?);
        }
        for (ns, pool) in &pools_locked(input) {
            pool_locks.push(store.lock_pool(ns.as_ref(), pool, LockMode::Exclusive)?);
        }
    }
    check_overlaps(store, pools)?;
    let mut plan = Vec::new();
    // Each pool as it is written: with the creation time ipamctl records, not the input's.
    let mut written = Vec::new();
    let mut existing_segments = None;
    for pool in pools {
        let (put, new) = plan_pool(store, pool, dry_run, &mut existing_segments)?;
        plan.push((Applied::Pool(pool), put));
        written.push(new);
    }
    refuse_unreachable_routes(store, input)?;
    if !dry_run {
        write_pools(store, &plan, &written)?;
    }
    // Subnets after their pools: a subnet may be of a pool the same input creates. A dry
    // run checks them against the pools as stored.
    for subnet in &input.subnets {
        plan.push((
            Applied::Subnet(subnet),
            put_subnet(store, input, subnet, dry_run)?,
        ));
    }
    // Quotas last, each on its own: a quota lowered below what its namespace holds is
    // written all the same, with a warning (claims are refused until it is back under).
    for quota in &input.quotas {
        let put = crate::engine::quota::put(store, quota, dry_run, warnings)?;
        plan.push((Applied::Quota(quota), put));
    }
    drop(scope_locks);
    drop(pool_locks);
    Ok(plan)
}

/// What `apply` does to `pool`, and the pool as it is written: the stored creation time on
/// an update, and on a creation one only if the new pool would move an existing segment's
/// DHCP subnet id ([`created`]; the segments are read once per input, into `segments`).
fn plan_pool(
    store: &dyn Store,
    pool: &PoolManifest,
    dry_run: bool,
    segments: &mut Option<subnet_ids::Existing>,
) -> Result<(Put, PoolManifest)> {
    let old = existing(store, &pool_ref(pool))?;
    if let Some(old) = &old {
        // A pool being deleted is not brought back by an apply that lacks the mark.
        crate::engine::doomed::refuse(old, &pool_ref(pool))?;
    }
    let mut new = pool.clone();
    created::keep(&mut new.metadata, old.as_ref().map(|o| &o.metadata));
    let put = match old {
        None => {
            // Allocations can outlive their pool (its manifest deleted by hand): a pool
            // created over them must hold them, as an update must.
            holders::refuse_breaking(store, None, &new)?;
            if !dry_run {
                let existing = match segments {
                    Some(e) => e,
                    None => segments.insert(subnet_ids::Existing::read(store)?),
                };
                let moves = existing.moved_by(new.metadata.namespace.as_ref(), &new.name(), None);
                created::record(&mut new.metadata, moves);
            }
            Put::Created
        }
        Some(old) if old == new => Put::Unchanged,
        Some(old) => {
            holders::refuse_breaking(store, Some(&old), &new)?;
            Put::Configured
        }
    };
    Ok((put, new))
}

/// The pools `apply` locks, in lock order: those of the input, and those of its subnets (a
/// subnet is checked and written under its pool's lock).
fn pools_locked(input: &Manifests) -> BTreeSet<(Option<Namespace>, PoolName)> {
    input
        .pools
        .iter()
        .map(|p| (p.metadata.namespace.clone(), p.name()))
        .chain(
            input
                .subnets
                .iter()
                .map(|s| (s.metadata.namespace.clone(), s.spec.pool.clone())),
        )
        .collect()
}

/// Writes every pool of `plan` that is not unchanged, as `written` has it (the pools of
/// `plan`, in order, as they are stored).
fn write_pools(
    store: &dyn Store,
    plan: &[(Applied<'_>, Put)],
    written: &[PoolManifest],
) -> Result<()> {
    for ((_, put), pool) in plan.iter().zip(written) {
        if *put != Put::Unchanged {
            let ns = pool.metadata.namespace.as_ref();
            store.replace(
                ObjectKind::Pool,
                ns,
                &pool.metadata.name,
                yaml::encode(pool).as_bytes(),
            )?;
            // A crash between two pools leaves the first written: each file is whole, and
            // applying the same input again converges (`unchanged`, then `created`).
            failpoint!("apply-between-pools");
        }
    }
    Ok(())
}

/// Checks and (unless `dry_run`) writes one subnet of `input`, whose pools are written.
fn put_subnet(
    store: &dyn Store,
    input: &Manifests,
    subnet: &SubnetManifest,
    dry_run: bool,
) -> Result<Put> {
    let created_here = input
        .pools
        .iter()
        .any(|p| p.metadata.namespace == subnet.metadata.namespace && p.name() == subnet.spec.pool);
    // A dry run has not written the pool this input creates: nothing to check it against.
    if dry_run && created_here && existing(store, &subnet.pool())?.is_none() {
        return Ok(Put::Created);
    }
    subnet::put_locked(store, subnet, true, dry_run)
}

/// The pool a manifest describes.
/// Exit 2 when a subnet a pool of the input will hold (stored, or as the input gives it)
/// inherits a route of that pool whose router it cannot reach ([`SubnetManifest::dhcp`]),
/// naming the subnet.
fn refuse_unreachable_routes(store: &dyn Store, input: &Manifests) -> Result<()> {
    for pool in input
        .pools
        .iter()
        .filter(|p| !p.spec.dhcp.routes.is_empty())
    {
        let pref = pool_ref(pool);
        let stored = subnet::of_pool(store, &pref)?;
        let replaced = |s: &&SubnetManifest| {
            input.subnets.iter().any(|i| {
                i.metadata.namespace == s.metadata.namespace && i.metadata.name == s.metadata.name
            })
        };
        let held = stored
            .iter()
            .filter(|s| !replaced(s))
            .chain(input.subnets.iter().filter(|s| s.pool() == pref));
        for s in held {
            s.dhcp(pool)
                .map_err(|why| Error::invalid(s.describe(), why))?;
        }
    }
    Ok(())
}

fn pool_ref(pool: &PoolManifest) -> PoolRef {
    PoolRef {
        namespace: pool.metadata.namespace.clone(),
        name: pool.name(),
    }
}

/// The existing manifest of `pool`, if any.
fn existing(store: &dyn Store, pool: &PoolRef) -> Result<Option<PoolManifest>> {
    match load_pool(store, pool) {
        Ok(m) => Ok(Some(m)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Refuses a public pool overlapping another public pool (existing or in the input).
fn check_overlaps(store: &dyn Store, incoming: &[PoolManifest]) -> Result<()> {
    let incoming_public: Vec<&PoolManifest> = incoming
        .iter()
        .filter(|p| p.spec.kind == PoolKind::Public)
        .collect();
    if incoming_public.is_empty() {
        return Ok(());
    }
    let replaced: HashSet<&str> = incoming_public
        .iter()
        .map(|p| p.metadata.name.as_str())
        .collect();
    let mut others: Vec<PoolManifest> = Vec::new();
    for entry in store.list(ObjectKind::Pool, None)? {
        if replaced.contains(entry.as_str()) {
            continue;
        }
        let Ok(name) = PoolName::new(&entry) else {
            continue;
        };
        if let Some(m) = existing(
            store,
            &PoolRef {
                namespace: None,
                name,
            },
        )? {
            others.push(m);
        }
    }
    for (i, pool) in incoming_public.iter().enumerate() {
        let clash = others
            .iter()
            .chain(incoming_public[..i].iter().copied())
            .find(|o| {
                o.spec.cidr.contains(&pool.spec.cidr.network())
                    || pool.spec.cidr.contains(&o.spec.cidr.network())
            });
        if let Some(other) = clash {
            return Err(Error::conflict(format!(
                "public pool `{}` ({}) overlaps public pool `{}` ({}); nothing applied",
                pool.metadata.name, pool.spec.cidr, other.metadata.name, other.spec.cidr
            )));
        }
    }
    Ok(())
}
