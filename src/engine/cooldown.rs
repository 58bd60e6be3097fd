//! The reuse cooldown's operations: reading a pool's records for a claim, writing one on a
//! release, forgetting and pruning them (the protocol is in [`crate::model::cooldown`]).

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use crate::error::Result;
use crate::model::cooldown::{CooldownRecord, Cooling};
use crate::model::{Owner, PoolManifest, PoolRef, allocation_name, parse_allocation_name};
use crate::store::{LockMode, ObjectKind, Store};
use crate::yaml;

/// Reads the records of `pool` and sorts their addresses for a claim by `owner` at `now`.
/// The caller holds the pool's lock (shared), so no release writes a record meanwhile.
pub fn cooling(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
    window: Duration,
    now: SystemTime,
) -> Result<Cooling> {
    let mut cooling = Cooling::default();
    for (address, record) in records(store, pool)? {
        match record {
            Some(r) if !r.cooling(window, now) => cooling.stale.push(address),
            Some(r) if r.spec.owner == *owner => cooling.own = Some(address),
            _ => cooling.blocked.push(address),
        }
    }
    Ok(cooling)
}

/// The addresses of `pool` that a cooldown record keeps for their last owner now (within the
/// pool's `reuseAfter`), lowest first; a record that cannot be read keeps its address too,
/// as it does for a claim. None without `reuseAfter`.
pub fn kept(store: &dyn Store, pool: &PoolRef, spec: &PoolManifest) -> Result<Vec<IpAddr>> {
    let Some(window) = &spec.spec.reuse_after else {
        return Ok(Vec::new());
    };
    let now = SystemTime::now();
    let mut kept: Vec<IpAddr> = records(store, pool)?
        .into_iter()
        .filter(|(_, record)| {
            record
                .as_ref()
                .is_none_or(|r| r.cooling(window.duration(), now))
        })
        .map(|(address, _)| address)
        .collect();
    kept.sort_unstable();
    Ok(kept)
}

/// The records of `pool`, by address: `None` for one that cannot be read or does not parse.
pub fn records(store: &dyn Store, pool: &PoolRef) -> Result<Vec<(IpAddr, Option<CooldownRecord>)>> {
    let ns = pool.namespace.as_ref();
    let mut found = Vec::new();
    for name in store.list(ObjectKind::Cooldown, ns)? {
        let Some((p, address)) = parse_allocation_name(&name) else {
            continue;
        };
        if p != pool.name.as_str() {
            continue;
        }
        let record = match store.get(ObjectKind::Cooldown, ns, &name) {
            Ok(Some(bytes)) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| yaml::decode_cooldown(text).ok())
                .filter(|r| r.spec.address == address),
            Ok(None) => continue,
            Err(_) => None,
        };
        found.push((address, record));
    }
    Ok(found)
}

/// Writes the record of `owner` releasing `address` now; replaces an older record of it.
pub fn record_release(
    store: &dyn Store,
    pool: &PoolRef,
    address: IpAddr,
    owner: &Owner,
) -> Result<()> {
    let record = CooldownRecord::new(pool, address, owner.clone(), SystemTime::now());
    store.replace(
        ObjectKind::Cooldown,
        pool.namespace.as_ref(),
        &record.metadata.name,
        yaml::encode(&record).as_bytes(),
    )
}

/// Removes the record of `address` of `pool`, if any.
pub fn forget(store: &dyn Store, pool: &PoolRef, address: IpAddr) -> Result<()> {
    store.delete(
        ObjectKind::Cooldown,
        pool.namespace.as_ref(),
        &allocation_name(&pool.name, address),
    )?;
    Ok(())
}

/// Removes the records of `pool` that hold nothing back at `now`: past the pool's window, or
/// of a pool that has no `reuseAfter` (or is not there at all); `ipamctl check --fix`.
/// Returns the names removed.
///
/// Under the pool's lock, exclusive, as a release takes it to write a record: the records are
/// read and removed with no release in between, so a record written since `check` looked (a
/// release of the same address, replacing an expired record with a fresh one) is judged as
/// it is now, never removed for what its predecessor said. A record that does not parse is
/// kept (`check` reports it), and so are all of a pool whose manifest does not decode (its
/// window is unknown).
///
/// An outside writer that takes no lock (`cp`, `git checkout`) and puts a fresh record in
/// place between this read and the delete keeps it: the delete takes the file from its name
/// and removes it only if it is the record judged ([`crate::store::Objects::delete_if`]),
/// else puts it back.
pub fn prune(store: &dyn Store, pool: &PoolRef, now: SystemTime) -> Result<Vec<String>> {
    let ns = pool.namespace.as_ref();
    crate::store::atomically(store, || {
        let _lock = store.lock_pool(ns, &pool.name, LockMode::Exclusive)?;
        let window = match store.get(ObjectKind::Pool, ns, pool.name.as_str())? {
            None => None,
            Some(bytes) => match std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| yaml::decode_pool(text).ok())
            {
                Some(manifest) => manifest.spec.reuse_after.map(|r| r.duration()),
                None => return Ok(Vec::new()),
            },
        };
        let mut removed = Vec::new();
        for (address, record) in records(store, pool)? {
            let expired = match (&record, window) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(r), Some(window)) => !r.cooling(window, now),
            };
            if let (true, Some(judged)) = (expired, record) {
                failpoint!("prune-before-remove");
                // Only the record judged expired: one a release (or `cp`, `git checkout`)
                // put in its place since is kept.
                let name = allocation_name(&pool.name, address);
                let mut ours = |bytes: &[u8]| {
                    std::str::from_utf8(bytes)
                        .ok()
                        .and_then(|text| yaml::decode_cooldown(text).ok())
                        .is_some_and(|now| now == judged)
                };
                if store.delete_if(ObjectKind::Cooldown, ns, &name, &mut ours)?
                    == crate::store::Release::Deleted
                {
                    removed.push(name);
                }
            }
        }
        Ok(removed)
    })
}

/// Removes every record of `pool` (when the pool itself goes).
pub fn forget_pool(store: &dyn Store, pool: &PoolRef) -> Result<()> {
    for (address, _) in records(store, pool)? {
        forget(store, pool, address)?;
    }
    Ok(())
}
