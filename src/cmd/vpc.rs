//! `ipamctl vpc create|delete`: a VPC and the private pool it owns.

use std::io::Write;

use crate::alloc::{self, PoolRef, Released};
use crate::cli::{GlobalArgs, VpcCommand, VpcCreateArgs, VpcDeleteArgs};
use crate::error::{Error, Result};
use crate::model::{
    API_VERSION, AllocationManifest, Metadata, Namespace, OwnerFilter, OwnerRef, POOL_KIND,
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
        Some(uid) => super::flag("--uid", Uid::new(uid))?,
        None => Uid::new(&uuid::Uuid::new_v4().to_string()).expect("a UUID is a valid uid"),
    };
    let manifest = PoolManifest {
        api_version: API_VERSION.into(),
        kind: POOL_KIND.into(),
        metadata: Metadata {
            name: pool.name.to_string(),
            namespace: Some(ns.clone()),
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
    if !created {
        return Err(Error::Conflict {
            message: format!(
                "VPC `{}` already exists in namespace `{ns}` (pool `{}`)",
                args.name, pool.name
            ),
            hint: Some(format!(
                "`ipamctl pool show {} -n {ns}` shows it",
                pool.name
            )),
        });
    }
    let action = Action::Created.planned(args.dry_run);
    if g.output.is_some() {
        return output::write_changes(out, g.output, &[Change::new(&manifest, action)], true);
    }
    eprintln!("ipampool/{} {action}", pool.name);
    output::line(out, uid.as_str())
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
    let (changes, kept) = if args.dry_run {
        delete_vpc(store, args, &pool)?
    } else {
        store::atomically(store, || delete_vpc(store, args, &pool))?
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
    for m in held {
        if !args.dry_run {
            let owner = &m.spec.owner;
            let guard = OwnerFilter::exactly(owner);
            if let Released::NotHeld =
                alloc::release_in_doomed_pool(store, pool, m.spec.address, &guard)?
            {
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
