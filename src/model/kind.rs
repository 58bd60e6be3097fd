//! The kinds of stored object, as the stores and every view name them, and the `apiVersion`
//! and `kind` strings their manifests carry.

/// The only `apiVersion` ipamctl reads and writes.
pub const API_VERSION: &str = "pivirt.hu/v1";

/// `kind` of a pool manifest.
pub const POOL_KIND: &str = "IPAMPool";

/// `kind` of an allocation manifest.
pub const ALLOCATION_KIND: &str = "IPAllocation";

/// `kind` of a subnet manifest.
pub const SUBNET_KIND: &str = "Subnet";

/// `kind` of a prefix claim (a child prefix of a supernet pool).
pub const PREFIX_CLAIM_KIND: &str = "IPPrefixClaim";

/// `kind` of a cooldown record.
pub const COOLDOWN_KIND: &str = "CooldownRecord";

/// `kind` of a namespace's quota.
pub const QUOTA_KIND: &str = "Quota";

/// The kinds of stored object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// `IPAMPool` manifests.
    Pool,
    /// `IPAllocation` manifests.
    Allocation,
    /// `Subnet` manifests: a named range of one pool of the same scope.
    Subnet,
    /// `CooldownRecord` manifests: an address released recently, named like its allocation
    /// (see [`crate::model::cooldown`]).
    Cooldown,
    /// `IPPrefixClaim` manifests: a child prefix of a supernet pool held by one owner
    /// (see [`crate::model::prefix_claim`]).
    PrefixClaim,
    /// `Quota` manifests: a namespace's ceilings (see [`crate::model::quota`]).
    Quota,
}

impl ObjectKind {
    /// Every kind, in the order a copy writes them (a subnet and a record name a pool; a
    /// quota comes after what it counts: an `import` keeps the quotas the target held
    /// before it, while the source's own are copied as `apply` writes one, even below what
    /// they count).
    pub const ALL: [ObjectKind; 6] = [
        ObjectKind::Pool,
        ObjectKind::Subnet,
        ObjectKind::Allocation,
        ObjectKind::Cooldown,
        ObjectKind::PrefixClaim,
        ObjectKind::Quota,
    ];

    /// The lowercase kind, as messages and `-o name` spell it.
    pub fn resource(self) -> &'static str {
        match self {
            ObjectKind::Pool => "ipampool",
            ObjectKind::Allocation => "ipallocation",
            ObjectKind::Subnet => "subnet",
            ObjectKind::Cooldown => "cooldownrecord",
            ObjectKind::PrefixClaim => "ipprefixclaim",
            ObjectKind::Quota => "quota",
        }
    }
}
