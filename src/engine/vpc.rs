//! VPCs: a VPC named NAME in a tenant namespace owns the private pools `vpc-NAME` (IPv4)
//! and `vpc-NAME-v6` (IPv6; dual stack: both), and its router's uplinks in public pools are
//! allocations owned by `VPC/router` with the VPC's uid (the naming rules are in
//! [`crate::model::vpc`]). Creating one and deleting one both hold the scope's lock, so the
//! two serialise; deleting one also holds each of its pools' locks exclusively while it
//! releases their allocations and removes them. Every command acts on a pool only if its
//! owner reference says it is the VPC asked for ([`crate::model::vpc::belongs_to`]), never
//! by its name alone.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;
use serde::Serialize;

use crate::engine::prefix;
use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::mac::MacPrefix;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::vpc::{
    RANGE_ANNOTATION, VPC_KIND, belongs_to, check_name, name_of, pool_name, range_annotation,
    vpc_uid,
};
use crate::model::{
    API_VERSION, AllocationManifest, Metadata, Namespace, Owner, OwnerFilter, OwnerKind, OwnerRef,
    POOL_KIND, PoolKind, PoolManifest, PoolName, PoolRef, PoolSpec, Uid,
};
use crate::store::read::load_pool;
use crate::store::{self, ObjectKind, Store};
use crate::yaml;

/// Where one of a VPC's ranges comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Range {
    /// `--cidr`: this range.
    Cidr(IpNet),
    /// `--from-pool POOL --prefix-length N`: a /N claimed from the supernet pool, owned by
    /// `VPC/router` with the VPC's uid.
    FromPool {
        /// The supernet pool.
        supernet: PoolRef,
        /// The length of the range.
        length: u8,
    },
}

/// A `vpc create` request, validated.
#[derive(Clone, Debug)]
pub struct CreateRequest {
    /// The VPC's name.
    pub name: String,
    /// Its tenant namespace.
    pub namespace: Namespace,
    /// Its pools with their ranges: one per family, IPv4 first when both are given.
    pub pools: Vec<(PoolRef, Range)>,
    /// `--uid`: the uid to give it (else a new UUID, or the uid of the pools that exist).
    pub uid: Option<Uid>,
    /// `--mac-prefix`: the `spec.macPrefix` of its pools, in their order (IPv4 first), so
    /// that `allocate --mac auto` works in them; fewer than pools leaves the rest without.
    pub mac_prefixes: Vec<MacPrefix>,
    /// Decide, but write nothing and take no lock.
    pub dry_run: bool,
}

/// What `vpc create` did to one of the VPC's pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    /// The pool was created (or, in a dry run, would be).
    Created,
    /// The pool existed already as this VPC's (a retry).
    Existing,
}

/// What `vpc create` did: the VPC's uid, the ranges it claimed and each of its pools.
#[derive(Clone, Debug)]
pub struct Created {
    /// The uid, new or adopted from the pools (or the range claims) that existed.
    pub uid: Uid,
    /// The prefix claims of the ranges taken from supernet pools.
    pub claims: Vec<(PrefixClaimManifest, Made)>,
    /// The pools, in the order of the request.
    pub pools: Vec<(PoolManifest, Made)>,
}

/// The owner of a VPC's uplinks and of the ranges it draws from supernet pools.
pub fn router(uid: &Uid) -> Owner {
    Owner::parse("VPC/router", Some(uid.clone())).expect("`VPC/router` is valid")
}

/// `vpc create`, as one unit of work under the scope's lock: the pools that exist already
/// must be this VPC's (a retry of a create that succeeded, in part or whole: their uid is
/// adopted); the others are created, a range from a supernet pool claimed first (by
/// `VPC/router` with the VPC's uid, annotated with the VPC, so that a retry after a crash
/// in between adopts that claim's uid and gets the same range). Exit 4 if a pool of that
/// name is another's.
pub fn create(store: &dyn Store, scope: &Scope, req: &CreateRequest) -> Result<Created> {
    let ns = &req.namespace;
    scope.check(Verb::Admin, Some(ns), || crate::engine::scopes::missing(ns))?;
    scope.scrub(create_in(store, req))
}

fn create_in(store: &dyn Store, req: &CreateRequest) -> Result<Created> {
    check_name(&req.name).map_err(|why| Error::invalid("vpc create", why))?;
    check_mac_prefixes(req)?;
    let work = || -> Result<Created> {
        let _scope = (!req.dry_run)
            .then(|| store.lock_scope(Some(&req.namespace)))
            .transpose()?;
        let existing = existing_pools(store, req)?;
        let uid = match uid_of(req, &existing)? {
            Some(uid) => uid,
            None => claimed_uid(store, req)?.unwrap_or_else(|| {
                Uid::parse_uuid(&uuid::Uuid::new_v4().to_string()).expect("a UUID is a valid uid")
            }),
        };
        let mut pools = Vec::new();
        let mut claims = Vec::new();
        for (at, ((pool, range), found)) in req.pools.iter().zip(existing).enumerate() {
            if let Some((m, _)) = found {
                pools.push((m, Made::Existing));
                continue;
            }
            let cidr = match range {
                Range::Cidr(cidr) => *cidr,
                Range::FromPool { supernet, length } => {
                    let (cidr, claim) = claim_range(store, req, supernet, *length, &uid)?;
                    claims.extend(claim);
                    cidr
                }
            };
            let mut m = pool_manifest(req, pool, cidr, &uid, req.mac_prefixes.get(at).copied());
            if !req.dry_run {
                let moves = crate::engine::subnet_ids::Existing::read(store)?.moved_by(
                    Some(&req.namespace),
                    &pool.name,
                    None,
                );
                crate::engine::created::record(&mut m.metadata, moves);
            }
            m.validate().map_err(|e| Error::invalid("vpc create", e))?;
            if !req.dry_run
                && !store.create(
                    ObjectKind::Pool,
                    Some(&req.namespace),
                    pool.name.as_str(),
                    yaml::encode(&m).as_bytes(),
                )?
            {
                return Err(Error::conflict(format!(
                    "pool `{pool}` was created meanwhile; run `ipamctl vpc create` again"
                )));
            }
            pools.push((m, Made::Created));
        }
        Ok(Created { uid, claims, pools })
    };
    if req.dry_run {
        work()
    } else {
        store::atomically(store, work)
    }
}

/// The supernet pool `name` a VPC of namespace `ns` draws from: the one in `ns`, else the
/// cluster-scoped one (tenants' VPCs draw from the provider's supernet); with its prefix.
/// Exit 3 if neither exists.
pub fn supernet(store: &dyn Store, ns: &Namespace, name: &PoolName) -> Result<(PoolRef, IpNet)> {
    let mut missing = None;
    for namespace in [Some(ns.clone()), None] {
        let pool = PoolRef {
            namespace,
            name: name.clone(),
        };
        match load_pool(store, &pool) {
            Ok(m) => return Ok((pool, m.spec.cidr)),
            Err(e @ Error::NotFound { .. }) => {
                missing.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::NotFound {
        message: format!(
            "--from-pool: no pool `{name}` in namespace `{ns}` and no cluster-scoped one"
        ),
        hint: missing.and_then(|e| e.hint().map(str::to_owned)),
    })
}

/// The range of the VPC's pool claimed from `supernet` (a /`length` owned by the VPC's
/// router), with the claim if this call made it; in a dry run, the range it would get.
fn claim_range(
    store: &dyn Store,
    req: &CreateRequest,
    supernet: &PoolRef,
    length: u8,
    uid: &Uid,
) -> Result<(IpNet, Option<(PrefixClaimManifest, Made)>)> {
    let owner = router(uid);
    let want = prefix::Want::Length(length);
    if req.dry_run {
        return Ok((prefix::predict(store, supernet, &owner, want)?, None));
    }
    let annotations = BTreeMap::from([(
        RANGE_ANNOTATION.to_owned(),
        range_annotation(&req.namespace, &req.name),
    )]);
    let claimed = prefix::claim_annotated(store, supernet, &owner, want, &annotations)?;
    let made = if claimed.created {
        Made::Created
    } else {
        Made::Existing
    };
    Ok((claimed.manifest.spec.prefix, Some((claimed.manifest, made))))
}

/// The uid of a claim a crashed `vpc create` of this VPC left in one of the request's
/// supernet pools (found by [`RANGE_ANNOTATION`]), if any.
fn claimed_uid(store: &dyn Store, req: &CreateRequest) -> Result<Option<Uid>> {
    let me = range_annotation(&req.namespace, &req.name);
    for (_, range) in &req.pools {
        let Range::FromPool { supernet, .. } = range else {
            continue;
        };
        for claim in prefix::pool_claims(store, supernet)? {
            let owner = &claim.spec.owner;
            if owner.kind() == OwnerKind::Vpc
                && claim.metadata.annotations.get(RANGE_ANNOTATION) == Some(&me)
                && let Some(uid) = owner.uid()
            {
                return Ok(Some(uid.clone()));
            }
        }
    }
    Ok(None)
}

/// Each pool of the request that exists, with its VPC's uid, checked to be this VPC's.
fn existing_pools(
    store: &dyn Store,
    req: &CreateRequest,
) -> Result<Vec<Option<(PoolManifest, Uid)>>> {
    let mut existing = Vec::new();
    for (at, (pool, range)) in req.pools.iter().enumerate() {
        existing.push(match load_pool(store, pool) {
            Ok(m) => {
                let (fits, asked) = fits(store, range, &m)?;
                let found = same_vpc(req, pool, m, fits, &asked)?;
                same_mac_prefix(req, pool, &found.0, req.mac_prefixes.get(at))?;
                Some(found)
            }
            Err(Error::NotFound { .. }) => None,
            Err(e) => return Err(e),
        });
    }
    Ok(existing)
}

/// Whether the existing VPC pool `m` has the range asked for (a range from a supernet: a
/// block of that length inside it), and the range asked for, as messages name it.
fn fits(store: &dyn Store, range: &Range, m: &PoolManifest) -> Result<(bool, String)> {
    Ok(match range {
        Range::Cidr(cidr) => (m.spec.cidr == *cidr, cidr.to_string()),
        Range::FromPool { supernet, length } => (
            m.spec.cidr.prefix_len() == *length
                && load_pool(store, supernet)?.spec.cidr.contains(&m.spec.cidr),
            format!("a /{length} of pool `{supernet}`"),
        ),
    })
}

/// The uid of the VPC being created: that of its existing pools (which must agree), else
/// the one asked for; `None` for neither.
fn uid_of(req: &CreateRequest, existing: &[Option<(PoolManifest, Uid)>]) -> Result<Option<Uid>> {
    let held: Vec<&Uid> = existing.iter().flatten().map(|(_, uid)| uid).collect();
    if let [first, rest @ ..] = held.as_slice()
        && rest.iter().any(|u| u != first)
    {
        return Err(Error::conflict(format!(
            "the pools of VPC `{}` in namespace `{}` belong to different VPCs; delete them and create it again",
            req.name, req.namespace
        )));
    }
    Ok(held
        .first()
        .map(|u| (*u).clone())
        .or_else(|| req.uid.clone()))
}

/// The manifest of the VPC's private pool `pool` of range `cidr`, owned by uid `uid`.
fn pool_manifest(
    req: &CreateRequest,
    pool: &PoolRef,
    cidr: IpNet,
    uid: &Uid,
    mac_prefix: Option<MacPrefix>,
) -> PoolManifest {
    PoolManifest {
        api_version: API_VERSION.into(),
        kind: POOL_KIND.into(),
        metadata: Metadata {
            name: pool.name.to_string(),
            namespace: Some(req.namespace.clone()),
            creation_timestamp: None,
            deletion_timestamp: None,
            labels: Default::default(),
            annotations: Default::default(),
            owner_refs: vec![OwnerRef {
                kind: VPC_KIND.into(),
                uid: uid.to_string(),
                name: Some(req.name.clone()),
                controller: Some(true),
            }],
        },
        spec: PoolSpec {
            cidr,
            kind: PoolKind::Private,
            prefix_lengths: None,
            gateway: None,
            exclude: Vec::new(),
            zone: None,
            reuse_after: None,
            mac_prefix,
            pick: Default::default(),
            dhcp: Default::default(),
        },
    }
}

/// `existing`, the pool a create found under this VPC's pool name, with its VPC's uid, if it
/// is this VPC's: owned by a VPC, of the range asked for (a range from a supernet: of its
/// length, inside it), and of the uid asked for, if any.
fn same_vpc(
    req: &CreateRequest,
    pool: &PoolRef,
    existing: PoolManifest,
    fits: bool,
    asked: &str,
) -> Result<(PoolManifest, Uid)> {
    let (name, ns, uid) = (&req.name, &req.namespace, req.uid.as_ref());
    let Some(owner_uid) = vpc_uid(&existing) else {
        return Err(Error::conflict(format!(
            "pool `{pool}` exists and is not owned by a VPC; choose another VPC name"
        )));
    };
    let v6 = pool.name.as_str().ends_with(crate::model::vpc::V6_SUFFIX);
    let Some(existing_uid) = belongs_to(&existing, name, v6) else {
        return Err(Error::conflict(format!(
            "pool `{pool}` belongs to another VPC (uid {owner_uid}); choose another VPC name"
        )));
    };
    if !fits || uid.is_some_and(|u| *u != existing_uid) {
        return Err(Error::Conflict {
            message: format!(
                "VPC `{name}` already exists in namespace `{ns}` with CIDR {} and uid {existing_uid}, not {asked}{}",
                existing.spec.cidr,
                uid.map(|u| format!(" and uid {u}")).unwrap_or_default(),
            ),
            hint: Some(format!("`ipamctl vpc get {name} -n {ns} -o yaml` shows it")),
        });
    }
    Ok((existing, existing_uid))
}

/// A VPC as `vpc get` and `vpc list` show it: a view in the manifests' shape, never stored.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Vpc {
    api_version: &'static str,
    kind: &'static str,
    /// Its name, namespace and uid.
    pub metadata: VpcMetadata,
    /// The private pool(s) it owns.
    pub pools: Vec<PoolManifest>,
    /// Its router's uplinks: every allocation owned by `VPC/router` with its uid.
    pub uplinks: Vec<AllocationManifest>,
    /// Where its ranges came from: the claims of the ranges it drew from supernet pools.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<PrefixClaimManifest>,
}

impl Vpc {
    /// A VPC of these parts, as [`get`] and [`list`] make one (a client of a server
    /// makes it again from what the server answered).
    pub fn new(
        metadata: VpcMetadata,
        pools: Vec<PoolManifest>,
        uplinks: Vec<AllocationManifest>,
        ranges: Vec<PrefixClaimManifest>,
    ) -> Vpc {
        Vpc {
            api_version: API_VERSION,
            kind: VPC_KIND,
            metadata,
            pools,
            uplinks,
            ranges,
        }
    }
}

/// Name, namespace and uid of a [`Vpc`].
#[derive(Clone, Debug, Serialize)]
pub struct VpcMetadata {
    /// The VPC's name.
    pub name: String,
    /// Its tenant namespace.
    pub namespace: Namespace,
    /// Its uid, from its pools' `ownerRefs`.
    pub uid: Uid,
}

/// The claims of the ranges VPC `name` of `ns` drew from supernet pools, in every scope:
/// owned by a VPC router and annotated with the VPC ([`RANGE_ANNOTATION`]), so that they
/// are found also after the VPC's pools (and with them its uid) are gone.
fn range_claims(store: &dyn Store, ns: &Namespace, name: &str) -> Result<Vec<PrefixClaimManifest>> {
    let me = range_annotation(ns, name);
    let routers =
        OwnerFilter::new(Some("VPC/router"), None).map_err(|e| Error::invalid("owner", e))?;
    let mut found = Vec::new();
    for scope in store.scopes()? {
        found.extend(
            prefix::claims_matching(store, scope.as_ref(), None, &routers)?
                .into_iter()
                .filter(|c| c.metadata.annotations.get(RANGE_ANNOTATION) == Some(&me)),
        );
    }
    Ok(found)
}

/// The allocations of the VPC router owned by `uid`, in every scope.
fn uplinks(
    store: &dyn Store,
    uid: &Uid,
    warnings: &mut Warnings,
) -> Result<Vec<AllocationManifest>> {
    let filter = OwnerFilter::exactly(&router(uid));
    let mut found = Vec::new();
    for scope in store.scopes()? {
        found.extend(crate::engine::allocate::allocations_of(
            store,
            scope.as_ref(),
            None,
            &filter,
            warnings,
        )?);
    }
    Ok(found)
}

/// The pools of VPC `name` that exist among `pools` (its IPv4 pool's name, then its IPv6
/// pool's), each kept only if its owner reference says it is this VPC's pool of that family
/// ([`belongs_to`]), with the VPC's uid: `None` if neither is. Exit 4 if the two are of
/// different uids (two VPCs' pools under one VPC's names).
fn own_pools(
    store: &dyn Store,
    name: &str,
    pools: &[PoolRef],
) -> Result<(Option<Uid>, Vec<PoolManifest>)> {
    let mut uid: Option<Uid> = None;
    let mut manifests = Vec::new();
    for (i, pool) in pools.iter().enumerate() {
        let m = match load_pool(store, pool) {
            Ok(m) => m,
            Err(Error::NotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        let Some(owner) = belongs_to(&m, name, i == 1) else {
            continue;
        };
        if uid.as_ref().is_some_and(|u| *u != owner) {
            return Err(Error::conflict(format!(
                "the pools of VPC `{name}` (`{}`, `{}`) belong to different VPCs; run `ipamctl check`",
                pools[0], pools[1]
            )));
        }
        uid = Some(owner);
        manifests.push(m);
    }
    Ok((uid, manifests))
}

/// The VPC named `name` in `ns`, if one of its `pools` exists and its owner reference says
/// it is that VPC's.
fn find(
    store: &dyn Store,
    ns: &Namespace,
    pools: &[PoolRef],
    name: &str,
    warnings: &mut Warnings,
) -> Result<Option<Vpc>> {
    let (uid, manifests) = own_pools(store, name, pools)?;
    let Some(uid) = uid else {
        return Ok(None);
    };
    let ranges = range_claims(store, ns, name)?
        .into_iter()
        .filter(|c| c.spec.owner.uid() == Some(&uid))
        .collect();
    let uplinks = uplinks(store, &uid, warnings)?;
    let metadata = VpcMetadata {
        name: name.to_owned(),
        namespace: ns.clone(),
        uid,
    };
    Ok(Some(Vpc::new(metadata, manifests, uplinks, ranges)))
}

/// `vpc get`: the VPC named `name` in `ns`, whose pools are `pools` (IPv4, then IPv6);
/// exit 3 if neither exists owned by a VPC.
pub fn get(
    store: &dyn Store,
    scope: &Scope,
    ns: &Namespace,
    pools: &[PoolRef; 2],
    name: &str,
    warnings: &mut Warnings,
) -> Result<Vpc> {
    scope.check(Verb::Read, Some(ns), || missing(ns, pools, name))?;
    match find(store, ns, pools, name, warnings)? {
        Some(vpc) => Ok(vpc),
        None => Err(Error::NotFound {
            message: missing(ns, pools, name),
            hint: (scope.is_everything()).then(|| suggest_vpc(store, Some(ns), name)),
        }),
    }
}

/// What a VPC that does not exist is called: also what a caller outside its namespace is
/// told.
pub fn missing(ns: &Namespace, pools: &[PoolRef; 2], name: &str) -> String {
    format!(
        "VPC `{name}` not found in namespace `{ns}` (no pool `{}` or `{}` owned by a VPC)",
        pools[0].name, pools[1].name
    )
}

/// `vpc list`: the VPCs of the tenant namespaces among `scopes`, namespace by namespace, in
/// the order of their pools' names.
pub fn list(
    store: &dyn Store,
    scopes: &[Option<Namespace>],
    warnings: &mut Warnings,
) -> Result<Vec<Vpc>> {
    let mut vpcs = Vec::new();
    for scope in scopes {
        let Some(ns) = scope else { continue };
        let mut names = store.list(ObjectKind::Pool, Some(ns))?;
        names.sort();
        // `vpc-X` is VPC X's IPv4 pool, `vpc-X-v6` its IPv6 pool: a VPC is listed once,
        // under the name its pools were made from (an IPv6 pool's name less `-v6`).
        let mut seen = BTreeSet::new();
        for name in names {
            if !name.starts_with("vpc-") {
                continue;
            }
            let v6 =
                load_pool(store, &pool_in(ns, &name)?).is_ok_and(|m| m.spec.cidr.addr().is_ipv6());
            let Some(vpc) = name_of(&name, v6) else {
                continue;
            };
            if !seen.insert(vpc.to_owned()) {
                continue;
            }
            let pools = [
                pool_in(ns, &pool_name(vpc, false))?,
                pool_in(ns, &pool_name(vpc, true))?,
            ];
            vpcs.extend(find(store, ns, &pools, vpc, warnings)?);
        }
    }
    Ok(vpcs)
}

/// The pool named `name` in `ns`; exit 2 if it is no valid pool name.
fn pool_in(ns: &Namespace, name: &str) -> Result<PoolRef> {
    Ok(PoolRef {
        namespace: Some(ns.clone()),
        name: PoolName::new(name).map_err(|e| Error::invalid("pool", e))?,
    })
}

/// The hint of a VPC not found: the nearest VPC name of the namespace (from its pools'
/// names, `vpc-NAME` and `vpc-NAME-v6`), else where to look.
fn suggest_vpc(store: &dyn Store, ns: Option<&Namespace>, name: &str) -> String {
    let pools = store.list(ObjectKind::Pool, ns).unwrap_or_default();
    let names: BTreeSet<&str> = pools.iter().filter_map(|p| name_of(p, true)).collect();
    match crate::model::suggest::nearest(name, names) {
        Some(near) => format!("did you mean `{near}`?"),
        None => "`ipamctl vpc list -A` lists every VPC".into(),
    }
}

mod delete;
mod mac_prefixes;

pub use delete::{Deleted, Removal, delete};
use mac_prefixes::{check_mac_prefixes, same_mac_prefix};
