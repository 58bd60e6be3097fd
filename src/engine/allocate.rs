//! The claim loop and owner look-ups: the first free candidate of a pool in the order of
//! its `spec.pick` (the lowest, or from the owner's hashed start: [`pick`]), claimed
//! exclusively, or the address the owner already holds (invariants 1, 2 and 6 of
//! [`crate::engine`]).
//!
//! This file holds the request and the checks run under the claim's locks; the loop that
//! claims is in `allocate/claim_loop.rs`, the owner look-ups in `allocate/owners.rs`, the
//! hashed start in `allocate/pick.rs` and the zone form in `allocate/zone.rs`.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::engine::cooldown;
use crate::engine::identity;
use crate::engine::mac::{self, MacChoice};
use crate::engine::release::release_address;
use crate::engine::subnet;
use crate::engine::warning::{Warning, Warnings};
use crate::error::{Error, Result};
use crate::model::candidates::Candidates;
use crate::model::subnet::{SubnetManifest, off_limits_role, pool_candidates};
use crate::model::{
    AllocationManifest, Namespace, Owner, OwnerFilter, PoolManifest, PoolName, PoolRef, SubnetName,
};
use crate::store::read::load_pool;
use crate::store::{self, ClaimLock, LockMode, ObjectKind, Store};

mod claim_loop;
mod owners;
mod pick;
mod zone;

use claim_loop::{Walk, claim};
use owners::find_owner;
pub use owners::{allocations_of, lookup_owner};
pub use pick::walk_start;
pub use zone::allocate_zone;

/// An `allocate` request.
#[derive(Clone, Debug)]
pub struct Request {
    /// The pool to claim from.
    pub pool: PoolRef,
    /// Exact owner identity.
    pub owner: Owner,
    /// Only addresses inside this subnet (its own network and broadcast skipped).
    pub within: Option<IpNet>,
    /// Only candidates of this stored subnet of the pool (`--subnet`).
    pub subnet: Option<SubnetName>,
    /// Addresses never to hand out in this request.
    pub reserved: Vec<IpAddr>,
    /// One specific address.
    pub address: Option<IpAddr>,
    /// Decide, but write nothing.
    pub dry_run: bool,
    /// `--mac`: the MAC of the owner's NIC, stored as `spec.mac` (a NIC's owner only).
    pub mac: Option<MacChoice>,
    /// `--ttl`: a lease ([`crate::engine::lease`]); asked again, it is renewed.
    pub ttl: Option<std::time::Duration>,
}

/// What `allocate` did.
#[derive(Clone, Debug)]
pub enum Allocated {
    /// The owner already held this allocation.
    Existing(AllocationManifest),
    /// A new allocation was claimed.
    Created(AllocationManifest),
    /// `--dry-run`: this allocation would be claimed.
    WouldCreate(AllocationManifest),
}

impl Allocated {
    /// The allocation, whichever way it came.
    pub fn manifest(&self) -> &AllocationManifest {
        match self {
            Allocated::Existing(m) | Allocated::Created(m) | Allocated::WouldCreate(m) => m,
        }
    }

    /// The allocation, owned.
    pub fn into_manifest(self) -> AllocationManifest {
        match self {
            Allocated::Existing(m) | Allocated::Created(m) | Allocated::WouldCreate(m) => m,
        }
    }
}

/// The warning about an allocation that does not parse. Its name stays taken.
pub fn unparsable(store: &dyn Store, ns: Option<&Namespace>, name: &str, why: &str) -> Warning {
    crate::engine::warning::unparsable(
        &store.locate(ObjectKind::Allocation, ns, name),
        why,
        "its address stays taken",
    )
}

/// Fails closed when an allocation of the pool that does not parse may be `owner`'s: its
/// bytes name the owner's uid, or its kind and name. A claim would then hand the owner a
/// second address the moment the file is repaired, so none is made: exit 1, naming the file
/// and `ipamctl check`. Other owners still claim (the file's address stays taken).
fn refuse_if_broken_names(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
    broken: &[(String, String)],
    warnings: &mut Warnings,
) -> Result<()> {
    let ns = pool.namespace.as_ref();
    for (name, _) in broken {
        // Over the size limit of a manifest, a file may still name the owner (issue 31):
        // its bytes are searched all the same; one too large to read at all may be anyone's.
        let bytes = match store.get_to_search(ObjectKind::Allocation, ns, name) {
            Ok(Some(bytes)) => bytes,
            // Released since the look-up.
            Ok(None) => continue,
            Err(e) => {
                return Err(Error::Corrupt {
                    path: store.locate(ObjectKind::Allocation, ns, name).into(),
                    message: format!(
                        "does not parse and cannot be read to tell whose it is ({e}); no address is claimed for `{owner}` until it is removed or repaired: run `ipamctl check`"
                    ),
                });
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let by_uid = owner.uid().is_some_and(|u| text.contains(u.as_str()));
        let by_name = text.contains(owner.kind().as_str()) && text.contains(owner.name());
        if by_uid || by_name {
            let path = store.locate(ObjectKind::Allocation, ns, name);
            // The error names the file: its warning would say the same twice.
            warnings.forget_about(&path);
            return Err(Error::Corrupt {
                path: path.into(),
                message: format!(
                    "does not parse and may be the allocation of `{owner}` (it names its {}); no address is claimed for `{owner}` until it is repaired: run `ipamctl check`",
                    if by_uid { "uid" } else { "kind and name" }
                ),
            });
        }
    }
    Ok(())
}

/// The claim's locks in `pools` (see [`ClaimLock`]); `None` when the store is read-only,
/// which leaves only a look-up (the note at the end of the module docs of
/// [`crate::engine`]).
fn claim_locks(
    store: &dyn Store,
    ns: Option<&Namespace>,
    pools: &[PoolName],
    owner: &Owner,
) -> Result<Option<ClaimLock>> {
    match store.lock_claim(ns, pools, owner) {
        Ok(locks) => Ok(Some(locks)),
        Err(Error::ReadOnly { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Checks a held allocation against the request's constraints (exit 4 if it breaks one).
fn check_held(
    held: &AllocationManifest,
    req: &Request,
    subnet: Option<&SubnetManifest>,
) -> Result<()> {
    let addr = held.spec.address;
    let broken = if req.address.is_some_and(|a| a != addr) {
        Some("`--address`")
    } else if subnet.is_some_and(|s| !s.spec.cidr.contains(&addr)) {
        Some("`--subnet`")
    } else if req.within.is_some_and(|w| !w.contains(&addr)) {
        Some("`--within`")
    } else if req.reserved.contains(&addr) {
        Some("`--reserved`")
    } else {
        None
    };
    match broken {
        None => Ok(()),
        Some(flag) => Err(Error::Conflict {
            message: format!(
                "owner `{}` already holds {addr} in pool `{}`, which does not satisfy {flag}",
                req.owner, req.pool
            ),
            hint: Some(format!(
                "release it first: {}",
                crate::engine::hint::release(&req.pool, addr, &held.spec.owner)
            )),
        }),
    }
}

/// `req` with its `--mac` made concrete for the pool `spec` ([`mac::for_pool`]).
fn with_pool_mac(store: &dyn Store, req: &Request, spec: &PoolManifest) -> Result<Request> {
    let mut req = req.clone();
    if let Some(choice) = req.mac {
        req.mac = Some(mac::for_pool(
            store, choice, spec, &req.pool, &req.owner, None,
        )?);
    }
    Ok(req)
}

/// The candidates of this request, before taken addresses are removed. Validates
/// `--within` and `--address` against the pool (exit 2).
fn request_candidates(
    spec: &PoolManifest,
    subnets: &[SubnetManifest],
    req: &Request,
    subnet: Option<&SubnetManifest>,
) -> Result<Candidates> {
    let cidr = spec.spec.cidr;
    if let Some(other) = req
        .reserved
        .iter()
        .find(|a| a.is_ipv6() != cidr.addr().is_ipv6())
    {
        return Err(Error::invalid(
            "--reserved",
            format!(
                "{other} is an {} address but pool `{}` is {cidr}",
                crate::model::family_name(*other),
                req.pool
            ),
        ));
    }
    let base = match subnet {
        Some(s) => s.candidates(spec),
        None => pool_candidates(spec, subnets),
    };
    let mut candidates = base.without(req.reserved.iter().copied());
    if let Some(within) = req.within {
        if !cidr.contains(&within) {
            return Err(Error::invalid(
                "--within",
                format!(
                    "`{within}` does not lie inside pool `{}` ({cidr})",
                    req.pool
                ),
            ));
        }
        candidates = candidates.within(within);
    }
    if let Some(addr) = req.address
        && let Some((s, role)) = off_limits_role(subnets, addr)
    {
        return Err(Error::Conflict {
            message: format!("{addr} is {role} of {}", s.describe()),
            hint: Some(format!(
                "no claim is given it; `--subnet {}` without `--address` claims a free address of it",
                s.metadata.name
            )),
        });
    }
    if let Some(addr) = req.address
        && !candidates.contains(addr)
    {
        let why = not_a_candidate(spec, req, subnet, addr);
        return Err(Error::invalid(
            "--address",
            format!("{addr} is not a candidate of this request: {why}"),
        ));
    }
    if let Some(addr) = req.address {
        // `--address` asks for exactly this address: it is the request's only candidate.
        candidates = candidates.only(addr);
    }
    Ok(candidates)
}

/// Why `addr` (`--address`) is not among the request's candidates.
fn not_a_candidate(
    spec: &PoolManifest,
    req: &Request,
    subnet: Option<&SubnetManifest>,
    addr: IpAddr,
) -> String {
    let cidr = spec.spec.cidr;
    if !cidr.contains(&addr) {
        format!("it is outside the pool's prefix {cidr}")
    } else if let Some(s) = subnet
        && !s.spec.cidr.contains(&addr)
    {
        format!(
            "it is outside subnet `{}` ({})",
            s.metadata.name, s.spec.cidr
        )
    } else if let Some(s) = subnet
        && s.gateway() == addr
    {
        format!("it is the gateway of subnet `{}`", s.metadata.name)
    } else if let Some(s) = subnet
        && s.spec.reserved.iter().any(|r| r.net().contains(&addr))
    {
        format!("it is reserved by subnet `{}`", s.metadata.name)
    } else if spec.spec.gateway == Some(addr) {
        "it is the pool's gateway".to_owned()
    } else if req.reserved.contains(&addr) {
        "it is listed in `--reserved`".to_owned()
    } else if req.within.is_some_and(|w| !w.contains(&addr)) {
        "it is outside `--within`".to_owned()
    } else if spec.spec.exclude.iter().any(|e| e.net().contains(&addr)) {
        "it is excluded by the pool".to_owned()
    } else if addr.is_ipv6() {
        "it is a subnet-router anycast address (RFC 4291 §2.6.1)".to_owned()
    } else {
        "it is a network or broadcast address".to_owned()
    }
}

/// The director's Allocate: the owner's existing address, or the first free candidate in
/// the pool's pick order (the lowest, or from the owner's hashed start), claimed exclusively. See the module docs for the protocol. On a database the whole
/// decision is one transaction ([`crate::store::Units::atomically`]). Broken allocation
/// files met on the way are added to `warnings`, whatever the result.
pub fn allocate(store: &dyn Store, req: &Request, warnings: &mut Warnings) -> Result<Allocated> {
    if req.mac.is_some() {
        mac::refuse_without_nic(&req.owner)?;
    }
    if req.dry_run {
        return allocate_under_locks(store, req, None, warnings);
    }
    let ns = req.pool.namespace.as_ref();
    let pools = std::slice::from_ref(&req.pool.name);
    store::atomically(store, || match claim_locks(store, ns, pools, &req.owner)? {
        Some(locks) => allocate_under_locks(store, req, Some(locks), warnings),
        None => allocate_read_only(store, req, warnings),
    })
}

/// One address for one owner in each of `requests`' pools (their owner is the same), in
/// order, all or nothing: when one fails, the addresses this call claimed in the pools
/// before it are released again (an address the owner already held stays) and its error
/// is returned. On a database the whole is one transaction, which the error rolls back.
///
/// Each pool's claim is [`allocate`]'s, so a crash between two claims leaves the earlier
/// ones as the owner's allocations: the same request, asked again, gets them back
/// ([`Allocated::Existing`]) and claims the rest, never a second address in a pool.
pub fn allocate_all(
    store: &dyn Store,
    requests: &[Request],
    warnings: &mut Warnings,
) -> Result<Vec<Allocated>> {
    let dry_run = requests.iter().any(|r| r.dry_run);
    let mut work = || {
        // The claim's locks in every pool at once, held until the last pool's claim: a
        // release of the owner cannot come between two pools (it would leave the owner
        // holding one address, and the earlier pool's `existing` answer false). Each
        // pool's claim then takes its own again, which a store grants to the holder.
        let locks = if dry_run {
            None
        } else {
            all_claim_locks(store, requests)?
        };
        let mut done: Vec<Allocated> = Vec::new();
        let mut failed = None;
        for (i, req) in requests.iter().enumerate() {
            if i > 0 {
                failpoint!("allocate-between-pools");
            }
            let mut req = req.clone();
            req.mac = mac::carried(req.mac, done.first().and_then(|a| a.manifest().spec.mac));
            match allocate(store, &req, warnings) {
                Ok(allocated) => done.push(allocated),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // Released before the undo, which may lock a pool exclusively (its cooldown).
        drop(locks);
        if let Some(e) = failed {
            // A database's error aborted the transaction: its rollback undoes the earlier
            // pools' claims, and a statement now would only fail, hiding the error (a
            // deadlock, for which the unit runs again, became exit 1 under `--jobs`).
            if !matches!(e, Error::Database { .. }) {
                undo(store, requests, &done)?;
            }
            return Err(e);
        }
        Ok(done)
    };
    if dry_run {
        return work();
    }
    store::atomically(store, work)
}

/// The claim locks of `requests` (one owner, several pools of one scope) in all their
/// pools, taken in the order [`crate::store::guard`] sets (pools ascending by name); `None`
/// on a read-only store (each pool's claim then only looks up) or for a single pool.
fn all_claim_locks(store: &dyn Store, requests: &[Request]) -> Result<Option<ClaimLock>> {
    let Some(first) = requests.first() else {
        return Ok(None);
    };
    let ns = first.pool.namespace.as_ref();
    if requests.len() < 2 || requests.iter().any(|r| r.pool.namespace.as_ref() != ns) {
        return Ok(None);
    }
    let mut pools: Vec<PoolName> = requests.iter().map(|r| r.pool.name.clone()).collect();
    pools.sort();
    pools.dedup();
    claim_locks(store, ns, &pools, &first.owner)
}

/// Releases what [`allocate_all`] claimed (`Created`) before a later pool failed.
fn undo(store: &dyn Store, requests: &[Request], done: &[Allocated]) -> Result<()> {
    for (req, allocated) in requests.iter().zip(done) {
        if let Allocated::Created(m) = allocated {
            let guard = OwnerFilter::exactly(&m.spec.owner);
            release_address(store, &req.pool, m.spec.address, &guard)?;
        }
    }
    Ok(())
}

/// The request's subnet (`--subnet`), read now, checked to be of the request's pool (exit 2
/// if not, 3 if it does not exist).
fn request_subnet(store: &dyn Store, req: &Request) -> Result<Option<SubnetManifest>> {
    let Some(name) = &req.subnet else {
        return Ok(None);
    };
    let s = subnet::load(store, req.pool.namespace.as_ref(), name)?;
    if s.spec.pool != req.pool.name {
        return Err(Error::invalid(
            "--subnet",
            format!(
                "subnet `{name}` is a range of pool `{}`, not of `{}`",
                s.pool(),
                req.pool
            ),
        ));
    }
    Ok(Some(s))
}

/// The part of [`allocate`] that runs under the claim's locks (`None` for a dry run), which
/// it holds until it returns: on the file store until then, on a database until the unit of
/// work ends.
fn allocate_under_locks(
    store: &dyn Store,
    req: &Request,
    _locks: Option<ClaimLock>,
    warnings: &mut Warnings,
) -> Result<Allocated> {
    // Read again under the lock: this is the pool (and subnet) as it stands until we are done.
    let spec = load_pool(store, &req.pool)?;
    crate::engine::doomed::refuse(&spec, &req.pool)?;
    crate::engine::prefix::refuse_addresses(&spec, &req.pool)?;
    let req = &with_pool_mac(store, req, &spec)?;
    let subnets = subnet::of_pool(store, &req.pool)?;
    let subnet = request_subnet(store, req)?;
    let candidates = request_candidates(&spec, &subnets, req, subnet.as_ref())?;
    let start = pick::start(&spec, req, &candidates);
    let lookup = find_owner(store, &req.pool, &req.owner, warnings)?;
    if let Some(held) = lookup.held {
        check_held(&held, req, subnet.as_ref())?;
        mac::check_held(store, &held, req.mac, &req.pool, !req.dry_run)?;
        let ns = req.pool.namespace.as_ref();
        let held = crate::engine::lease::renewed(store, ns, held, req.ttl, req.dry_run)?;
        return Ok(Allocated::Existing(held));
    }
    if let Some(holder) = &lookup.namesake {
        return Err(identity::holds_the_name(&req.pool, &req.owner, holder));
    }
    refuse_if_broken_names(store, &req.pool, &req.owner, &lookup.broken, warnings)?;
    // Read after the allocations were listed: an address released since the listing has
    // its record written before its allocation went (see `crate::engine::cooldown`).
    let cooling = cooldown::cooling(store, &req.pool, &spec, &req.owner)?;
    if let Some(addr) = req.address
        && cooling.blocked.contains(&addr)
    {
        return Err(Error::conflict(format!(
            "{addr} in pool `{}` was released by another owner less than {} ago (the pool's reuseAfter)",
            req.pool,
            spec.spec
                .reuse_after
                .as_ref()
                .map_or(String::new(), |r| r.to_string())
        )));
    }
    let range = candidates.describe();
    let cooling_count = cooling
        .blocked
        .iter()
        .filter(|a| candidates.contains(**a))
        .count();
    let candidates = candidates.without(cooling.blocked.iter().copied());
    let whole_pool = req.within.is_none()
        && req.subnet.is_none()
        && req.reserved.is_empty()
        && req.address.is_none()
        && cooling.blocked.is_empty()
        && cooling.own.is_none();
    let walk = Walk { start, whole_pool };
    let mut claimed = claim(store, req, &candidates, &lookup.taken, walk, &cooling)?;
    // Nothing free: a request for the same owner may have taken the last free address while
    // this one looked (on a database nothing serialises one owner's requests; its unique
    // constraint arbitrates). Then that address is the answer, not exhaustion.
    if claimed.is_none() && !req.dry_run {
        let again = find_owner(store, &req.pool, &req.owner, warnings)?;
        if let Some(held) = again.held {
            check_held(&held, req, subnet.as_ref())?;
            mac::check_held(store, &held, req.mac, &req.pool, true)?;
            let ns = req.pool.namespace.as_ref();
            let held = crate::engine::lease::renewed(store, ns, held, req.ttl, false)?;
            claimed = Some(Allocated::Existing(held));
        } else if let Some(holder) = &again.namesake {
            return Err(identity::holds_the_name(&req.pool, &req.owner, holder));
        }
    }
    claimed.ok_or_else(|| exhausted(req, &spec, subnet.as_ref(), &range, cooling_count))
}

/// The error of a request that found no free candidate: what was searched (`range`, as
/// the candidates describe themselves), and how many released addresses wait out the
/// pool's `reuseAfter`.
fn exhausted(
    req: &Request,
    spec: &PoolManifest,
    subnet: Option<&SubnetManifest>,
    range: &str,
    cooling_count: usize,
) -> Error {
    let cooling_note = if cooling_count > 0 {
        format!(
            "; {cooling_count} released address{} wait{} out reuseAfter {}",
            if cooling_count == 1 { "" } else { "es" },
            if cooling_count == 1 { "s" } else { "" },
            spec.spec
                .reuse_after
                .as_ref()
                .map_or(String::new(), |r| r.to_string())
        )
    } else {
        String::new()
    };
    Error::Exhausted {
        what: match subnet {
            Some(s) => s.describe(),
            None => format!("pool `{}`", req.pool),
        },
        range: if req.within.is_some() || !req.reserved.is_empty() {
            format!("{range} (after `--within`/`--reserved`){cooling_note}")
        } else {
            format!("{range}{cooling_note}")
        },
    }
}

/// `allocate` on a store that cannot be written: the owner's address if it holds one, else
/// the read-only error a claim would meet.
fn allocate_read_only(
    store: &dyn Store,
    req: &Request,
    warnings: &mut Warnings,
) -> Result<Allocated> {
    let spec = load_pool(store, &req.pool)?;
    crate::engine::doomed::refuse(&spec, &req.pool)?;
    crate::engine::prefix::refuse_addresses(&spec, &req.pool)?;
    let req = &with_pool_mac(store, req, &spec)?;
    let subnets = subnet::of_pool(store, &req.pool)?;
    let subnet = request_subnet(store, req)?;
    request_candidates(&spec, &subnets, req, subnet.as_ref())?;
    let lookup = find_owner(store, &req.pool, &req.owner, warnings)?;
    if let Some(held) = lookup.held {
        check_held(&held, req, subnet.as_ref())?;
        mac::check_held(store, &held, req.mac, &req.pool, false)?;
        return Ok(Allocated::Existing(held));
    }
    if let Some(holder) = &lookup.namesake {
        return Err(identity::holds_the_name(&req.pool, &req.owner, holder));
    }
    // Take the lock again for its error, which names what cannot be written.
    let ns = req.pool.namespace.as_ref();
    match claim_locks(store, ns, std::slice::from_ref(&req.pool.name), &req.owner)? {
        None => Err(store
            .lock_pool(
                req.pool.namespace.as_ref(),
                &req.pool.name,
                LockMode::Shared,
            )
            .err()
            .unwrap_or_else(|| Error::conflict("the state directory became writable; try again"))),
        Some(_) => Err(Error::conflict(
            "the state directory became writable meanwhile; try again",
        )),
    }
}
