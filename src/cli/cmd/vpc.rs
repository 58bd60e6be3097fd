//! `ipamctl vpc create|get|list|delete`: a VPC, the private pools it owns (`vpc-NAME` for
//! its IPv4 range, `vpc-NAME-v6` for its IPv6 range; dual stack: both), and its router's
//! uplinks in public pools (allocations owned by `VPC/router` with the VPC's uid).

use std::io::Write;

use crate::cli::output::{self, Action, Change, Named};
use crate::cli::{GlobalArgs, OutputFormat, VpcCommand, VpcCreateArgs, VpcDeleteArgs};
use crate::engine::release::Released;
use crate::error::{Error, Result};
use crate::model::PoolRef;
use crate::model::vpc::{V6_SUFFIX, VPC_KIND, name_of, vpc_uid};
use crate::model::{
    API_VERSION, AllocationManifest, Metadata, Namespace, Owner, OwnerFilter, OwnerRef, POOL_KIND,
    PoolKind, PoolManifest, PoolName, PoolSpec, Uid,
};
use crate::store::{self, LockMode, ObjectKind, Store};
use crate::yaml;

/// Both pools a VPC named `name` may own, IPv4 first.
fn vpc_pools(g: &GlobalArgs, name: &str) -> Result<(Namespace, [PoolRef; 2])> {
    let (ns, v4) = vpc_pool(g, name, false)?;
    let (_, v6) = vpc_pool(g, name, true)?;
    Ok((ns, [v4, v6]))
}

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    command: &VpcCommand,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        VpcCommand::Create(args) => create(store, g, args, out),
        VpcCommand::Get(args) => get(store, g, &args.name, out),
        VpcCommand::List => list(store, g, out),
        VpcCommand::Delete(args) => delete(store, g, args, out),
    }
}

/// The VPC's namespace (required) and pool.
fn vpc_pool(g: &GlobalArgs, name: &str, v6: bool) -> Result<(Namespace, PoolRef)> {
    let ns = super::namespace(g)?.ok_or_else(|| Error::Usage {
        message: "a VPC lives in a tenant namespace: pass `-n NS`".into(),
        hint: None,
    })?;
    let suffix = if v6 { V6_SUFFIX } else { "" };
    let pool = super::flag("NAME", PoolName::new(&format!("vpc-{name}{suffix}")))?;
    Ok((
        ns.clone(),
        PoolRef {
            namespace: Some(ns),
            name: pool,
        },
    ))
}

fn create(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &VpcCreateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let given_uid = match &args.uid {
        Some(uid) => Some(super::flag("--uid", Uid::parse_uuid(uid))?),
        None => None,
    };
    let cidrs = args
        .cidr
        .iter()
        .map(|c| super::prefix("--cidr", c))
        .collect::<Result<Vec<_>>>()?;
    if cidrs.len() > 2 || cidrs.len() == 2 && cidrs[0].addr().is_ipv6() == cidrs[1].addr().is_ipv6()
    {
        return Err(Error::invalid(
            "--cidr",
            "give at most one IPv4 and one IPv6 range (a dual-stack VPC has one of each)",
        ));
    }
    let mut pools = Vec::new();
    for cidr in &cidrs {
        pools.push(vpc_pool(g, &args.name, cidr.addr().is_ipv6())?);
    }
    let ns = pools[0].0.clone();
    let manifest = |pool: &PoolRef, cidr: ipnet::IpNet, uid: &Uid| PoolManifest {
        api_version: API_VERSION.into(),
        kind: POOL_KIND.into(),
        metadata: Metadata {
            name: pool.name.to_string(),
            namespace: Some(ns.clone()),
            creation_timestamp: None,
            labels: Default::default(),
            annotations: Default::default(),
            owner_refs: vec![OwnerRef {
                kind: VPC_KIND.into(),
                uid: uid.to_string(),
                name: Some(args.name.clone()),
                controller: Some(true),
            }],
        },
        spec: PoolSpec {
            cidr,
            kind: PoolKind::Private,
            gateway: None,
            exclude: Vec::new(),
            zone: None,
            reuse_after: None,
        },
    };
    // Under the scope's lock: the pools that exist already must be this VPC's (a retry of a
    // create that succeeded, in part or whole: its uid is adopted); the others are created.
    let work = || -> Result<(Uid, Vec<(PoolManifest, Action)>)> {
        let _scope = (!args.dry_run)
            .then(|| store.lock_scope(Some(&ns)))
            .transpose()?;
        let mut existing = Vec::new();
        for ((_, pool), cidr) in pools.iter().zip(&cidrs) {
            existing.push(match crate::store::read::load_pool(store, pool) {
                Ok(m) => Some(same_vpc(
                    &args.name,
                    &ns,
                    pool,
                    m,
                    *cidr,
                    given_uid.as_ref(),
                )?),
                Err(Error::NotFound { .. }) => None,
                Err(e) => return Err(e),
            });
        }
        let held: Vec<&Uid> = existing.iter().flatten().map(|(_, uid)| uid).collect();
        if let [first, rest @ ..] = held.as_slice()
            && rest.iter().any(|u| u != first)
        {
            return Err(Error::conflict(format!(
                "the pools of VPC `{}` in namespace `{ns}` belong to different VPCs; delete them and create it again",
                args.name
            )));
        }
        let uid = held
            .first()
            .map(|u| (*u).clone())
            .or_else(|| given_uid.clone())
            .unwrap_or_else(|| {
                Uid::parse_uuid(&uuid::Uuid::new_v4().to_string()).expect("a UUID is a valid uid")
            });
        let mut done = Vec::new();
        for (((_, pool), cidr), found) in pools.iter().zip(&cidrs).zip(existing) {
            if let Some((m, _)) = found {
                done.push((m, Action::Existing));
                continue;
            }
            let m = manifest(pool, *cidr, &uid);
            m.validate().map_err(|e| Error::invalid("vpc create", e))?;
            if !args.dry_run
                && !store.create(
                    ObjectKind::Pool,
                    Some(&ns),
                    pool.name.as_str(),
                    yaml::encode(&m).as_bytes(),
                )?
            {
                return Err(Error::conflict(format!(
                    "pool `{pool}` was created meanwhile; run `ipamctl vpc create` again"
                )));
            }
            done.push((m, Action::Created.planned(args.dry_run)));
        }
        Ok((uid, done))
    };
    let (uid, done) = if args.dry_run {
        work()?
    } else {
        store::atomically(store, work)?
    };
    if g.output.is_some() {
        let changes: Vec<_> = done.iter().map(|(m, a)| Change::new(m, *a)).collect();
        return output::write_changes(out, g.output, &changes, true);
    }
    for (m, action) in &done {
        eprintln!("ipampool/{} {action}", m.metadata.name);
    }
    output::line(out, uid.as_str())
}

/// `existing`, the pool a create found under this VPC's pool name, with its VPC's uid, if it
/// is this VPC's: owned by a VPC, of range `cidr`, and of uid `uid` when one was given.
fn same_vpc(
    name: &str,
    ns: &Namespace,
    pool: &PoolRef,
    existing: PoolManifest,
    cidr: ipnet::IpNet,
    uid: Option<&Uid>,
) -> Result<(PoolManifest, Uid)> {
    let Some(existing_uid) = vpc_uid(&existing) else {
        return Err(Error::conflict(format!(
            "pool `{pool}` exists and is not owned by a VPC; choose another VPC name"
        )));
    };
    if existing.spec.cidr != cidr || uid.is_some_and(|u| *u != existing_uid) {
        return Err(Error::Conflict {
            message: format!(
                "VPC `{name}` already exists in namespace `{ns}` with CIDR {} and uid {existing_uid}, not {cidr}{}",
                existing.spec.cidr,
                uid.map(|u| format!(" and uid {u}")).unwrap_or_default(),
            ),
            hint: Some(format!("`ipamctl vpc get {name} -n {ns} -o yaml` shows it")),
        });
    }
    Ok((existing, existing_uid))
}

/// A VPC as `vpc get` and `vpc list` show it: a view in the manifests' shape, never stored.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Vpc {
    api_version: &'static str,
    kind: &'static str,
    metadata: VpcMetadata,
    /// The private pool(s) it owns.
    pools: Vec<PoolManifest>,
    /// Its router's uplinks: every allocation owned by `VPC/router` with its uid.
    uplinks: Vec<AllocationManifest>,
}

/// Name, namespace and uid of a [`Vpc`].
#[derive(Clone, Debug, serde::Serialize)]
struct VpcMetadata {
    name: String,
    namespace: Namespace,
    uid: Uid,
}

impl Named for Vpc {
    fn resource(&self) -> String {
        format!("vpc/{}", self.metadata.name)
    }
}

/// The allocations of the VPC router owned by `uid`, in every scope.
fn uplinks(store: &dyn Store, uid: &Uid) -> Result<Vec<AllocationManifest>> {
    let router = Owner::parse("VPC/router", Some(uid.clone())).expect("`VPC/router` is valid");
    let filter = OwnerFilter::exactly(&router);
    let mut found = Vec::new();
    for scope in store.scopes()? {
        let mut warnings = crate::engine::warning::Warnings::default();
        found.extend(crate::engine::allocate::allocations_of(
            store,
            scope.as_ref(),
            None,
            &filter,
            &mut warnings,
        )?);
        output::warn(&warnings);
    }
    Ok(found)
}

/// The VPC named `name` in `ns`, if one of its pools exists and a VPC owns it.
fn find(store: &dyn Store, ns: &Namespace, pools: &[PoolRef], name: &str) -> Result<Option<Vpc>> {
    let mut manifests = Vec::new();
    for pool in pools {
        match crate::store::read::load_pool(store, pool) {
            Ok(m) if vpc_uid(&m).is_some() => manifests.push(m),
            Ok(_) | Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let Some(uid) = manifests.first().and_then(vpc_uid) else {
        return Ok(None);
    };
    Ok(Some(Vpc {
        api_version: API_VERSION,
        kind: VPC_KIND,
        uplinks: uplinks(store, &uid)?,
        metadata: VpcMetadata {
            name: name.to_owned(),
            namespace: ns.clone(),
            uid,
        },
        pools: manifests,
    }))
}

fn get(store: &dyn Store, g: &GlobalArgs, name: &str, out: &mut dyn Write) -> Result<()> {
    let (ns, pools) = vpc_pools(g, name)?;
    let Some(vpc) = find(store, &ns, &pools, name)? else {
        return Err(Error::NotFound {
            message: format!(
                "VPC `{name}` not found in namespace `{ns}` (no pool `{}` or `{}` owned by a VPC)",
                pools[0].name, pools[1].name
            ),
            hint: Some("`ipamctl vpc list -A` lists every VPC".into()),
        });
    };
    match g.output {
        Some(OutputFormat::Json) => output::write_json(out, &vpc),
        Some(OutputFormat::Yaml) => output::write(out, &yaml::encode(&vpc)),
        None => output::line(out, vpc.metadata.uid.as_str()),
        Some(_) => render(out, g, &[vpc]),
    }
}

fn list(store: &dyn Store, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let mut vpcs = Vec::new();
    for scope in super::scopes(store, g)? {
        let Some(ns) = scope else { continue };
        let mut names = store.list(ObjectKind::Pool, Some(&ns))?;
        names.sort();
        // `vpc-X` is VPC X's IPv4 pool, `vpc-X-v6` its IPv6 pool: a VPC is listed once,
        // under the name its pools were made from (an IPv6 pool's name less `-v6`).
        let mut seen = std::collections::BTreeSet::new();
        for pool_name in names {
            if !pool_name.starts_with("vpc-") {
                continue;
            }
            let pool = PoolRef {
                namespace: Some(ns.clone()),
                name: super::flag("pool", PoolName::new(&pool_name))?,
            };
            let v6 = crate::store::read::load_pool(store, &pool)
                .is_ok_and(|m| m.spec.cidr.addr().is_ipv6());
            let Some(name) = name_of(&pool_name, v6) else {
                continue;
            };
            if !seen.insert(name.to_owned()) {
                continue;
            }
            let pools = [
                PoolRef {
                    namespace: Some(ns.clone()),
                    name: super::flag("pool", PoolName::new(&format!("vpc-{name}")))?,
                },
                PoolRef {
                    namespace: Some(ns.clone()),
                    name: super::flag("pool", PoolName::new(&format!("vpc-{name}{V6_SUFFIX}")))?,
                },
            ];
            if let Some(vpc) = find(store, &ns, &pools, name)? {
                vpcs.push(vpc);
            }
        }
    }
    if output::write_list(out, g.output, &vpcs)? {
        return Ok(());
    }
    render(out, g, &vpcs)
}

/// The table of `vpc list` (and `vpc get -o table|wide`).
fn render(out: &mut dyn Write, g: &GlobalArgs, vpcs: &[Vpc]) -> Result<()> {
    if let Some(OutputFormat::Name) = g.output {
        return output::write_names(out, vpcs);
    }
    let rows = vpcs
        .iter()
        .map(|v| {
            let cidrs: Vec<String> = v.pools.iter().map(|p| p.spec.cidr.to_string()).collect();
            let uplinks: Vec<String> = v
                .uplinks
                .iter()
                .map(|m| format!("{}/{}", m.spec.pool, m.spec.address))
                .collect();
            vec![
                v.metadata.namespace.to_string(),
                v.metadata.name.clone(),
                v.metadata.uid.to_string(),
                cidrs.join(","),
                if uplinks.is_empty() {
                    "-".into()
                } else {
                    uplinks.join(",")
                },
            ]
        })
        .collect();
    output::write(
        out,
        &output::table(
            &["NAMESPACE", "NAME", "UID", "CIDR", "UPLINKS"],
            rows,
            &[],
            g.no_headers,
        ),
    )
}

fn delete(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &VpcDeleteArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let (_, pools) = vpc_pools(g, &args.name)?;
    // Both pools, IPv4 and IPv6, whichever exist: not found only when neither does.
    let delete_both = || -> Result<(Removed, Option<Error>)> {
        let mut changes = Vec::new();
        let mut missing = None;
        for pool in &pools {
            match delete_vpc(store, args, pool) {
                Ok((more, kept)) => {
                    changes.extend(more);
                    if kept.is_some() {
                        return Ok((changes, kept));
                    }
                }
                Err(e @ Error::NotFound { .. }) => {
                    missing.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        match missing {
            Some(e) if changes.is_empty() => Err(e),
            _ => Ok((changes, None)),
        }
    };
    // One unit of work: on a database, one transaction. The lines are printed once it is
    // done, and an error found after releasing (files that could not be released) comes
    // after them, as the releases stand.
    let deleted = if args.dry_run {
        delete_both()
    } else {
        store::atomically(store, delete_both)
    };
    let (changes, kept) = match deleted {
        // Already deleted (a retry): nothing to do, and a retry loop sees success.
        Err(Error::NotFound { message, .. }) if args.ignore_not_found => {
            eprintln!("note: {message}; nothing to delete");
            (Vec::new(), None)
        }
        other => other?,
    };
    output::write_changes(out, g.output, &changes, false)?;
    match kept {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// What `vpc delete` released and removed: the allocations, then the pool.
type Removed = Vec<Change<Removal>>;

/// An object `vpc delete` removes.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(untagged)]
enum Removal {
    Allocation(AllocationManifest),
    Pool(PoolManifest),
}

impl Named for Removal {
    fn resource(&self) -> String {
        match self {
            Removal::Allocation(m) => m.resource(),
            Removal::Pool(m) => m.resource(),
        }
    }
}

/// The work of `vpc delete`: what it removed, and the error to report after printing it.
fn delete_vpc(
    store: &dyn Store,
    args: &VpcDeleteArgs,
    pool: &PoolRef,
) -> Result<(Removed, Option<Error>)> {
    let ns = pool.namespace.as_ref();
    let mut changes = Vec::new();
    // Exclusive: allocate holds this lock shared from before it reads the pool until its
    // claim is durable, so once we hold it no claim is in flight and none can start.
    let _lock = (!args.dry_run)
        .then(|| store.lock_pool(ns, &pool.name, LockMode::Exclusive))
        .transpose()?;
    let manifest = match crate::store::read::load_pool(store, pool) {
        Ok(m) => Some(m),
        Err(Error::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    if let Some(m) = &manifest
        && !m.metadata.owner_refs.iter().any(|r| r.kind == VPC_KIND)
    {
        return Err(Error::conflict(format!(
            "pool `{pool}` is not owned by a VPC; delete it with `ipamctl pool delete`"
        )));
    }
    let mut warnings = crate::engine::warning::Warnings::default();
    let held = crate::engine::allocate::allocations_of(
        store,
        ns,
        Some(&pool.name),
        &OwnerFilter::default(),
        &mut warnings,
    )?;
    output::warn(&warnings);
    if manifest.is_none() && held.is_empty() {
        return Err(Error::NotFound {
            message: format!(
                "VPC `{}` not found in namespace `{}` (no pool `{}`)",
                args.name,
                ns.map_or("", |n| n.as_str()),
                pool.name
            ),
            hint: None,
        });
    }
    // The router's uplinks first (in public pools, owned by the VPC's uid): while the pool
    // stands, a retry after a crash still knows the uid to find them by.
    let uplinks = match manifest.as_ref().and_then(vpc_uid) {
        Some(uid) => uplinks(store, &uid)?,
        None => Vec::new(),
    };
    for m in uplinks.into_iter().chain(held) {
        if !args.dry_run {
            let owner = &m.spec.owner;
            let guard = OwnerFilter::exactly(owner);
            let of = PoolRef {
                namespace: m.metadata.namespace.clone(),
                name: m.spec.pool.clone(),
            };
            // The VPC's own pool is locked and going: no cooldown record there. An uplink in
            // a public pool is released as any release is (with its pool's cooldown).
            let released = if of == *pool {
                crate::engine::release::release_in_doomed_pool(store, &of, m.spec.address, &guard)?
            } else {
                crate::engine::release::release_address(store, &of, m.spec.address, &guard)?
            };
            if let Released::NotHeld = released {
                continue;
            }
        }
        let action = Action::Released.planned(args.dry_run);
        changes.push(Change::new(Removal::Allocation(m), action));
    }
    // Files that do not parse were not released above; never orphan them silently.
    let left = store
        .list(ObjectKind::Allocation, ns)?
        .iter()
        .filter(|e| {
            crate::model::parse_allocation_name(e).is_some_and(|(p, _)| p == pool.name.as_str())
        })
        .count();
    if left > 0 && !args.dry_run {
        let kept = Error::Conflict {
            message: format!(
                "{left} allocation file{} of pool `{pool}` could not be released; the pool is kept",
                if left == 1 { "" } else { "s" }
            ),
            hint: Some(
                "run `ipamctl check` to see why, fix them, and run `ipamctl vpc delete` again"
                    .into(),
            ),
        };
        return Ok((changes, Some(kept)));
    }
    if let Some(m) = manifest {
        if !args.dry_run {
            crate::engine::subnet::delete_of_pool(store, pool)?;
            crate::engine::cooldown::forget_pool(store, pool)?;
            store.delete(ObjectKind::Pool, ns, pool.name.as_str())?;
        }
        let action = Action::Deleted.planned(args.dry_run);
        changes.push(Change::new(Removal::Pool(m), action));
    }
    Ok((changes, None))
}
