//! `ipamctl release`: free one address, an owner's addresses, or everything a uid holds.

use std::io::Write;

use crate::alloc::{self, PoolRef, Released};
use crate::cli::{GlobalArgs, OutputFormat, ReleaseArgs};
use crate::error::{Error, Result};
use crate::model::{AllocationManifest, OwnerFilter};
use crate::output;
use crate::store::Store;

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &ReleaseArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let filter = super::owner_filter(args.owner.as_deref(), args.uid.as_deref())?;
    let released = match (&args.pool, &args.address) {
        (Some(pool), Some(addr)) => {
            let pool = super::pool_ref(g, pool)?;
            release_one(store, &pool, &super::address("ADDRESS", addr)?, &filter)?
        }
        (Some(pool), None) if !filter.is_empty() => {
            release_matching(store, &super::pool_ref(g, pool)?, &filter)?
        }
        (None, None) if filter.uid.is_some() => release_uid(store, g, &filter)?,
        _ => {
            return Err(Error::Usage {
                message: "release needs a selector: `POOL ADDRESS`, `POOL --owner KIND/NAME`, or `--uid UID`".into(),
                hint: Some("see `ipamctl release --help`".into()),
            });
        }
    };
    match g.output {
        Some(OutputFormat::Json) => output::write(out, &output::json(&released)),
        Some(OutputFormat::Yaml) => output::write(out, &crate::yaml::encode_stream(&released)),
        Some(OutputFormat::Table) | None => {
            for m in &released {
                output::line(out, &format!("ipallocation/{} released", m.metadata.name))?;
            }
            Ok(())
        }
    }
}

/// Does the pool manifest exist? (Release works without it; it only sharpens errors.)
fn pool_spec(store: &dyn Store, pool: &PoolRef) -> Result<Option<crate::model::PoolManifest>> {
    match alloc::load_pool(store, pool) {
        Ok(p) => Ok(Some(p)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn release_one(
    store: &dyn Store,
    pool: &PoolRef,
    addr: &std::net::Ipv4Addr,
    guard: &OwnerFilter,
) -> Result<Vec<AllocationManifest>> {
    let spec = pool_spec(store, pool)?;
    if let Some(spec) = &spec
        && !spec.spec.cidr.contains(addr)
    {
        return Err(Error::invalid(
            "ADDRESS",
            format!("{addr} is outside pool `{pool}` ({})", spec.spec.cidr),
        ));
    }
    match alloc::release_address(store, pool, *addr, guard)? {
        Released::Deleted(m) => Ok(vec![*m]),
        Released::NotHeld if spec.is_none() => Err(alloc::pool_not_found(store, pool)),
        Released::NotHeld => {
            eprintln!("note: {addr} in pool `{pool}` is not allocated; nothing to release");
            Ok(Vec::new())
        }
    }
}

fn release_matching(
    store: &dyn Store,
    pool: &PoolRef,
    filter: &OwnerFilter,
) -> Result<Vec<AllocationManifest>> {
    let held = alloc::allocations_of(store, pool.namespace.as_ref(), Some(&pool.name), filter)?;
    if held.is_empty() {
        if pool_spec(store, pool)?.is_none() {
            return Err(alloc::pool_not_found(store, pool));
        }
        eprintln!("note: no allocation in pool `{pool}` matches; nothing to release");
    }
    release_all(store, held)
}

/// Releases each allocation guarded by its exact owner, so an address re-allocated to
/// someone else in the meantime is left alone.
fn release_all(
    store: &dyn Store,
    held: Vec<AllocationManifest>,
) -> Result<Vec<AllocationManifest>> {
    let mut released = Vec::new();
    for m in held {
        let pool = PoolRef {
            namespace: m.metadata.namespace.clone(),
            name: m.spec.pool.clone(),
        };
        let guard = OwnerFilter::exactly(&m.spec.owner);
        match alloc::release_address(store, &pool, m.spec.address, &guard) {
            Ok(Released::Deleted(m)) => released.push(*m),
            Ok(Released::NotHeld) | Err(Error::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(released)
}

/// Everything the uid holds in the selected scopes, read from the files the store's owner
/// index cannot rule out.
fn release_uid(
    store: &dyn Store,
    g: &GlobalArgs,
    filter: &OwnerFilter,
) -> Result<Vec<AllocationManifest>> {
    let mut released = Vec::new();
    for ns in super::scopes(store, g)? {
        let held = alloc::allocations_of(store, ns.as_ref(), None, filter)?;
        released.extend(release_all(store, held)?);
    }
    if released.is_empty() {
        eprintln!("note: nothing held by that uid; nothing to release");
    }
    Ok(released)
}
