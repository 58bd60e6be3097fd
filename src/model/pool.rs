//! The `IPAMPool` manifest: its spec, kind and excludes, and [`PoolRef`], which pool in
//! which scope.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::address::{Exclude, family_name, serde_ip};
use crate::model::dhcp_options::DhcpOptions;
use crate::model::mac::MacPrefix;
use crate::model::manifest::{API_VERSION, Metadata, POOL_KIND};
use crate::model::names::{Namespace, PoolName, check_label};
use crate::model::pick::Pick;
use crate::model::prefix::PrefixLengths;

/// `public` (cluster-scoped, operator-made) or `private` (a VPC's range, namespaced).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PoolKind {
    /// Cluster-scoped; floating IPs and router uplinks come from it.
    Public,
    /// A VPC's own range in a tenant namespace.
    Private,
    /// Hands out child prefixes, never single addresses (`allocate --prefix-length N`);
    /// cluster-scoped or namespaced, no gateway.
    Supernet,
}

impl fmt::Display for PoolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoolKind::Public => "public",
            PoolKind::Private => "private",
            PoolKind::Supernet => "supernet",
        })
    }
}

/// `spec` of an `IPAMPool`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// The pool's prefix (no host bits).
    #[serde(with = "serde_ip::net")]
    #[schemars(schema_with = "crate::model::schema::fields::cidr")]
    pub cidr: IpNet,
    /// `public`, `private` or `supernet`.
    pub kind: PoolKind,
    /// A supernet's bounds on the lengths it hands out (`{min: 44, max: 64}`); without
    /// them any length longer than the pool's own.
    #[serde(
        default,
        rename = "prefixLengths",
        skip_serializing_if = "Option::is_none"
    )]
    pub prefix_lengths: Option<PrefixLengths>,
    /// Never allocated.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_ip::opt_addr"
    )]
    #[schemars(schema_with = "crate::model::schema::fields::optional_address")]
    pub gateway: Option<IpAddr>,
    /// Addresses or prefixes never handed out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<Exclude>,
    /// Where a public pool is routable (an RFC 1123 label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::model::schema::fields::optional_label")]
    pub zone: Option<String>,
    /// How long a released address is kept from other owners (`10m`, `1h30m`); the owner
    /// that released it gets it back meanwhile. None: reused at once.
    #[serde(
        default,
        rename = "reuseAfter",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "crate::model::schema::fields::duration")]
    pub reuse_after: Option<ReuseAfter>,
    /// The first three octets of the MACs `allocate --mac auto` derives in this pool
    /// (`52:54:00`), locally administered and unicast. None: `--mac auto` is refused.
    #[serde(default, rename = "macPrefix", skip_serializing_if = "Option::is_none")]
    pub mac_prefix: Option<MacPrefix>,
    /// How a claim picks among the free candidates: `lowest` (the default, left out of
    /// the manifest) or `hashed` (the first free one at or above a position derived from
    /// the owner's kind and name, wrapping around), so that two branches claiming for
    /// different owners rarely take the same address. Not for a supernet, which hands out
    /// prefixes by best fit.
    #[serde(default, skip_serializing_if = "Pick::is_lowest")]
    pub pick: Pick,
    /// What a DHCP server tells the guests of this pool and, as a default field by field,
    /// of its subnets: DNS servers, domain, lease time, MTU, NTP servers, extra routes.
    /// Not for a supernet.
    #[serde(default, skip_serializing_if = "DhcpOptions::is_empty")]
    pub dhcp: DhcpOptions,
}

impl PoolSpec {
    /// A supernet has no gateway, room for a child prefix and sound `prefixLengths`; no
    /// other pool has `prefixLengths`.
    fn validate_supernet(&self) -> Result<(), String> {
        if self.kind == PoolKind::Supernet && !self.pick.is_lowest() {
            return Err(format!(
                "spec.pick: a supernet hands out prefixes by best fit; `pick: {}` is for pools of addresses",
                self.pick
            ));
        }
        if self.kind == PoolKind::Supernet && !self.dhcp.is_empty() {
            return Err("spec.dhcp: a supernet hands out prefixes and serves no guest; give the options to the pools or subnets made of its prefixes".into());
        }
        if self.kind != PoolKind::Supernet {
            return match self.prefix_lengths {
                Some(_) => Err(format!(
                    "spec.prefixLengths: only a supernet pool hands out prefixes; this pool is `{}`",
                    self.kind
                )),
                None => Ok(()),
            };
        }
        if let Some(gw) = self.gateway {
            return Err(format!(
                "spec.gateway: a supernet hands out prefixes and has no gateway, found `{gw}`"
            ));
        }
        if self.cidr.prefix_len() == self.cidr.max_prefix_len() {
            return Err(format!(
                "spec.cidr: a supernet needs room for a child prefix, found `{}`",
                self.cidr
            ));
        }
        self.prefix_lengths.unwrap_or_default().validate(self.cidr)
    }
}

/// An `IPAMPool` manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PoolManifest {
    /// Always [`API_VERSION`].
    #[schemars(
        schema_with = "crate::model::schema::fields::api_version",
        description = "Always `pivirt.hu/v1`."
    )]
    pub api_version: String,
    /// Always [`POOL_KIND`].
    #[schemars(
        schema_with = "crate::model::schema::fields::pool_kind",
        description = "Always `IPAMPool`."
    )]
    pub kind: String,
    /// Name, namespace, labels…
    #[schemars(schema_with = "crate::model::manifest::pool_metadata")]
    pub metadata: Metadata,
    /// The pool itself.
    pub spec: PoolSpec,
}

impl PoolManifest {
    /// The pool's validated name.
    ///
    /// Callers get manifests from [`crate::yaml::decode_pool`], which validated it already.
    pub fn name(&self) -> PoolName {
        PoolName::new(&self.metadata.name).expect("decode_pool validated metadata.name")
    }

    /// Cross-field checks that serde cannot express; each message names the field and value.
    pub fn validate(&self) -> Result<(), String> {
        if self.api_version != API_VERSION {
            return Err(format!(
                "apiVersion: `{}` is not supported; expected `{API_VERSION}`",
                self.api_version
            ));
        }
        if self.kind != POOL_KIND {
            return Err(format!(
                "kind: expected `{POOL_KIND}`, found `{}`",
                self.kind
            ));
        }
        PoolName::new(&self.metadata.name).map_err(|e| format!("metadata.name: {e}"))?;
        let spec = &self.spec;
        match (spec.kind, &self.metadata.namespace) {
            (PoolKind::Public, Some(ns)) => {
                return Err(format!(
                    "metadata.namespace: a public pool is cluster-scoped and has no namespace, found `{ns}`"
                ));
            }
            (PoolKind::Private, None) => {
                return Err("metadata.namespace: a private pool needs a namespace (the VPC's tenant namespace)".into());
            }
            _ => {}
        }
        spec.validate_supernet()?;
        refuse_mapped(spec.cidr)?;
        let family = family_name(spec.cidr.addr());
        if let Some(gw) = spec.gateway {
            if family_name(gw) != family {
                return Err(format!(
                    "spec.gateway: `{gw}` is an {} address but spec.cidr `{}` is {family}",
                    family_name(gw),
                    spec.cidr
                ));
            }
            if !spec.cidr.contains(&gw) {
                return Err(format!("spec.gateway: `{gw}` is outside `{}`", spec.cidr));
            }
        }
        for entry in &spec.exclude {
            let entry_family = family_name(entry.net().addr());
            if entry_family != family {
                let what = if entry.to_string().contains('/') {
                    "prefix"
                } else {
                    "address"
                };
                return Err(format!(
                    "spec.exclude: `{entry}` is an {entry_family} {what} but spec.cidr `{}` is {family}",
                    spec.cidr
                ));
            }
            if !spec.cidr.contains(&entry.net()) {
                return Err(format!(
                    "spec.exclude: `{entry}` is outside `{}`",
                    spec.cidr
                ));
            }
        }
        if let Some(zone) = &spec.zone {
            check_label(zone).map_err(|why| format!("spec.zone: `{zone}` {why}"))?;
        }
        spec.dhcp.validate(spec.cidr)
    }
}

/// Refuses an IPv6 `cidr` that overlaps the IPv4-mapped range `::ffff:0:0/96`: its
/// addresses are IPv4 addresses by another spelling, so a pool of it beside the IPv4 pool
/// of that range would hand out one address twice (`::ffff:192.0.2.5` and 192.0.2.5), and
/// no overlap check that compares families could see it. The error names the IPv4 range.
fn refuse_mapped(cidr: IpNet) -> Result<(), String> {
    let IpNet::V6(v6) = cidr else {
        return Ok(());
    };
    let mapped: ipnet::Ipv6Net = "::ffff:0:0/96".parse().expect("a valid prefix");
    if mapped.contains(&v6) {
        let v4 = v6.network().to_ipv4_mapped().expect("inside ::ffff:0:0/96");
        let v4 = ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).expect("a length of at most 32");
        return Err(format!(
            "spec.cidr: `{cidr}` is IPv4-mapped: its addresses are the IPv4 range {v4}, which a pool must name as such (give `cidr: {v4}`)"
        ));
    }
    if v6.contains(&mapped) {
        return Err(format!(
            "spec.cidr: `{cidr}` holds the IPv4-mapped range ::ffff:0:0/96, whose addresses are IPv4 addresses; give a range outside it"
        ));
    }
    Ok(())
}

/// Which pool, in which scope (`None` = cluster-scoped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolRef {
    /// The pool's namespace; `None` for a public pool.
    pub namespace: Option<Namespace>,
    /// The pool's name.
    pub name: PoolName,
}

impl std::fmt::Display for PoolRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => write!(f, "{}", self.name),
        }
    }
}

/// The longest `reuseAfter` accepted: a year (a longer one is a typo, not a policy).
const LONGEST: Duration = Duration::from_secs(366 * 24 * 3600);

/// `spec.reuseAfter`: a duration as written (`10m`, `1h 30m`, `90s`), kept as written so the
/// pool's manifest round-trips byte for byte.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ReuseAfter {
    text: String,
    duration: Duration,
}

impl ReuseAfter {
    /// Parses a duration as `humantime` reads it (`30s`, `10m`, `2h`, `1h 30m`, `1d`): more
    /// than zero, at most a year.
    pub fn new(text: &str) -> std::result::Result<ReuseAfter, String> {
        let duration = humantime::parse_duration(text).map_err(|e| {
            format!(
                "reuseAfter: `{}` is not a duration like `10m`, `1h` or `90s` ({e})",
                text.escape_debug()
            )
        })?;
        if duration.is_zero() || duration > LONGEST {
            return Err(format!(
                "reuseAfter: `{text}` must be more than zero and at most a year"
            ));
        }
        Ok(ReuseAfter {
            text: text.to_owned(),
            duration,
        })
    }

    /// The window.
    pub fn duration(&self) -> Duration {
        self.duration
    }
}

impl std::fmt::Display for ReuseAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl TryFrom<String> for ReuseAfter {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        ReuseAfter::new(&s)
    }
}

impl From<ReuseAfter> for String {
    fn from(r: ReuseAfter) -> String {
        r.text
    }
}
