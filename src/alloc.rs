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
//!    address back: the look-up below never trusts the derived index alone, it reads every
//!    allocation the index does not vouch for, so a claim whose index update was lost is
//!    still found.
//! 5. A guarded release never deletes another owner's allocation: an allocation is deleted
//!    only by a process that holds the lock of the owner recorded *in the file* and read the
//!    file after taking that lock. Nobody else can delete that file meanwhile (they would need
//!    the same lock), so the address cannot be released and re-claimed under its feet.
//! 6. `allocate` holds the pool's lock shared from before it reads the pool until its claim
//!    is durable; `apply` and `pool delete` hold it exclusive while they check allocations
//!    and change the pool. So a claim is always checked against the pool as it stands.
//!
//! # Owner look-up in O(1), without trusting derived state
//!
//! The allocation files are the only truth. The index (`.index/` in each allocations
//! directory, git-ignored) is a cache with two parts: a per-owner hint (owner key →
//! address) and a journal of facts (which inode of which allocation is whose) together
//! with the directory states for which those facts are complete (see
//! [`crate::store::journal`]). A look-up for owner O:
//! 1. *Hint:* read O's hint, then read that one allocation file; if it names O, done.
//!    Two small reads, whatever the pool's size: this is the idempotent path.
//! 2. *Listing:* otherwise load the journal and list the allocation names (no file reads).
//!    If every change of the directory since the pool was last read in full was made and
//!    logged by ipamctl, an allocation whose inode matches its fact is known, and is read
//!    only if the fact says its owner is O. Any allocation without a matching fact is read.
//!    If some change was not logged (a `git pull`, a hand edit, a process killed between
//!    its claim and its journal line), a fact holds only for a file whose change time
//!    (ctime, which user space cannot set back, and which a rename or link moves forward)
//!    is before the last version the journal was complete for; every other file of the pool
//!    is read, what is learnt is logged, and the journal vouches for the directory again.
//!
//! Step 2 costs one directory listing plus the few unknown files, so a new owner's
//! `allocate` grows with N only as fast as listing the directory does. Inode numbers alone
//! would not do: filesystems hand a freed number to the next new file, so a file replaced
//! under the same name can carry the old number; the journal's chain of logged changes is
//! what rules that out.
//!
//! What the journal cannot see: a file rewritten *in place* while the journal still
//! vouches for the directory (an in-place write does not change the directory), and an
//! outside change landing in the same clock tick as an ipamctl write to the same
//! directory. Neither is something git or ipamctl does; `ipamctl check` reports the
//! duplicate owner either could cause.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::error::{Error, Result};
use crate::model::{
    AllocationManifest, Namespace, Owner, OwnerFilter, PoolManifest, PoolName, allocation_name,
    parse_allocation_name,
};
use crate::pool::Candidates;
use crate::store::{Entry, IndexEntry, IndexView, LockMode, ObjectKind, Store};
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
    pub within: Option<Ipv4Net>,
    /// Addresses never to hand out in this request.
    pub reserved: Vec<Ipv4Addr>,
    /// One specific address.
    pub address: Option<Ipv4Addr>,
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

/// An allocation file as read: parsed, or the reason it does not parse.
pub type Parsed = std::result::Result<AllocationManifest, String>;

/// Reads and parses one allocation; `None` if it does not exist. The stamp comes along. A
/// file that is no manifest (too large, a symlink, not a regular file) reads like one that
/// does not parse, with stamp 0.
pub fn read_allocation(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &str,
) -> Result<Option<(Parsed, u64)>> {
    let obj = match store.get(ObjectKind::Allocation, ns, name) {
        Ok(Some(obj)) => obj,
        Ok(None) => return Ok(None),
        // The file itself is too large, a symlink, not a regular file: as broken as a file
        // that does not parse, so its address stays taken and readers warn rather than fail.
        // (A symlinked directory on the way is the whole scope's problem: that stays an error.)
        Err(Error::Corrupt { path, message })
            if path.ends_with(store.locate(ObjectKind::Allocation, ns, name)) =>
        {
            return Ok(Some((Err(message), 0)));
        }
        Err(e) => return Err(e),
    };
    let parsed = std::str::from_utf8(&obj.bytes)
        .map_err(|_| "is not UTF-8 text".to_owned())
        .and_then(yaml::decode_allocation);
    Ok(Some((parsed, obj.stamp)))
}

/// Reads a pool manifest; `NotFound` (with a hint naming other scopes that have a pool of
/// that name) when it does not exist.
pub fn load_pool(store: &dyn Store, pool: &PoolRef) -> Result<PoolManifest> {
    let ns = pool.namespace.as_ref();
    let Some(obj) = store.get(ObjectKind::Pool, ns, pool.name.as_str())? else {
        return Err(pool_not_found(store, pool));
    };
    let location = store.locate(ObjectKind::Pool, ns, pool.name.as_str());
    let text = std::str::from_utf8(&obj.bytes)
        .map_err(|_| Error::invalid(&location, "is not UTF-8 text"))?;
    yaml::decode_pool(text).map_err(|e| Error::invalid(location, e))
}

/// The pool's manifest and the addresses its allocations hold, from one directory listing
/// (no allocation file is read). Takes no lock: for explaining a dry run, not for claiming.
pub fn pool_state(store: &dyn Store, pool: &PoolRef) -> Result<(PoolManifest, Vec<Ipv4Addr>)> {
    let spec = load_pool(store, pool)?;
    let entries = store.list(ObjectKind::Allocation, pool.namespace.as_ref())?;
    let taken = pool_entries(&entries, &pool.name).map(|(a, _)| a).collect();
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

/// The allocations of `pool` in the listing of its scope, with their addresses.
pub fn pool_entries<'a>(
    entries: &'a [Entry],
    pool: &'a PoolName,
) -> impl Iterator<Item = (Ipv4Addr, &'a Entry)> + 'a {
    entries
        .iter()
        .filter_map(move |e| match parse_allocation_name(&e.name) {
            Some((p, addr)) if p == pool.as_str() => Some((addr, e)),
            _ => None,
        })
}

/// Prints a warning about an allocation file that does not parse. Its name stays taken.
fn warn_unparsable(store: &dyn Store, ns: Option<&Namespace>, name: &str, why: &str) {
    eprintln!(
        "warning: {}: {why} (its address stays taken; run `ipamctl check`)",
        store.locate(ObjectKind::Allocation, ns, name)
    );
}

/// Finds the allocation `owner` holds in `pool`, if any. The caller holds the owner's lock
/// (or accepts a racy answer, as `--dry-run` does). Returns the pool's taken addresses when
/// it had to list them, so the caller need not list again.
fn find_owner(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
    record: bool,
) -> Result<(Option<AllocationManifest>, Option<Vec<Ipv4Addr>>)> {
    let ns = pool.namespace.as_ref();
    let key = owner.key();
    if let Some(addr) = store.index_hint(ns, &pool.name, key)
        && let Some((Ok(m), _)) = read_allocation(store, ns, &allocation_name(&pool.name, addr))?
        && m.spec.owner == *owner
    {
        return Ok((Some(m), None));
    }
    // The version is taken before the listing, so a full read can vouch for it.
    let first = store.index_load(ns, &pool.name);
    let entries = store.list(ObjectKind::Allocation, ns)?;
    let index = wait_for_trust(store, pool, first, entries.len());
    let mut learnt = Vec::new();
    let mut found = None;
    let mut taken = Vec::new();
    for (addr, entry) in pool_entries(&entries, &pool.name) {
        taken.push(addr);
        // A fact holds if the index is trusted, or if this file has not changed since the
        // index was last complete (strictly before: timestamps are coarse).
        let known = index.facts.get(&addr).filter(|(stamp, _)| {
            *stamp == entry.stamp
                && (index.trusted
                    || index.settled.is_some_and(|settled| {
                        store
                            .changed_at(ns, &entry.name)
                            .is_some_and(|c| c < settled)
                    }))
        });
        if known.is_some_and(|&(_, k)| k != key) {
            continue;
        }
        let Some((parsed, stamp)) = read_allocation(store, ns, &entry.name)? else {
            continue; // released since the listing
        };
        match parsed {
            Ok(m) => {
                let holder = m.spec.owner.key();
                if known.is_none() {
                    learnt.push(IndexEntry {
                        address: addr,
                        stamp,
                        key: holder,
                    });
                }
                if m.spec.owner == *owner && m.spec.address == addr {
                    found = Some((
                        m,
                        IndexEntry {
                            address: addr,
                            stamp,
                            key: holder,
                        },
                    ));
                }
            }
            Err(why) => warn_unparsable(store, ns, &entry.name, &why),
        }
    }
    if record {
        // After reading every file: forget what the index knew of files that are gone, and
        // record that the pool's facts are complete for the version seen before the listing.
        let verified = (!index.trusted).then_some(index.version).flatten();
        if verified.is_some() {
            let listed: HashSet<Ipv4Addr> = taken.iter().copied().collect();
            learnt.extend(
                index
                    .facts
                    .keys()
                    .filter(|a| !listed.contains(*a))
                    .map(|&address| IndexEntry {
                        address,
                        stamp: 0,
                        key: 0,
                    }),
            );
        }
        store.index_record(
            ns,
            &pool.name,
            &learnt,
            found.as_ref().map(|(_, e)| *e),
            verified,
        );
    }
    Ok((found.map(|(m, _)| m), Some(taken)))
}

/// Files below which checking each one's change time is cheaper than waiting for the index
/// to be trusted.
const CHEAP_CHECK: usize = 512;

/// An untrusted index may be a concurrent writer caught between its change and its journal
/// line (microseconds, unless it was preempted). In a large directory a short wait is far
/// cheaper than checking every file's change time, so wait a little for a trusted view; a
/// small directory is checked at once. If trust never comes, `first` is kept: its version
/// precedes the listing, so the check may vouch for it.
fn wait_for_trust(store: &dyn Store, pool: &PoolRef, first: IndexView, listed: usize) -> IndexView {
    if first.trusted || first.version.is_none() || listed <= CHEAP_CHECK {
        return first;
    }
    for _ in 0..3 {
        std::thread::sleep(std::time::Duration::from_millis(1));
        let again = store.index_load(pool.namespace.as_ref(), &pool.name);
        if again.trusted {
            return again;
        }
    }
    first
}

/// Checks a held allocation against the request's constraints (exit 4 if it breaks one).
fn check_held(held: &AllocationManifest, req: &Request) -> Result<()> {
    let addr = held.spec.address;
    let broken = if req.address.is_some_and(|a| a != addr) {
        Some("`--address`")
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
fn request_candidates(spec: &PoolManifest, req: &Request) -> Result<Candidates> {
    let cidr = spec.spec.cidr;
    let mut candidates = Candidates::of_pool(&spec.spec).without(req.reserved.iter().copied());
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
        } else if spec.spec.gateway == Some(addr) {
            "it is the pool's gateway".to_owned()
        } else if req.reserved.contains(&addr) {
            "it is listed in `--reserved`".to_owned()
        } else if req.within.is_some_and(|w| !w.contains(&addr)) {
            "it is outside `--within`".to_owned()
        } else if spec.spec.exclude.iter().any(|e| e.net().contains(&addr)) {
            "it is excluded by the pool".to_owned()
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
        candidates = candidates.within(Ipv4Net::from(addr));
    }
    Ok(candidates)
}

/// The director's Allocate: the owner's existing address, or the lowest free candidate,
/// claimed exclusively. See the module docs for the protocol.
pub fn allocate(store: &dyn Store, req: &Request) -> Result<Allocated> {
    let ns = req.pool.namespace.as_ref();
    // Read once to fail fast (and without creating a lock file) when the pool is missing.
    load_pool(store, &req.pool)?;
    let _pool_lock = if req.dry_run {
        None
    } else {
        Some(store.lock_pool(ns, &req.pool.name, LockMode::Shared)?)
    };
    // Read again under the lock: this is the pool as it stands until we are done.
    let spec = load_pool(store, &req.pool)?;
    let candidates = request_candidates(&spec, req)?;
    let _owner_lock = if req.dry_run {
        None
    } else {
        Some(store.lock_owner(ns, &req.pool.name, req.owner.key())?)
    };
    let (held, entries) = find_owner(store, &req.pool, &req.owner, !req.dry_run)?;
    if let Some(held) = held {
        check_held(&held, req)?;
        return Ok(Allocated::Existing(held));
    }
    let taken = entries.expect("find_owner lists when the owner holds nothing");
    let range = candidates.describe();
    match claim(store, req, &candidates, &taken)? {
        Some(allocated) => Ok(allocated),
        None => Err(Error::Exhausted {
            what: format!("pool `{}`", req.pool),
            range: if req.within.is_some() || !req.reserved.is_empty() {
                format!("{range} (after `--within`/`--reserved`)")
            } else {
                range
            },
        }),
    }
}

/// Claims the lowest free candidate of `pool` for `req.owner`, moving on when another
/// claimer wins an address; `None` when no candidate is left. The caller holds the pool's
/// lock (shared) and the owner's lock, and found that the owner holds nothing here.
fn claim(
    store: &dyn Store,
    req: &Request,
    candidates: &Candidates,
    taken: &[Ipv4Addr],
) -> Result<Option<Allocated>> {
    let pool = &req.pool;
    let ns = pool.namespace.as_ref();
    // Cutting the taken addresses out of the candidate spans (one sort) is several times
    // cheaper than hashing every one of them into a set.
    let free = candidates.clone().without(taken.iter().copied());
    if let Some(addr) = req.address
        && !free.contains(addr)
    {
        return Err(held_by_other(store, req, addr));
    }
    for addr in free.iter() {
        let manifest = AllocationManifest::new(&pool.name, ns, addr, req.owner.clone());
        if req.dry_run {
            return Ok(Some(Allocated::WouldCreate(manifest)));
        }
        let name = &manifest.metadata.name;
        match store.create(
            ObjectKind::Allocation,
            ns,
            name,
            yaml::encode(&manifest).as_bytes(),
        )? {
            Some(stamp) => {
                failpoint!("allocate-before-index");
                let fact = IndexEntry {
                    address: addr,
                    stamp,
                    key: req.owner.key(),
                };
                store.index_record(ns, &pool.name, &[fact], Some(fact), None);
                return Ok(Some(Allocated::Created(manifest)));
            }
            None if req.address.is_some() => return Err(held_by_other(store, req, addr)),
            // Lost the race for this address to another claimer: try the next one.
            None => continue,
        }
    }
    Ok(None)
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
    let mut names: Vec<String> = store
        .list(ObjectKind::Pool, None)?
        .into_iter()
        .map(|e| e.name)
        .collect();
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
    if !dry_run {
        for pool in &pools {
            locks.push(store.lock_pool(None, &pool.name, LockMode::Shared)?);
        }
        for pool in &pools {
            locks.push(store.lock_owner(None, &pool.name, owner.key())?);
        }
    }
    let mut listings = Vec::new();
    for pool in &pools {
        let (held, entries) = find_owner(store, pool, owner, !dry_run)?;
        if let Some(held) = held {
            return Ok(Allocated::Existing(held));
        }
        listings.push(entries.expect("find_owner lists when the owner holds nothing"));
    }
    for (pool, entries) in pools.iter().zip(&listings) {
        // Re-read under the lock: a pool deleted or changed meanwhile is skipped or current.
        let Ok(spec) = load_pool(store, pool) else {
            continue;
        };
        let candidates = Candidates::of_pool(&spec.spec);
        let req = Request {
            pool: pool.clone(),
            owner: owner.clone(),
            within: None,
            reserved: Vec::new(),
            address: None,
            dry_run,
        };
        if let Some(allocated) = claim(store, &req, &candidates, entries)? {
            return Ok(allocated);
        }
    }
    let names: Vec<String> = pools.iter().map(|p| format!("`{}`", p.name)).collect();
    Err(Error::Exhausted {
        what: format!("zone `{zone}`"),
        range: format!("any of its pools ({})", names.join(", ")),
    })
}

fn held_by_other(store: &dyn Store, req: &Request, addr: Ipv4Addr) -> Error {
    let name = allocation_name(&req.pool.name, addr);
    let holder = match read_allocation(store, req.pool.namespace.as_ref(), &name) {
        Ok(Some((Ok(m), _))) => format!("by `{}`", m.spec.owner),
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
pub fn release_address(
    store: &dyn Store,
    pool: &PoolRef,
    addr: Ipv4Addr,
    guard: &OwnerFilter,
) -> Result<Released> {
    let ns = pool.namespace.as_ref();
    let name = allocation_name(&pool.name, addr);
    // Each turn of the loop takes the lock of the owner the file names; if the file changed
    // hands before the lock was granted, go round again with the new owner.
    for _ in 0..16 {
        let Some((parsed, _)) = read_allocation(store, ns, &name)? else {
            return Ok(Released::NotHeld);
        };
        let manifest = parsed
            .map_err(|why| Error::invalid(store.locate(ObjectKind::Allocation, ns, &name), why))?;
        let owner = manifest.spec.owner.clone();
        if !guard.matches(&owner) {
            return Err(Error::conflict(format!(
                "{addr} in pool `{pool}` is held by `{owner}`{}, not by the given owner; nothing released",
                owner
                    .uid()
                    .map(|u| format!(" (uid {u})"))
                    .unwrap_or_default()
            )));
        }
        let _lock = store.lock_owner(ns, &pool.name, owner.key())?;
        match read_allocation(store, ns, &name)? {
            Some((Ok(now), _)) if now == manifest => {
                store.delete(ObjectKind::Allocation, ns, &name)?;
                return Ok(Released::Deleted(Box::new(manifest)));
            }
            None => return Ok(Released::NotHeld),
            Some(_) => continue,
        }
    }
    Err(Error::conflict(format!(
        "{addr} in pool `{pool}` kept changing hands while releasing it; try again"
    )))
}

/// Every allocation in `pool` (parsed ones only) whose owner passes `filter`, sorted by
/// address. Reads every allocation of the pool.
pub fn allocations_of(
    store: &dyn Store,
    pool: &PoolRef,
    filter: &OwnerFilter,
) -> Result<Vec<AllocationManifest>> {
    let ns = pool.namespace.as_ref();
    let entries = store.list(ObjectKind::Allocation, ns)?;
    let mut found = Vec::new();
    for (_, entry) in pool_entries(&entries, &pool.name) {
        match read_allocation(store, ns, &entry.name)? {
            Some((Ok(m), _)) if filter.matches(&m.spec.owner) => found.push(m),
            Some((Err(why), _)) => warn_unparsable(store, ns, &entry.name, &why),
            _ => {}
        }
    }
    found.sort_by_key(|m| m.spec.address);
    Ok(found)
}

/// Looks up the owner's allocation without locking or writing (for `--dry-run` and reads).
pub fn lookup_owner(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
) -> Result<Option<AllocationManifest>> {
    Ok(find_owner(store, pool, owner, false)?.0)
}
