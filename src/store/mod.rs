//! Storage of manifests behind the [`Store`] trait, cut by concern: object bytes
//! ([`Objects`]), typed queries of allocations ([`Queries`]), the claims and releases that
//! arbitrate addresses ([`Claims`]), locks with guards that say what they hold
//! ([`Locks`], [`guard`]), the unit of work ([`Units`]), a store's own audit log
//! ([`Audit`]) and what only one kind of store can do ([`Capabilities`]: a state
//! directory's walk and root, a database's snapshot and self-inspection, in [`capability`],
//! with what they find in [`inspect`]). The engine takes `&dyn Store`, which is all seven,
//! and never names an implementation. [`registry::open`] is the one place that opens a store
//! from where it is (a directory, or a database's URL).
//!
//! Objects are keyed by (kind, namespace, name). The filesystem implementation is
//! [`fs::FsStore`], where the file name is the arbiter of every claim; [`pg::PgStore`] keeps
//! the same objects in PostgreSQL, where the arbiters are the tables' primary key and unique
//! owner constraint. How an implementation keeps its indexes honest, and the locks only it
//! needs (the file store's per-owner lock), stay inside it.

pub mod capability;
pub mod fs;
pub mod guard;
pub mod inspect;
pub mod parallel;
pub mod pg;
pub mod read;
pub mod registry;
pub mod tokens;

use std::net::IpAddr;

use crate::error::Result;
use crate::model::candidates::Candidates;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::taken::Taken;
use crate::model::{AllocationManifest, Namespace, Owner, OwnerFilter, PoolName};

pub use crate::model::ObjectKind;
pub use crate::store::capability::{Capabilities, Database, StateDir};
pub use crate::store::guard::{ClaimLock, Hold, LockMode, PoolLock, QuotaLock, ScopeLock};

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

/// The answer to [`Queries::find_owner`].
#[derive(Clone, Debug, Default)]
pub struct OwnerLookup {
    /// The owner's allocation in the pool, read just now.
    pub held: Option<AllocationManifest>,
    /// When it holds none: an allocation of the pool whose owner holds the owner's name
    /// under another identity (another uid, or a uid where the owner has none, or none where
    /// it has one: [`Owner::is_namesake`]), read just now. Never for a `VPC` owner, whose
    /// name says nothing. An owner's name is one identity per pool: the claim is refused
    /// (`crate::engine::identity`).
    pub namesake: Option<AllocationManifest>,
    /// When it holds none: the addresses the pool's allocations hold, the broken ones too,
    /// as far as the look-up saw them (a store whose look-up is one indexed row, the
    /// database, leaves it empty: its [`Queries::free_candidates`] finds them itself).
    pub taken: Taken,
    /// Allocations of the pool that do not parse: (object name, why).
    pub broken: Vec<(String, String)>,
}

/// The answer to [`Queries::find_prefix_owner`].
#[derive(Clone, Debug, Default)]
pub struct PrefixLookup {
    /// The claim the owner holds in the supernet pool, read just now: a stored manifest whose
    /// owner is the owner's (its name and pool are for the caller to check against where it
    /// is stored).
    pub held: Option<PrefixClaimManifest>,
    /// The prefixes the pool's claims hold as their names spell them (the name is what the
    /// create arbitrates), the broken ones too, ascending.
    pub taken: Vec<ipnet::IpNet>,
    /// Claims of the pool that do not parse: (object name, why). Their owner is unknown.
    pub broken: Vec<(String, String)>,
    /// `taken` was not read ([`Queries::find_prefix_holder`] of a store that keeps the free
    /// space): ask [`Queries::find_prefix_owner`] for it.
    pub taken_left_out: bool,
}

/// What claiming one address for an owner did.
#[derive(Clone, Debug)]
pub enum Claim {
    /// The address is now the owner's: the allocation is stored, complete and durable once
    /// the surrounding [`Units::atomically`] returns.
    Claimed,
    /// Someone else holds the address: try the next candidate.
    AddressTaken,
    /// The owner already holds this allocation in the pool (a concurrent request for the
    /// same owner won): it is the answer, whatever the candidate was.
    OwnerHolds(Box<AllocationManifest>),
    /// Another allocation of the pool holds the manifest's MAC (`spec.mac`): this one is
    /// not stored (or was undone); the holder, read just now.
    MacHeld(Box<AllocationManifest>),
    /// The owner's name is held in the pool under another identity ([`Owner::is_namesake`];
    /// a concurrent request for the name with another uid won): nothing is stored; the
    /// holder, read just now.
    NameHeld(Box<AllocationManifest>),
}

/// What [`Claims::set_mac`] did.
#[derive(Clone, Debug)]
pub enum MacChange {
    /// The allocation now holds the new MAC.
    Changed,
    /// The allocation is not the expected one any more (released, claimed again or
    /// rewritten): nothing was written; read it again.
    Moved,
    /// Another allocation of the pool holds the new MAC: nothing changed; the holder.
    MacHeld(Box<AllocationManifest>),
}

/// One change of an allocation (or of a prefix claim, `M`), as a store's own audit log
/// recorded it.
#[derive(Clone, Debug)]
pub struct Event<M = AllocationManifest> {
    /// When, as RFC 3339.
    pub at: String,
    /// Who: the client (`user@host`).
    pub who: String,
    /// `claimed` or `released`.
    pub action: String,
    /// The object as claimed, or as it was when released.
    pub manifest: M,
}

/// Free candidates, lowest first, each read from the store as it is when asked for.
pub type FreeIter<'a> = Box<dyn Iterator<Item = Result<IpAddr>> + 'a>;

/// What a guarded release ([`Claims::release`]) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The allocation was as expected, and is deleted.
    Deleted,
    /// No allocation holds the address any more.
    Gone,
    /// The allocation is not the expected one any more (released and claimed again, or
    /// rewritten): nothing was deleted; read it again.
    Changed,
}

/// Runs `work` as one unit on `store` (see [`Units::atomically`]) and returns its value.
pub fn atomically<T>(store: &dyn Store, mut work: impl FnMut() -> Result<T>) -> Result<T> {
    let mut value = None;
    store.atomically(&mut || {
        value = Some(work()?);
        Ok(())
    })?;
    Ok(value.expect("atomically returns Ok only after the work returned Ok"))
}

/// Storage of pools and allocations: every concern below. Every method is safe to call
/// from many processes at once, and no answer rests on anything but the stored objects as
/// they are when it is given.
pub trait Store: Objects + Queries + Claims + Locks + Units + Audit + Capabilities {}

impl<T: Objects + Queries + Claims + Locks + Units + Audit + Capabilities + ?Sized> Store for T {}

/// Object bytes: every kind of object by (kind, namespace, name).
pub trait Objects {
    /// A human-readable location of an object, for messages (a path relative to the root).
    fn locate(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> String;

    /// Reads an object's bytes; `None` when it does not exist. Never returns a partly
    /// written object.
    fn get(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<Option<Vec<u8>>>;

    /// An object's bytes to search for an owner's name, where [`Objects::get`] refuses them
    /// as a manifest (larger than a manifest may be): a claim fails closed on a file that
    /// names its owner, whatever its size. `Some(empty)` for what holds no bytes of its own
    /// (a FIFO, a symlink); an error where they cannot be read (larger than a store reads at
    /// all), which the caller must take for a file that may name anyone.
    fn get_to_search(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
    ) -> Result<Option<Vec<u8>>> {
        self.get(kind, ns, name)
    }

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

    /// Deletes an object durably only if its bytes, as they are when it is deleted, are ones
    /// `ours` accepts (the object its caller read and judged): [`Release::Deleted`];
    /// [`Release::Gone`] if there is none, [`Release::Changed`] (and nothing deleted) if it
    /// is another. A store whose objects can change under a read (files) must make the
    /// judged object the deleted one; the default is for stores whose caller's unit of work
    /// already keeps the object from changing.
    fn delete_if(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        ours: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Release> {
        match self.get(kind, ns, name)? {
            None => Ok(Release::Gone),
            Some(bytes) if !ours(&bytes) => Ok(Release::Changed),
            Some(_) => Ok(if self.delete(kind, ns, name)? {
                Release::Deleted
            } else {
                Release::Gone
            }),
        }
    }

    /// Names of the objects of a kind in one scope, in no particular order.
    fn list(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<Vec<String>>;

    /// Every scope that holds pools, allocations or quotas (a tenant with floating IPs may hold
    /// nothing else): `None` is the cluster scope.
    fn scopes(&self) -> Result<Vec<Option<Namespace>>>;
}

/// Typed queries of allocations, answered from the stored objects as they are.
pub trait Queries: Objects {
    /// The clock that decides leases (`expiresAt`): this machine's on the file store
    /// (hosts sharing a directory through git each have their own: `--grace` is the
    /// margin), the database server's on PostgreSQL, so that every client of one database
    /// judges a lease by one clock.
    fn clock(&self) -> Result<crate::model::Timestamp> {
        Ok(crate::model::Timestamp::now())
    }

    /// The allocation `owner` (kind, name and uid exactly) holds in `pool`, read just now;
    /// when it holds none, the allocation that holds its name under another identity, if
    /// any ([`OwnerLookup::namesake`]), and the addresses the pool's allocations hold (see
    /// [`OwnerLookup::taken`]).
    fn find_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<OwnerLookup>;

    /// The allocations of scope `ns` (of `pool` only, if given) whose owner passes
    /// `filter`, each read just now, in no particular order; allocations that do not parse
    /// come along (their owner is unknown), for the caller to warn about.
    fn find_allocations(
        &self,
        ns: Option<&Namespace>,
        pool: Option<&PoolName>,
        filter: &OwnerFilter,
    ) -> Result<Vec<Found>>;

    /// [`Queries::find_allocations`] over every scope, each answer with its scope. This
    /// asks the scopes one by one; a store that can answer in one question (the database,
    /// whose owner-uid index spans every scope) overrides it.
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

    /// The free addresses among `candidates` of `pool`, lowest first. The caller has cut
    /// out what its [`Queries::find_owner`] saw taken; a store that answers from an index
    /// finds the rest itself. `whole_pool` says the candidates are the pool's own (no
    /// `--within`, `--reserved` or `--address`), so that a store may keep a low-water hint
    /// from the answer. Advice only: [`Claims::claim`] still arbitrates every address.
    fn free_candidates<'a>(
        &'a self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        candidates: &Candidates,
        whole_pool: bool,
    ) -> Result<FreeIter<'a>>;

    /// The prefix claim `owner` (kind, name and uid exactly) holds in the supernet `pool`,
    /// read just now, and the prefixes the pool's claims hold: what a prefix claim decides
    /// on. It rests on the stored claims as they are when it is asked, never on a cache
    /// that an outside writer could have made stale.
    fn find_prefix_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<PrefixLookup>;

    /// [`Queries::find_prefix_owner`] for a claim that may not need the pool's claimed
    /// prefixes: `held` and `broken` as there, `taken` possibly empty (a store that keeps the
    /// free space, [`Queries::prefix_free_space`], leaves it out). By default the whole look-up.
    fn find_prefix_holder(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<PrefixLookup> {
        self.find_prefix_owner(ns, pool, owner)
    }

    /// What a best-fit claim of a /`len` in the supernet `pool` (of prefix `cidr`, with
    /// `excludes`) needs of its free space, when the store keeps it (a database): maximal
    /// free aligned blocks of the pool outside its claims and `excludes`, as
    /// [`crate::model::prefix::free_blocks`] gives them, among them the one best fit picks
    /// for `len` (if any) and the largest; read now, under the pool's exclusive lock. `None`
    /// (the default): the caller computes them from [`Queries::find_prefix_owner`]'s
    /// `taken`. A claim made after this answer is written with [`Objects::create`] in the
    /// same unit, so that the store keeps its free space with it.
    fn prefix_free_space(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        cidr: ipnet::IpNet,
        excludes: &[ipnet::IpNet],
        len: u8,
    ) -> Result<Option<Vec<ipnet::IpNet>>> {
        let _ = (ns, pool, cidr, excludes, len);
        Ok(None)
    }

    /// How many objects of `kind` scope `ns` holds: by default the length of
    /// [`Objects::list`]'s answer; a database counts them without listing them.
    fn count(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<u64> {
        Ok(self.list(kind, ns)?.len() as u64)
    }

    /// How many allocations `pool` has, and how many of them are among `candidates`,
    /// when the store can count them without listing them (a database); `None` by default:
    /// the caller counts from [`Objects::list`].
    fn count_held(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        candidates: &Candidates,
    ) -> Result<Option<(u64, u64)>> {
        let _ = (ns, pool, candidates);
        Ok(None)
    }
}

/// The typed writes that arbitrate addresses: a claim, a copy, a guarded release.
pub trait Claims {
    /// Claims `manifest`'s address for its owner, unless the address is taken, the owner
    /// already holds an address in the pool, or (on a store whose constraint arbitrates
    /// names, a database) another identity holds the owner's name there
    /// ([`Claim::NameHeld`]), and remembers what the store's next look-up for the owner
    /// needs (the file store's owner hint). The caller holds the [`ClaimLock`] of the
    /// owner in the pool, which on the file store is the name's lock: a namesake's claim
    /// waits for it, and its look-up finds this one.
    fn claim(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim>;

    /// [`Claims::claim`] for an allocation copied from another store (`import`, `export`):
    /// the same arbiters, and nothing remembered for look-ups (a bulk copy would write a
    /// hint per allocation that no look-up may ever ask for). The caller holds no claim
    /// lock: on the file store nothing but the file name arbitrates it, so the copy relies
    /// on its source holding one address per owner and pool.
    fn claim_copy(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim>;

    /// Deletes the allocation `expected` names if it is still `expected` (invariant 5 of
    /// [`crate::engine`]): [`Release::Changed`] (nothing deleted) if it is not,
    /// [`Release::Gone`] if nothing holds the address. `before_delete` runs once the
    /// allocation is confirmed, right before it is deleted (a cooldown record is written
    /// there); its error is returned, nothing deleted. The file store takes the lock of
    /// `expected`'s owner and reads the file again under it; a database reads the row
    /// and deletes it with a `DELETE` guarded by the owner's columns.
    ///
    /// With `lapsed` (a lease's release, `reconcile --expired`), only while the allocation
    /// still lapses that long before the store's clock ([`Queries::clock`]), judged at the
    /// delete: the file store under the owner's lock with the file read again, a database
    /// in the `DELETE`'s own condition. A renewal that came first makes it
    /// [`Release::Changed`].
    fn release(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        lapsed: Option<std::time::Duration>,
        before_delete: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Release>;

    /// Rewrites the allocation `expected` names as `updated` (the same pool, address,
    /// owner and MAC; a lease's new `expiresAt`) if it is still `expected`: `false`
    /// (nothing written) if not. The caller holds the [`ClaimLock`] of the owner in the
    /// pool, so no release of the owner runs beside it on the file store; a database
    /// guards the `UPDATE` by the row's bytes, and a release's conditional `DELETE` waits
    /// for it and then finds the lease renewed.
    fn renew(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        updated: &AllocationManifest,
    ) -> Result<bool>;

    /// Makes sure the store's arbiter holds `held`'s MAC for it: `held` is an allocation the
    /// owner holds already, found by a look-up; on the file store its MAC's record may have
    /// been deleted from outside, or never made by an older version, which this makes (and
    /// `check --fix`, through [`crate::engine::mac::restore_record`]). `Some`: another
    /// allocation of the pool holds the MAC. The caller holds the owner's [`ClaimLock`]. By
    /// default nothing: a store whose claim writes both in one transaction (a database) has
    /// nothing to repair.
    fn claim_mac(
        &self,
        ns: Option<&Namespace>,
        held: &AllocationManifest,
    ) -> Result<Option<AllocationManifest>> {
        let _ = (ns, held);
        Ok(None)
    }

    /// Rewrites the allocation `expected` names as `updated` (the same pool, address and
    /// owner, another `spec.mac`) if it is still `expected`, the new MAC arbitrated as a
    /// claim's is: [`MacChange::MacHeld`] (nothing changed) when another allocation of the
    /// pool holds it. The caller holds the [`ClaimLock`] of the owner in the pool.
    fn set_mac(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        updated: &AllocationManifest,
    ) -> Result<MacChange>;
}

/// Locks, each returned as a guard whose type says what it holds (see [`guard`] for the
/// lock order, and why it cannot deadlock). Each blocks until granted, and is
/// [`crate::Error::ReadOnly`] when the store cannot be written, so that a caller that only
/// reads can go on without it. On a database a lock is a row lock of the unit of work's
/// transaction, and outside a unit it is an error.
pub trait Locks {
    /// Locks a pool against changes (`Exclusive`) or against being changed while claiming
    /// (`Shared`).
    fn lock_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<PoolLock>;

    /// Serialises changes to the set of pools of one scope (`apply` holds it while it checks
    /// overlaps and writes), so two concurrent applies cannot both create overlapping
    /// public pools.
    fn lock_scope(&self, ns: Option<&Namespace>) -> Result<ScopeLock>;

    /// Serialises the claims charged to namespace `ns`'s quotas ([`crate::engine::quota`]):
    /// each takes it after its claim locks, once its look-up found the owner new, and holds
    /// it until its claim is durable, so that what it counts is what the next one counts
    /// plus its own claim. Granted again to its holder (a claim in several pools of one
    /// namespace, each pool's in turn).
    fn lock_quota(&self, ns: &Namespace) -> Result<QuotaLock>;

    /// The locks a claim for `owner` in each of `pools` (ascending by name, one at least)
    /// holds from before it reads the pools until the claim is durable: every pool shared,
    /// then, where the store needs one (the file store), the owner's lock in every pool:
    /// its name's ([`Owner::lock_key`]), so that requests for one name under two
    /// identities run their look-up and claim one after the other too.
    fn lock_claim(
        &self,
        ns: Option<&Namespace>,
        pools: &[PoolName],
        owner: &Owner,
    ) -> Result<ClaimLock>;

    /// The lock a prefix claim for `owner` in the supernet `pool` holds from before it
    /// reads the pool until its claim is durable: the pool's, exclusive. `len` is the length
    /// a best-fit claim asks for (`None` for an exact prefix), so that a store can read
    /// ahead what the claim asks next ([`Queries::find_prefix_holder`],
    /// [`Queries::prefix_free_space`]) with the lock.
    fn lock_prefix_claim(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
        len: Option<u8>,
    ) -> Result<PoolLock> {
        let _ = (owner, len);
        self.lock_pool(ns, pool, LockMode::Exclusive)
    }
}

/// The unit of work.
pub trait Units {
    /// Runs `work` (which calls this store) as one unit: on a database, one transaction,
    /// committed when `work` returns `Ok`, rolled back when it returns `Err`, and run again
    /// from the start (a bounded number of times) after a serialization failure or deadlock,
    /// so `work` must have no effect outside the store before it returns. Nested calls join
    /// the outer unit. The file store runs `work` as it is: each of its writes is durable on
    /// its own, and the locks `work` takes keep its steps apart from other processes'.
    fn atomically(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()>;

    /// Says that many requests follow in this process (`allocate -f`, `release -f`), run by
    /// `workers` stores at once (this one among them): the store may keep what it learns
    /// from one for the next, as long as what it keeps stays as true as what it would read
    /// again (the file store's watch: `fs/owner/watch.rs`), and may group them
    /// ([`Units::grouped`]). Each request is still its own unit of work.
    fn batch(&self, _workers: usize) {}

    /// Says a batch's requests are all done (every worker's last group committed): the
    /// store may bring up to date what its workers left behind for the next command (the
    /// pools' hints, on a database: `pg/siblings.rs`). Advice only: a failure is ignored.
    fn batch_done(&self) {}

    /// This store can run nothing more (a database connection that closed: every unit on it
    /// would fail at once): a batch's worker on it hands its requests on (`engine/executor/`).
    fn lost(&self) -> bool {
        false
    }

    /// Opens a lost store's connection anew (a server's, `pg/revive.rs`): whether it did, or
    /// `None` for a store that never does.
    fn revive(&self) -> Option<bool> {
        None
    }

    /// How many of a batch's requests this store runs in one group ([`Units::grouped`]): 1
    /// (each on its own) unless [`Units::batch`] chose more.
    fn group_size(&self) -> usize {
        1
    }

    /// Runs `work`, which runs units of work one after another, as one group: on a
    /// database, one transaction, each unit in it undone alone when it fails and the whole
    /// committed when `work` returns (`pg/group.rs`). An `Err` is the group's own failure:
    /// none of its units stands (or, for [`crate::error::Error::OutcomeUnknown`], whether
    /// they stand is unknown), whatever each returned, and the caller runs each again on its
    /// own. A store that does not group runs `work` as it is.
    fn grouped(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        work()
    }
}

/// What a store without an audit log of its own answers for one: exit 2.
fn no_history() -> crate::error::Error {
    crate::error::Error::Usage {
        message: "this store keeps no history of its own".into(),
        hint: Some(
            "a state directory's history is git's: run `ipamctl history` in its working tree"
                .into(),
        ),
    }
}

/// When a store's objects last changed, by the store's own clock, in whole seconds since the
/// Unix epoch: what `dns export` derives its SOA serials from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Changed {
    /// The newest change to the scopes asked about (a write, a removal); `None` if the
    /// store records none.
    pub newest: Option<i64>,
    /// The time now, by the clock that dated the changes: a change made from now on is
    /// dated at least this second.
    pub now: i64,
}

/// A store's own audit log.
pub trait Audit {
    /// The newest change to the objects of `scopes` (`None`: every scope, and the scopes
    /// themselves coming and going). A file store: the newest modification time of the
    /// scopes' directories and files (a removal changes its directory's), the kernel's
    /// clock; a database: its events table's newest `at`, the server's clock.
    fn changed(&self, scopes: Option<&[Option<Namespace>]>) -> Result<Changed>;

    /// Every recorded claim and release of the allocations of scope `ns`, oldest first,
    /// from the store's own audit log. A store that keeps none (the file store, whose
    /// history is git's) says so: exit 2.
    fn allocation_events(&self, ns: Option<&Namespace>) -> Result<Vec<Event>> {
        let _ = ns;
        Err(no_history())
    }

    /// The same for the prefix claims of supernet pools.
    fn prefix_claim_events(
        &self,
        ns: Option<&Namespace>,
    ) -> Result<Vec<Event<crate::model::prefix_claim::PrefixClaimManifest>>> {
        let _ = ns;
        Err(no_history())
    }
}
