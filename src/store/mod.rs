//! Storage of manifests behind the [`Store`] trait: the queries the commands ask, so that a
//! database-backed store can follow without touching them. The filesystem implementation
//! is [`fs::FsStore`]; how it keeps its indexes honest stays inside it.
//!
//! Objects are keyed by (kind, namespace, name); `create` is create-only and is the arbiter
//! of every claim. [`pg::PgStore`] keeps the same objects in PostgreSQL, where the arbiters
//! are the tables' primary key and unique owner constraint.
//!
//! A few methods have default bodies that describe a store arbitrated by files and locks
//! (the file store uses them as they are): [`Store::atomically`] runs the work as it is,
//! [`Store::claim`] is a `create`, [`Store::free_candidates`] cuts the caller's taken
//! addresses out of the candidates, and [`Store::release`] deletes under the owner's lock
//! the caller holds. A database overrides them with one transaction, one
//! `INSERT … ON CONFLICT DO NOTHING`, an indexed gap query and a guarded `DELETE`.

pub mod fs;
pub mod parallel;
pub mod pg;
pub mod read;

use std::any::Any;
use std::net::IpAddr;

use crate::error::Result;
use crate::model::candidates::Candidates;
use crate::model::{AllocationManifest, Namespace, Owner, OwnerFilter, PoolName};
use crate::yaml;

pub use crate::model::ObjectKind;

/// How a pool lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Held by `allocate` while it claims: many at once.
    Shared,
    /// Held by `apply` and `pool delete` while they change the pool: alone.
    Exclusive,
}

/// A held lock; dropping it unlocks.
pub type LockGuard = Box<dyn Any>;

/// An allocation as read: its manifest, or why the stored object is no manifest.
pub type Parsed = std::result::Result<AllocationManifest, String>;

/// An allocation a query returned: its object name and what it holds, read just now.
#[derive(Clone, Debug)]
pub struct Found {
    /// The object name (`<pool>-<a-b-c-d>`).
    pub name: String,
    /// The manifest, or why it does not parse (its address stays taken).
    pub parsed: Parsed,
}

/// The answer to [`Store::find_owner`].
#[derive(Clone, Debug, Default)]
pub struct OwnerLookup {
    /// The owner's allocation in the pool, read just now.
    pub held: Option<AllocationManifest>,
    /// When it holds none: the addresses the pool's allocations hold, the broken ones too.
    pub taken: Vec<IpAddr>,
    /// Allocations of the pool that do not parse: (object name, why).
    pub broken: Vec<(String, String)>,
}

/// What claiming one address for an owner did.
#[derive(Clone, Debug)]
pub enum Claim {
    /// The address is now the owner's: the allocation is stored, complete and durable once
    /// the surrounding [`Store::atomically`] returns.
    Claimed,
    /// Someone else holds the address: try the next candidate.
    AddressTaken,
    /// The owner already holds this allocation in the pool (a concurrent request for the
    /// same owner won): it is the answer, whatever the candidate was.
    OwnerHolds(Box<AllocationManifest>),
}

/// One change of an allocation, as a store's own audit log recorded it.
#[derive(Clone, Debug)]
pub struct Event {
    /// When, as RFC 3339.
    pub at: String,
    /// Who: the client (`user@host`).
    pub who: String,
    /// `claimed` or `released`.
    pub action: String,
    /// The allocation as claimed, or as it was when released.
    pub manifest: AllocationManifest,
}

/// Free candidates, lowest first, each read from the store as it is when asked for.
pub type FreeIter<'a> = Box<dyn Iterator<Item = Result<IpAddr>> + 'a>;

/// Runs `work` as one unit on `store` (see [`Store::atomically`]) and returns its value.
pub fn atomically<T>(store: &dyn Store, mut work: impl FnMut() -> Result<T>) -> Result<T> {
    let mut value = None;
    store.atomically(&mut || {
        value = Some(work()?);
        Ok(())
    })?;
    Ok(value.expect("atomically returns Ok only after the work returned Ok"))
}

/// Storage of pools and allocations. Every method is safe to call from many processes at
/// once, and no answer rests on anything but the stored objects as they are when it is given.
pub trait Store {
    /// A human-readable location of an object, for messages (a path relative to the root).
    fn locate(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> String;

    /// Reads an object's bytes; `None` when it does not exist. Never returns a partly
    /// written object.
    fn get(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<Option<Vec<u8>>>;

    /// Creates an object if no object has that name; `false` (and nothing written) if one
    /// has. When it returns `true`, the object is complete and durable.
    fn create(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<bool>;

    /// Creates or atomically replaces an object: readers see the old or the new bytes.
    fn replace(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<()>;

    /// Deletes an object durably; `false` if it did not exist.
    fn delete(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<bool>;

    /// Names of the objects of a kind in one scope, in no particular order.
    fn list(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<Vec<String>>;

    /// Every scope that holds a pool or allocation directory: `None` is the cluster scope.
    fn scopes(&self) -> Result<Vec<Option<Namespace>>>;

    /// Locks a pool against changes (`Exclusive`) or against being changed while claiming
    /// (`Shared`). Blocks until granted. [`crate::Error::ReadOnly`] when the store cannot be
    /// written, so that a caller that only reads can go on without it.
    fn lock_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<LockGuard>;

    /// Serialises changes to the set of pools of one scope (`apply` holds it while it checks
    /// overlaps and writes), so two concurrent applies cannot both create overlapping
    /// public pools.
    fn lock_scope(&self, ns: Option<&Namespace>) -> Result<LockGuard>;

    /// Serialises requests for one owner identity in one pool.
    fn lock_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<LockGuard>;

    /// The allocation `owner` (kind, name and uid exactly) holds in `pool`, read just now;
    /// when it holds none, the addresses the pool's allocations hold.
    fn find_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<OwnerLookup>;

    /// Tells the store that `owner` now holds `address` in `pool` (after a `create` for it),
    /// so that its next look-up is quick. A hint only: nothing may depend on it.
    fn record_claim(&self, ns: Option<&Namespace>, pool: &PoolName, owner: &Owner, address: IpAddr);

    /// The allocations of scope `ns` (of `pool` only, if given) whose owner passes
    /// `filter`, each read just now, in no particular order; allocations that do not parse
    /// come along (their owner is unknown), for the caller to warn about.
    fn find_allocations(
        &self,
        ns: Option<&Namespace>,
        pool: Option<&PoolName>,
        filter: &OwnerFilter,
    ) -> Result<Vec<Found>>;

    /// [`Store::find_allocations`] over every scope, each answer with its scope. This asks
    /// the scopes one by one; a store that can answer in one question (the database, whose
    /// owner-uid index spans every scope) overrides it.
    fn find_allocations_everywhere(
        &self,
        pool: Option<&PoolName>,
        filter: &OwnerFilter,
    ) -> Result<Vec<(Option<Namespace>, Found)>> {
        let mut all = Vec::new();
        for ns in self.scopes()? {
            let found = self.find_allocations(ns.as_ref(), pool, filter)?;
            all.extend(found.into_iter().map(|f| (ns.clone(), f)));
        }
        Ok(all)
    }

    /// Every recorded claim and release of the allocations of scope `ns`, oldest first,
    /// from the store's own audit log. A store that keeps none (the file store, whose
    /// history is git's) says so: exit 2.
    fn allocation_events(&self, ns: Option<&Namespace>) -> Result<Vec<Event>> {
        let _ = ns;
        Err(crate::error::Error::Usage {
            message: "this store keeps no history of its own".into(),
            hint: Some(
                "a state directory's history is git's: run `ipamctl history` in its working tree"
                    .into(),
            ),
        })
    }

    /// Runs `work` (which calls this store) as one unit: on a database, one transaction,
    /// committed when `work` returns `Ok`, rolled back when it returns `Err`, and run again
    /// from the start (a bounded number of times) after a serialization failure or deadlock,
    /// so `work` must have no effect outside the store before it returns. Nested calls join
    /// the outer unit. The file store runs `work` as it is: each of its writes is durable on
    /// its own, and the locks `work` takes keep its steps apart from other processes'.
    fn atomically(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        work()
    }

    /// Claims `manifest`'s address for its owner, unless the address is taken or the owner
    /// already holds an address in the pool. The caller holds the pool's lock (shared).
    /// By default a create-only write of the object: the owner's lock, which the caller
    /// holds on such a store, rules out [`Claim::OwnerHolds`].
    fn claim(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim> {
        let created = self.create(
            ObjectKind::Allocation,
            ns,
            &manifest.metadata.name,
            yaml::encode(manifest).as_bytes(),
        )?;
        Ok(if created {
            Claim::Claimed
        } else {
            Claim::AddressTaken
        })
    }

    /// The free addresses among `candidates` of `pool`, lowest first. `taken` is what the
    /// caller's [`Store::find_owner`] returned; a store that answers from an index may
    /// ignore it. `whole_pool` says the candidates are the pool's own (no `--within`,
    /// `--reserved` or `--address`), so that a store may keep a low-water hint from the
    /// answer. Advice only: [`Store::claim`] still arbitrates every address.
    fn free_candidates<'a>(
        &'a self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        candidates: &Candidates,
        taken: &[IpAddr],
        whole_pool: bool,
    ) -> Result<FreeIter<'a>> {
        let _ = (ns, pool, whole_pool);
        let free = candidates.clone().without(taken.iter().copied());
        let v6 = free.is_v6();
        // Lazy over the free spans: a /64's first free address costs no more than a /24's.
        Ok(Box::new(free.spans().into_iter().flat_map(
            move |(lo, hi)| (lo..=hi).map(move |a| Ok(crate::model::candidates::address(v6, a))),
        )))
    }

    /// How many allocations `pool` has, and how many of them are among `candidates`,
    /// when the store can count them without listing them (a database); `None` by default:
    /// the caller counts from [`Store::list`].
    fn count_held(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        candidates: &Candidates,
    ) -> Result<Option<(u64, u64)>> {
        let _ = (ns, pool, candidates);
        Ok(None)
    }

    /// Deletes the allocation `expected` names if it still belongs to `expected`'s owner;
    /// `false` (nothing deleted) if not. By default a plain delete: the caller holds the
    /// lock of that owner and re-read the allocation under it (invariant 5 of
    /// [`crate::alloc`]).
    fn release(&self, ns: Option<&Namespace>, expected: &AllocationManifest) -> Result<bool> {
        self.delete(ObjectKind::Allocation, ns, &expected.metadata.name)
    }
}
