//! The answer of a diff, as a reviewer and a program read it: each changed object, each
//! conflict with the invariants, and the commits compared.

use std::net::IpAddr;

use serde::Serialize;

/// What changed about one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// A new allocation.
    Claimed,
    /// An allocation deleted.
    Released,
    /// An allocation whose owner was rewritten in place.
    OwnerChanged,
    /// An allocation rewritten in place with the same owner.
    Edited,
    /// An allocation whose NIC's MAC (`spec.mac`) changed in place, and nothing else
    /// (`ipamctl mac set`).
    MacChanged,
    /// An allocation whose lease (`spec.expiresAt`) was renewed in place, and nothing else
    /// (`ipamctl renew`, or the owner asking again with `--ttl`).
    Renewed,
    /// A new pool.
    PoolCreated,
    /// A pool whose manifest changed.
    PoolChanged,
    /// A pool deleted.
    PoolDeleted,
    /// A new subnet.
    SubnetCreated,
    /// A subnet whose manifest changed.
    SubnetChanged,
    /// A subnet deleted.
    SubnetDeleted,
    /// A cooldown record written: an address released that only its owner may have back
    /// until the pool's `reuseAfter` has passed.
    CooldownStarted,
    /// A cooldown record rewritten (released again, by another owner or later).
    CooldownChanged,
    /// A cooldown record deleted: its address is free for everyone again.
    CooldownEnded,
    /// A child prefix claimed from a supernet pool.
    PrefixClaimed,
    /// A child prefix released.
    PrefixReleased,
    /// A prefix claim rewritten in place.
    PrefixEdited,
    /// A new quota.
    QuotaCreated,
    /// A quota whose ceilings changed.
    QuotaChanged,
    /// A quota deleted.
    QuotaDeleted,
    /// A manifest that does not parse on one side.
    Unreadable,
}

impl ChangeKind {
    /// The word, as JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Claimed => "claimed",
            ChangeKind::Released => "released",
            ChangeKind::OwnerChanged => "owner-changed",
            ChangeKind::Edited => "edited",
            ChangeKind::MacChanged => "mac-changed",
            ChangeKind::Renewed => "renewed",
            ChangeKind::PoolCreated => "pool-created",
            ChangeKind::PoolChanged => "pool-changed",
            ChangeKind::PoolDeleted => "pool-deleted",
            ChangeKind::SubnetCreated => "subnet-created",
            ChangeKind::SubnetChanged => "subnet-changed",
            ChangeKind::SubnetDeleted => "subnet-deleted",
            ChangeKind::CooldownStarted => "cooldown-started",
            ChangeKind::CooldownChanged => "cooldown-changed",
            ChangeKind::CooldownEnded => "cooldown-ended",
            ChangeKind::PrefixClaimed => "prefix-claimed",
            ChangeKind::PrefixReleased => "prefix-released",
            ChangeKind::PrefixEdited => "prefix-edited",
            ChangeKind::QuotaCreated => "quota-created",
            ChangeKind::QuotaChanged => "quota-changed",
            ChangeKind::QuotaDeleted => "quota-deleted",
            ChangeKind::Unreadable => "unreadable",
        }
    }
}

/// A conflict with the invariants that the change brings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictKind {
    /// The same address claimed on both sides, for different owners.
    ClaimedOnBothSides,
    /// The same owner claiming in the same pool on both sides, at different addresses.
    OwnerClaimedTwice,
    /// An allocation rewritten in place instead of released and claimed.
    EditedInPlace,
    /// An allocation whose address is not a candidate of its pool on the new side (or
    /// whose pool is gone).
    OutsidePool,
    /// A manifest that does not parse on the new side.
    Unreadable,
    /// A prefix claim of the branch that overlaps another claim of its pool on the new
    /// side (or one claimed on the base branch since the fork), or lies outside its pool.
    PrefixOverlap,
}

/// One changed object.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// What happened.
    pub change: ChangeKind,
    /// `ipallocation/<name>`, `ipampool/<name>`, `subnet/<name>` or `cooldownrecord/<name>`.
    pub object: String,
    /// The file, relative to the state directory.
    pub path: String,
    /// The namespace, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The pool of the allocation, subnet or cooldown record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The address of the allocation or cooldown record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
    /// The prefix of a prefix claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The owner (`KIND/NAME`), as it is now (as it was, for a release).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The owner's uid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// What was before: the old owner, or the pool or subnet fields that changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub was: Option<String>,
    /// The allocation's MAC (`spec.mac`), as it is now (as it was, for a release).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// One conflict.
#[derive(Clone, Debug, Serialize)]
pub struct Conflict {
    /// What kind.
    pub conflict: ConflictKind,
    /// The object it is about.
    pub object: String,
    /// What is wrong, on one line.
    pub message: String,
}

/// The whole answer.
#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    /// The fork point (a commit id).
    pub base: String,
    /// The branch: a commit id, or `working tree`.
    pub head: String,
    /// The base branch's tip checked for conflicts, if it moved on since the fork.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other: Option<String>,
    /// The changes, in path order.
    pub changes: Vec<Change>,
    /// The conflicts with the invariants.
    pub conflicts: Vec<Conflict>,
}

/// The first 12 characters of a commit id.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
