//! `vpc delete`: under the scope's lock (as `vpc create` holds it), each pool of the VPC
//! that its owner reference says is the VPC's is marked, emptied and removed, then the
//! ranges it drew from supernets go back.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use super::{own_pools, range_claims, suggest_vpc, uplinks};
use crate::engine::prefix;
use crate::engine::release::{self, Released};
use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::subnet::SubnetManifest;
use crate::model::vpc::{VPC_KIND, belongs_to, vpc_uid};
use crate::model::{AllocationManifest, OwnerFilter, PoolManifest, PoolRef, Uid};
use crate::store::read::load_pool;
use crate::store::{self, LockMode, ObjectKind, Store};

/// An object `vpc delete` removes: a released allocation, a deleted subnet, or a deleted
/// pool.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Removal {
    /// An allocation released (an uplink, or one of the VPC's own pools).
    Allocation(AllocationManifest),
    /// A subnet of one of the VPC's pools, deleted with it.
    Subnet(SubnetManifest),
    /// One of the VPC's pools, deleted.
    Pool(PoolManifest),
    /// The claim of a range the VPC drew from a supernet pool, released after its pool.
    Claim(PrefixClaimManifest),
}

/// What `vpc delete` did.
#[derive(Debug)]
pub struct Deleted {
    /// What it removed (or, in a dry run, would), in order: per pool, the allocations,
    /// then the pool.
    pub removed: Vec<Removal>,
    /// The error to report once `removed` is shown: allocation files that could not be
    /// released, so a pool was kept. What was released stays released.
    pub kept: Option<Error>,
}

/// `vpc delete`: both pools of VPC `name` (`pools`, IPv4 then IPv6), whichever exist, as
/// one unit of work; exit 3 only when neither does. First both pools are marked as being
/// deleted (`metadata.deletionTimestamp`), so no claim is made in them from then on. Then
/// each pool's allocations are released (the router's uplinks first) before the pool, its
/// subnets and its cooldown records go.
///
/// `stop` is looked at between two steps (a release, a pool): once set (by SIGINT or
/// SIGTERM), the delete stops there and [`Deleted::kept`] says what is left and that running
/// it again finishes the job.
pub fn delete(
    store: &dyn Store,
    scope: &Scope,
    name: &str,
    pools: &[PoolRef; 2],
    dry_run: bool,
    stop: &AtomicBool,
    warnings: &mut Warnings,
) -> Result<Deleted> {
    let ns = pools[0]
        .namespace
        .as_ref()
        .expect("a VPC's pools are namespaced");
    scope.check(Verb::Admin, Some(ns), || super::missing(ns, pools, name))?;
    scope.scrub(delete_in(store, name, pools, dry_run, stop, warnings))
}

fn delete_in(
    store: &dyn Store,
    name: &str,
    pools: &[PoolRef; 2],
    dry_run: bool,
    stop: &AtomicBool,
    warnings: &mut Warnings,
) -> Result<Deleted> {
    let ns = pools[0]
        .namespace
        .as_ref()
        .expect("a VPC's pools are namespaced");
    let mut delete_both = || -> Result<Deleted> {
        // The scope's lock, as `vpc create` holds it: a create and a delete of one VPC run
        // one after the other, never a delete between a create's range claim and its pool
        // (which released the claim under a pool that then stood, issue 31).
        let _scope = (!dry_run).then(|| store.lock_scope(Some(ns))).transpose()?;
        // Whose pools these are, under the scope's lock (which `apply` takes too): only
        // pools of this uid are touched below, whatever else carries their names.
        let (uid, _) = own_pools(store, name, pools)?;
        if !dry_run {
            for (i, pool) in pools.iter().enumerate() {
                mark(store, pool, name, i == 1, uid.as_ref())?;
            }
        }
        let mut removed = Vec::new();
        let mut missing = None;
        for (i, pool) in pools.iter().enumerate() {
            let this = Doomed {
                name,
                v6: i == 1,
                uid: uid.as_ref(),
            };
            match delete_pool(store, &this, pool, dry_run, stop, warnings) {
                Ok(Deleted {
                    removed: more,
                    kept,
                }) => {
                    removed.extend(more);
                    if kept.is_some() {
                        return Ok(Deleted { removed, kept });
                    }
                }
                Err(e @ Error::NotFound { .. }) => {
                    missing.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        // The pools are gone: the ranges they drew from supernets go back (those of this
        // VPC's uid; with no pool left to say it, those annotated with its name).
        let claims: Vec<_> = range_claims(store, ns, name)?
            .into_iter()
            .filter(|c| uid.is_none() || c.spec.owner.uid() == uid.as_ref())
            .collect();
        let released = if dry_run {
            claims
        } else {
            prefix::release_each(store, &claims)?
        };
        removed.extend(released.into_iter().map(Removal::Claim));
        match missing {
            Some(e) if removed.is_empty() => Err(e),
            _ => Ok(Deleted {
                removed,
                kept: None,
            }),
        }
    };
    // One unit of work: on a database, one transaction, committed also when a pool is
    // kept (the releases before it stand).
    if dry_run {
        delete_both()
    } else {
        store::atomically(store, delete_both)
    }
}

/// Marks `pool` as being deleted, under its exclusive lock, if it exists and is VPC
/// `name`'s pool of family `v6` and uid `uid`.
fn mark(store: &dyn Store, pool: &PoolRef, name: &str, v6: bool, uid: Option<&Uid>) -> Result<()> {
    let _lock = store.lock_pool(pool.namespace.as_ref(), &pool.name, LockMode::Exclusive)?;
    match load_pool(store, pool) {
        Ok(m) if uid.is_some() && belongs_to(&m, name, v6).as_ref() == uid => {
            crate::engine::doomed::mark(store, pool, m)?;
            Ok(())
        }
        // Not this VPC's (the delete refuses or skips it below), or already gone.
        Ok(_) | Err(Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The VPC a `vpc delete` removes one pool of: its name, the family of the pool, and its
/// uid (`None` when none of its pools stands).
struct Doomed<'a> {
    name: &'a str,
    v6: bool,
    uid: Option<&'a Uid>,
}

/// The error of a delete that `stop` ended early: what is left of `pool`, and how to finish.
fn interrupted(name: &str, pool: &PoolRef) -> Error {
    Error::Interrupted {
        message: format!(
            "interrupted: VPC `{name}` is partly deleted (pool `{pool}` stands, marked as being deleted, so it takes no claim); what is listed above was removed"
        ),
        hint: format!(
            "run `{}` again to finish",
            crate::engine::hint::vpc_delete(name, pool)
        ),
    }
}

/// The manifest of `pool` if it stands and is `vpc`'s (`None` if it is gone). Exit 4 for a
/// pool no VPC owns; exit 3 for another VPC's pool under this VPC's pool name (VPC `a`'s
/// IPv6 pool `vpc-a-v6` is not VPC `a-v6`'s): not this VPC's, so nothing of it is touched.
fn this_vpcs(store: &dyn Store, vpc: &Doomed<'_>, pool: &PoolRef) -> Result<Option<PoolManifest>> {
    match load_pool(store, pool) {
        Ok(m) if !m.metadata.owner_refs.iter().any(|r| r.kind == VPC_KIND) => Err(Error::conflict(
            format!("pool `{pool}` is not owned by a VPC; delete it with `ipamctl pool delete`"),
        )),
        Ok(m) if vpc.uid.is_none() || belongs_to(&m, vpc.name, vpc.v6).as_ref() != vpc.uid => {
            Err(not_found(store, vpc.name, pool))
        }
        Ok(m) => Ok(Some(m)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes one pool of VPC `name`, under the pool's exclusive lock: allocate holds it
/// shared from before it reads the pool until its claim is durable, so once it is held no
/// claim is in flight and none can start.
fn delete_pool(
    store: &dyn Store,
    vpc: &Doomed<'_>,
    pool: &PoolRef,
    dry_run: bool,
    stop: &AtomicBool,
    warnings: &mut Warnings,
) -> Result<Deleted> {
    let ns = pool.namespace.as_ref();
    let _lock = (!dry_run)
        .then(|| store.lock_pool(ns, &pool.name, LockMode::Exclusive))
        .transpose()?;
    // The pool's bytes under the lock: the delete below removes them and nothing else.
    let read = store.get(ObjectKind::Pool, ns, pool.name.as_str())?;
    let manifest = this_vpcs(store, vpc, pool)?;
    let name = vpc.name;
    let held = crate::engine::allocate::allocations_of(
        store,
        ns,
        Some(&pool.name),
        &OwnerFilter::default(),
        warnings,
    )?;
    if manifest.is_none() && held.is_empty() {
        return Err(not_found(store, name, pool));
    }
    // The router's uplinks first (in public pools, owned by the VPC's uid): while the pool
    // stands, a retry after a crash still knows the uid to find them by.
    let uplinks = match manifest.as_ref().and_then(vpc_uid) {
        Some(uid) => uplinks(store, &uid, warnings)?,
        None => Vec::new(),
    };
    let mut removed = release_all(store, pool, uplinks.into_iter().chain(held), dry_run, stop)?;
    if stop.load(Ordering::Relaxed) && !dry_run {
        return Ok(Deleted {
            removed,
            kept: Some(interrupted(name, pool)),
        });
    }
    if let Some(kept) = unreleased(store, name, pool, dry_run)? {
        return Ok(Deleted {
            removed,
            kept: Some(kept),
        });
    }
    if let Some(m) = manifest {
        let subnets = if dry_run {
            crate::engine::subnet::of_pool(store, pool)?
        } else {
            let subnets = crate::engine::subnet::delete_of_pool(store, pool)?;
            crate::engine::cooldown::forget_pool(store, pool)?;
            // No bytes read (removed since): nothing matches, the pool is "not found".
            crate::engine::pool::delete_as_read(store, pool, read.as_deref().unwrap_or_default())?;
            subnets
        };
        removed.extend(subnets.into_iter().map(Removal::Subnet));
        removed.push(Removal::Pool(m));
    }
    Ok(Deleted {
        removed,
        kept: None,
    })
}

/// VPC `name` has no pool `pool` (exit 3), with the nearest VPC name as a hint.
fn not_found(store: &dyn Store, name: &str, pool: &PoolRef) -> Error {
    let ns = pool.namespace.as_ref();
    Error::NotFound {
        message: format!(
            "VPC `{name}` not found in namespace `{}` (no pool `{}`)",
            ns.map_or("", |n| n.as_str()),
            pool.name
        ),
        hint: Some(suggest_vpc(store, ns, name)),
    }
}

/// Releases each allocation guarded by its exact owner (in a dry run, none); returns those
/// released (or that would be). `pool` is the VPC's pool being removed.
fn release_all(
    store: &dyn Store,
    pool: &PoolRef,
    held: impl Iterator<Item = AllocationManifest>,
    dry_run: bool,
    stop: &AtomicBool,
) -> Result<Vec<Removal>> {
    let mut removed = Vec::new();
    for m in held {
        if !dry_run {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let guard = OwnerFilter::exactly(&m.spec.owner);
            let of = PoolRef {
                namespace: m.metadata.namespace.clone(),
                name: m.spec.pool.clone(),
            };
            // The VPC's own pool is locked and going: no cooldown record there. An uplink in
            // a public pool is released as any release is (with its pool's cooldown).
            let released = if of == *pool {
                release::release_in_doomed_pool(store, &of, m.spec.address, &guard)?
            } else {
                release::release_address(store, &of, m.spec.address, &guard)?
            };
            if let Released::NotHeld = released {
                continue;
            }
        }
        removed.push(Removal::Allocation(m));
    }
    Ok(removed)
}

/// Exit 4 to report when allocation files of `pool` are left after the releases (files
/// that do not parse were not released): never orphan them silently. None in a dry run.
fn unreleased(
    store: &dyn Store,
    name: &str,
    pool: &PoolRef,
    dry_run: bool,
) -> Result<Option<Error>> {
    let left = store
        .list(ObjectKind::Allocation, pool.namespace.as_ref())?
        .iter()
        .filter(|e| {
            crate::model::parse_allocation_name(e).is_some_and(|(p, _)| p == pool.name.as_str())
        })
        .count();
    if left == 0 || dry_run {
        return Ok(None);
    }
    Ok(Some(Error::Conflict {
        message: format!(
            "{left} allocation file{} of pool `{pool}` could not be released; the pool is kept",
            if left == 1 { "" } else { "s" }
        ),
        hint: Some(format!(
            "run `ipamctl check` to see why, fix them, and run `{}` again",
            crate::engine::hint::vpc_delete(name, pool)
        )),
    }))
}
