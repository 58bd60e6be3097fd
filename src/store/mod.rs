//! Storage of manifests behind the [`Store`] trait: the queries the commands ask, so that a
//! database-backed store can follow without touching them. The filesystem implementation
//! is [`fs::FsStore`]; how it keeps its indexes honest stays inside it.
//!
//! Objects are keyed by (kind, namespace, name); `create` is create-only and is the arbiter
//! of every claim.

pub mod beneath;
pub mod fs;
pub mod index;
pub mod lock;

use std::any::Any;
use std::net::Ipv4Addr;

use crate::error::Result;
use crate::model::{AllocationManifest, Namespace, Owner, OwnerFilter, PoolName};

/// The two kinds of stored object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// `IPAMPool` manifests.
    Pool,
    /// `IPAllocation` manifests.
    Allocation,
}

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
    pub taken: Vec<Ipv4Addr>,
    /// Allocations of the pool that do not parse: (object name, why).
    pub broken: Vec<(String, String)>,
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
    fn record_claim(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
        address: Ipv4Addr,
    );

    /// The allocations of scope `ns` (of `pool` only, if given) whose owner passes
    /// `filter`, each read just now, in no particular order; allocations that do not parse
    /// come along (their owner is unknown), for the caller to warn about.
    fn find_allocations(
        &self,
        ns: Option<&Namespace>,
        pool: Option<&PoolName>,
        filter: &OwnerFilter,
    ) -> Result<Vec<Found>>;
}
