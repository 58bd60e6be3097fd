//! `ipamctl vpc create|get|list|delete`: a VPC, the private pool it owns, and its router's
//! uplinks in public pools (allocations owned by `VPC/router` with the VPC's uid).

use std::io::Write;

use crate::alloc::{self, PoolRef, Released};
use crate::cli::{GlobalArgs, OutputFormat, VpcCommand, VpcCreateArgs, VpcDeleteArgs};
use crate::error::{Error, Result};
use crate::model::{
    API_VERSION, AllocationManifest, Metadata, Namespace, Owner, OwnerFilter, OwnerRef, POOL_KIND,
    PoolKind, PoolManifest, PoolName, PoolSpec, Uid,
};
use crate::output::{self, Action, Change, Named};
use crate::store::{self, LockMode, ObjectKind, Store};
use crate::yaml;

/// The kind written in the pool's `ownerRefs`.
const VPC_KIND: &str = "VPC";

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
fn vpc_pool(g: &GlobalArgs, name: &str) -> Result<(Namespace, PoolRef)> {
    let ns = super::namespace(g)?.ok_or_else(|| Error::Usage {
        message: "a VPC lives in a tenant namespace: pass `-n NS`".into(),
        hint: None,
    })?;
    let pool = super::flag("NAME", PoolName::new(&format!("vpc-{name}")))?;
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
    let (ns, pool) = vpc_pool(g, &args.name)?;
    let uid = match &args.uid {
        Some(uid) => super::flag("--uid", Uid::parse_uuid(uid))?,
        None => Uid::parse_uuid(&uuid::Uuid::new_v4().to_string()).expect("a UUID is a valid uid"),
    };
    let manifest = PoolManifest {
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
            cidr: super::prefix("--cidr", &args.cidr)?,
            kind: PoolKind::Private,
            gateway: None,
            exclude: Vec::new(),
            zone: None,
            reuse_after: None,
        },
    };
    manifest
        .validate()
        .map_err(|e| Error::invalid("vpc create", e))?;
    let created = if args.dry_run {
        store
            .get(ObjectKind::Pool, Some(&ns), pool.name.as_str())?
            .is_none()
    } else {
        store::atomically(store, || {
            let _scope = store.lock_scope(Some(&ns))?;
            store.create(
                ObjectKind::Pool,
                Some(&ns),
                pool.name.as_str(),
                yaml::encode(&manifest).as_bytes(),
            )
        })?
    };
    let (manifest, uid, action) = if created {
        (manifest, uid, Action::Created.planned(args.dry_run))
    } else {
        // A retry of a create that succeeded: the same VPC is the answer, anything else is
        // someone else's VPC under that name.
        let existing = alloc::load_pool(store, &pool)?;
        let Some(existing_uid) = vpc_uid(&existing) else {
            return Err(Error::conflict(format!(
                "pool `{pool}` exists and is not owned by a VPC; choose another VPC name"
            )));
        };
        if existing.spec.cidr != manifest.spec.cidr || args.uid.is_some() && existing_uid != uid {
            return Err(Error::Conflict {
                message: format!(
                    "VPC `{}` already exists in namespace `{ns}` with CIDR {} and uid {existing_uid}, not {}{}",
                    args.name,
                    existing.spec.cidr,
                    manifest.spec.cidr,
                    if args.uid.is_some() {
                        format!(" and uid {uid}")
                    } else {
                        String::new()
                    },
                ),
                hint: Some(format!(
                    "`ipamctl vpc get {} -n {ns} -o yaml` shows it",
                    args.name
                )),
            });
        }
        (existing, existing_uid, Action::Existing)
    };
    if g.output.is_some() {
        return output::write_changes(out, g.output, &[Change::new(&manifest, action)], true);
    }
    eprintln!("ipampool/{} {action}", pool.name);
    output::line(out, uid.as_str())
}

/// The uid of the VPC that owns `pool`, from its `ownerRefs`; `None` if no VPC owns it.
fn vpc_uid(pool: &PoolManifest) -> Option<Uid> {
    pool.metadata
        .owner_refs
        .iter()
        .find(|r| r.kind == VPC_KIND)
        .and_then(|r| Uid::new(&r.uid).ok())
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
        found.extend(alloc::allocations_of(store, scope.as_ref(), None, &filter)?);
    }
    Ok(found)
}

/// The VPC named `name` in `ns`, if its pool exists and a VPC owns it.
fn find(store: &dyn Store, ns: &Namespace, pool: &PoolRef, name: &str) -> Result<Option<Vpc>> {
    let manifest = match alloc::load_pool(store, pool) {
        Ok(m) => m,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(uid) = vpc_uid(&manifest) else {
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
        pools: vec![manifest],
    }))
}

fn get(store: &dyn Store, g: &GlobalArgs, name: &str, out: &mut dyn Write) -> Result<()> {
    let (ns, pool) = vpc_pool(g, name)?;
    let Some(vpc) = find(store, &ns, &pool, name)? else {
        return Err(Error::NotFound {
            message: format!(
                "VPC `{name}` not found in namespace `{ns}` (no pool `{}` owned by a VPC)",
                pool.name
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
        for pool_name in names {
            let Some(name) = pool_name.strip_prefix("vpc-") else {
                continue;
            };
            let pool = PoolRef {
                namespace: Some(ns.clone()),
                name: super::flag("pool", PoolName::new(&pool_name))?,
            };
            if let Some(vpc) = find(store, &ns, &pool, name)? {
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
    let (_, pool) = vpc_pool(g, &args.name)?;
    // One unit of work: on a database, one transaction. The lines are printed once it is
    // done, and an error found after releasing (files that could not be released) comes
    // after them, as the releases stand.
    let deleted = if args.dry_run {
        delete_vpc(store, args, &pool)
    } else {
        store::atomically(store, || delete_vpc(store, args, &pool))
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
    let manifest = match alloc::load_pool(store, pool) {
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
    let held = alloc::allocations_of(store, ns, Some(&pool.name), &OwnerFilter::default())?;
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
                alloc::release_in_doomed_pool(store, &of, m.spec.address, &guard)?
            } else {
                alloc::release_address(store, &of, m.spec.address, &guard)?
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
            crate::subnet::delete_of_pool(store, pool)?;
            crate::cooldown::forget_pool(store, pool)?;
            store.delete(ObjectKind::Pool, ns, pool.name.as_str())?;
        }
        let action = Action::Deleted.planned(args.dry_run);
        changes.push(Change::new(Removal::Pool(m), action));
    }
    Ok((changes, None))
}
