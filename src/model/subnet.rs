//! Stored subnets (`kind: Subnet`): a named range of one pool with its gateway and reserved
//! addresses, so that a claim says `--subnet web` instead of repeating `--within CIDR
//! --reserved GATEWAY` (and cannot forget the gateway).
//!
//! A subnet lives in its pool's scope (`<scope>/subnets/<name>.yaml`). Its candidates are the
//! pool's ([`Candidates::of_pool`]) narrowed to its prefix, without its gateway and reserved
//! entries: the same arithmetic as `--within`/`--reserved`.
//!
//! Every change of a subnet (create, update by `apply`, delete) holds its pool's lock
//! exclusively while it checks and writes, and a claim with `--subnet` reads the subnet under
//! the same lock shared (invariant 6 of [`crate::engine`]): so two subnets of one pool can
//! never overlap, a claim is always checked against the subnet as it stands, and a subnet is
//! never deleted while a claim is being made into it.

use std::net::IpAddr;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::address::Exclude;
use crate::model::address::serde_ip;
use crate::model::candidates::{Candidates, address, host_span, ordinal, span_of};
use crate::model::dhcp_options::DhcpOptions;
pub use crate::model::kind::SUBNET_KIND;
use crate::model::manifest::{API_VERSION, Metadata};
use crate::model::names::{PoolName, SubnetName};
use crate::model::pool::{PoolManifest, PoolRef};

/// `spec` of a `Subnet`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubnetSpec {
    /// The pool it is a range of (in the same scope).
    pub pool: PoolName,
    /// The subnet's prefix, inside the pool's.
    #[serde(with = "serde_ip::net")]
    #[schemars(schema_with = "crate::model::schema::fields::cidr")]
    pub cidr: IpNet,
    /// Never allocated; defaults to the subnet's first host address.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_ip::opt_addr"
    )]
    #[schemars(with = "Option<IpAddr>")]
    pub gateway: Option<IpAddr>,
    /// Addresses or prefixes of the subnet never handed out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved: Vec<Exclude>,
    /// What a DHCP server tells the guests of this subnet; each field set here replaces
    /// the pool's ([`SubnetManifest::dhcp`]).
    #[serde(default, skip_serializing_if = "DhcpOptions::is_empty")]
    pub dhcp: DhcpOptions,
}

/// A `Subnet` manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubnetManifest {
    /// Always [`API_VERSION`].
    #[schemars(
        schema_with = "crate::model::schema::fields::api_version",
        description = "Always `pivirt.hu/v1`."
    )]
    pub api_version: String,
    /// Always [`SUBNET_KIND`].
    #[schemars(
        schema_with = "crate::model::schema::fields::subnet_kind",
        description = "Always `Subnet`."
    )]
    pub kind: String,
    /// Name and the pool's namespace.
    #[schemars(schema_with = "crate::model::manifest::pool_metadata")]
    pub metadata: Metadata,
    /// The range itself.
    pub spec: SubnetSpec,
}

impl SubnetManifest {
    /// A subnet named `name` of `pool`, with the gateway filled in (the first host address
    /// when `None`).
    pub fn new(
        name: &SubnetName,
        pool: &PoolRef,
        cidr: IpNet,
        gateway: Option<IpAddr>,
        reserved: Vec<Exclude>,
    ) -> SubnetManifest {
        SubnetManifest {
            api_version: API_VERSION.into(),
            kind: SUBNET_KIND.into(),
            metadata: Metadata {
                name: name.to_string(),
                namespace: pool.namespace.clone(),
                labels: Default::default(),
                annotations: Default::default(),
                owner_refs: Vec::new(),
                creation_timestamp: None,
                deletion_timestamp: None,
            },
            spec: SubnetSpec {
                pool: pool.name.clone(),
                cidr,
                gateway: Some(gateway.unwrap_or_else(|| first_host(cidr))),
                reserved,
                dhcp: DhcpOptions::default(),
            },
        }
        .normalized()
    }

    /// The manifest as stored: the gateway filled in.
    pub fn normalized(mut self) -> SubnetManifest {
        if self.spec.gateway.is_none() {
            self.spec.gateway = Some(first_host(self.spec.cidr));
        }
        self
    }

    /// The subnet's validated name (decoding validated it).
    pub fn name(&self) -> SubnetName {
        SubnetName::new(&self.metadata.name).expect("validate checked metadata.name")
    }

    /// The pool it belongs to.
    pub fn pool(&self) -> PoolRef {
        PoolRef {
            namespace: self.metadata.namespace.clone(),
            name: self.spec.pool.clone(),
        }
    }

    /// The gateway: the one written, else the first host address.
    pub fn gateway(&self) -> IpAddr {
        self.spec
            .gateway
            .unwrap_or_else(|| first_host(self.spec.cidr))
    }

    /// The candidates a claim with `--subnet` may be given, before taken addresses: the
    /// pool's, inside the prefix, without network, broadcast, gateway and reserved entries.
    pub fn candidates(&self, pool: &PoolManifest) -> Candidates {
        Candidates::of_pool(&pool.spec)
            .within(self.spec.cidr)
            .without([self.gateway()])
            .without_nets(self.spec.reserved.iter().map(|r| r.net()))
    }

    /// The addresses this subnet keeps from every claim of its pool, whether or not the
    /// claim names the subnet: its network and broadcast addresses (IPv6: its
    /// subnet-router anycast address), its gateway and its reserved entries.
    pub fn off_limits(&self) -> Vec<IpNet> {
        let cidr = self.spec.cidr;
        let (first, last) = span_of(cidr);
        let (host_lo, host_hi) = host_span(cidr);
        let v6 = cidr.addr().is_ipv6();
        let mut nets: Vec<IpNet> = Vec::new();
        if host_lo > first {
            nets.push(IpNet::from(address(v6, first)));
        }
        if host_hi < last {
            nets.push(IpNet::from(address(v6, last)));
        }
        nets.push(IpNet::from(self.gateway()));
        nets.extend(self.spec.reserved.iter().map(|r| r.net()));
        nets
    }

    /// What `addr` is to this subnet if it is one of its [`off_limits`](Self::off_limits)
    /// addresses: "the gateway", "a reserved address", "the network address", "the broadcast
    /// address" or "the subnet-router anycast address".
    pub fn role_of(&self, addr: IpAddr) -> Option<&'static str> {
        let cidr = self.spec.cidr;
        if !cidr.contains(&addr) {
            return None;
        }
        let (host_lo, host_hi) = host_span(cidr);
        let n = ordinal(addr);
        if addr == self.gateway() {
            Some("the gateway")
        } else if self.spec.reserved.iter().any(|r| r.net().contains(&addr)) {
            Some("a reserved address")
        } else if n < host_lo && addr.is_ipv6() {
            Some("the subnet-router anycast address")
        } else if n < host_lo {
            Some("the network address")
        } else if n > host_hi {
            Some("the broadcast address")
        } else {
            None
        }
    }

    /// How messages name it: "subnet `web` (10.42.1.0/29) of pool `acme/prod/vpc-main`".
    pub fn describe(&self) -> String {
        format!(
            "subnet `{}` ({}) of pool `{}`",
            self.metadata.name,
            self.spec.cidr,
            self.pool()
        )
    }

    /// Checks that serde cannot express (exit 2 when they fail).
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.api_version != API_VERSION {
            return Err(format!(
                "apiVersion: `{}` is not supported; expected `{API_VERSION}`",
                self.api_version
            ));
        }
        if self.kind != SUBNET_KIND {
            return Err(format!(
                "kind: expected `{SUBNET_KIND}`, found `{}`",
                self.kind
            ));
        }
        SubnetName::new(&self.metadata.name).map_err(|e| format!("metadata.name: {e}"))?;
        let cidr = self.spec.cidr;
        if let Some(gw) = self.spec.gateway
            && !cidr.contains(&gw)
        {
            return Err(format!("spec.gateway: `{gw}` is outside `{cidr}`"));
        }
        for entry in &self.spec.reserved {
            if !cidr.contains(&entry.net()) {
                return Err(format!("spec.reserved: `{entry}` is outside `{cidr}`"));
            }
        }
        self.spec.dhcp.validate(cidr)
    }

    /// The options its guests are told: its own `spec.dhcp` over its pool's. The rule every
    /// writer of a subnet or pool (apply, import, `subnet create`) and `check` apply to the
    /// pair: a route the subnet inherits has its router inside the subnet, or no guest of
    /// the subnet could reach it. The message names the pool; the caller names the subnet.
    pub fn dhcp(&self, pool: &PoolManifest) -> std::result::Result<DhcpOptions, String> {
        if self.spec.dhcp.routes.is_empty() {
            pool.spec.dhcp.check_routes(self.spec.cidr).map_err(|why| {
                format!(
                    "spec.dhcp.routes of pool `{}`: {why}; give the subnet routes of its own",
                    pool.metadata.name
                )
            })?;
        }
        Ok(self.spec.dhcp.over(&pool.spec.dhcp))
    }
}

/// The candidates of `pool`, which holds `subnets`: the pool's own
/// ([`Candidates::of_pool`]) without any subnet's [`off_limits`](SubnetManifest::off_limits)
/// addresses. Every claim starts from these, whatever it names, so no claim can hand out a
/// subnet's gateway, even one that does not say `--subnet`.
pub fn pool_candidates(pool: &PoolManifest, subnets: &[SubnetManifest]) -> Candidates {
    Candidates::of_pool(&pool.spec).without_nets(subnets.iter().flat_map(|s| s.off_limits()))
}

/// The subnet among `subnets` that keeps `addr` from every claim, and what `addr` is to it.
pub fn off_limits_role(
    subnets: &[SubnetManifest],
    addr: IpAddr,
) -> Option<(&SubnetManifest, &'static str)> {
    subnets
        .iter()
        .find_map(|s| s.role_of(addr).map(|role| (s, role)))
}

/// The first host address of `net` (its network address for a /31 or /32).
fn first_host(net: IpNet) -> IpAddr {
    crate::model::candidates::address(net.addr().is_ipv6(), host_span(net).0)
}
