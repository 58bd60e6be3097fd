//! The objects the queries answer with: pools with their usage, allocations, subnets and
//! VPCs, and what a claim holds, each with its manifest as stored where a client renders it
//! ([`crate::cli::remote`]), and the allocations' selectors.

use async_graphql::{Enum, InputObject, SimpleObject};

use crate::engine::request::field::pool_ref;
use crate::engine::scope::Scope;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::candidates::Usage;
use crate::model::{AllocationManifest, PoolManifest};

/// How a claim came about.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
pub enum Action {
    Created,
    Existing,
    WouldCreate,
}

impl From<&crate::engine::allocate::Allocated> for Action {
    fn from(a: &crate::engine::allocate::Allocated) -> Action {
        use crate::engine::allocate::Allocated;
        match a {
            Allocated::Created(_) => Action::Created,
            Allocated::WouldCreate(_) => Action::WouldCreate,
            Allocated::Existing(_) => Action::Existing,
        }
    }
}

/// One object a claim holds: how it came about and its manifest as stored (YAML).
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct Held {
    pub action: Action,
    /// The document, encoded only when a client selects `manifest`: an `allocate` that asks
    /// for its addresses alone spent a YAML encoding per claim on nothing.
    #[graphql(skip)]
    encode: Box<dyn Fn() -> String + Send + Sync>,
}

impl Held {
    pub(super) fn new(
        action: Action,
        manifest: impl serde::Serialize + Send + Sync + 'static,
    ) -> Held {
        Held {
            action,
            encode: Box::new(move || crate::yaml::encode(&manifest)),
        }
    }
}

#[async_graphql::ComplexObject]
impl Held {
    /// The `IPAllocation` or `IPPrefixClaim` document, as the store keeps it.
    async fn manifest(&self) -> String {
        (self.encode)()
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("action", &self.action)
            .finish_non_exhaustive()
    }
}

/// A pool and its usage; counts are decimal strings (an IPv6 pool's exceed 64 bits).
#[derive(SimpleObject, Debug)]
pub struct Pool {
    pub name: String,
    pub namespace: Option<String>,
    pub cidr: String,
    pub kind: String,
    pub gateway: Option<String>,
    pub zone: Option<String>,
    pub candidates: String,
    pub allocated: String,
    pub free: String,
    /// Allocations on addresses that are not candidates (a gateway, an excluded address).
    pub off_candidates: String,
    /// The share of candidates allocated, 0–100, one decimal (`pool list`'s USED).
    pub percent_used: f64,
    /// The `IPAMPool` document, as the store keeps it.
    pub manifest: String,
    /// A supernet's prefixes (`pool list`'s figures of a supernet); null for an address
    /// pool, or when they could not be read (then `supernetError`).
    pub supernet: Option<super::supernets::Supernet>,
    /// Why a supernet's prefixes could not be read (a claim's file that does not parse):
    /// the error `pool list -o json` stops at, where its table shows the address figures.
    pub supernet_error: Option<super::errors::RequestError>,
}

impl Pool {
    pub(super) fn new(m: &PoolManifest, usage: &Usage) -> Pool {
        Pool {
            name: m.metadata.name.clone(),
            namespace: m.metadata.namespace.as_ref().map(ToString::to_string),
            cidr: m.spec.cidr.to_string(),
            kind: m.spec.kind.to_string(),
            gateway: m.spec.gateway.map(|g| g.to_string()),
            zone: m.spec.zone.clone(),
            candidates: usage.candidates.to_string(),
            allocated: usage.allocated.to_string(),
            free: usage.free.to_string(),
            off_candidates: usage.off_candidates.to_string(),
            percent_used: usage.percent_used,
            manifest: crate::yaml::encode(m),
            supernet: None,
            supernet_error: None,
        }
    }
}

impl Pool {
    /// A pool the caller may read, as `pools` and `pool` answer it: a supernet with its
    /// prefixes, read now (or the error that kept them from being read).
    pub(super) fn listed(
        store: &dyn crate::store::Store,
        manifest: &PoolManifest,
        usage: &Usage,
    ) -> Pool {
        let mut shown = Pool::new(manifest, usage);
        if manifest.spec.kind == crate::model::PoolKind::Supernet {
            let pool = crate::model::PoolRef {
                namespace: manifest.metadata.namespace.clone(),
                name: manifest.name(),
            };
            match crate::engine::supernet::usage(store, &pool, manifest) {
                Ok(u) => shown.supernet = Some(super::supernets::Supernet::from(&u)),
                Err(e) => shown.supernet_error = Some(super::errors::RequestError::from(&e)),
            }
        }
        shown
    }
}

/// An address held by an owner.
#[derive(SimpleObject, Debug)]
pub struct Allocation {
    pub name: String,
    pub namespace: Option<String>,
    pub pool: String,
    pub address: String,
    pub owner: String,
    pub uid: Option<String>,
    pub mac: Option<String>,
    /// The `IPAllocation` document, as the store keeps it.
    pub manifest: String,
    /// The VPC (`NAMESPACE/NAME`) whose router holds the address, as `list` shows it; null
    /// for a VPC of a namespace the token does not read.
    pub vpc: Option<String>,
}

impl From<&AllocationManifest> for Allocation {
    fn from(m: &AllocationManifest) -> Allocation {
        Allocation {
            name: m.metadata.name.clone(),
            namespace: m.metadata.namespace.as_ref().map(ToString::to_string),
            pool: m.spec.pool.to_string(),
            address: m.spec.address.to_string(),
            owner: m.spec.owner.to_string(),
            uid: m.spec.owner.uid().map(ToString::to_string),
            mac: m.spec.mac.map(|mac| mac.to_string()),
            manifest: crate::yaml::encode(m),
            vpc: None,
        }
    }
}

/// A named subnet of a pool.
#[derive(SimpleObject, Debug)]
pub struct Subnet {
    pub name: String,
    pub namespace: Option<String>,
    pub pool: String,
    pub cidr: String,
    pub gateway: Option<String>,
}

impl From<&crate::model::subnet::SubnetManifest> for Subnet {
    fn from(s: &crate::model::subnet::SubnetManifest) -> Subnet {
        Subnet {
            name: s.metadata.name.clone(),
            namespace: s.metadata.namespace.as_ref().map(ToString::to_string),
            pool: s.spec.pool.to_string(),
            cidr: s.spec.cidr.to_string(),
            gateway: s.spec.gateway.map(|g| g.to_string()),
        }
    }
}

/// The VPC `name` of `namespace` as it stands, for the caller of `scope`.
pub fn vpc_now(
    store: &dyn crate::store::Store,
    scope: &Scope,
    namespace: &str,
    name: &str,
) -> Result<Vpc> {
    let ns = crate::engine::request::field::namespace(Some(namespace))?
        .ok_or_else(|| Error::usage("a VPC lives in a namespace"))?;
    let pools = [
        pool_ref(Some(namespace), &crate::model::vpc::pool_name(name, false))?,
        pool_ref(Some(namespace), &crate::model::vpc::pool_name(name, true))?,
    ];
    let mut warnings = Warnings::default();
    let vpc = crate::engine::vpc::get(store, scope, &ns, &pools, name, &mut warnings)?;
    let usages = crate::engine::pool::list(store, &[Some(ns)], &mut warnings)?;
    Ok(Vpc::new(&vpc, &usages))
}

/// A VPC: its private pools and its router's uplinks.
#[derive(SimpleObject, Debug)]
pub struct Vpc {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub cidrs: Vec<String>,
    pub pools: Vec<Pool>,
    pub uplinks: Vec<String>,
    /// The `IPAMPool` documents of its pools, as stored (`vpc get -o yaml`).
    pub pool_manifests: Vec<String>,
    /// The `IPAllocation` documents of its router's uplinks.
    pub uplink_manifests: Vec<String>,
    /// The `IPPrefixClaim` documents of the ranges it drew from supernets.
    pub range_manifests: Vec<String>,
}

impl Vpc {
    pub(super) fn new(v: &crate::engine::vpc::Vpc, usages: &[(PoolManifest, Usage)]) -> Vpc {
        let usage = |m: &PoolManifest| {
            usages
                .iter()
                .find(|(p, _)| {
                    p.metadata.name == m.metadata.name
                        && p.metadata.namespace == m.metadata.namespace
                })
                .map(|(p, u)| Pool::new(p, u))
        };
        Vpc {
            name: v.metadata.name.clone(),
            namespace: v.metadata.namespace.to_string(),
            uid: v.metadata.uid.to_string(),
            cidrs: v.pools.iter().map(|p| p.spec.cidr.to_string()).collect(),
            pools: v.pools.iter().filter_map(usage).collect(),
            uplinks: v
                .uplinks
                .iter()
                .map(|a| a.spec.address.to_string())
                .collect(),
            pool_manifests: v.pools.iter().map(crate::yaml::encode).collect(),
            uplink_manifests: v.uplinks.iter().map(crate::yaml::encode).collect(),
            range_manifests: v.ranges.iter().map(crate::yaml::encode).collect(),
        }
    }
}

/// `allocations`' selectors besides the pool, owner, uid and MAC: `list`'s flags of the
/// same names, read by the same constructor.
#[derive(InputObject, Debug, Default)]
pub struct Selectors {
    /// An address (`list --address`).
    pub(super) address: Option<String>,
    /// The owner's kind (`--kind`).
    pub(super) kind: Option<String>,
    /// A CIDR the addresses lie in (`--within`).
    pub(super) within: Option<String>,
    /// A label selector (`-l`).
    pub(super) labels: Option<String>,
    /// A tenant's floating IPs (`--tenant`).
    pub(super) tenant: Option<String>,
    /// The addresses of a stored subnet of `namespace` (`--subnet`).
    pub(super) subnet: Option<String>,
    /// The addresses of a NIC's host name, in every pool (`--host-name`).
    pub(super) host_name: Option<String>,
    /// Only leases that have lapsed (`--expired`).
    pub(super) expired: Option<bool>,
}

/// Usage figures, as `pool show` prints them; counts are decimal strings.
#[derive(SimpleObject, Debug)]
pub struct Figures {
    pub candidates: String,
    pub allocated: String,
    pub off_candidates: String,
    pub free: String,
    pub percent_used: f64,
    /// The free candidates, as spans (`10.0.0.5-10.0.0.9`).
    pub free_ranges: Vec<String>,
}

impl Figures {
    pub(super) fn new(usage: &Usage, free_ranges: Vec<String>) -> Figures {
        Figures {
            candidates: usage.candidates.to_string(),
            allocated: usage.allocated.to_string(),
            off_candidates: usage.off_candidates.to_string(),
            free: usage.free.to_string(),
            percent_used: usage.percent_used,
            free_ranges,
        }
    }
}

/// A stored subnet of a pool, with its usage (`pool show`'s `Subnets:`).
#[derive(SimpleObject, Debug)]
pub struct SubnetFigures {
    pub name: String,
    pub cidr: String,
    pub usage: Figures,
}

/// One pool as `pool show` shows it: its manifest, its usage (within a range, if asked),
/// and its stored subnets' usage.
#[derive(SimpleObject, Debug)]
pub struct PoolShown {
    /// The `IPAMPool` document, as the store keeps it.
    pub manifest: String,
    pub usage: Figures,
    pub subnets: Vec<SubnetFigures>,
    /// A supernet's prefixes (`pool show` of a supernet); null for an address pool.
    pub supernet: Option<super::supernets::Supernet>,
    /// A supernet's claims with their holders, lowest prefix first (`pool show`'s lines
    /// under its figures); none for an address pool.
    pub claims: Vec<super::supernets::PrefixClaim>,
}

/// `pool show` of `pool` for the caller of `scope`, its usage within `within` if given.
pub fn pool_shown(
    store: &dyn crate::store::Store,
    scope: &Scope,
    pool: &crate::model::PoolRef,
    within: Option<ipnet::IpNet>,
) -> Result<PoolShown> {
    let shown = crate::engine::pool::show(store, scope, pool)?;
    let (supernet, claims) = super::supernets::shown(store, scope, pool, &shown.manifest)?;
    let (usage, free) = shown.usage(within);
    let subnets = crate::engine::subnet_usage::list(
        store,
        std::slice::from_ref(&pool.namespace),
        Some(&pool.name),
    )?
    .into_iter()
    .map(|(s, status)| SubnetFigures {
        name: s.metadata.name.clone(),
        cidr: s.spec.cidr.to_string(),
        usage: Figures::new(&status.usage, status.free_ranges),
    })
    .collect();
    Ok(PoolShown {
        manifest: crate::yaml::encode(&shown.manifest),
        usage: Figures::new(&usage, free),
        subnets,
        supernet,
        claims,
    })
}

impl Selectors {
    /// The query these selectors and the ones beside them stand for (the command line's
    /// constructor), the subnet named, and whether only lapsed leases are asked for.
    pub(super) fn query(
        self,
        pool: Option<String>,
        owner: Option<String>,
        uid: Option<String>,
        mac: Option<String>,
    ) -> Result<(
        crate::engine::list::Query,
        Option<crate::model::SubnetName>,
        bool,
    )> {
        use crate::engine::request::field::flag;
        let select = crate::engine::request::SelectInput {
            owner,
            uid,
            kind: self.kind,
            within: self.within,
            labels: self.labels,
            tenant: self.tenant,
        };
        let mut query =
            crate::engine::request::query(pool.as_deref(), self.address.as_deref(), &select)?;
        query.mac = mac
            .as_deref()
            .map(|m| flag("--mac", m.parse()))
            .transpose()?;
        query.host_name = self
            .host_name
            .as_deref()
            .map(|h| flag("--host-name", crate::model::host_name::parse(h)))
            .transpose()?;
        let subnet = self
            .subnet
            .as_deref()
            .map(|s| flag("NAME", crate::model::SubnetName::new(s)))
            .transpose()?;
        Ok((query, subnet, self.expired.unwrap_or(false)))
    }
}

/// `list`'s arguments, as `allocations` and `prefixClaims` take them, read by the command
/// line's constructors before the store is asked.
pub(super) struct Listing {
    ns: Option<crate::model::Namespace>,
    query: crate::engine::list::Query,
    subnet: Option<crate::model::SubnetName>,
    expired: bool,
}

impl Listing {
    /// The arguments, validated (exit 2 naming the flag).
    pub(super) fn read(
        namespace: Option<String>,
        pool: Option<String>,
        owner: Option<String>,
        uid: Option<String>,
        mac: Option<String>,
        selectors: Option<Selectors>,
    ) -> Result<Listing> {
        let more = selectors.unwrap_or_default();
        let (query, subnet, expired) = more.query(pool, owner, uid, mac)?;
        let ns = crate::engine::request::field::namespace(namespace.as_deref())?;
        Ok(Listing {
            ns,
            query,
            subnet,
            expired,
        })
    }

    /// Whether a namespace was named.
    pub(super) fn named(&self) -> bool {
        self.ns.is_some()
    }

    /// The query as the store is asked it for the caller of `scope`: the scopes the
    /// namespace names ([`crate::engine::scopes::named_scopes`]), and the query with
    /// `--expired`'s instant and the stored subnet's pool and prefix (read after the
    /// scope's check).
    pub(super) fn scoped(
        &self,
        store: &dyn crate::store::Store,
        scope: &Scope,
    ) -> Result<(
        Option<Vec<Option<crate::model::Namespace>>>,
        crate::engine::list::Query,
    )> {
        let Listing {
            ns,
            query,
            subnet,
            expired,
        } = self;
        let mut query = query.clone();
        let scopes = crate::engine::scopes::named_scopes(
            store,
            scope,
            crate::engine::scope::Verb::Read,
            ns.clone(),
        )?;
        if *expired {
            query.lapsed_at = Some(store.clock()?);
        }
        if let Some(name) = &subnet {
            let s = crate::engine::subnet::load(store, ns.as_ref(), name)?;
            query.pool = Some(s.pool().name);
            query.within = Some(s.spec.cidr);
        }
        Ok((scopes, query))
    }
}

/// `found` as the API shows it, a VPC router's address with its VPC (as `list` does) when
/// the caller of `scope` sees the VPC's namespace: a router's uplink lives in the cluster's
/// public pools, and its VPC's name is another tenant's to tell (as a supernet's claims:
/// [`super::supernets::PrefixClaim`]).
pub(super) fn allocations(
    store: &dyn crate::store::Store,
    found: &[AllocationManifest],
    scope: &Scope,
) -> Result<Vec<Allocation>> {
    let mut holders = crate::engine::range_holder::Holders::new(store);
    found
        .iter()
        .map(|m| {
            let mut shown = Allocation::from(m);
            if m.spec.owner.kind() == crate::model::OwnerKind::Vpc {
                shown.vpc = holders
                    .of_owner(&m.spec.owner, None)?
                    .vpc
                    .filter(|v| scope.sees(Some(&v.namespace)))
                    .map(|v| format!("{}/{}", v.namespace, v.name));
            }
            Ok(shown)
        })
        .collect()
}

/// A stored subnet as `subnet list` shows it: its manifest and its usage.
#[derive(SimpleObject, Debug)]
pub struct SubnetShown {
    /// The `Subnet` document, as the store keeps it.
    pub manifest: String,
    pub usage: Figures,
}

/// `subnet list`: the subnets of `ns`'s pools (every namespace the caller may read without
/// it), of `pool` only if given.
pub fn subnets_shown(
    store: &dyn crate::store::Store,
    scope: &Scope,
    ns: Option<&str>,
    pool: Option<&crate::model::PoolName>,
) -> Result<Vec<SubnetShown>> {
    let ns = crate::engine::request::field::namespace(ns)?;
    let scopes = crate::engine::scopes::scopes(store, scope, crate::engine::scope::Verb::Read, ns)?;
    let listed = crate::engine::subnet_usage::list(store, &scopes, pool)?;
    Ok(listed
        .into_iter()
        .map(|(m, status)| SubnetShown {
            manifest: crate::yaml::encode(&m),
            usage: Figures::new(&status.usage, status.free_ranges),
        })
        .collect())
}

/// `subnet show` of subnet `name` of scope `ns` for the caller of `scope` (outside it, not
/// found, as a subnet that does not exist).
pub fn subnet_shown(
    store: &dyn crate::store::Store,
    scope: &Scope,
    ns: Option<&crate::model::Namespace>,
    name: &crate::model::SubnetName,
) -> Result<SubnetShown> {
    scope.check(crate::engine::scope::Verb::Read, ns, || {
        crate::engine::subnet::missing(ns, name)
    })?;
    let (m, status) = crate::engine::subnet_usage::show(store, ns, name)?;
    Ok(SubnetShown {
        manifest: crate::yaml::encode(&m),
        usage: Figures::new(&status.usage, status.free_ranges),
    })
}
