//! The VPC naming rules: a VPC named NAME owns the private pools `vpc-NAME` (IPv4) and
//! `vpc-NAME-v6` (IPv6), each carrying the VPC's uid in an `ownerRefs` entry of kind `VPC`.
//!
//! # The pool names are injective
//!
//! (VPC name, family) → pool name must never map two inputs to one file: VPC `a`'s IPv6 pool
//! and VPC `a-v6`'s IPv4 pool would both be `vpc-a-v6`, and a `vpc delete a-v6` that went by
//! the name deleted `a`'s pool (issue 31). The rule chosen is the simplest that makes the map
//! injective without renaming anything that exists: a VPC name may not end in `-v6`
//! ([`check_name`]). Then `vpc-N` = `vpc-M` gives N = M, `vpc-N-v6` = `vpc-M-v6` gives
//! N = M, and `vpc-N` = `vpc-M-v6` would need N to end in `-v6`, which is refused. (A new
//! scheme, say `vpc4-NAME`/`vpc6-NAME`, would be injective too, but it renames every
//! existing pool, which allocation file names and outside references carry: a migration
//! for no gain.) State made before the rule (a VPC named `x-v6`) is reported by `check`.
//!
//! A name is only how a pool is found; whose it is, is its owner reference
//! ([`belongs_to`]), as Kubernetes' garbage collector goes by `ownerReferences[].uid`: a
//! VPC command acts on a pool only if it is a VPC's pool of the family its name is for,
//! recorded (where the reference names its VPC) for that VPC, and of that VPC's uid.

use crate::model::names::{PoolName, Uid};
use crate::model::pool::PoolManifest;

/// The kind written in a VPC pool's `ownerRefs`.
pub const VPC_KIND: &str = "VPC";

/// Suffix of the name of a VPC's IPv6 pool.
pub const V6_SUFFIX: &str = "-v6";

/// Whether `name` may name a new VPC: not if it ends in [`V6_SUFFIX`], since its IPv4 pool
/// would then be named as another VPC's IPv6 pool (see the module docs). The error says why.
pub fn check_name(name: &str) -> Result<(), String> {
    match name.strip_suffix(V6_SUFFIX) {
        Some(base) => Err(format!(
            "a VPC name may not end in `{V6_SUFFIX}`: VPC `{name}`'s IPv4 pool would be named \
             `{}`, the name of VPC `{base}`'s IPv6 pool; choose another name",
            pool_name(name, false)
        )),
        None => Ok(()),
    }
}

/// The uid of VPC `vpc`, if `pool` (found under `vpc`'s pool name of family `v6`) is that
/// VPC's: owned by a VPC, of that family, and recorded for VPC `vpc` where its owner
/// reference names the VPC. `None` for a pool that is not this VPC's, whatever its name.
pub fn belongs_to(manifest: &PoolManifest, vpc: &str, v6: bool) -> Option<Uid> {
    let owner = manifest
        .metadata
        .owner_refs
        .iter()
        .find(|r| r.kind == VPC_KIND)?;
    let named = owner.name.as_deref().is_none_or(|n| n == vpc);
    (named && manifest.spec.cidr.addr().is_ipv6() == v6)
        .then(|| Uid::new(&owner.uid).ok())
        .flatten()
}

/// What is wrong with the name of pool `pool`, owned by a VPC, and whether it is an error:
/// the pool is not named as its VPC's pool of its family (an error: VPC commands do not
/// find it), or the VPC it is recorded for has a name ending in `-v6`, made before
/// [`check_name`] (a warning: it still works, by its owner reference). `None` for a pool no
/// VPC owns, or one named right.
pub fn name_problem(pool: &str, manifest: &PoolManifest) -> Option<(bool, String)> {
    let owner = manifest
        .metadata
        .owner_refs
        .iter()
        .find(|r| r.kind == VPC_KIND)?;
    let v6 = manifest.spec.cidr.addr().is_ipv6();
    let vpc = owner.name.as_deref().or_else(|| name_of(pool, v6))?;
    let family = if v6 { "IPv6" } else { "IPv4" };
    if pool != pool_name(vpc, v6) {
        return Some((
            true,
            format!(
                "pool `{pool}` is owned by VPC `{vpc}`, whose {family} pool is named `{}`: VPC commands do not find it by this name; rename it",
                pool_name(vpc, v6)
            ),
        ));
    }
    check_name(vpc).err().map(|why| {
        (false, format!("pool `{pool}` belongs to VPC `{vpc}`, made before its name was refused: {why} (`vpc get`/`vpc delete {vpc}` still find it by its owner reference)"))
    })
}

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

/// The VPC a [`RANGE_ANNOTATION`] names: its namespace and name, if it reads as one (a
/// VPC's name has no `/`, so the last one separates them).
pub fn range_annotation_vpc(annotation: &str) -> Option<(crate::model::names::Namespace, &str)> {
    let (ns, name) = annotation.rsplit_once('/')?;
    Some((crate::model::names::Namespace::new(ns).ok()?, name))
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

    #[test]
    fn no_two_allowed_vpc_names_map_to_one_pool_name() {
        let names = ["a", "a-v6", "a-v6-v6", "v6", "a-v", "a-v4", "-v6"];
        let allowed: Vec<&str> = names
            .into_iter()
            .filter(|n| check_name(n).is_ok())
            .collect();
        assert_eq!(allowed, ["a", "v6", "a-v", "a-v4"]);
        let mut seen = std::collections::BTreeSet::new();
        for name in allowed {
            for v6 in [false, true] {
                assert!(seen.insert(pool_name(name, v6)), "{name} {v6}");
            }
        }
    }
}
