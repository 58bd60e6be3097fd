//! The reuse cooldown's operations: reading a pool's records for a claim, writing one on a
//! release, forgetting and pruning them (the protocol is in [`crate::model::cooldown`]).

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use crate::error::Result;
use crate::model::cooldown::{
    CooldownRecord, Cooling, parse_prefix_record_name, prefix_record_name,
};
use ipnet::IpNet;

use crate::model::{Owner, PoolManifest, PoolRef, allocation_name, parse_allocation_name};
use crate::store::{LockMode, ObjectKind, Store};
use crate::yaml;

/// What the address records of `pool` say to a claim by `owner` now (none without the
/// pool's `reuseAfter`, in `spec`). The caller holds the pool's lock (shared), or makes a dry
/// run, so no release writes a record meanwhile.
pub fn cooling(
    store: &dyn Store,
    pool: &PoolRef,
    spec: &PoolManifest,
    owner: &Owner,
) -> Result<Cooling> {
    for_claim(spec, owner, || records(store, pool))
}

/// [`cooling`] for a claim of a prefix of the supernet `pool` (the caller holds the pool's
/// lock, exclusive).
pub fn prefix_cooling(
    store: &dyn Store,
    pool: &PoolRef,
    spec: &PoolManifest,
    owner: &Owner,
) -> Result<Cooling<IpNet>> {
    for_claim(spec, owner, || prefix_records(store, pool))
}

/// The records `read` gives, sorted for a claim by `owner` now; none read without
/// `reuseAfter`.
fn for_claim<A>(
    spec: &PoolManifest,
    owner: &Owner,
    read: impl FnOnce() -> Result<Vec<(A, Option<CooldownRecord>)>>,
) -> Result<Cooling<A>> {
    match &spec.spec.reuse_after {
        Some(window) => Ok(sort(read()?, owner, window.duration(), SystemTime::now())),
        None => Ok(Cooling::default()),
    }
}

/// Sorts `records` (what each keeps, and the record if it can be read) for a claim by
/// `owner` at `now`.
fn sort<A>(
    records: Vec<(A, Option<CooldownRecord>)>,
    owner: &Owner,
    window: Duration,
    now: SystemTime,
) -> Cooling<A> {
    let mut cooling = Cooling::default();
    for (kept, record) in records {
        match record {
            Some(r) if !r.cooling(window, now) => cooling.stale.push(kept),
            Some(r) if r.spec.owner == *owner => cooling.own = Some(kept),
            _ => cooling.blocked.push(kept),
        }
    }
    cooling
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

/// The address records of `pool`, by address: `None` for one that cannot be read or does
/// not parse. A name of the allocation form can also spell a prefix's record of another
/// pool (`p-10-0-0-0-24` is pool `p-10`'s 0.0.0.24, or pool `p`'s 10.0.0.0/24): a record
/// that decodes as another pool's, or a prefix's, is left out.
pub fn records(store: &dyn Store, pool: &PoolRef) -> Result<Vec<(IpAddr, Option<CooldownRecord>)>> {
    Ok(unnamed(address_records(store, pool)?))
}

/// [`records`], each with its record's name.
fn address_records(store: &dyn Store, pool: &PoolRef) -> Result<Named<IpAddr>> {
    scan(store, pool, parse_allocation_name, |r| {
        (r.spec.prefix_length.is_none()).then_some(r.spec.address)
    })
}

/// The prefix records of the supernet `pool`, by prefix, as [`records`] gives addresses'
/// (under their names, or the names they had before the kind marker).
pub fn prefix_records(
    store: &dyn Store,
    pool: &PoolRef,
) -> Result<Vec<(IpNet, Option<CooldownRecord>)>> {
    Ok(unnamed(named_prefix_records(store, pool)?))
}

/// [`prefix_records`], each with its record's name.
fn named_prefix_records(store: &dyn Store, pool: &PoolRef) -> Result<Named<IpNet>> {
    scan(store, pool, prefix_record_of, CooldownRecord::prefix)
}

/// The pool and prefix a prefix record's name spells.
fn prefix_record_of(name: &str) -> Option<(&str, IpNet)> {
    parse_prefix_record_name(name).map(|(p, net, _)| (p, net))
}

/// Records with what each keeps and its name.
type Named<A> = Vec<(A, Option<CooldownRecord>, String)>;

/// `records` without their names.
fn unnamed<A>(records: Named<A>) -> Vec<(A, Option<CooldownRecord>)> {
    records.into_iter().map(|(a, r, _)| (a, r)).collect()
}

/// The records of `pool` whose names `parse` reads as the pool's (name's pool, what it
/// keeps), each with the record if it decodes and keeps what its name says (`keeps`: `None`
/// for a record of the other sort, which is left out, as is another pool's), and its name.
fn scan<A: PartialEq>(
    store: &dyn Store,
    pool: &PoolRef,
    parse: impl Fn(&str) -> Option<(&str, A)>,
    keeps: impl Fn(&CooldownRecord) -> Option<A>,
) -> Result<Named<A>> {
    let ns = pool.namespace.as_ref();
    let mut found = Vec::new();
    for name in store.list(ObjectKind::Cooldown, ns)? {
        let Some((p, named)) = parse(&name) else {
            continue;
        };
        if p != pool.name.as_str() {
            continue;
        }
        let record = match store.get(ObjectKind::Cooldown, ns, &name) {
            Ok(Some(bytes)) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| yaml::decode_cooldown(text).ok()),
            Ok(None) => continue,
            Err(_) => None,
        };
        match record {
            None => found.push((named, None, name)),
            Some(r) if r.spec.pool != pool.name => {}
            Some(r) => match keeps(&r) {
                None => {}
                Some(kept) => {
                    let same = kept == named;
                    found.push((named, same.then_some(r), name));
                }
            },
        }
    }
    Ok(found)
}

/// Writes the record of `owner` releasing `prefix` of the supernet `pool` now; replaces an
/// older record of it.
pub fn record_prefix_release(
    store: &dyn Store,
    pool: &PoolRef,
    prefix: IpNet,
    owner: &Owner,
) -> Result<()> {
    let now = SystemTime::now();
    write(
        store,
        &CooldownRecord::for_prefix(pool, prefix, owner.clone(), now),
    )
}

/// Removes the record of `prefix` of `pool`, if any, under its name and under the name it
/// had before the kind marker (that one only if it is this prefix's record: the same name
/// may be another pool's address record).
pub fn forget_prefix(store: &dyn Store, pool: &PoolRef, prefix: IpNet) -> Result<()> {
    remove(store, pool, &prefix_record_name(&pool.name, prefix))?;
    let legacy = crate::model::prefix_claim::prefix_claim_name(&pool.name, prefix);
    let mut this_prefix = |bytes: &[u8]| {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| yaml::decode_cooldown(text).ok())
            .is_some_and(|r| r.spec.pool == pool.name && r.prefix() == Some(prefix))
    };
    store.delete_if(
        ObjectKind::Cooldown,
        pool.namespace.as_ref(),
        &legacy,
        &mut this_prefix,
    )?;
    Ok(())
}

/// Writes the record of `owner` releasing `address` now; replaces an older record of it.
pub fn record_release(
    store: &dyn Store,
    pool: &PoolRef,
    address: IpAddr,
    owner: &Owner,
) -> Result<()> {
    let now = SystemTime::now();
    write(
        store,
        &CooldownRecord::new(pool, address, owner.clone(), now),
    )
}

/// Removes the record of `address` of `pool`, if any.
pub fn forget(store: &dyn Store, pool: &PoolRef, address: IpAddr) -> Result<()> {
    remove(store, pool, &allocation_name(&pool.name, address))
}

/// Writes `record`, replacing one of its name.
fn write(store: &dyn Store, record: &CooldownRecord) -> Result<()> {
    store.replace(
        ObjectKind::Cooldown,
        record.metadata.namespace.as_ref(),
        &record.metadata.name,
        yaml::encode(record).as_bytes(),
    )
}

/// Removes the record `name` of `pool`'s scope, if any.
fn remove(store: &dyn Store, pool: &PoolRef, name: &str) -> Result<()> {
    store.delete(ObjectKind::Cooldown, pool.namespace.as_ref(), name)?;
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
        let addresses = address_records(store, pool)?.into_iter();
        let prefixes = named_prefix_records(store, pool)?.into_iter();
        let named = addresses
            .map(|(_, r, name)| (name, r))
            .chain(prefixes.map(|(_, r, name)| (name, r)));
        for (name, record) in named {
            let expired = match (&record, window) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(r), Some(window)) => !r.cooling(window, now),
            };
            if let (true, Some(judged)) = (expired, record) {
                failpoint!("prune-before-remove");
                // Only the record judged expired: one a release (or `cp`, `git checkout`)
                // put in its place since is kept.
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
    for (prefix, _) in prefix_records(store, pool)? {
        forget_prefix(store, pool, prefix)?;
    }
    Ok(())
}
