//! Guarded release: an allocation is deleted only if it is still the one read, its owner
//! passing the guard (invariant 5 of [`crate::engine`]; the store's [`Claims::release`](crate::store::Claims::release)
//! arbitrates).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::engine::cooldown;
use crate::error::{Error, Result};
use crate::model::{AllocationManifest, Namespace, Owner, OwnerFilter, PoolRef, allocation_name};
use crate::store::read::{load_pool, read_allocation};
use crate::store::{self, LockMode, ObjectKind, Parsed, Release, Store};
use crate::yaml;

/// What a release of one address did.
#[derive(Clone, Debug)]
pub enum Released {
    /// The allocation was deleted.
    Deleted(Box<AllocationManifest>),
    /// Nothing held the address.
    NotHeld,
}

/// Deletes the allocation of `addr` in `pool` if its owner passes `guard` (exit 4 and
/// nothing deleted if not). Safe against a racing release and re-allocation (invariant 5).
/// In a pool with `reuseAfter`, the address's cooldown record is written first, under the
/// pool's exclusive lock (see [`crate::engine::cooldown`]).
pub fn release_address(
    store: &dyn Store,
    pool: &PoolRef,
    addr: IpAddr,
    guard: &OwnerFilter,
) -> Result<Released> {
    release_with(store, pool, addr, guard, Mode::Plain)
}

/// [`release_address`] of a lease found lapsed `grace` ago (`reconcile --expired`): the
/// owner's exactly, and only while it still lapses when the store deletes it (judged again
/// there: [`crate::store::Claims::release`]'s `lapsed`). A lease renewed meanwhile is
/// [`Released::NotHeld`] as far as this release goes: it is left.
pub fn release_lapsed(
    store: &dyn Store,
    pool: &PoolRef,
    lease: &AllocationManifest,
    grace: Duration,
) -> Result<Released> {
    let guard = OwnerFilter::exactly(&lease.spec.owner);
    release_with(store, pool, lease.spec.address, &guard, Mode::Lapsed(grace))
}

/// How a release judges what it deletes.
#[derive(Clone, Copy)]
enum Mode {
    /// As asked, with the pool's cooldown.
    Plain,
    /// In a pool being removed: no lock, no cooldown record.
    Doomed,
    /// A lease, only while it lapses this long before the store's clock.
    Lapsed(Duration),
}

/// [`release_address`] for a caller that holds the pool's lock exclusively and is removing
/// the pool (`vpc delete`): no lock is taken and no cooldown record written.
pub fn release_in_doomed_pool(
    store: &dyn Store,
    pool: &PoolRef,
    addr: IpAddr,
    guard: &OwnerFilter,
) -> Result<Released> {
    release_with(store, pool, addr, guard, Mode::Doomed)
}

fn release_with(
    store: &dyn Store,
    pool: &PoolRef,
    addr: IpAddr,
    guard: &OwnerFilter,
    mode: Mode,
) -> Result<Released> {
    // Each turn of the loop releases the allocation as it read it; if it changed hands before
    // the store's release confirmed it, go round again with the new owner.
    for _ in 0..16 {
        match store::atomically(store, || release_attempt(store, pool, addr, guard, mode))? {
            Some(released) => return Ok(released),
            None => continue,
        }
    }
    Err(Error::conflict(format!(
        "{addr} in pool `{pool}` kept changing hands while releasing it; try again"
    )))
}

/// One turn of [`release_address`]: `None` when the allocation changed hands meanwhile.
fn release_attempt(
    store: &dyn Store,
    pool: &PoolRef,
    addr: IpAddr,
    guard: &OwnerFilter,
    mode: Mode,
) -> Result<Option<Released>> {
    let ns = pool.namespace.as_ref();
    let name = allocation_name(&pool.name, addr);
    let Some(parsed) = read_whole_allocation(store, ns, &name)? else {
        return Ok(Some(Released::NotHeld));
    };
    let manifest = match guarded(store, pool, addr, parsed, guard) {
        Ok(manifest) => manifest,
        // A lease's address claimed by another owner since: not this release's.
        Err(Error::Conflict { .. }) if matches!(mode, Mode::Lapsed(_)) => {
            return Ok(Some(Released::NotHeld));
        }
        Err(e) => return Err(e),
    };
    let lapsed = match mode {
        Mode::Lapsed(grace) => {
            if !manifest.spec.lapsed(store.clock()?, grace) {
                return Ok(Some(Released::NotHeld)); // renewed since it was judged
            }
            Some(grace)
        }
        Mode::Plain | Mode::Doomed => None,
    };
    let doomed = matches!(mode, Mode::Doomed);
    // With a cooldown, no claim may run between the record and the delete: the pool's lock,
    // exclusive, taken before the store's release takes the owner's (the order every claim
    // takes them in).
    let cooldown = !doomed && load_pool(store, pool).is_ok_and(|p| p.spec.reuse_after.is_some());
    let _pool_lock = cooldown
        .then(|| store.lock_pool(ns, &pool.name, LockMode::Exclusive))
        .transpose()?;
    let owner = &manifest.spec.owner;
    // First the record, then the delete: the address never looks free without it.
    let mut record = || {
        if cooldown {
            cooldown::record_release(store, pool, addr, owner)?;
            failpoint!("release-after-cooldown-record");
        }
        Ok(())
    };
    Ok(match store.release(ns, &manifest, lapsed, &mut record)? {
        Release::Deleted => Some(Released::Deleted(Box::new(manifest))),
        Release::Gone => Some(Released::NotHeld),
        Release::Changed => None,
    })
}

/// Releases each of `held` guarded by its exact owner (an address released and claimed by
/// someone else meanwhile is left alone), as one unit of work: on a database one
/// transaction, so a connection lost halfway releases none of them; on the file store each
/// release stands on its own, as every write there does. Returns what was released, in
/// the order of `held`.
///
/// An owner's addresses in several pools (a dual-stack NIC) are released under its claim
/// locks in all of them at once ([`owner_locks`]), so that a claim of the same owner in
/// those pools ([`crate::engine::allocate::allocate_all`], which holds the same locks)
/// comes wholly before or wholly after: never between two pools, where it would find the
/// first released and claim it anew, find the second still held, and leave the owner with
/// one address once the release goes on.
pub fn release_each(
    store: &dyn Store,
    held: &[AllocationManifest],
) -> Result<Vec<AllocationManifest>> {
    // Each owner's allocations, owners in the order they first appear.
    let mut owners: Vec<(&Owner, Vec<usize>)> = Vec::new();
    for (i, m) in held.iter().enumerate() {
        match owners.iter_mut().find(|(o, _)| **o == m.spec.owner) {
            Some((_, each)) => each.push(i),
            None => owners.push((&m.spec.owner, vec![i])),
        }
    }
    store::atomically(store, || {
        let mut released = Vec::new();
        for (owner, each) in &owners {
            let _locks = owner_locks(store, owner, each.iter().map(|&i| &held[i]))?;
            for (n, &i) in each.iter().enumerate() {
                if n > 0 {
                    failpoint!("release-between-addresses");
                }
                let m = &held[i];
                let pool = PoolRef {
                    namespace: m.metadata.namespace.clone(),
                    name: m.spec.pool.clone(),
                };
                let guard = OwnerFilter::exactly(&m.spec.owner);
                match release_address(store, &pool, m.spec.address, &guard) {
                    Ok(Released::Deleted(m)) => released.push((i, *m)),
                    Ok(Released::NotHeld) | Err(Error::Conflict { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        released.sort_by_key(|(i, _)| *i);
        Ok(released.into_iter().map(|(_, m)| m).collect())
    })
}

/// The locks under which `owner`'s allocations `held` are released together: when they lie
/// in two pools or more of one scope, each pool's lock (exclusive where the pool has a
/// cooldown, as each release then takes it anyway; else shared), pools ascending by name,
/// then the owner's claim locks in all of them: the order every claim takes them in
/// ([`crate::store::guard`]). Each release then takes its own again, which the store grants
/// to the holder. `None` for allocations in one pool (a release of one address is whole on
/// its own) or in several scopes.
fn owner_locks<'a>(
    store: &dyn Store,
    owner: &Owner,
    held: impl Iterator<Item = &'a AllocationManifest>,
) -> Result<Option<(Vec<store::PoolLock>, store::ClaimLock)>> {
    let mut pools: Vec<PoolRef> = held
        .map(|m| PoolRef {
            namespace: m.metadata.namespace.clone(),
            name: m.spec.pool.clone(),
        })
        .collect();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    pools.dedup_by(|a, b| a.name == b.name && a.namespace == b.namespace);
    let Some(ns) = pools.first().map(|p| p.namespace.clone()) else {
        return Ok(None);
    };
    let ns = ns.as_ref();
    if pools.len() < 2 || pools.iter().any(|p| p.namespace.as_ref() != ns) {
        return Ok(None);
    }
    let mut locks = Vec::with_capacity(pools.len());
    for pool in &pools {
        let cooldown = load_pool(store, pool).is_ok_and(|p| p.spec.reuse_after.is_some());
        let mode = if cooldown {
            LockMode::Exclusive
        } else {
            LockMode::Shared
        };
        locks.push(store.lock_pool(ns, &pool.name, mode)?);
    }
    let names: Vec<_> = pools.into_iter().map(|p| p.name).collect();
    let claim = store.lock_claim(ns, &names, owner)?;
    Ok(Some((locks, claim)))
}

/// What [`release_address`] would do, without locking or writing anything (`--dry-run`):
/// the allocation as it is now, if its owner passes `guard`; exit 4 if not.
pub fn would_release(
    store: &dyn Store,
    pool: &PoolRef,
    addr: IpAddr,
    guard: &OwnerFilter,
) -> Result<Released> {
    let name = allocation_name(&pool.name, addr);
    match read_allocation(store, pool.namespace.as_ref(), &name)? {
        None => Ok(Released::NotHeld),
        Some(parsed) => Ok(Released::Deleted(Box::new(guarded(
            store, pool, addr, parsed, guard,
        )?))),
    }
}

/// Who holds `addr` in `pool` now, if its allocation parses: what `release POOL ADDRESS`
/// without a guard names (exit 2) before anything is released.
pub fn holder(store: &dyn Store, pool: &PoolRef, addr: IpAddr) -> Result<Option<Owner>> {
    let name = allocation_name(&pool.name, addr);
    Ok(
        match read_allocation(store, pool.namespace.as_ref(), &name)? {
            Some(Ok(m)) => Some(m.spec.owner),
            _ => None,
        },
    )
}

/// The allocation of `addr` read for a release, if it parses (exit 2 if not) and its owner
/// passes `guard` (exit 4 if not).
fn guarded(
    store: &dyn Store,
    pool: &PoolRef,
    addr: IpAddr,
    parsed: Parsed,
    guard: &OwnerFilter,
) -> Result<AllocationManifest> {
    let name = allocation_name(&pool.name, addr);
    let located = || store.locate(ObjectKind::Allocation, pool.namespace.as_ref(), &name);
    let manifest = parsed.map_err(|why| Error::invalid(located(), why))?;
    let owner = &manifest.spec.owner;
    if !guard.matches(owner) {
        return Err(not_held_by(pool, addr, owner));
    }
    Ok(manifest)
}

/// Exit 4: `addr` in `pool` is held by `owner`, not by the owner a release was given.
pub fn not_held_by(pool: &PoolRef, addr: IpAddr, owner: &Owner) -> Error {
    Error::conflict(format!(
        "{addr} in pool `{pool}` is held by `{owner}`{}, not by the given owner; nothing released",
        owner
            .uid()
            .map(|u| format!(" (uid {u})"))
            .unwrap_or_default()
    ))
}

/// How long a file that is not exactly ipamctl's output must stay byte for byte the same
/// before a release trusts it (see [`read_whole_allocation`]).
const SETTLE: Duration = Duration::from_millis(500);

/// How long a release waits for a file to settle before it gives up ("try again").
const SETTLE_LIMIT: Duration = Duration::from_millis(3000);

/// The allocation `name` read for a release (and so for `reconcile --apply`), trusted as
/// complete by the rule the file store's look-ups use: `cp`, editors and sync tools rewrite
/// a file in place, and while they do it passes through prefixes that do not parse, or that
/// parse as another owner (`name: fip-web-0` is a prefix of `name: fip-web-01`). A file is
/// taken as it reads only if its bytes are exactly what ipamctl writes for the manifest
/// they decode to (a prefix of that output lacks its last newline, or a line), or they
/// have stayed the same for [`SETTLE`]; otherwise it is read again, for at most
/// [`SETTLE_LIMIT`] (then exit 1, "try again", nothing released). The rule needs nothing
/// but the bytes, so it holds on every store.
fn read_whole_allocation(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &str,
) -> Result<Option<Parsed>> {
    let begun = Instant::now();
    let mut last: Option<(Vec<u8>, Instant)> = None;
    loop {
        let now = Instant::now();
        let bytes = match store.get(ObjectKind::Allocation, ns, name) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(None),
            // Not a regular file, too large: what `read_allocation` makes of it.
            Err(Error::Corrupt { .. }) => return read_allocation(store, ns, name),
            Err(e) => return Err(e),
        };
        let (parsed, exact) = match std::str::from_utf8(&bytes) {
            Ok(text) => yaml::decode_allocation_exact(text),
            Err(_) => (Err("is not UTF-8 text".to_owned()), false),
        };
        if parsed.is_ok() && exact {
            return Ok(Some(parsed));
        }
        let since = match last {
            Some((before, since)) if before == bytes => since,
            _ => now,
        };
        if now.duration_since(since) >= SETTLE {
            return Ok(Some(parsed));
        }
        if now.duration_since(begun) >= SETTLE_LIMIT {
            return Err(Error::io(
                store.locate(ObjectKind::Allocation, ns, name),
                std::io::Error::other(
                    "kept changing while it was read: another program may be rewriting it; \
                     nothing was released, try again",
                ),
            ));
        }
        last = Some((bytes, since));
        std::thread::sleep(Duration::from_millis(10));
    }
}
