//! The `IPPrefixClaim` manifest: one child prefix of a supernet pool held by one owner, and
//! its name `<pool>-<address spelling of allocation names>-<length>`.
//!
//! A kind of its own rather than an `IPAllocation` with a prefix: every view, index and
//! invariant of allocations (one address per object, the name parsed back to an address,
//! the per-owner look-ups and cooldown records keyed by address, the database's address
//! column) would otherwise have to learn that some allocations are ranges, and an old
//! version would read a /56 claim as its network address. A separate kind in its own
//! directory (`ipprefixclaims/`) leaves address allocations exactly as they were.

use std::collections::BTreeMap;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::address::serde_ip;
use crate::model::allocation::push_allocation_name;
use crate::model::kind::{API_VERSION, PREFIX_CLAIM_KIND};
use crate::model::manifest::{MANAGED_BY, MANAGED_BY_LABEL, Metadata};
use crate::model::names::{Namespace, PoolName};
use crate::model::owner::Owner;

/// `spec` of an `IPPrefixClaim`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrefixClaimSpec {
    /// The supernet pool the prefix comes from.
    pub pool: PoolName,
    /// The prefix held (no host bits).
    #[serde(with = "serde_ip::net")]
    #[schemars(schema_with = "crate::model::schema::fields::cidr")]
    pub prefix: IpNet,
    /// Who holds it.
    pub owner: Owner,
}

/// An `IPPrefixClaim` manifest. Only ipamctl writes these.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrefixClaimManifest {
    /// Always [`API_VERSION`].
    #[schemars(
        schema_with = "crate::model::schema::fields::api_version",
        description = "Always `pivirt.hu/v1`."
    )]
    pub api_version: String,
    /// Always `IPPrefixClaim`.
    pub kind: String,
    /// Name `<pool>-<a-b-c-d>-<len>`, the pool's namespace, the managed-by label.
    pub metadata: Metadata,
    /// Pool, prefix, owner.
    pub spec: PrefixClaimSpec,
}

/// The name of the claim of `prefix` in `pool`: the allocation name of its network address
/// and `-<length>`. Injective within a pool: the allocation name is injective in the
/// address, and the length is the last dash-separated field.
///
/// # Examples
///
/// ```
/// use ipamctl::model::{PoolName, prefix_claim::prefix_claim_name};
/// let pool = PoolName::new("provider-v6").unwrap();
/// assert_eq!(
///     prefix_claim_name(&pool, "2001:db8:100::/56".parse().unwrap()),
///     "provider-v6-2001-0db8-0100-0000-0000-0000-0000-0000-56"
/// );
/// ```
pub fn prefix_claim_name(pool: &PoolName, prefix: IpNet) -> String {
    let mut name = String::with_capacity(pool.as_str().len() + 44);
    push_allocation_name(&mut name, pool.as_str(), prefix.network());
    name.push('-');
    name.push_str(&prefix.prefix_len().to_string());
    name
}

impl PrefixClaimManifest {
    /// The manifest of `owner` holding `prefix` in `pool` (in `namespace`), without a
    /// creation time: the claim sets it.
    pub fn new(
        pool: &PoolName,
        namespace: Option<&Namespace>,
        prefix: IpNet,
        owner: Owner,
    ) -> PrefixClaimManifest {
        PrefixClaimManifest {
            api_version: API_VERSION.into(),
            kind: PREFIX_CLAIM_KIND.into(),
            metadata: Metadata {
                name: prefix_claim_name(pool, prefix),
                namespace: namespace.cloned(),
                creation_timestamp: None,
                deletion_timestamp: None,
                labels: BTreeMap::from([(MANAGED_BY_LABEL.into(), MANAGED_BY.into())]),
                annotations: BTreeMap::new(),
                owner_refs: Vec::new(),
            },
            spec: PrefixClaimSpec {
                pool: pool.clone(),
                prefix,
                owner,
            },
        }
    }

    /// What `check` says of a claim owned by a tenant's floating IP, which only a hand edit
    /// or another clone's file writes (`import` refuses a state directory `check` finds it
    /// in): a tenant's floating IP holds one address from the cluster's public pools, and
    /// every claim refuses it a prefix (`engine::request::allocate`). Another tenant's token would list it as `FloatingIP/…`
    /// and could not release it, so it is reported rather than left to be found that way.
    pub fn tenant_problem(&self) -> Option<String> {
        let owner = &self.spec.owner;
        owner.tenant().map(|tenant| {
            format!(
                "owner `{owner}` is tenant `{tenant}`'s floating IP, which holds one address from the cluster's public pools, never a prefix: was the file edited by hand? release {} and claim it for its real owner",
                self.spec.prefix
            )
        })
    }

    /// Cross-field checks of a claim read from the state directory.
    pub fn validate(&self) -> Result<(), String> {
        if self.api_version != API_VERSION {
            return Err(format!(
                "apiVersion: `{}` is not supported; expected `{API_VERSION}`",
                self.api_version
            ));
        }
        if self.kind != PREFIX_CLAIM_KIND {
            return Err(format!(
                "kind: expected `{PREFIX_CLAIM_KIND}`, found `{}`",
                self.kind
            ));
        }
        if self.spec.prefix.trunc() != self.spec.prefix {
            return Err(format!(
                "spec.prefix: `{}` has host bits set",
                self.spec.prefix
            ));
        }
        let expected = prefix_claim_name(&self.spec.pool, self.spec.prefix);
        if self.metadata.name != expected {
            return Err(format!(
                "metadata.name: `{}` does not match spec.pool and spec.prefix; expected `{expected}`",
                self.metadata.name
            ));
        }
        Ok(())
    }
}

/// The pool name and prefix a claim's name spells: the inverse of [`prefix_claim_name`] on
/// the names it makes (`None` for any other).
pub fn parse_prefix_claim_name(name: &str) -> Option<(&str, IpNet)> {
    let (rest, len) = name.rsplit_once('-')?;
    if len.is_empty() || (len.len() > 1 && len.starts_with('0')) {
        return None;
    }
    let len: u8 = len.parse().ok()?;
    let (pool, addr) = crate::model::allocation::parse_allocation_name(rest)?;
    let net = IpNet::new(addr, len).ok()?;
    (net.trunc() == net).then_some((pool, net))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_names_round_trip() {
        let pool = PoolName::new("p-10").unwrap();
        for text in ["10.0.0.0/24", "0.0.0.24/30", "2001:db8:100::/56", "::/0"] {
            let net: IpNet = text.parse().unwrap();
            let name = prefix_claim_name(&pool, net);
            assert_eq!(
                parse_prefix_claim_name(&name),
                Some(("p-10", net)),
                "{name}"
            );
        }
        assert_eq!(parse_prefix_claim_name("p-10-0-0-1-24"), None); // host bits
        assert_eq!(parse_prefix_claim_name("p-10-0-0-0-024"), None);
        assert_eq!(parse_prefix_claim_name("p-10-0-0-0-33"), None);
        assert_eq!(parse_prefix_claim_name("p-10-0-0-0"), None);
    }
}
