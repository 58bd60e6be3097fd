//! Pools as `pool list`, `pool show` and `pool delete` see them: the stored pools of a scope
//! with their usage, one pool with the addresses its allocations hold, and the delete that
//! takes the pool's subnets and cooldown records with it (invariant 6 of [`crate::engine`]).

use std::net::IpAddr;

use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::{Warning, Warnings};
use crate::error::{Error, Result};
use crate::model::candidates::{Candidates, Usage};
use crate::model::subnet::{SubnetManifest, pool_candidates};
use crate::model::{Namespace, OwnerFilter, PoolManifest, PoolName, PoolRef, pool_addresses};
use crate::store::read::{load_pool, pool_not_found};
use crate::store::{self, LockMode, ObjectKind, Release, Store};

/// Addresses taken in `pool`, from the listing alone (no file is read).
fn taken(store: &dyn Store, ns: Option<&Namespace>, pool: &PoolName) -> Result<Vec<IpAddr>> {
    let names = store.list(ObjectKind::Allocation, ns)?;
    Ok(pool_addresses(&names, pool).collect())
}

/// The pools of scope `ns` in name order. One that does not parse, or has an invalid name,
/// is skipped with a warning in `warnings`; one deleted since the listing is skipped.
pub fn pools_of(
    store: &dyn Store,
    ns: Option<&Namespace>,
    warnings: &mut Warnings,
) -> Result<Vec<PoolManifest>> {
    let mut names = store.list(ObjectKind::Pool, ns)?;
    names.sort();
    let mut pools = Vec::new();
    for name in names {
        let Ok(name) = PoolName::new(&name) else {
            warnings.push(Warning::new(format!(
                "{}: not a valid pool name (skipped; run `ipamctl check`)",
                store.locate(ObjectKind::Pool, ns, &name)
            )));
            continue;
        };
        let pool = PoolRef {
            namespace: ns.cloned(),
            name,
        };
        match load_pool(store, &pool) {
            Ok(m) => pools.push(m),
            Err(Error::NotFound { .. }) => continue, // deleted since the listing
            Err(e) => warnings.push(Warning::new(format!("{e} (skipped; run `ipamctl check`)"))),
        }
    }
    Ok(pools)
}

/// `pool list`: every pool of `scopes` (scope by scope, each in name order) with its usage.
/// Pools skipped are warned about in `warnings`, which keeps those met before a failure.
pub fn list(
    store: &dyn Store,
    scopes: &[Option<Namespace>],
    warnings: &mut Warnings,
) -> Result<Vec<(PoolManifest, Usage)>> {
    let mut pools = Vec::new();
    for ns in scopes {
        // Listed only if the store cannot count (the file store: one listing per scope).
        let mut entries: Option<Vec<String>> = None;
        let subnets = crate::engine::subnet::list(store, ns.as_ref(), None)?;
        for manifest in pools_of(store, ns.as_ref(), warnings)? {
            let name = manifest.name();
            let own: Vec<SubnetManifest> = subnets
                .iter()
                .filter(|s| s.spec.pool == name)
                .cloned()
                .collect();
            let candidates = pool_candidates(&manifest, &own);
            let usage = match store.count_held(ns.as_ref(), &name, &candidates)? {
                Some((allocated, held)) => Usage::from_counts(&candidates, allocated, held),
                None => {
                    let entries = match &mut entries {
                        Some(e) => e,
                        None => entries.insert(store.list(ObjectKind::Allocation, ns.as_ref())?),
                    };
                    let taken: Vec<IpAddr> = pool_addresses(entries, &name).collect();
                    Usage::of_candidates(&candidates, &taken)
                }
            };
            pools.push((manifest, usage));
        }
    }
    Ok(pools)
}

/// One pool as `pool show` reads it.
#[derive(Clone, Debug)]
pub struct Shown {
    /// The pool's manifest.
    pub manifest: PoolManifest,
    /// The addresses its allocations hold, from the listing (no file is read).
    pub taken: Vec<IpAddr>,
    /// Its subnets, in name order.
    pub subnets: Vec<SubnetManifest>,
}

impl Shown {
    /// The usage of the pool (of `within` only, if given, which the caller checked lies
    /// inside it) and its free ranges, as [`Candidates::format_spans`] writes them.
    pub fn usage(&self, within: Option<ipnet::IpNet>) -> (Usage, Vec<String>) {
        let all = pool_candidates(&self.manifest, &self.subnets);
        let (candidates, taken): (Candidates, Vec<IpAddr>) = match within {
            Some(w) => (
                all.within(w),
                self.taken
                    .iter()
                    .copied()
                    .filter(|a| w.contains(a))
                    .collect(),
            ),
            None => (all, self.taken.clone()),
        };
        let usage = Usage::of_candidates(&candidates, &taken);
        let free = candidates.clone().without(self.taken.iter().copied());
        (usage, candidates.format_spans(&free.spans()))
    }
}

/// The largest IPv4 view `pool show --map` draws: a /12 is 4096 cells of one /24 each.
pub const LARGEST_VIEW: u8 = 12;

/// Can `view` be drawn? An IPv4 view up to a /12; any IPv6 view.
pub fn drawable(view: ipnet::IpNet) -> bool {
    view.addr().is_ipv6() || view.prefix_len() >= LARGEST_VIEW
}

/// What `pool show --map` draws of an address pool, here or through a server: only what
/// the map reads, so a large pool's answer is the addresses of its view, not of the pool.
#[derive(Clone, Debug)]
pub struct Drawn {
    /// The pool's manifest.
    pub manifest: PoolManifest,
    /// Its subnets, in name order.
    pub subnets: Vec<SubnetManifest>,
    /// The usage of the whole pool (the map's first usage line).
    pub usage: Usage,
    /// The addresses its allocations hold inside the view (`within`, else the pool),
    /// ascending; none when the view is too large to draw ([`drawable`]).
    pub held: Vec<IpAddr>,
}

impl Shown {
    /// What the map of this pool over `within` (else the whole pool) draws.
    pub fn drawn(self, within: Option<ipnet::IpNet>) -> Drawn {
        let view = within.unwrap_or(self.manifest.spec.cidr);
        let all = pool_candidates(&self.manifest, &self.subnets);
        let usage = Usage::of_candidates(&all, &self.taken);
        let mut held: Vec<IpAddr> = if drawable(view) {
            self.taken
                .into_iter()
                .filter(|a| view.contains(a))
                .collect()
        } else {
            Vec::new()
        };
        held.sort_unstable();
        Drawn {
            manifest: self.manifest,
            subnets: self.subnets,
            usage,
            held,
        }
    }
}

/// `pool show --map`: what the map of `pool` over `within` draws, for the caller of
/// `scope` (exit 3 if it does not exist or lies outside the scope).
pub fn map(
    store: &dyn Store,
    scope: &Scope,
    pool: &PoolRef,
    within: Option<ipnet::IpNet>,
) -> Result<Drawn> {
    Ok(show(store, scope, pool)?.drawn(within))
}

/// `pool show`: the pool (exit 3 if it does not exist) and the addresses it holds.
pub fn show(store: &dyn Store, scope: &Scope, pool: &PoolRef) -> Result<Shown> {
    scope.check(Verb::Read, pool.namespace.as_ref(), || {
        crate::store::read::pool_missing(pool)
    })?;
    scope.scrub(show_in(store, pool))
}

fn show_in(store: &dyn Store, pool: &PoolRef) -> Result<Shown> {
    let manifest = load_pool(store, pool)?;
    let taken = taken(store, pool.namespace.as_ref(), &pool.name)?;
    let subnets = crate::engine::subnet::of_pool(store, pool)?;
    Ok(Shown {
        manifest,
        taken,
        subnets,
    })
}

/// Who holds each address of `pool` inside `view`, as `KIND/NAME (uid U)` (a VPC router's
/// uplink as `VPC NAMESPACE/NAME (uid U)`, only to a caller of `scope` that sees the VPC's
/// namespace, as `allocations` names it; a tenant's floating IP as `FloatingIP/…` to a
/// caller that does not see its tenant): the tooltips of the SVG map.
pub fn owners(
    store: &dyn Store,
    scope: &Scope,
    pool: &PoolRef,
    view: ipnet::IpNet,
    warnings: &mut Warnings,
) -> Result<Vec<(IpAddr, String)>> {
    let held = crate::engine::allocate::allocations_of(
        store,
        pool.namespace.as_ref(),
        Some(&pool.name),
        &OwnerFilter::default(),
        warnings,
    )?;
    // A VPC router's uplink is named as its VPC (crate::engine::range_holder).
    let mut holders = crate::engine::range_holder::Holders::new(store);
    held.into_iter()
        .filter(|m| view.contains(&m.spec.address))
        .map(|m| {
            if !scope.sees_owner(&m.spec.owner) {
                return Ok((m.spec.address, crate::engine::scope::UNSEEN.to_owned()));
            }
            let mut holder = holders.of_owner(&m.spec.owner, None)?;
            holder.vpc = holder.vpc.filter(|v| scope.sees(Some(&v.namespace)));
            Ok((m.spec.address, holder.display_with_uid()))
        })
        .collect()
}

/// `pool delete`: deletes `pool` with its subnets and cooldown records, as one unit of
/// work, if no allocation holds an address in it and no prefix of it is claimed (exit 3 if
/// it does not exist, 4 while one is). Returns the manifest deleted (or that would be, in a dry run, which only checks).
pub fn delete(store: &dyn Store, pool: &PoolRef, dry_run: bool) -> Result<PoolManifest> {
    let manifest = load_pool(store, pool)?;
    if dry_run {
        delete_locked(store, pool, true)?;
    } else {
        store::atomically(store, || delete_locked(store, pool, false))?;
    }
    Ok(manifest)
}

/// Deletes `pool` under its exclusive lock if no allocation holds an address in it; a dry
/// run only checks, without the lock.
fn delete_locked(store: &dyn Store, pool: &PoolRef, dry_run: bool) -> Result<()> {
    let ns = pool.namespace.as_ref();
    // The scope's lock first, as `apply`, `vpc create` and `vpc delete` hold it: a pool
    // delete runs before or after them, never between a VPC's range claim and its pool.
    let _scope = (!dry_run).then(|| store.lock_scope(ns)).transpose()?;
    // Exclusive: no allocate can be between reading this pool and claiming (invariant 6).
    let _lock = (!dry_run)
        .then(|| store.lock_pool(ns, &pool.name, LockMode::Exclusive))
        .transpose()?;
    // Allocations hold an address pool; claimed prefixes hold a supernet.
    let held = taken(store, ns, &pool.name)?.len();
    let claimed = crate::engine::prefix::pool_claim_names(store, pool)?.len();
    for (n, one, many) in [
        (held, "allocation", "allocations"),
        (claimed, "claimed prefix", "claimed prefixes"),
    ] {
        if n > 0 {
            return Err(Error::Conflict {
                message: format!(
                    "pool `{pool}` still has {n} {}",
                    if n == 1 { one } else { many }
                ),
                hint: Some(format!(
                    "release them first: ipamctl list --pool {}{}",
                    pool.name,
                    ns.map(|ns| format!(" -n {ns}")).unwrap_or_default()
                )),
            });
        }
    }
    if !dry_run {
        crate::engine::doomed::mark(store, pool, load_pool(store, pool)?)?;
        // The pool as this process just marked it, under the lock: what the delete below
        // removes, and nothing else.
        let read = store.get(ObjectKind::Pool, ns, pool.name.as_str())?;
        // Its subnets and cooldown records are part of it: they go first, so a crash leaves
        // the pool (marked: no claim is made in it; running the command again finishes the
        // job), never an orphan.
        crate::engine::subnet::delete_of_pool(store, pool)?;
        crate::engine::cooldown::forget_pool(store, pool)?;
        let Some(read) = read else {
            return Err(pool_not_found(store, pool));
        };
        delete_as_read(store, pool, &read)?;
    }
    Ok(())
}

/// Deletes `pool`'s manifest only if its file still holds the bytes `read` (under the pool's
/// lock; see [`crate::store::Objects::delete_if`]): a pool a writer that takes no lock
/// changed meanwhile (`git pull`, `cp`) is kept, exit 4; one removed meanwhile is exit 3.
pub(crate) fn delete_as_read(store: &dyn Store, pool: &PoolRef, read: &[u8]) -> Result<()> {
    let ns = pool.namespace.as_ref();
    match store.delete_if(ObjectKind::Pool, ns, pool.name.as_str(), &mut |now| {
        now == read
    })? {
        Release::Deleted => Ok(()),
        Release::Gone => Err(pool_not_found(store, pool)),
        Release::Changed => Err(Error::conflict(format!(
            "pool `{pool}` was changed by another program while it was being deleted; it is kept, run the command again"
        ))),
    }
}
