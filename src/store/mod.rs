//! Storage of manifests behind a small trait, so that a database-backed store can follow
//! without touching the commands. The filesystem implementation is [`fs::FsStore`].
//!
//! Objects are keyed by (kind, namespace, name); `create` is create-only and is the arbiter
//! of every claim. Besides objects, a store offers the two locks and the derived owner index
//! that [`crate::alloc`] builds its protocol on.

pub mod fs;
pub mod journal;

use std::any::Any;
use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::error::Result;
use crate::model::{Namespace, PoolName};

/// The two kinds of stored object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// `IPAMPool` manifests.
    Pool,
    /// `IPAllocation` manifests.
    Allocation,
}

/// An object's name with its stamp: a token that differs whenever the object under that name
/// was removed and created again (the inode number, for the filesystem). Listing yields it
/// without reading the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The object name (file name without `.yaml`).
    pub name: String,
    /// See [`Entry`].
    pub stamp: u64,
}

/// A stored object's bytes and stamp.
#[derive(Clone, Debug)]
pub struct Object {
    /// The manifest as stored.
    pub bytes: Vec<u8>,
    /// See [`Entry`].
    pub stamp: u64,
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

/// The derived owner index of one pool, as loaded: address → (stamp, owner key) of the
/// allocation the index last saw under that address.
pub type IndexMap = HashMap<Ipv4Addr, (u64, u64)>;

/// A state of an allocations directory, as the store can observe it cheaply (for the
/// filesystem: the directory's change time in nanoseconds). Any change of the directory's
/// entries gives a new version.
pub type Version = i128;

/// What the owner index knows of one pool, and whether that knowledge can be trusted.
#[derive(Debug, Default)]
pub struct IndexView {
    /// Address → (stamp, owner key) of the allocations the index knows.
    pub facts: IndexMap,
    /// The directory's version when the index was loaded; `None` if it has no directory.
    pub version: Option<Version>,
    /// True when every change of the directory since the pool was last read in full was
    /// logged by ipamctl: then an allocation whose stamp matches its fact need not be read.
    /// False after a `git pull`, a hand edit or a crash: every file must be read.
    pub trusted: bool,
    /// When not trusted: the latest version for which the facts were complete. An
    /// allocation whose change time is before it was not touched since, so its fact holds
    /// (ctime cannot be set from user space, and a rename or link moves it forward).
    pub settled: Option<Version>,
}

/// One fact for the owner index: `address` (with `stamp`) is held by the owner with `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The allocated address.
    pub address: Ipv4Addr,
    /// The allocation's stamp when the owner was read; 0 records that it is gone.
    pub stamp: u64,
    /// [`crate::model::Owner::key`] of the holder.
    pub key: u64,
}

/// Storage of pools and allocations. Every method is safe to call from many processes at once.
pub trait Store {
    /// A human-readable location of an object, for messages (a path relative to the root).
    fn locate(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> String;

    /// Reads an object; `None` when it does not exist. Never returns a partly written object.
    fn get(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<Option<Object>>;

    /// Creates an object if no object has that name; `None` (and nothing written) if one has.
    /// When it returns `Some(stamp)`, the object is complete and durable.
    fn create(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<Option<u64>>;

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

    /// Names (and stamps) of the objects of a kind in one scope, in no particular order.
    fn list(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<Vec<Entry>>;

    /// Every scope that holds a pool or allocation directory: `None` is the cluster scope.
    fn scopes(&self) -> Result<Vec<Option<Namespace>>>;

    /// Locks a pool against changes (`Exclusive`) or against being changed while claiming
    /// (`Shared`). Blocks until granted.
    fn lock_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<LockGuard>;

    /// Serialises changes to the set of pools of one scope (`apply` holds it exclusively
    /// while it checks overlaps and writes), so two concurrent applies cannot both create
    /// overlapping public pools.
    fn lock_scope(&self, ns: Option<&Namespace>) -> Result<LockGuard>;

    /// Serialises requests for one owner identity in one pool (keyed by
    /// [`crate::model::Owner::key`]); distinct owners rarely wait for each other.
    fn lock_owner(&self, ns: Option<&Namespace>, pool: &PoolName, key: u64) -> Result<LockGuard>;

    /// The address the index last recorded for an owner key; a hint that must be verified.
    fn index_hint(&self, ns: Option<&Namespace>, pool: &PoolName, key: u64) -> Option<Ipv4Addr>;

    /// The change time (ctime) of an allocation file, as a [`Version`]; `None` if gone.
    fn changed_at(&self, ns: Option<&Namespace>, name: &str) -> Option<Version>;

    /// Loads what the index knows about every address of the pool, and whether it can be
    /// trusted for the directory as it is now.
    fn index_load(&self, ns: Option<&Namespace>, pool: &PoolName) -> IndexView;

    /// Records facts in the index (best effort: the index is derived and may always be lost).
    /// `hint`, if given, also becomes the owner-key hint for its owner. `verified`, if given,
    /// says every file of the pool was just read, with the directory at that version.
    fn index_record(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        entries: &[IndexEntry],
        hint: Option<IndexEntry>,
        verified: Option<Version>,
    );
}
