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
//! the same lock shared (invariant 6 of [`crate::alloc`]): so two subnets of one pool can
//! never overlap, a claim is always checked against the subnet as it stands, and a subnet is
//! never deleted while a claim is being made into it.

use std::net::IpAddr;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::alloc::{self, PoolRef, pool_addresses};
use crate::error::{Error, Result};
use crate::model::{
    API_VERSION, Exclude, Metadata, Namespace, PoolManifest, PoolName, SubnetName, serde_ip,
};
use crate::pool::{Candidates, host_span};
use crate::store::{self, LockMode, ObjectKind, Store};
use crate::yaml;

/// `kind` of a subnet manifest.
pub const SUBNET_KIND: &str = "Subnet";

/// `spec` of a `Subnet`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubnetSpec {
    /// The pool it is a range of (in the same scope).
    pub pool: PoolName,
    /// The subnet's prefix, inside the pool's.
    #[serde(with = "serde_ip::net")]
    #[schemars(schema_with = "crate::schema::cidr")]
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
        schema_with = "crate::schema::api_version",
        description = "Always `pivirt.hu/v1`."
    )]
    pub api_version: String,
    /// Always [`SUBNET_KIND`].
    #[schemars(
        schema_with = "crate::schema::subnet_kind",
        description = "Always `Subnet`."
    )]
    pub kind: String,
    /// Name and the pool's namespace.
    #[schemars(schema_with = "crate::schema::pool_metadata")]
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
    crate::pool::address(net.addr().is_ipv6(), host_span(net).0)
}

/// Reads a subnet; exit 3 when it does not exist.
pub fn load(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &SubnetName,
) -> Result<SubnetManifest> {
    match read(store, ns, name.as_str())? {
        Some(m) => Ok(m),
        None => Err(Error::NotFound {
            message: format!(
                "subnet `{name}` not found ({})",
                match ns {
                    Some(ns) => format!("in namespace `{ns}`"),
                    None => "cluster-scoped".into(),
                }
            ),
            hint: Some("`ipamctl subnet list -A` shows every subnet".into()),
        }),
    }
}

/// Reads a subnet; `None` when it does not exist, exit 2 when it does not parse.
fn read(store: &dyn Store, ns: Option<&Namespace>, name: &str) -> Result<Option<SubnetManifest>> {
    let Some(bytes) = store.get(ObjectKind::Subnet, ns, name)? else {
        return Ok(None);
    };
    let at = || store.locate(ObjectKind::Subnet, ns, name);
    let text =
        std::str::from_utf8(&bytes).map_err(|_| Error::invalid(at(), "is not UTF-8 text"))?;
    yaml::decode_subnet(text)
        .map(Some)
        .map_err(|e| Error::invalid(at(), e))
}

/// The subnets of scope `ns` (of `pool` only, if given), in name order.
pub fn list(
    store: &dyn Store,
    ns: Option<&Namespace>,
    pool: Option<&PoolName>,
) -> Result<Vec<SubnetManifest>> {
    let mut names = store.list(ObjectKind::Subnet, ns)?;
    names.sort();
    let mut subnets = Vec::new();
    for name in names {
        if let Some(m) = read(store, ns, &name)?
            && pool.is_none_or(|p| *p == m.spec.pool)
        {
            subnets.push(m);
        }
    }
    Ok(subnets)
}

/// What a [`put`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// A new subnet.
    Created,
    /// An existing subnet changed (`apply` only).
    Configured,
    /// The subnet exists as asked.
    Unchanged,
}

/// Creates `subnet` (or, with `update`, changes an existing one), under its pool's exclusive
/// lock: exit 3 if the pool does not exist, 4 if the subnet leaves its pool, overlaps a
/// sibling, would make an address held by an allocation its gateway, a reserved, network or
/// broadcast address, or (without `update`) exists with another spec. A dry run checks
/// without the lock and writes nothing.
pub fn put(store: &dyn Store, subnet: &SubnetManifest, update: bool, dry_run: bool) -> Result<Put> {
    let pool = subnet.pool();
    alloc::load_pool(store, &pool)?;
    if dry_run {
        return put_locked(store, subnet, update, true);
    }
    store::atomically(store, || {
        let _lock = store.lock_pool(pool.namespace.as_ref(), &pool.name, LockMode::Exclusive)?;
        put_locked(store, subnet, update, false)
    })
}

/// [`put`] for a caller that holds the subnet's pool lock exclusively (`apply`, which locks
/// every pool it touches first).
pub fn put_locked(
    store: &dyn Store,
    subnet: &SubnetManifest,
    update: bool,
    dry_run: bool,
) -> Result<Put> {
    subnet.validate().map_err(|e| Error::invalid("subnet", e))?;
    let put = check(store, subnet, update)?;
    if dry_run || put == Put::Unchanged {
        return Ok(put);
    }
    let ns = subnet.metadata.namespace.as_ref();
    let bytes = yaml::encode(subnet);
    if put == Put::Created {
        if !store.create(
            ObjectKind::Subnet,
            ns,
            &subnet.metadata.name,
            bytes.as_bytes(),
        )? {
            return Err(Error::conflict(format!(
                "subnet `{}` was created meanwhile; run the command again",
                subnet.metadata.name
            )));
        }
    } else {
        store.replace(
            ObjectKind::Subnet,
            ns,
            &subnet.metadata.name,
            bytes.as_bytes(),
        )?;
    }
    Ok(put)
}

/// The checks of [`put`], against the pool and its subnets as they stand.
fn check(store: &dyn Store, subnet: &SubnetManifest, update: bool) -> Result<Put> {
    let pool = subnet.pool();
    let ns = pool.namespace.as_ref();
    let manifest = alloc::load_pool(store, &pool)?;
    let cidr = subnet.spec.cidr;
    if !manifest.spec.cidr.contains(&cidr) {
        return Err(Error::conflict(format!(
            "subnet `{}` ({cidr}) does not lie inside pool `{pool}` ({})",
            subnet.metadata.name, manifest.spec.cidr
        )));
    }
    let existing = read(store, ns, &subnet.metadata.name)?;
    let put = match &existing {
        Some(old) if old == subnet => return Ok(Put::Unchanged),
        Some(old) if !update => {
            return Err(Error::Conflict {
                message: format!(
                    "subnet `{}` exists with another spec ({} of pool `{}`, gateway {})",
                    subnet.metadata.name,
                    old.spec.cidr,
                    old.pool(),
                    old.gateway()
                ),
                hint: Some("change it with `ipamctl apply -f`, or pick another name".into()),
            });
        }
        Some(old) if old.spec.pool != subnet.spec.pool => {
            return Err(Error::conflict(format!(
                "subnet `{}` belongs to pool `{}`; a subnet cannot move to another pool (delete it first)",
                subnet.metadata.name,
                old.pool()
            )));
        }
        Some(_) => Put::Configured,
        None => Put::Created,
    };
    for sibling in list(store, ns, Some(&pool.name))? {
        if sibling.metadata.name != subnet.metadata.name
            && (sibling.spec.cidr.contains(&cidr) || cidr.contains(&sibling.spec.cidr))
        {
            return Err(Error::conflict(format!(
                "subnet `{}` ({cidr}) overlaps {}",
                subnet.metadata.name,
                sibling.describe()
            )));
        }
    }
    // An address already held must stay a candidate: the gateway of a new subnet must not
    // be a VM's address.
    let candidates = subnet.candidates(&manifest);
    let names = store.list(ObjectKind::Allocation, ns)?;
    if let Some(held) = pool_addresses(&names, &pool.name)
        .filter(|a| cidr.contains(a) && !candidates.contains(*a))
        .min()
    {
        let what = if held == subnet.gateway() {
            "its gateway"
        } else if subnet.spec.reserved.iter().any(|r| r.net().contains(&held)) {
            "reserved"
        } else {
            "its network or broadcast address"
        };
        return Err(Error::Conflict {
            message: format!(
                "{held} of subnet `{}` would be {what}, but it is allocated",
                subnet.metadata.name
            ),
            hint: Some(format!(
                "see who holds it: ipamctl list --pool {} --address {held}{}",
                pool.name,
                ns.map(|n| format!(" -n {n}")).unwrap_or_default()
            )),
        });
    }
    Ok(put)
}

/// Deletes the subnet `name` under its pool's exclusive lock: exit 3 if it does not exist
/// (unless `ignore_missing`), 4 while an allocation of its pool holds an address inside it.
/// Returns the subnet deleted (or that would be, in a dry run).
pub fn delete(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &SubnetName,
    dry_run: bool,
) -> Result<SubnetManifest> {
    let subnet = load(store, ns, name)?;
    let pool = subnet.pool();
    let work = || -> Result<SubnetManifest> {
        let _lock = (!dry_run)
            .then(|| store.lock_pool(ns, &pool.name, LockMode::Exclusive))
            .transpose()?;
        // Read again under the lock: the subnet as it stands.
        let subnet = load(store, ns, name)?;
        let names = store.list(ObjectKind::Allocation, ns)?;
        let held = pool_addresses(&names, &subnet.spec.pool)
            .filter(|a| subnet.spec.cidr.contains(a))
            .count();
        if held > 0 {
            return Err(Error::Conflict {
                message: format!(
                    "{} still holds {held} allocation{}",
                    subnet.describe(),
                    if held == 1 { "" } else { "s" }
                ),
                hint: Some(format!(
                    "release them first: ipamctl list --subnet {name}{}",
                    ns.map(|n| format!(" -n {n}")).unwrap_or_default()
                )),
            });
        }
        if !dry_run {
            store.delete(ObjectKind::Subnet, ns, name.as_str())?;
        }
        Ok(subnet)
    };
    if dry_run {
        work()
    } else {
        store::atomically(store, work)
    }
}

/// Deletes every subnet of `pool` (when the pool itself goes; the caller holds its lock).
pub fn delete_of_pool(store: &dyn Store, pool: &PoolRef) -> Result<()> {
    let ns = pool.namespace.as_ref();
    for subnet in list(store, ns, Some(&pool.name))? {
        store.delete(ObjectKind::Subnet, ns, &subnet.metadata.name)?;
    }
    Ok(())
}
