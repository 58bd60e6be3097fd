//! Stored subnets' operations: reading, listing, creating, updating and deleting them, each
//! holding its pool's lock (see [`crate::model::subnet`] for what a subnet is).

use std::net::IpAddr;

use ipnet::IpNet;

use crate::engine::scope::{Scope, Verb};
use crate::engine::{created, subnet_ids};
use crate::error::{Error, Result};
use crate::model::prefix::{NoRoom, best_fit};
use crate::model::subnet::SubnetManifest;
use crate::model::suggest::nearest;
use crate::model::{
    Namespace, PoolKind, PoolManifest, PoolName, PoolRef, SubnetName, pool_addresses,
};
use crate::store::read::load_pool;
use crate::store::{self, LockMode, ObjectKind, Store};
use crate::yaml;

/// Reads a subnet; exit 3 when it does not exist.
pub fn load(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &SubnetName,
) -> Result<SubnetManifest> {
    match read(store, ns, name.as_str())? {
        Some(m) => Ok(m),
        None => {
            let known = store.list(ObjectKind::Subnet, ns).unwrap_or_default();
            let hint = match nearest(name.as_str(), known.iter().map(String::as_str)) {
                Some(near) => format!("did you mean `{near}`?"),
                None => "`ipamctl subnet list -A` shows every subnet".into(),
            };
            Err(Error::NotFound {
                message: missing(ns, name),
                hint: Some(hint),
            })
        }
    }
}

/// What a subnet that does not exist is called: also what a caller outside its scope is
/// told.
pub fn missing(ns: Option<&Namespace>, name: &SubnetName) -> String {
    format!(
        "subnet `{name}` not found ({})",
        match ns {
            Some(ns) => format!("in namespace `{ns}`"),
            None => "cluster-scoped".into(),
        }
    )
}

/// Reads a subnet; `None` when it does not exist, exit 2 when it does not parse.
fn read(store: &dyn Store, ns: Option<&Namespace>, name: &str) -> Result<Option<SubnetManifest>> {
    crate::store::read::read_subnet(store, ns, name)
}

/// The subnets of scope `ns` (of `pool` only, if given), in name order.
pub fn list(
    store: &dyn Store,
    ns: Option<&Namespace>,
    pool: Option<&PoolName>,
) -> Result<Vec<SubnetManifest>> {
    let mut names = store.list(ObjectKind::Subnet, ns)?;
    names.sort();
    let mut subnets = Vec::new();
    for name in names {
        if let Some(m) = read(store, ns, &name)?
            && pool.is_none_or(|p| *p == m.spec.pool)
        {
            subnets.push(m);
        }
    }
    Ok(subnets)
}

/// The subnets of `pool`, in name order: what every claim of the pool keeps clear of
/// ([`crate::model::subnet::pool_candidates`]). A claim calls it under the pool's lock, shared,
/// which every change of a subnet holds exclusively (invariant 6 of [`crate::engine`]).
pub fn of_pool(store: &dyn Store, pool: &PoolRef) -> Result<Vec<SubnetManifest>> {
    list(store, pool.namespace.as_ref(), Some(&pool.name))
}

/// What a [`put`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// A new subnet.
    Created,
    /// An existing subnet changed (`apply` only).
    Configured,
    /// The subnet exists as asked.
    Unchanged,
}

/// Creates `subnet` (or, with `update`, changes an existing one), under its pool's exclusive
/// lock: exit 3 if the pool does not exist, 4 if the subnet leaves its pool, overlaps a
/// sibling, would make an address held by an allocation its gateway, a reserved, network or
/// broadcast address, or (without `update`) exists with another spec. A dry run checks
/// without the lock and writes nothing.
pub fn put(
    store: &dyn Store,
    scope: &Scope,
    subnet: &SubnetManifest,
    update: bool,
    dry_run: bool,
) -> Result<Put> {
    let pool = subnet.pool();
    scope.check(Verb::Admin, pool.namespace.as_ref(), || {
        crate::store::read::pool_missing(&pool)
    })?;
    scope.scrub(put_in(store, subnet, update, dry_run))
}

fn put_in(store: &dyn Store, subnet: &SubnetManifest, update: bool, dry_run: bool) -> Result<Put> {
    let pool = subnet.pool();
    crate::engine::doomed::refuse(&load_pool(store, &pool)?, &pool)?;
    if dry_run {
        return put_locked(store, subnet, update, true);
    }
    store::atomically(store, || {
        let _lock = store.lock_pool(pool.namespace.as_ref(), &pool.name, LockMode::Exclusive)?;
        put_locked(store, subnet, update, false)
    })
}

/// [`put`] for a caller that holds the subnet's pool lock exclusively (`apply`, which locks
/// every pool it touches first).
pub fn put_locked(
    store: &dyn Store,
    subnet: &SubnetManifest,
    update: bool,
    dry_run: bool,
) -> Result<Put> {
    subnet.validate().map_err(|e| Error::invalid("subnet", e))?;
    let ns = subnet.metadata.namespace.as_ref();
    let old = read(store, ns, &subnet.metadata.name)?;
    let mut subnet = subnet.clone();
    created::keep(&mut subnet.metadata, old.as_ref().map(|o| &o.metadata));
    let put = check(store, &subnet, update)?;
    if dry_run || put == Put::Unchanged {
        return Ok(put);
    }
    if put == Put::Created {
        let moves = subnet_ids::Existing::read(store)?.moved_by(
            ns,
            &subnet.spec.pool,
            Some(&subnet.metadata.name),
        );
        created::record(&mut subnet.metadata, moves);
    }
    let subnet = &subnet;
    let bytes = yaml::encode(subnet);
    if put == Put::Created {
        if !store.create(
            ObjectKind::Subnet,
            ns,
            &subnet.metadata.name,
            bytes.as_bytes(),
        )? {
            return Err(Error::conflict(format!(
                "subnet `{}` was created meanwhile; run the command again",
                subnet.metadata.name
            )));
        }
    } else {
        store.replace(
            ObjectKind::Subnet,
            ns,
            &subnet.metadata.name,
            bytes.as_bytes(),
        )?;
    }
    Ok(put)
}

/// The checks of [`put`], against the pool and its subnets as they stand.
fn check(store: &dyn Store, subnet: &SubnetManifest, update: bool) -> Result<Put> {
    let pool = subnet.pool();
    let ns = pool.namespace.as_ref();
    let manifest = load_pool(store, &pool)?;
    refuse_supernet(&manifest, &pool)?;
    subnet
        .dhcp(&manifest)
        .map_err(|why| Error::invalid(subnet.describe(), why))?;
    let cidr = subnet.spec.cidr;
    if !manifest.spec.cidr.contains(&cidr) {
        return Err(Error::conflict(format!(
            "subnet `{}` ({cidr}) does not lie inside pool `{pool}` ({})",
            subnet.metadata.name, manifest.spec.cidr
        )));
    }
    let existing = read(store, ns, &subnet.metadata.name)?;
    let put = match &existing {
        Some(old) if old == subnet => return Ok(Put::Unchanged),
        Some(old) if !update => {
            return Err(Error::Conflict {
                message: format!(
                    "subnet `{}` exists with another spec ({} of pool `{}`, gateway {})",
                    subnet.metadata.name,
                    old.spec.cidr,
                    old.pool(),
                    old.gateway()
                ),
                hint: Some(
                    "change it with `ipamctl apply -f FILE` (a Subnet manifest), or pick another name"
                        .into(),
                ),
            });
        }
        Some(old) if old.spec.pool != subnet.spec.pool => {
            return Err(Error::conflict(format!(
                "subnet `{}` belongs to pool `{}`; a subnet cannot move to another pool (delete it first)",
                subnet.metadata.name,
                old.pool()
            )));
        }
        Some(_) => Put::Configured,
        None => Put::Created,
    };
    for sibling in list(store, ns, Some(&pool.name))? {
        if sibling.metadata.name != subnet.metadata.name
            && (sibling.spec.cidr.contains(&cidr) || cidr.contains(&sibling.spec.cidr))
        {
            return Err(Error::conflict(format!(
                "subnet `{}` ({cidr}) overlaps {}",
                subnet.metadata.name,
                sibling.describe()
            )));
        }
    }
    refuse_harm(store, subnet, &manifest)?;
    Ok(put)
}

/// Exit 4 when `subnet` would take an address from its holder: an allocated address, or one
/// a cooldown record keeps for the owner that released it, as its network, broadcast,
/// gateway or a reserved address.
fn refuse_harm(store: &dyn Store, subnet: &SubnetManifest, manifest: &PoolManifest) -> Result<()> {
    let pool = subnet.pool();
    let ns = pool.namespace.as_ref();
    // An address already held must stay a candidate: the gateway of a new subnet must not
    // be a VM's address, nor one a cooldown record keeps for the VM that released it.
    let names = store.list(ObjectKind::Allocation, ns)?;
    let held: Vec<IpAddr> = pool_addresses(&names, &pool.name).collect();
    let kept = crate::engine::cooldown::kept(store, &pool, manifest)?;
    let hint = |address: IpAddr| {
        format!(
            "see who holds it: ipamctl list --pool {} --address {address}{}",
            pool.name,
            ns.map(|n| format!(" -n {n}")).unwrap_or_default()
        )
    };
    if let Some(address) = harmed(subnet, manifest, &held) {
        return Err(Error::Conflict {
            message: format!(
                "{address} of subnet `{}` would be {}, but it is allocated",
                subnet.metadata.name,
                role(subnet, address)
            ),
            hint: Some(hint(address)),
        });
    }
    if let Some(address) = harmed(subnet, manifest, &kept) {
        return Err(Error::Conflict {
            message: format!(
                "{address} of subnet `{}` would be {}, but it is cooling: pool `{pool}`'s \
                 reuseAfter keeps it for the owner that released it",
                subnet.metadata.name,
                role(subnet, address)
            ),
            hint: Some(format!(
                "wait until the cooldown ends (`ipamctl history {address}` shows the release), or pick another range"
            )),
        });
    }
    Ok(())
}

/// Exit 2 for a subnet of a supernet pool: a supernet hands out prefixes, and its children
/// are claimed (`allocate --prefix-length`), not subnets.
fn refuse_supernet(manifest: &PoolManifest, pool: &PoolRef) -> Result<()> {
    if manifest.spec.kind == PoolKind::Supernet {
        return Err(Error::usage(format!(
            "pool `{pool}` is a supernet: it hands out prefixes, and has no subnets; claim one with `ipamctl allocate {} --prefix-length N`, or draw a VPC from it with `vpc create --from-pool`",
            pool.name
        )));
    }
    Ok(())
}

/// What `address` would be in `subnet`: its gateway, reserved, or its network or broadcast
/// address.
fn role(subnet: &SubnetManifest, address: IpAddr) -> &'static str {
    if address == subnet.gateway() {
        "its gateway"
    } else if subnet
        .spec
        .reserved
        .iter()
        .any(|r| r.net().contains(&address))
    {
        "reserved"
    } else {
        "its network or broadcast address"
    }
}

/// The lowest of `held` (the addresses allocated in the subnet's pool) that `subnet` would
/// take from its holder: its network, broadcast, gateway or a reserved address.
fn harmed(subnet: &SubnetManifest, pool: &PoolManifest, held: &[IpAddr]) -> Option<IpAddr> {
    let candidates = subnet.candidates(pool);
    held.iter()
        .copied()
        .filter(|a| subnet.spec.cidr.contains(a) && !candidates.contains(*a))
        .min()
}

/// `subnet create NAME --pool P --prefix-length N`: the subnet `name` as the next free block
/// of that length in `pool`, by the best-fit rule of [`crate::model::prefix::best_fit`]: it
/// overlaps no sibling subnet, and no block is taken whose network, broadcast or gateway
/// address an allocation holds (such a block is passed over, as a sibling would be). Chosen
/// and created under the pool's exclusive lock, which every change of a subnet holds, so
/// concurrent carves get disjoint blocks. Idempotent by name: a subnet `name` of this pool
/// and length is returned as it is ([`Put::Unchanged`]); one of another pool or length is
/// exit 4. No free block of that length is exit 5, naming the largest free block.
pub fn carve(
    store: &dyn Store,
    scope: &Scope,
    name: &SubnetName,
    pool: &PoolRef,
    len: u8,
    dry_run: bool,
) -> Result<(SubnetManifest, Put)> {
    scope.check(Verb::Admin, pool.namespace.as_ref(), || {
        crate::store::read::pool_missing(pool)
    })?;
    scope.scrub(carve_in(store, name, pool, len, dry_run))
}

fn carve_in(
    store: &dyn Store,
    name: &SubnetName,
    pool: &PoolRef,
    len: u8,
    dry_run: bool,
) -> Result<(SubnetManifest, Put)> {
    let manifest = load_pool(store, pool)?;
    refuse_supernet(&manifest, pool)?;
    crate::engine::doomed::refuse(&manifest, pool)?;
    let work = || -> Result<(SubnetManifest, Put)> {
        let _lock = (!dry_run)
            .then(|| store.lock_pool(pool.namespace.as_ref(), &pool.name, LockMode::Exclusive))
            .transpose()?;
        let subnet = match read(store, pool.namespace.as_ref(), name.as_str())? {
            Some(old) => return same_carve(old, pool, len).map(|old| (old, Put::Unchanged)),
            None => pick(store, name, pool, len)?,
        };
        let put = put_locked(store, &subnet, false, dry_run)?;
        Ok((subnet, put))
    };
    if dry_run {
        work()
    } else {
        store::atomically(store, work)
    }
}

/// `old`, the subnet a carve found under its name, if it is what the carve asks for.
fn same_carve(old: SubnetManifest, pool: &PoolRef, len: u8) -> Result<SubnetManifest> {
    if old.spec.pool == pool.name && old.spec.cidr.prefix_len() == len {
        return Ok(old);
    }
    let message = if old.spec.pool == pool.name {
        format!(
            "subnet `{}` of pool `{pool}` exists as {}, not a /{len}",
            old.metadata.name, old.spec.cidr
        )
    } else {
        format!(
            "subnet `{}` exists as {} of pool `{}`, not in pool `{pool}`",
            old.metadata.name,
            old.spec.cidr,
            old.pool()
        )
    };
    Err(Error::Conflict {
        message,
        hint: Some("pick another name, or delete it first".into()),
    })
}

/// The subnet a carve makes: the best-fit free block of length `len` of the pool (read under
/// its lock) that harms no allocation.
fn pick(store: &dyn Store, name: &SubnetName, pool: &PoolRef, len: u8) -> Result<SubnetManifest> {
    let manifest = load_pool(store, pool)?;
    let cidr = manifest.spec.cidr;
    if len < cidr.prefix_len() || len > cidr.max_prefix_len() {
        return Err(Error::invalid(
            "--prefix-length",
            format!(
                "/{len} does not fit pool `{pool}` ({cidr}): give a length from {} to {}",
                cidr.prefix_len(),
                cidr.max_prefix_len()
            ),
        ));
    }
    let ns = pool.namespace.as_ref();
    let mut taken: Vec<IpNet> = list(store, ns, Some(&pool.name))?
        .iter()
        .map(|s| s.spec.cidr)
        .collect();
    let names = store.list(ObjectKind::Allocation, ns)?;
    // What a carve must not take from anyone: the allocated addresses, and the addresses a
    // cooldown record keeps for their last owner (`reuseAfter`).
    let mut held: Vec<IpAddr> = pool_addresses(&names, &pool.name).collect();
    held.extend(crate::engine::cooldown::kept(store, pool, &manifest)?);
    // Each pass either returns or takes one more block out of the running; a block is
    // passed over only for a held address inside it, so this ends after at most one pass
    // per held address of the pool.
    loop {
        let block = best_fit(cidr, &taken, len).map_err(|NoRoom { largest }| Error::NoRoom {
            what: format!("pool `{pool}`"),
            length: len,
            largest,
        })?;
        let subnet = SubnetManifest::new(name, pool, block, None, Vec::new());
        if harmed(&subnet, &manifest, &held).is_none() {
            return Ok(subnet);
        }
        taken.push(block);
    }
}

/// Deletes the subnet `name` under its pool's exclusive lock: exit 3 if it does not exist
/// (unless `ignore_missing`), 4 while an allocation of its pool holds an address inside it.
/// Returns the subnet deleted (or that would be, in a dry run).
pub fn delete(
    store: &dyn Store,
    scope: &Scope,
    ns: Option<&Namespace>,
    name: &SubnetName,
    dry_run: bool,
) -> Result<SubnetManifest> {
    scope.check(Verb::Admin, ns, || missing(ns, name))?;
    scope.scrub(delete_in(store, ns, name, dry_run))
}

fn delete_in(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &SubnetName,
    dry_run: bool,
) -> Result<SubnetManifest> {
    let subnet = load(store, ns, name)?;
    let pool = subnet.pool();
    let work = || -> Result<SubnetManifest> {
        let _lock = (!dry_run)
            .then(|| store.lock_pool(ns, &pool.name, LockMode::Exclusive))
            .transpose()?;
        // Read again under the lock: the subnet as it stands.
        let subnet = load(store, ns, name)?;
        let names = store.list(ObjectKind::Allocation, ns)?;
        let held = pool_addresses(&names, &subnet.spec.pool)
            .filter(|a| subnet.spec.cidr.contains(a))
            .count();
        if held > 0 {
            return Err(Error::Conflict {
                message: format!(
                    "{} still holds {held} allocation{}",
                    subnet.describe(),
                    if held == 1 { "" } else { "s" }
                ),
                hint: Some(format!(
                    "release them first: ipamctl list --subnet {name}{}",
                    ns.map(|n| format!(" -n {n}")).unwrap_or_default()
                )),
            });
        }
        if !dry_run {
            delete_as_read(store, ns, &subnet)?;
        }
        Ok(subnet)
    };
    if dry_run {
        work()
    } else {
        store::atomically(store, work)
    }
}

/// Deletes every subnet of `pool` (when the pool itself goes; the caller holds its lock), and
/// returns them.
pub fn delete_of_pool(store: &dyn Store, pool: &PoolRef) -> Result<Vec<SubnetManifest>> {
    let ns = pool.namespace.as_ref();
    let subnets = list(store, ns, Some(&pool.name))?;
    for subnet in &subnets {
        delete_as_read(store, ns, subnet)?;
    }
    Ok(subnets)
}

/// Deletes `subnet` only if its file still holds it ([`crate::store::Objects::delete_if`]):
/// one changed by a writer that takes no lock is kept, and the command says so (exit 4).
fn delete_as_read(
    store: &dyn Store,
    ns: Option<&Namespace>,
    subnet: &SubnetManifest,
) -> Result<()> {
    let mut ours = |bytes: &[u8]| {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| crate::yaml::decode_subnet(text).ok())
            .is_some_and(|now| now == *subnet)
    };
    match store.delete_if(ObjectKind::Subnet, ns, &subnet.metadata.name, &mut ours)? {
        crate::store::Release::Changed => Err(Error::conflict(format!(
            "{} was changed by another program while it was being deleted; it is kept, run the command again",
            subnet.describe()
        ))),
        _ => Ok(()),
    }
}
