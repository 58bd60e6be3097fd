//! What the owner index and its scan need to know of each kind of object they serve
//! ([`Kind`]): how a file is named, decoded and rebuilt. Allocations are keyed by address;
//! prefix claims of supernet pools by prefix (`prefix_claims.rs`).

use std::net::IpAddr;

use crate::model::{AllocationManifest, Namespace, Owner, PoolName, Timestamp};
use crate::store::ObjectKind;
use crate::store::fs::owner::index::Key;
use crate::yaml;

/// A kind of object a scan looks at, for one pool: how its files are named, decoded and
/// rebuilt. Everything else (the index, the status check, what is recorded) is the scan's.
pub(in crate::store::fs) trait Kind: Sync {
    /// What a file's name spells, and the index keys its record by.
    type Key: Key;
    /// What a file holds.
    type Manifest: PartialEq + Send;
    /// The directory the files live in.
    const OBJECTS: ObjectKind;
    /// The object name of `key`'s file in the pool (the file is `<name>.yaml`).
    fn name(&self, key: Self::Key) -> String;

    /// The address `key` stands for, for a kind keyed by address (allocations): a batch's
    /// watch remembers those files' statuses in address order too (`watch.rs`).
    fn address(_key: Self::Key) -> Option<IpAddr> {
        None
    }
    /// Decodes a file's text: the manifest (or why it is none), and whether the text is
    /// exactly what ipamctl writes for it.
    fn decode(text: &str) -> (std::result::Result<Self::Manifest, String>, bool);
    /// The key and the owner `m` says it holds.
    fn key_and_owner(m: &Self::Manifest) -> (Self::Key, &Owner);
    /// `m`'s `metadata.creationTimestamp`.
    fn created(m: &Self::Manifest) -> Option<Timestamp>;
    /// The manifest ipamctl writes for `owner` holding `key` in the pool, created at
    /// `created`; `None` when the pool's name is not one (it cannot be rebuilt).
    fn canonical(
        &self,
        key: Self::Key,
        owner: Owner,
        created: Option<Timestamp>,
    ) -> Option<Self::Manifest>;
}

/// Allocations of one pool, keyed by address.
pub(in crate::store::fs) struct Allocations<'a> {
    /// The pool as its files spell it.
    pub(in crate::store::fs) pool: &'a str,
    /// The pool's name, when it is a valid one (else nothing is rebuilt).
    pub(in crate::store::fs) pool_name: Option<PoolName>,
    /// The scope.
    pub(in crate::store::fs) ns: Option<&'a Namespace>,
}

impl Kind for Allocations<'_> {
    type Key = IpAddr;
    type Manifest = AllocationManifest;
    const OBJECTS: ObjectKind = ObjectKind::Allocation;

    fn name(&self, key: IpAddr) -> String {
        let mut name = String::with_capacity(self.pool.len() + 21);
        crate::model::push_allocation_name(&mut name, self.pool, key);
        name
    }

    fn address(key: IpAddr) -> Option<IpAddr> {
        Some(key)
    }

    fn decode(text: &str) -> (std::result::Result<AllocationManifest, String>, bool) {
        yaml::decode_allocation_exact(text)
    }

    fn key_and_owner(m: &AllocationManifest) -> (IpAddr, &Owner) {
        (m.spec.address, &m.spec.owner)
    }

    fn created(m: &AllocationManifest) -> Option<Timestamp> {
        m.metadata.creation_timestamp
    }

    fn canonical(
        &self,
        key: IpAddr,
        owner: Owner,
        created: Option<Timestamp>,
    ) -> Option<AllocationManifest> {
        let mut m = AllocationManifest::new(self.pool_name.as_ref()?, self.ns, key, owner);
        m.metadata.creation_timestamp = created;
        Some(m)
    }
}
