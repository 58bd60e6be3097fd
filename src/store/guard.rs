//! The guards of the store's locks ([`crate::store::Locks`]): each type says what it holds,
//! and each hold says until when, because the two stores hold locks for different spans.
//!
//! # Lock order
//!
//! Every process takes its locks in this order, and never a lock earlier in the order
//! while it holds a later one:
//!
//! 1. scope locks ([`ScopeLock`]), by namespace (`apply`, `vpc create`);
//! 2. pool locks ([`PoolLock`], and the pool part of a [`ClaimLock`]), by (namespace, pool
//!    name): `apply` takes every pool it writes in that order, a zone claim every pool of
//!    the zone in pool-name order (all cluster-scoped), `allocate` and `release` one pool;
//! 3. owner locks (the file store's, inside a [`ClaimLock`] and inside a release), by
//!    pool in the same order: a zone claim takes them after all its pool locks;
//! 4. the quota lock of a namespace ([`QuotaLock`]), taken by a claim charged to the
//!    namespace's quotas once its look-up found the owner new, after its claim locks (a
//!    prefix claim after its pool's lock, `import` after every pool's, in namespace order);
//!    a claim holds one namespace's.
//!
//! So a process waits only for a lock later in the order than every lock it holds; in a
//! cycle of waiting processes each would wait for a lock later than one it holds that the
//! one before it waits for, and following the cycle round would make a lock later than
//! itself. No cycle, no deadlock. (A shared pool lock waits only for an exclusive holder,
//! which follows the same order.) A database may still report a deadlock between its own
//! row locks and a writer outside ipamctl: the unit of work runs again ([`crate::store::Units`]).

/// How a pool lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Held by `allocate` while it claims: many at once.
    Shared,
    /// Held by `apply` and `pool delete` while they change the pool: alone.
    Exclusive,
}

/// What keeps one lock held, and until when.
#[derive(Debug)]
pub enum Hold {
    /// Held until the guard drops (the file store's byte-range locks, open file
    /// descriptions of its lock file): the lock goes when the last guard of that byte in
    /// the process is dropped (the descriptors close), or when the process dies, however
    /// it dies.
    UntilDropped(Box<dyn std::fmt::Debug + Send + Sync>),
    /// Held until the unit of work ends (a database's row locks, in the transaction of the
    /// surrounding unit of work, [`crate::store::Units::atomically`]): the lock goes when
    /// that unit commits or rolls back, never before. Dropping the guard releases nothing.
    UntilUnitEnds,
}

/// One pool locked shared or exclusive ([`LockMode`]), held as its [`Hold`] says: until
/// the guard drops on the file store, until the unit of work ends on a database.
#[derive(Debug)]
#[must_use = "the pool is locked only while the guard is held"]
pub struct PoolLock {
    _hold: Hold,
}

impl PoolLock {
    /// The guard of a pool lock held by `hold`.
    pub fn new(hold: Hold) -> PoolLock {
        PoolLock { _hold: hold }
    }
}

/// The set of pools of one scope locked against changes by others (`apply` holds it while
/// it checks overlaps and writes), held as its [`Hold`] says.
#[derive(Debug)]
#[must_use = "the scope is locked only while the guard is held"]
pub struct ScopeLock {
    _hold: Hold,
}

impl ScopeLock {
    /// The guard of a scope lock held by `hold`.
    pub fn new(hold: Hold) -> ScopeLock {
        ScopeLock { _hold: hold }
    }
}

/// The claims charged to one namespace's quotas serialised ([`crate::engine::quota`]),
/// held as its [`Hold`] says.
#[derive(Debug)]
#[must_use = "the namespace's quotas are held only while the guard is held"]
pub struct QuotaLock {
    _hold: Hold,
}

impl QuotaLock {
    /// The guard of a quota lock held by `hold`.
    pub fn new(hold: Hold) -> QuotaLock {
        QuotaLock { _hold: hold }
    }
}

/// The locks a claim for one owner holds until the claim is durable: each pool's lock,
/// shared (so no `apply` or `pool delete` changes the pool under the claim), and, where no
/// constraint arbitrates owners (the file store), the owner's lock in each pool (so two
/// requests for one owner run their look-up and claim one after the other). On a database
/// only the pools' rows are locked (`FOR SHARE`), until the unit of work ends: its unique
/// owner constraint arbitrates the rest.
#[derive(Debug)]
#[must_use = "the claim's locks are held only while the guard is held"]
pub struct ClaimLock {
    // Dropped in declaration order: the owners' locks go before the pools'.
    _owners: Vec<Hold>,
    _pools: Vec<Hold>,
}

impl ClaimLock {
    /// The guard of a claim's pool locks (shared) and owner locks, taken in that order.
    pub fn new(pools: Vec<Hold>, owners: Vec<Hold>) -> ClaimLock {
        ClaimLock {
            _owners: owners,
            _pools: pools,
        }
    }
}
