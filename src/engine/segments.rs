//! The network segments an export describes, and the NICs on them: every stored subnet of
//! the scopes (and every pool that has none, as one segment) with its gateway and a stable
//! numeric id, and each allocation of a NIC placed on its segment with its host name. What
//! `dhcp export` and `dns export` share ([`crate::engine::dhcp`], [`crate::engine::dns`]).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use ipnet::IpNet;

use crate::engine::list::{self, Query};
use crate::engine::subnet_ids;
use crate::engine::warning::{Warning, Warnings};
use crate::error::{Error, Result};
use crate::model::dhcp_options::DhcpOptions;
use crate::model::host_name::host_name;
use crate::model::mac::Mac;
use crate::model::subnet::SubnetManifest;
use crate::model::{
    AllocationManifest, Namespace, Owner, PoolKind, PoolName, SubnetName, Timestamp,
};
use crate::store::Store;

/// Which segments an export covers: all must hold; an empty list does not narrow.
#[derive(Debug, Default, Clone)]
pub struct Scope {
    /// `-n NS`: these scopes only; `None`, every scope.
    pub scopes: Option<Vec<Option<Namespace>>>,
    /// `--pool P`, repeatable.
    pub pools: Vec<PoolName>,
    /// `--subnet S`, repeatable: stored subnets by name.
    pub subnets: Vec<SubnetName>,
}

/// One segment: a stored subnet, or a pool without subnets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The pool's namespace (`None`: cluster-scoped).
    pub namespace: Option<Namespace>,
    /// The pool.
    pub pool: PoolName,
    /// The stored subnet; `None` for a pool without subnets.
    pub subnet: Option<SubnetName>,
    /// The subnet's prefix (the pool's, for a pool without subnets).
    pub cidr: IpNet,
    /// The subnet's gateway (the pool's, for a pool without subnets), if any.
    pub gateway: Option<IpAddr>,
    /// What its guests are told: the subnet's `spec.dhcp` over its pool's (the pool's, for
    /// a pool without subnets).
    pub options: DhcpOptions,
    /// In 1..=2^32-1, unique among the segments of the scopes read, and the same on every
    /// run while the segment exists: see [`assign_ids`].
    pub id: u32,
}

impl Segment {
    /// `pool `P`` or `subnet `S` of pool `P``, with `in namespace `NS`` for a private
    /// pool: for messages and comments.
    pub fn label(&self) -> String {
        let mut label = match &self.subnet {
            Some(s) => format!("subnet `{s}` of pool `{}`", self.pool),
            None => format!("pool `{}`", self.pool),
        };
        if let Some(ns) = &self.namespace {
            label.push_str(&format!(" in namespace `{ns}`"));
        }
        label
    }
}

/// A NIC's allocation on a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// The address held.
    pub address: IpAddr,
    /// The NIC's MAC, if the allocation has one.
    pub mac: Option<Mac>,
    /// Who holds it.
    pub owner: Owner,
    /// Its host name ([`host_name`]).
    pub host: String,
    /// The allocation's name, for messages.
    pub allocation: String,
}

/// Segments in (namespace, pool, subnet prefix) order, each with its NICs in address order.
pub type Placed = Vec<(Segment, Vec<Nic>)>;

/// Gives each segment its id ([`subnet_ids::assign`]).
fn assign_ids(segments: &mut [(Segment, Option<Timestamp>)]) {
    let keys: Vec<(String, Option<Timestamp>)> = segments
        .iter()
        .map(|(s, created)| (key(s), *created))
        .collect();
    for ((s, _), id) in segments.iter_mut().zip(subnet_ids::assign(&keys)) {
        s.id = id;
    }
}

/// The text a segment's id is the hash of ([`subnet_ids::key`]).
fn key(s: &Segment) -> String {
    subnet_ids::key(
        s.namespace.as_ref(),
        &s.pool,
        s.subnet.as_ref().map(SubnetName::as_str),
    )
}

/// The segments of `scope` with the NICs on them: allocations of a `VirtualMachine` or
/// `Node` (with `macs_only`, only those with a MAC; without a MAC, not a Node named by its
/// prefix, which has no name), each with its host name. An owner whose
/// name gives no host name is exit 2 naming it; two owners deriving one host name are exit 4
/// naming both. An allocation in a pool with subnets but outside all of them is skipped
/// with a warning. A `--pool` or `--subnet` that names nothing in scope is exit 3.
pub fn placed(
    store: &(dyn Store + Sync),
    scope: &Scope,
    macs_only: bool,
    warnings: &mut Warnings,
) -> Result<Placed> {
    let scopes = match &scope.scopes {
        Some(s) => s.clone(),
        None => store.scopes()?,
    };
    let mut all = read_segments(store, &scopes, warnings)?;
    assign_ids(&mut all);
    for p in &scope.pools {
        if !all.iter().any(|(s, _)| s.pool == *p) {
            return Err(not_found(format!("pool `{p}`")));
        }
    }
    for n in &scope.subnets {
        if !all.iter().any(|(s, _)| s.subnet.as_ref() == Some(n)) {
            return Err(not_found(format!("subnet `{n}`")));
        }
    }
    let mut segments: Placed = all
        .into_iter()
        .map(|(s, _)| s)
        .filter(|s| scope.pools.is_empty() || scope.pools.contains(&s.pool))
        .filter(|s| {
            scope.subnets.is_empty() || s.subnet.as_ref().is_some_and(|n| scope.subnets.contains(n))
        })
        .map(|s| (s, Vec::new()))
        .collect();
    segments.sort_by(|(a, _), (b, _)| {
        (&a.namespace, &a.pool, a.cidr.network(), a.cidr.prefix_len()).cmp(&(
            &b.namespace,
            &b.pool,
            b.cidr.network(),
            b.cidr.prefix_len(),
        ))
    });
    place(store, scope, &scopes, &mut segments, macs_only, warnings)?;
    Ok(segments)
}

/// Every segment of `scopes` (supernets hold no addresses and give none), id not yet set,
/// with the creation time of the subnet or pool it is.
fn read_segments(
    store: &dyn Store,
    scopes: &[Option<Namespace>],
    warnings: &mut Warnings,
) -> Result<Vec<(Segment, Option<Timestamp>)>> {
    let mut all = Vec::new();
    for ns in scopes {
        let subnets = crate::engine::subnet::list(store, ns.as_ref(), None)?;
        let mut by_pool: BTreeMap<&PoolName, Vec<&SubnetManifest>> = BTreeMap::new();
        for s in &subnets {
            by_pool.entry(&s.spec.pool).or_default().push(s);
        }
        for pool in crate::engine::pool::pools_of(store, ns.as_ref(), warnings)? {
            if pool.spec.kind == PoolKind::Supernet {
                continue;
            }
            let name = pool.name();
            match by_pool.get(&name) {
                None => all.push((
                    Segment {
                        namespace: ns.clone(),
                        pool: name,
                        subnet: None,
                        cidr: pool.spec.cidr,
                        gateway: pool.spec.gateway,
                        options: pool.spec.dhcp.clone(),
                        id: 0,
                    },
                    pool.metadata.creation_timestamp,
                )),
                Some(subnets) => {
                    for s in subnets {
                        let Ok(subnet) = SubnetName::new(&s.metadata.name) else {
                            continue;
                        };
                        // A hand edit `check` reports: no server is told an unreachable route.
                        let options = s.dhcp(&pool).map_err(|why| {
                            let at = store.locate(
                                crate::store::ObjectKind::Subnet,
                                ns.as_ref(),
                                &s.metadata.name,
                            );
                            Error::invalid(at, why)
                        })?;
                        all.push((
                            Segment {
                                namespace: ns.clone(),
                                pool: name.clone(),
                                subnet: Some(subnet),
                                cidr: s.spec.cidr,
                                gateway: s.spec.gateway,
                                options,
                                id: 0,
                            },
                            s.metadata.creation_timestamp,
                        ));
                    }
                }
            }
        }
    }
    Ok(all)
}

fn not_found(what: String) -> Error {
    Error::NotFound {
        message: format!("{what} not found in the namespaces exported"),
        hint: Some("`ipamctl pool list -A` and `ipamctl subnet list -A` show them".into()),
    }
}

/// Puts each allocation of a NIC on its segment, checking host names.
fn place(
    store: &(dyn Store + Sync),
    scope: &Scope,
    scopes: &[Option<Namespace>],
    segments: &mut Placed,
    macs_only: bool,
    warnings: &mut Warnings,
) -> Result<()> {
    if segments.is_empty() {
        return Ok(());
    }
    let query = Query {
        pool: match scope.pools.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        },
        ..Query::default()
    };
    let found = list::collect(
        store,
        scope.scopes.as_ref().map(|_| scopes),
        &query,
        warnings,
    )?;
    // Segments of one pool, by (namespace, pool): a pool's few subnets are searched in turn.
    let mut of_pool: HashMap<(&Option<Namespace>, &PoolName), Vec<usize>> = HashMap::new();
    for (i, (s, _)) in segments.iter().enumerate() {
        of_pool.entry((&s.namespace, &s.pool)).or_default().push(i);
    }
    let mut placed: Vec<(usize, Nic)> = Vec::new();
    let mut hosts: HashMap<String, Owner> = HashMap::new();
    for m in found {
        let spec = &m.spec;
        if macs_only && spec.mac.is_none() {
            continue;
        }
        if !has_nic(store, &m)? {
            continue;
        }
        let Some(candidates) = of_pool.get(&(&m.metadata.namespace, &spec.pool)) else {
            continue; // a pool filtered out, or a supernet
        };
        let Some(&at) = candidates
            .iter()
            .find(|&&i| segments[i].0.cidr.contains(&spec.address))
        else {
            if segments[candidates[0]].0.subnet.is_some() {
                warnings.push(Warning::new(format!(
                    "allocation `{}` ({}) lies in no subnet of pool `{}` (skipped)",
                    m.metadata.name, spec.address, spec.pool
                )));
            }
            continue;
        };
        let host = unique_host(&m, &mut hosts)?;
        placed.push((
            at,
            Nic {
                address: spec.address,
                mac: spec.mac,
                owner: spec.owner.clone(),
                host,
                allocation: m.metadata.name.clone(),
            },
        ));
    }
    for (at, nic) in placed {
        segments[at].1.push(nic);
    }
    Ok(())
}

/// Whether `m` is held by a named NIC (a `VirtualMachine`, or a `Node` named by a label or
/// holding a MAC); exit 2 for a MAC on an owner without a NIC (a hand edit: the allocator
/// refuses it).
fn has_nic(store: &(dyn Store + Sync), m: &AllocationManifest) -> Result<bool> {
    let spec = &m.spec;
    if !matches!(
        spec.owner.kind(),
        crate::model::OwnerKind::VirtualMachine | crate::model::OwnerKind::Node
    ) {
        if let Some(mac) = spec.mac {
            return Err(Error::invalid(
                store.locate(
                    crate::store::ObjectKind::Allocation,
                    m.metadata.namespace.as_ref(),
                    &m.metadata.name,
                ),
                format!(
                    "holds MAC {} for `{}`, which has no NIC; remove the `mac:` line",
                    mac, spec.owner
                ),
            ));
        }
        return Ok(false);
    }
    // A Node named by its prefix (`Node/10.42.1.0/24`, a host's address on a segment) has
    // no name to publish: no record, unless it has a MAC, whose reservation needs a host
    // name (then `host_name` refuses it).
    Ok(!(spec.owner.kind() == crate::model::OwnerKind::Node
        && spec.owner.name().contains('/')
        && spec.mac.is_none()))
}

/// The host name of `m`'s owner, checked against those of the owners met before (`hosts`).
fn unique_host(m: &AllocationManifest, hosts: &mut HashMap<String, Owner>) -> Result<String> {
    let spec = &m.spec;
    let host = host_name(&spec.owner).map_err(|why| {
        Error::invalid(
            format!("allocation `{}`", m.metadata.name),
            format!("{why}; a host name must be one RFC 1123 label"),
        )
    })?;
    match hosts.get(&host) {
        Some(other) if *other != spec.owner => {
            return Err(Error::Conflict {
                message: format!(
                    "`{}` and `{}` both have the host name `{host}`",
                    other.with_uid(),
                    spec.owner.with_uid()
                ),
                hint: Some(
                    "rename one, or export one namespace (`-n NS`) or pool (`--pool P`) at a time"
                        .into(),
                ),
            });
        }
        Some(_) => {}
        None => {
            hosts.insert(host.clone(), spec.owner.clone());
        }
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(pool: &str, subnet: Option<&str>) -> Segment {
        Segment {
            namespace: None,
            pool: PoolName::new(pool).unwrap(),
            subnet: subnet.map(|s| SubnetName::new(s).unwrap()),
            cidr: "192.0.2.0/24".parse().unwrap(),
            gateway: None,
            options: DhcpOptions::default(),
            id: 0,
        }
    }

    #[test]
    fn ids_do_not_move_when_a_segment_is_added() {
        let mut two = vec![(seg("a", None), None), (seg("b", Some("web")), None)];
        assign_ids(&mut two);
        let mut three = vec![
            (seg("0", None), None),
            (seg("a", None), None),
            (seg("b", Some("web")), None),
        ];
        assign_ids(&mut three);
        assert_eq!(two[0].0.id, three[1].0.id);
        assert_eq!(two[1].0.id, three[2].0.id);
        assert!(three.iter().all(|(s, _)| s.id != 0));
    }

    #[test]
    fn a_collision_leaves_the_older_segment_its_hash() {
        let old = Timestamp::parse("2024-01-01T00:00:00Z").unwrap();
        let new = Timestamp::parse("2025-01-01T00:00:00Z").unwrap();
        // The same key twice stands in for two keys that collide.
        let mut both = vec![(seg("a", None), Some(new)), (seg("a", None), Some(old))];
        assign_ids(&mut both);
        let hash = subnet_ids::fnv1a(b"\0a\0");
        assert_eq!(both[1].0.id, hash);
        assert_eq!(both[0].0.id, hash + 1);
    }
}
