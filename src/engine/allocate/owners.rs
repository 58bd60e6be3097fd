//! Owner look-ups: the allocation an owner holds in a pool (invariant 2 of
//! [`crate::engine`]), and every allocation whose owner passes a filter.

use super::unparsable;
use crate::engine::warning::Warnings;
use crate::error::Result;
use crate::model::{AllocationManifest, Namespace, Owner, OwnerFilter, PoolName, PoolRef};
use crate::store::{OwnerLookup, Store};

/// Finds the allocation `owner` holds in `pool`, with a warning for each broken file seen
/// on the way.
pub(super) fn find_owner(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
    warnings: &mut Warnings,
) -> Result<OwnerLookup> {
    let ns = pool.namespace.as_ref();
    let lookup = store.find_owner(ns, &pool.name, owner)?;
    for (name, why) in &lookup.broken {
        warnings.push(unparsable(store, ns, name, why));
    }
    Ok(lookup)
}

/// Every allocation of scope `ns` (of `pool` only, if given) whose owner passes `filter`,
/// sorted by pool and address; each broken file is a warning added to `warnings`. Reads
/// only the files the store cannot rule out.
pub fn allocations_of(
    store: &dyn Store,
    ns: Option<&Namespace>,
    pool: Option<&PoolName>,
    filter: &OwnerFilter,
    warnings: &mut Warnings,
) -> Result<Vec<AllocationManifest>> {
    let mut found = Vec::new();
    for f in store.find_allocations(ns, pool, filter)? {
        match f.parsed {
            Ok(m) => found.push(m),
            Err(why) => warnings.push(unparsable(store, ns, &f.name, &why)),
        }
    }
    found.sort_by(|a, b| (&a.spec.pool, a.spec.address).cmp(&(&b.spec.pool, b.spec.address)));
    Ok(found)
}

/// Looks up the owner's allocation without locking or writing (for `--dry-run` and reads);
/// each broken file seen on the way is a warning added to `warnings`.
pub fn lookup_owner(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
    warnings: &mut Warnings,
) -> Result<Option<AllocationManifest>> {
    Ok(find_owner(store, pool, owner, warnings)?.held)
}
