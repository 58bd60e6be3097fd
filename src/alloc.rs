//! The claim loop, owner look-ups and guarded release, written against [`Store`].
//!
//! # Invariants
//!
//! 1. No two allocations hold the same address of a pool: an allocation's name is
//!    `<pool>-<a-b-c-d>`, and [`Store::create`] creates a name only if it does not exist.
//! 2. One owner identity (kind, name, uid) holds at most one address per pool, also when
//!    requests for it race: every request for an owner runs its look-up *and* its claim
//!    while holding that owner's lock ([`Store::lock_owner`]), so a second request waits
//!    and then finds the first one's allocation.
//! 3. Every manifest under its final name is complete (see the write protocol in
//!    [`crate::store::fs`]).
//! 4. A crash at any instant leaves 1–3 intact, and the owner that asks again gets its
//!    address back: [`Store::find_owner`] answers from the stored objects as they are, never
//!    from derived state alone (how the file store does that cheaply, and what outside
//!    writers can still do, is documented in [`crate::store::fs`]).
//! 5. A guarded release never deletes another owner's allocation: an allocation is deleted
//!    only by a process that holds the lock of the owner recorded *in the file* and read the
//!    file after taking that lock. Nobody else can delete that file meanwhile (they would need
//!    the same lock), so the address cannot be released and re-claimed under its feet.
//! 6. `allocate` holds the pool's lock shared from before it reads the pool until its claim
//!    is durable; `apply` and `pool delete` hold it exclusive while they check allocations
//!    and change the pool. So a claim is always checked against the pool as it stands.
//!
//! On PostgreSQL ([`crate::store::pg`]) the same code runs each command as one transaction
//! ([`Store::atomically`]), and the arbiters are the table's: 1 is the primary key
//! (namespace, pool, address) and 2 the unique (namespace, pool, owner kind, name, uid),
//! both decided by one `INSERT … ON CONFLICT DO NOTHING` ([`Store::claim`]; a same-owner
//! race answers [`Claim::OwnerHolds`] instead of walking every candidate); 3 and 4 are the
//! transaction's atomicity; 5 is a `DELETE` guarded by the owner's columns
//! ([`Store::release`]); 6 is the pool's row read `FOR SHARE` by a claim and `FOR UPDATE` by
//! `apply` and `pool delete`. The owner lock is then no lock at all.
//!
//! A store that cannot be written (a read-only mount) still answers an owner that already
//! holds an address: without locks, since a look-up that finds the owner's allocation is
//! right whatever runs beside it; only a claim needs the locks, and then fails.

use std::collections::VecDeque;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::cooldown::{self, Cooling};
use crate::error::{Error, Result};
use crate::model::{
    AllocationManifest, Namespace, Owner, OwnerFilter, PoolManifest, PoolName, SubnetName,
    Timestamp, allocation_name, parse_allocation_name,
};
use crate::pool::Candidates;
use crate::store::{self, Claim, FreeIter, LockGuard, LockMode, ObjectKind, OwnerLookup, Store};
use crate::subnet::{self, SubnetManifest};
use crate::yaml;

/// Which pool, in which scope (`None` = cluster-scoped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolRef {
    /// The pool's namespace; `None` for a public pool.
    pub namespace: Option<Namespace>,
    /// The pool's name.
    pub name: PoolName,
}

impl std::fmt::Display for PoolRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => write!(f, "{}", self.name),
        }
    }
}

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
}

pub use crate::store::Parsed;

/// Reads and parses one allocation; `None` if it does not exist. A file that is no manifest
/// (too large, a symlink, not a regular file) reads like one that does not parse.
pub fn read_allocation(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &str,
) -> Result<Option<Parsed>> {
    let bytes = match store.get(ObjectKind::Allocation, ns, name) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        // The file itself is too large, a symlink, not a regular file: as broken as a file
        // that does not parse, so its address stays taken and readers warn rather than fail.
        // (A symlinked directory on the way is the whole scope's problem: that stays an error.)
        Err(Error::Corrupt { path, message })
            if path.ends_with(store.locate(ObjectKind::Allocation, ns, name)) =>
        {
            return Ok(Some(Err(message)));
        }
        Err(e) => return Err(e),
    };
    Ok(Some(
        std::str::from_utf8(&bytes)
            .map_err(|_| "is not UTF-8 text".to_owned())
            .and_then(yaml::decode_allocation),
    ))
}

/// [`read_allocation`], giving a file that does not parse half a second to become whole:
/// `cp` and editors rewrite a file in place (truncate, then write), and a guarded release
/// must not refuse a file that only looked broken for an instant.
fn read_whole_allocation(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &str,
) -> Result<Option<Parsed>> {
    let mut read = read_allocation(store, ns, name)?;
    for _ in 0..50 {
        if !matches!(read, Some(Err(_))) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        read = read_allocation(store, ns, name)?;
    }
    Ok(read)
}

/// Reads a pool manifest; `NotFound` (with a hint naming other scopes that have a pool of
/// that name) when it does not exist.
pub fn load_pool(store: &dyn Store, pool: &PoolRef) -> Result<PoolManifest> {
    let ns = pool.namespace.as_ref();
    let Some(bytes) = store.get(ObjectKind::Pool, ns, pool.name.as_str())? else {
        return Err(pool_not_found(store, pool));
    };
    let location = store.locate(ObjectKind::Pool, ns, pool.name.as_str());
    let text =
        std::str::from_utf8(&bytes).map_err(|_| Error::invalid(&location, "is not UTF-8 text"))?;
    yaml::decode_pool(text).map_err(|e| Error::invalid(location, e))
}

/// The pool's manifest and the addresses its allocations hold, from one directory listing
/// (no allocation file is read). Takes no lock: for explaining a dry run, not for claiming.
pub fn pool_state(store: &dyn Store, pool: &PoolRef) -> Result<(PoolManifest, Vec<IpAddr>)> {
    let spec = load_pool(store, pool)?;
    let names = store.list(ObjectKind::Allocation, pool.namespace.as_ref())?;
    let taken = pool_addresses(&names, &pool.name).collect();
    Ok((spec, taken))
}

/// The `NotFound` error for `pool`, with a hint if the name exists in another scope.
pub fn pool_not_found(store: &dyn Store, pool: &PoolRef) -> Error {
    let elsewhere: Vec<String> = store
        .scopes()
        .unwrap_or_default()
        .into_iter()
        .filter(|scope| *scope != pool.namespace)
        .filter(|scope| {
            store
                .get(ObjectKind::Pool, scope.as_ref(), pool.name.as_str())
                .is_ok_and(|o| o.is_some())
        })
        .map(|scope| match scope {
            Some(ns) => format!("in namespace `{ns}` (pass `-n {ns}`)"),
            None => "cluster-scoped (omit `-n`)".to_owned(),
        })
        .collect();
    let scope = match &pool.namespace {
        Some(ns) => format!("in namespace `{ns}`"),
        None => "cluster-scoped".to_owned(),
    };
    Error::NotFound {
        message: format!("pool `{}` not found ({scope})", pool.name),
        hint: (!elsewhere.is_empty())
            .then(|| format!("a pool `{}` exists {}", pool.name, elsewhere.join(", "))),
    }
}

/// The addresses of `pool`'s allocations among the names of its scope.
pub fn pool_addresses<'a>(
    names: &'a [String],
    pool: &'a PoolName,
) -> impl Iterator<Item = IpAddr> + 'a {
    names
        .iter()
        .filter_map(move |name| match parse_allocation_name(name) {
            Some((p, addr)) if p == pool.as_str() => Some(addr),
            _ => None,
        })
}

/// Prints a warning about an allocation file that does not parse. Its name stays taken.
pub fn warn_unparsable(store: &dyn Store, ns: Option<&Namespace>, name: &str, why: &str) {
    eprintln!(
        "warning: {}: {why} (its address stays taken; run `ipamctl check`)",
        store.locate(ObjectKind::Allocation, ns, name)
    );
}

/// Finds the allocation `owner` holds in `pool`, warning about broken files on the way.
fn find_owner(store: &dyn Store, pool: &PoolRef, owner: &Owner) -> Result<OwnerLookup> {
    let ns = pool.namespace.as_ref();
    let lookup = store.find_owner(ns, &pool.name, owner)?;
    for (name, why) in &lookup.broken {
        warn_unparsable(store, ns, name, why);
    }
    Ok(lookup)
}

/// The pool lock (shared) and the owner's lock, for a claim; `None` when the store is
/// read-only, which leaves only a look-up (invariant 4's note in the module docs).
fn claim_locks(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
) -> Result<Option<(LockGuard, LockGuard)>> {
    let ns = pool.namespace.as_ref();
    match store.lock_pool(ns, &pool.name, LockMode::Shared) {
        Ok(pool_lock) => Ok(Some((pool_lock, store.lock_owner(ns, &pool.name, owner)?))),
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
                "release it first: ipamctl release {} {addr}{}",
                req.pool.name,
                req.pool
                    .namespace
                    .as_ref()
                    .map(|n| format!(" -n {n}"))
                    .unwrap_or_default()
            )),
        }),
    }
}

/// The candidates of this request, before taken addresses are removed. Validates
/// `--within` and `--address` against the pool (exit 2).
fn request_candidates(
    spec: &PoolManifest,
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
        None => Candidates::of_pool(&spec.spec),
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
        && !candidates.contains(addr)
    {
        let why = if !cidr.contains(&addr) {
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
        };
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

/// The director's Allocate: the owner's existing address, or the lowest free candidate,
/// claimed exclusively. See the module docs for the protocol. On a database the whole
/// decision is one transaction ([`Store::atomically`]).
pub fn allocate(store: &dyn Store, req: &Request) -> Result<Allocated> {
    if req.dry_run {
        return decide(store, req, None);
    }
    store::atomically(store, || match claim_locks(store, &req.pool, &req.owner)? {
        Some(locks) => decide(store, req, Some(locks)),
        None => allocate_read_only(store, req),
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
pub fn allocate_all(store: &dyn Store, requests: &[Request]) -> Result<Vec<Allocated>> {
    let dry_run = requests.iter().any(|r| r.dry_run);
    let work = || {
        let mut done: Vec<Allocated> = Vec::new();
        for (i, req) in requests.iter().enumerate() {
            if i > 0 {
                failpoint!("allocate-between-pools");
            }
            match allocate(store, req) {
                Ok(allocated) => done.push(allocated),
                Err(e) => {
                    undo(store, requests, &done)?;
                    return Err(e);
                }
            }
        }
        Ok(done)
    };
    if dry_run {
        return work();
    }
    store::atomically(store, work)
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

/// What the pool's cooldown records say to a claim by `owner` (nothing without
/// `reuseAfter`). The caller holds the pool's lock (shared), or makes a dry run.
pub fn cooling_for(
    store: &dyn Store,
    pool: &PoolRef,
    spec: &PoolManifest,
    owner: &Owner,
) -> Result<Cooling> {
    match &spec.spec.reuse_after {
        Some(window) => cooldown::cooling(
            store,
            pool,
            owner,
            window.duration(),
            std::time::SystemTime::now(),
        ),
        None => Ok(Cooling::default()),
    }
}

/// The part of [`allocate`] that runs under the claim's locks (`None` for a dry run).
fn decide(
    store: &dyn Store,
    req: &Request,
    locks: Option<(LockGuard, LockGuard)>,
) -> Result<Allocated> {
    // Read again under the lock: this is the pool (and subnet) as it stands until we are done.
    let spec = load_pool(store, &req.pool)?;
    let subnet = request_subnet(store, req)?;
    let candidates = request_candidates(&spec, req, subnet.as_ref())?;
    let lookup = find_owner(store, &req.pool, &req.owner)?;
    if let Some(held) = lookup.held {
        check_held(&held, req, subnet.as_ref())?;
        return Ok(Allocated::Existing(held));
    }
    // Read after the allocations were listed: an address released since the listing has
    // its record written before its allocation went (see `crate::cooldown`).
    let cooling = cooling_for(store, &req.pool, &spec, &req.owner)?;
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
    let mut claimed = claim(store, req, &candidates, &lookup.taken, whole_pool, &cooling)?;
    // Nothing free: a request for the same owner may have taken the last free address while
    // this one looked (on a database nothing serialises one owner's requests; its unique
    // constraint arbitrates). Then that address is the answer, not exhaustion.
    if claimed.is_none()
        && !req.dry_run
        && let Some(held) = find_owner(store, &req.pool, &req.owner)?.held
    {
        check_held(&held, req, subnet.as_ref())?;
        claimed = Some(Allocated::Existing(held));
    }
    drop(locks);
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
    match claimed {
        Some(allocated) => Ok(allocated),
        None => Err(Error::Exhausted {
            what: match &subnet {
                Some(s) => s.describe(),
                None => format!("pool `{}`", req.pool),
            },
            range: if req.within.is_some() || !req.reserved.is_empty() {
                format!("{range} (after `--within`/`--reserved`){cooling_note}")
            } else {
                format!("{range}{cooling_note}")
            },
        }),
    }
}

/// `allocate` on a store that cannot be written: the owner's address if it holds one, else
/// the read-only error a claim would meet.
fn allocate_read_only(store: &dyn Store, req: &Request) -> Result<Allocated> {
    let spec = load_pool(store, &req.pool)?;
    let subnet = request_subnet(store, req)?;
    request_candidates(&spec, req, subnet.as_ref())?;
    if let Some(held) = find_owner(store, &req.pool, &req.owner)?.held {
        check_held(&held, req, subnet.as_ref())?;
        return Ok(Allocated::Existing(held));
    }
    // Take the lock again for its error, which names what cannot be written.
    match claim_locks(store, &req.pool, &req.owner)? {
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

/// Claims the lowest free candidate of `pool` for `req.owner`, moving on when another
/// claimer wins an address; `None` when no candidate is left. The caller holds the pool's
/// lock (shared) and the owner's lock, and found that the owner holds nothing here. On a
/// store where the owner's constraint arbitrates instead of a lock, a concurrent request for
/// the same owner may win: its allocation is then the answer ([`Claim::OwnerHolds`]).
fn claim(
    store: &dyn Store,
    req: &Request,
    candidates: &Candidates,
    taken: &[IpAddr],
    whole_pool: bool,
    cooling: &Cooling,
) -> Result<Option<Allocated>> {
    let pool = &req.pool;
    let ns = pool.namespace.as_ref();
    // The address this owner released within the window comes first, if it may have it.
    let own = cooling.own.filter(|a| {
        candidates.contains(*a) && !taken.contains(a) && req.address.is_none_or(|r| r == *a)
    });
    let free: FreeIter<'_> = match req.address {
        // `--address`: that address or nothing, and a holder is a conflict, not exhaustion.
        Some(addr) => {
            let name = allocation_name(&pool.name, addr);
            if taken.contains(&addr) || store.get(ObjectKind::Allocation, ns, &name)?.is_some() {
                return Err(held_by_other(store, req, addr));
            }
            Box::new(std::iter::once(Ok(addr)))
        }
        None => store.free_candidates(ns, &pool.name, candidates, taken, whole_pool)?,
    };
    let free = own.map(Ok).into_iter().chain(free);
    let (mut free, mut put_off, mut lost) = (free, VecDeque::new(), 0u32);
    loop {
        let addr = match free.next() {
            Some(addr) => addr?,
            None => match put_off.pop_front() {
                Some(addr) => addr,
                None => break,
            },
        };
        let mut manifest = AllocationManifest::new(&pool.name, ns, addr, req.owner.clone());
        // Written once, by the claim: `reconcile` never releases what a live list taken
        // before it could not have named.
        manifest.metadata.creation_timestamp = Some(Timestamp::now());
        if req.dry_run {
            return Ok(Some(Allocated::WouldCreate(manifest)));
        }
        match store.claim(ns, &manifest)? {
            Claim::Claimed => {
                failpoint!("allocate-before-index");
                store.record_claim(ns, &pool.name, &req.owner, addr);
                // A record left behind (a crash before this) is harmless: its address is
                // held, and the next release of it replaces the record.
                if cooling.own == Some(addr) || cooling.stale.contains(&addr) {
                    cooldown::forget(store, pool, addr)?;
                }
                return Ok(Some(Allocated::Created(manifest)));
            }
            Claim::OwnerHolds(held) => {
                check_held(&held, req, None)?;
                return Ok(Some(Allocated::Existing(*held)));
            }
            Claim::AddressTaken if req.address.is_some() => {
                return Err(held_by_other(store, req, addr));
            }
            // Lost the race for this address to another claimer: try the next one. Claimers
            // that lost together would race together for each next address too, every loser
            // paying a durable write for it (64 processes filling a /24 made 3,086 attempts
            // for 254 addresses). So from the second loss on, a random number of free
            // candidates (fewer than 2, 4, … 32) is put off until the others ran out: the
            // first try is still the lowest free, and nothing free is ever skipped for good.
            Claim::AddressTaken => {
                lost += 1;
                for _ in 0..random_below(1 << (lost - 1).min(5)) {
                    match free.next() {
                        Some(addr) => put_off.push_back(addr?),
                        None => break,
                    }
                }
            }
        }
    }
    Ok(None)
}

/// A random number below `n` (a power of two, at most 256).
fn random_below(n: u32) -> u32 {
    u32::from(uuid::Uuid::new_v4().as_bytes()[0]) % n
}

/// Claims a floating IP from the public pools of `zone`, in name order, moving to the next
/// pool when one is exhausted. Idempotent across the zone: an owner holding an address in
/// any of its pools gets that one back.
///
/// Every pool lock, then every owner lock, is taken in pool-name order, so two requests for
/// one owner cannot claim in two different pools, and no lock order can deadlock.
pub fn allocate_zone(
    store: &dyn Store,
    zone: &str,
    owner: &Owner,
    dry_run: bool,
) -> Result<Allocated> {
    if dry_run {
        return allocate_zone_now(store, zone, owner, dry_run);
    }
    store::atomically(store, || allocate_zone_now(store, zone, owner, dry_run))
}

/// [`allocate_zone`] inside its unit of work.
fn allocate_zone_now(
    store: &dyn Store,
    zone: &str,
    owner: &Owner,
    dry_run: bool,
) -> Result<Allocated> {
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
    let mut locks = Vec::new();
    let mut read_only = None;
    if !dry_run {
        for pool in &pools {
            match store.lock_pool(None, &pool.name, LockMode::Shared) {
                Ok(lock) => locks.push(lock),
                // Only a look-up is possible: an owner holding an address still gets it.
                Err(e @ Error::ReadOnly { .. }) => {
                    read_only = Some(e);
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if read_only.is_none() {
            for pool in &pools {
                locks.push(store.lock_owner(None, &pool.name, owner)?);
            }
        }
    }
    let mut listings = Vec::new();
    for pool in &pools {
        let lookup = find_owner(store, pool, owner)?;
        if let Some(held) = lookup.held {
            return Ok(Allocated::Existing(held));
        }
        listings.push(lookup.taken);
    }
    if let Some(e) = read_only {
        return Err(e);
    }
    for (pool, entries) in pools.iter().zip(&listings) {
        // Re-read under the lock: a pool deleted or changed meanwhile is skipped or current.
        let Ok(spec) = load_pool(store, pool) else {
            continue;
        };
        let cooling = cooling_for(store, pool, &spec, owner)?;
        let candidates = Candidates::of_pool(&spec.spec).without(cooling.blocked.iter().copied());
        let whole_pool = cooling.blocked.is_empty() && cooling.own.is_none();
        let req = Request {
            pool: pool.clone(),
            owner: owner.clone(),
            within: None,
            subnet: None,
            reserved: Vec::new(),
            address: None,
            dry_run,
        };
        if let Some(allocated) = claim(store, &req, &candidates, entries, whole_pool, &cooling)? {
            return Ok(allocated);
        }
    }
    let names: Vec<String> = pools.iter().map(|p| format!("`{}`", p.name)).collect();
    Err(Error::Exhausted {
        what: format!("zone `{zone}`"),
        range: format!("any of its pools ({})", names.join(", ")),
    })
}

fn held_by_other(store: &dyn Store, req: &Request, addr: IpAddr) -> Error {
    let name = allocation_name(&req.pool.name, addr);
    let holder = match read_allocation(store, req.pool.namespace.as_ref(), &name) {
        Ok(Some(Ok(m))) => format!("by `{}`", m.spec.owner),
        _ => "already".to_owned(),
    };
    Error::conflict(format!("{addr} in pool `{}` is held {holder}", req.pool))
}

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
/// pool's exclusive lock (see [`crate::cooldown`]).
pub fn release_address(
    store: &dyn Store,
    pool: &PoolRef,
    addr: IpAddr,
    guard: &OwnerFilter,
) -> Result<Released> {
    release_with(store, pool, addr, guard, false)
}

/// [`release_address`] for a caller that holds the pool's lock exclusively and is removing
/// the pool (`vpc delete`): no lock is taken and no cooldown record written.
pub fn release_in_doomed_pool(
    store: &dyn Store,
    pool: &PoolRef,
    addr: IpAddr,
    guard: &OwnerFilter,
) -> Result<Released> {
    release_with(store, pool, addr, guard, true)
}

fn release_with(
    store: &dyn Store,
    pool: &PoolRef,
    addr: IpAddr,
    guard: &OwnerFilter,
    doomed: bool,
) -> Result<Released> {
    // Each turn of the loop takes the lock of the owner the file names; if the file changed
    // hands before the lock was granted, go round again with the new owner.
    for _ in 0..16 {
        match store::atomically(store, || release_attempt(store, pool, addr, guard, doomed))? {
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
    doomed: bool,
) -> Result<Option<Released>> {
    let ns = pool.namespace.as_ref();
    let name = allocation_name(&pool.name, addr);
    let Some(parsed) = read_whole_allocation(store, ns, &name)? else {
        return Ok(Some(Released::NotHeld));
    };
    let manifest = guarded(store, pool, addr, parsed, guard)?;
    let owner = manifest.spec.owner.clone();
    // With a cooldown, no claim may run between the record and the delete: the pool's lock,
    // exclusive, taken before the owner's (the order every claim takes them in).
    let cooldown = !doomed && load_pool(store, pool).is_ok_and(|p| p.spec.reuse_after.is_some());
    let _pool_lock = cooldown
        .then(|| store.lock_pool(ns, &pool.name, LockMode::Exclusive))
        .transpose()?;
    let _lock = store.lock_owner(ns, &pool.name, &owner)?;
    match read_allocation(store, ns, &name)? {
        Some(Ok(now)) if now == manifest => {
            if cooldown {
                // First the record, then the delete: the address never looks free without it.
                cooldown::record_release(store, pool, addr, &owner)?;
                failpoint!("release-after-cooldown-record");
            }
            Ok(if store.release(ns, &manifest)? {
                Some(Released::Deleted(Box::new(manifest)))
            } else {
                None
            })
        }
        None => Ok(Some(Released::NotHeld)),
        Some(_) => Ok(None),
    }
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
        return Err(Error::conflict(format!(
            "{addr} in pool `{pool}` is held by `{owner}`{}, not by the given owner; nothing released",
            owner
                .uid()
                .map(|u| format!(" (uid {u})"))
                .unwrap_or_default()
        )));
    }
    Ok(manifest)
}

/// Every allocation of scope `ns` (of `pool` only, if given) whose owner passes `filter`,
/// sorted by pool and address; broken files are warned about. Reads only the files the
/// store cannot rule out.
pub fn allocations_of(
    store: &dyn Store,
    ns: Option<&Namespace>,
    pool: Option<&PoolName>,
    filter: &OwnerFilter,
) -> Result<Vec<AllocationManifest>> {
    let mut found = Vec::new();
    for f in store.find_allocations(ns, pool, filter)? {
        match f.parsed {
            Ok(m) => found.push(m),
            Err(why) => warn_unparsable(store, ns, &f.name, &why),
        }
    }
    found.sort_by(|a, b| (&a.spec.pool, a.spec.address).cmp(&(&b.spec.pool, b.spec.address)));
    Ok(found)
}

/// Looks up the owner's allocation without locking or writing (for `--dry-run` and reads).
pub fn lookup_owner(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
) -> Result<Option<AllocationManifest>> {
    Ok(find_owner(store, pool, owner)?.held)
}
