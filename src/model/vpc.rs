//! The VPC naming rules: a VPC named NAME owns the private pools `vpc-NAME` (IPv4) and
//! `vpc-NAME-v6` (IPv6), each carrying the VPC's uid in an `ownerRefs` entry of kind `VPC`.

use crate::model::names::{PoolName, Uid};
use crate::model::pool::PoolManifest;

/// The kind written in a VPC pool's `ownerRefs`.
pub const VPC_KIND: &str = "VPC";

/// Suffix of the name of a VPC's IPv6 pool.
pub const V6_SUFFIX: &str = "-v6";

/// The name of the pool of VPC `name` for one family (`vpc-NAME` or `vpc-NAME-v6`), as text
/// for the caller to validate as a [`PoolName`].
pub fn pool_name(name: &str, v6: bool) -> String {
    let suffix = if v6 { V6_SUFFIX } else { "" };
    format!("vpc-{name}{suffix}")
}

/// The name of the VPC whose pool is called `pool` (`vpc-NAME`, or `vpc-NAME-v6` for an IPv6
/// pool); `None` for a pool not named like a VPC's.
pub fn name_of(pool: &str, v6: bool) -> Option<&str> {
    let stem = pool.strip_prefix("vpc-")?;
    Some(match stem.strip_suffix(V6_SUFFIX) {
        Some(base) if v6 => base,
        _ => stem,
    })
}

/// The name of the VPC that owns `pool`: its name if a VPC's `ownerRefs` are on it.
pub fn owning_vpc<'a>(pool: &'a PoolName, manifest: &PoolManifest) -> Option<&'a str> {
    vpc_uid(manifest)?;
    name_of(pool.as_str(), manifest.spec.cidr.addr().is_ipv6())
}

/// The uid of the VPC that owns `pool`, from its `ownerRefs`; `None` if no VPC owns it.
pub fn vpc_uid(pool: &PoolManifest) -> Option<Uid> {
    pool.metadata
        .owner_refs
        .iter()
        .find(|r| r.kind == VPC_KIND)
        .and_then(|r| Uid::new(&r.uid).ok())
}

/// The annotation on a VPC range's prefix claim that names its VPC (`NAMESPACE/NAME`): a
/// `vpc create` run again after a crash between the claim and its pools finds the claim by
/// it, adopts its uid and so gets the same range.
pub const RANGE_ANNOTATION: &str = "ipamctl.pivirt.hu/vpc";

/// The value of [`RANGE_ANNOTATION`] for VPC `name` of namespace `ns`.
pub fn range_annotation(ns: &crate::model::names::Namespace, name: &str) -> String {
    format!("{ns}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_pool_is_named_after_its_vpc_less_the_suffix() {
        assert_eq!(name_of("vpc-web-v6", true), Some("web"));
        assert_eq!(name_of("vpc-web-v6", false), Some("web-v6"));
        assert_eq!(name_of("web", false), None);
        assert_eq!(pool_name("web", true), "vpc-web-v6");
    }
}
