//! `createVpc` and `deleteVpc` (`vpc create`, `vpc delete`): a VPC's pools and ranges
//! ([`crate::engine::vpc`]), and with an uplink zone its router's uplink, `VPC/router`
//! under the VPC's uid, claimed from that zone's public pools as `allocate --zone` claims
//! (in name order). The same VPC asked again answers the same pools, uid and uplink; a
//! create whose uplink claim failed (the zone exhausted) leaves the VPC made, and asking
//! again claims the uplink. `vpc delete` releases the uplinks with the VPC's pools.

use std::sync::atomic::AtomicBool;

use crate::engine::allocate::{Allocated, allocate_zone};
use crate::engine::request::field::{flag, prefix, uid};
use crate::engine::scope::Scope;
use crate::engine::vpc::{CreateRequest, Created, Deleted, Range, router, supernet};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::mac::MacPrefix;
use crate::model::vpc::{check_name, pool_name};
use crate::model::{Namespace, PoolName, PoolRef, Uid};
use crate::store::Store;

/// A range drawn from a supernet pool: `--from-pool POOL --prefix-length N`.
#[derive(Clone, Debug, Default)]
pub struct FromPoolInput {
    pub pool: String,
    pub prefix_length: u8,
}

/// `createVpc`'s input (`vpc create`'s flags), as a user gives it.
#[derive(Clone, Debug, Default)]
pub struct CreateVpcInput {
    pub name: String,
    pub namespace: String,
    /// `--cidr`: ranges given as prefixes.
    pub cidrs: Vec<String>,
    /// `--from-pool`/`--prefix-length`: ranges drawn from supernet pools.
    pub from_pools: Vec<FromPoolInput>,
    /// `--uid`: the VPC's uid (else a new UUID, or the uid of the pools that exist).
    pub uid: Option<String>,
    /// `--mac-prefix`, one per pool in their order (IPv4 first).
    pub mac_prefixes: Vec<String>,
    /// `--uplink-zone`: claim the router's uplink from this zone's public pools.
    pub uplink_zone: Option<String>,
    pub dry_run: bool,
}

/// A `createVpc` request, valid in every way that does not need the store.
#[derive(Clone, Debug)]
pub struct VpcCreate {
    name: String,
    namespace: Namespace,
    cidrs: Vec<ipnet::IpNet>,
    from_pools: Vec<(PoolName, u8)>,
    uid: Option<Uid>,
    mac_prefixes: Vec<MacPrefix>,
    uplink_zone: Option<String>,
    dry_run: bool,
}

impl VpcCreate {
    /// The request `input` stands for, or exit 2 naming the flag that is wrong.
    pub fn new(input: &CreateVpcInput) -> Result<VpcCreate> {
        check_name(&input.name).map_err(|why| Error::invalid("vpc create", why))?;
        let namespace = super::namespace("--namespace", &input.namespace)?;
        if input.cidrs.len() + input.from_pools.len() == 0 {
            return Err(Error::usage(
                "a VPC needs a range: give `--cidr CIDR` or `--from-pool POOL --prefix-length N`",
            ));
        }
        Ok(VpcCreate {
            name: input.name.clone(),
            namespace,
            cidrs: input
                .cidrs
                .iter()
                .map(|c| prefix("--cidr", c))
                .collect::<Result<_>>()?,
            from_pools: input
                .from_pools
                .iter()
                .map(|f| {
                    Ok((
                        flag("--from-pool", PoolName::new(&f.pool))?,
                        f.prefix_length,
                    ))
                })
                .collect::<Result<_>>()?,
            uid: uid(input.uid.as_deref())?,
            mac_prefixes: input
                .mac_prefixes
                .iter()
                .map(|p| flag("--mac-prefix", MacPrefix::parse(p)))
                .collect::<Result<_>>()?,
            uplink_zone: input.uplink_zone.clone(),
            dry_run: input.dry_run,
        })
    }

    /// The VPC's namespace.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The VPC's pools with their ranges, IPv4 first: the `--cidr`s and the `--from-pool`s
    /// (a supernet's family is its prefix's); exit 2 for two of one family.
    fn ranges(&self, store: &dyn Store) -> Result<Vec<(PoolRef, Range)>> {
        let mut ranges: Vec<(bool, Range)> = self
            .cidrs
            .iter()
            .map(|cidr| (cidr.addr().is_ipv6(), Range::Cidr(*cidr)))
            .collect();
        for (name, length) in &self.from_pools {
            let (supernet, cidr) = supernet(store, &self.namespace, name)?;
            let length = *length;
            ranges.push((cidr.addr().is_ipv6(), Range::FromPool { supernet, length }));
        }
        if ranges.len() > 2 || ranges.len() == 2 && ranges[0].0 == ranges[1].0 {
            return Err(Error::invalid(
                "--cidr",
                "give at most one IPv4 and one IPv6 range, by `--cidr` or `--from-pool` (a dual-stack VPC has one of each)",
            ));
        }
        // IPv4 first, as the pools are listed everywhere.
        ranges.sort_by_key(|(v6, _)| *v6);
        ranges
            .into_iter()
            .map(|(v6, range)| Ok((vpc_pool(&self.namespace, &self.name, v6)?, range)))
            .collect()
    }
}

/// The pool of VPC `name` in `ns` for one family.
pub fn vpc_pool(ns: &Namespace, name: &str, v6: bool) -> Result<PoolRef> {
    Ok(PoolRef {
        namespace: Some(ns.clone()),
        name: flag("NAME", PoolName::new(&pool_name(name, v6)))?,
    })
}

/// What `createVpc` did: the VPC's pools and ranges, and its router's uplink if a zone was
/// given.
#[derive(Debug)]
pub struct VpcCreated {
    pub created: Created,
    pub uplink: Option<Allocated>,
}

/// Creates the VPC (`admin` in its namespace; outside the scope, not found), then claims
/// its router's uplink in the uplink zone, if any. Warnings (broken files met by the
/// uplink's claim) go to `warnings`.
pub fn create_vpc(
    store: &dyn Store,
    scope: &Scope,
    request: &VpcCreate,
    warnings: &mut Warnings,
) -> Result<VpcCreated> {
    let ns = &request.namespace;
    super::check_admin(scope, Some(ns), || super::no_namespace(ns))?;
    if request.uplink_zone.is_some() && !uplink_may_be_held(store, request)? {
        // A new VPC's uplink over the namespace's `floatingIPs` is refused before the VPC
        // is made, which would otherwise stay without it; the claim is still counted under
        // the quota lock (a VPC that exists may hold its uplink: asked again, answered).
        let charge = crate::engine::quota::Charge {
            namespace: ns.clone(),
            resource: crate::model::quota::Resource::FloatingIps,
        };
        crate::engine::quota::refuse_over(store, &charge)?;
    }
    let req = CreateRequest {
        name: request.name.clone(),
        namespace: ns.clone(),
        pools: request.ranges(store)?,
        uid: request.uid.clone(),
        mac_prefixes: request.mac_prefixes.clone(),
        dry_run: request.dry_run,
    };
    let created = crate::engine::vpc::create(store, scope, &req)?;
    let uplink = match &request.uplink_zone {
        Some(zone) => Some(allocate_zone(
            store,
            zone,
            &router(&created.uid),
            (request.dry_run, None),
            warnings,
        )?),
        None => None,
    };
    Ok(VpcCreated { created, uplink })
}

/// Whether a pool of the VPC exists (then its router may hold its uplink already).
fn uplink_may_be_held(store: &dyn Store, request: &VpcCreate) -> Result<bool> {
    for v6 in [false, true] {
        let pool = vpc_pool(&request.namespace, &request.name, v6)?;
        let ns = pool.namespace.as_ref();
        if store
            .get(crate::store::ObjectKind::Pool, ns, pool.name.as_str())?
            .is_some()
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `deleteVpc`'s input (`vpc delete`'s), as a user gives it.
#[derive(Clone, Debug, Default)]
pub struct DeleteVpcInput {
    pub name: String,
    pub namespace: String,
    pub ignore_not_found: bool,
    pub dry_run: bool,
}

/// A `deleteVpc` request, valid in every way that does not need the store.
#[derive(Clone, Debug)]
pub struct VpcDelete {
    name: String,
    namespace: Namespace,
    pools: [PoolRef; 2],
    ignore_not_found: bool,
    dry_run: bool,
}

impl VpcDelete {
    /// The request `input` stands for, or exit 2 naming the field that is wrong.
    pub fn new(input: &DeleteVpcInput) -> Result<VpcDelete> {
        let namespace = super::namespace("--namespace", &input.namespace)?;
        let pools = [
            vpc_pool(&namespace, &input.name, false)?,
            vpc_pool(&namespace, &input.name, true)?,
        ];
        Ok(VpcDelete {
            name: input.name.clone(),
            namespace,
            pools,
            ignore_not_found: input.ignore_not_found,
            dry_run: input.dry_run,
        })
    }
}

/// Deletes the VPC (`admin` in its namespace; outside the scope, not found): its router's
/// uplinks, then its pools, subnets and ranges ([`crate::engine::vpc::delete`]), stopping
/// between objects when `stop` is set. With `ignore_not_found`, a VPC that does not exist
/// is [`super::Deletion::Absent`].
pub fn delete_vpc(
    store: &dyn Store,
    scope: &Scope,
    request: &VpcDelete,
    stop: &AtomicBool,
    warnings: &mut Warnings,
) -> Result<super::Deletion<Deleted>> {
    let (name, ns) = (&request.name, &request.namespace);
    super::check_admin(scope, Some(ns), || {
        format!(
            "VPC `{name}` not found in namespace `{ns}` (no pool `{}`)",
            request.pools[0].name
        )
    })?;
    super::absent_ok(
        crate::engine::vpc::delete(
            store,
            scope,
            name,
            &request.pools,
            request.dry_run,
            stop,
            warnings,
        ),
        request.ignore_not_found,
    )
}
