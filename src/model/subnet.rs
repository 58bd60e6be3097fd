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
use crate::model::candidates::{Candidates, host_span};
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
            },
            spec: SubnetSpec {
                pool: pool.name.clone(),
                cidr,
                gateway: Some(gateway.unwrap_or_else(|| first_host(cidr))),
                reserved,
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
        Ok(())
    }
}

/// The first host address of `net` (its network address for a /31 or /32).
fn first_host(net: IpNet) -> IpAddr {
    crate::model::candidates::address(net.addr().is_ipv6(), host_span(net).0)
}
