//! `ipamctl list`: allocations, sorted by namespace (cluster first), pool, then address.

use std::io::Write;

use crate::alloc;
use crate::cli::{GlobalArgs, ListArgs, OutputFormat};
use crate::error::Result;
use crate::model::{AllocationManifest, PoolName, parse_allocation_name};
use crate::store::{ObjectKind, Store};
use crate::{output, yaml};

/// Reads every allocation of the selected scopes that passes the filters, sorted.
pub fn collect(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &ListArgs,
) -> Result<Vec<AllocationManifest>> {
    let pool = args
        .pool
        .as_deref()
        .map(|p| super::flag("--pool", PoolName::new(p)))
        .transpose()?;
    let filter = super::owner_filter(args.owner.as_deref(), args.uid.as_deref())?;
    let address = args
        .address
        .as_deref()
        .map(|a| super::address("--address", a))
        .transpose()?;
    let mut found = Vec::new();
    for ns in super::scopes(store, g)? {
        for entry in store.list(ObjectKind::Allocation, ns.as_ref())? {
            // Filter on the name first: only matching files are read.
            let Some((p, addr)) = parse_allocation_name(&entry.name) else {
                continue;
            };
            if pool.as_ref().is_some_and(|want| want.as_str() != p)
                || address.is_some_and(|a| a != addr)
            {
                continue;
            }
            match alloc::read_allocation(store, ns.as_ref(), &entry.name)? {
                Some((Ok(m), _)) if filter.matches(&m.spec.owner) => found.push(m),
                Some((Err(why), _)) => eprintln!(
                    "warning: {}: {why} (skipped; run `ipamctl check`)",
                    store.locate(ObjectKind::Allocation, ns.as_ref(), &entry.name)
                ),
                _ => {}
            }
        }
    }
    found.sort_by(|a, b| {
        (&a.metadata.namespace, &a.spec.pool, a.spec.address).cmp(&(
            &b.metadata.namespace,
            &b.spec.pool,
            b.spec.address,
        ))
    });
    Ok(found)
}

pub fn run(store: &dyn Store, g: &GlobalArgs, args: &ListArgs, out: &mut dyn Write) -> Result<()> {
    let found = collect(store, g, args)?;
    match g.output {
        Some(OutputFormat::Json) => output::write(out, &output::json(&found)),
        Some(OutputFormat::Yaml) => output::write(out, &yaml::encode_stream(&found)),
        Some(OutputFormat::Table) | None => {
            if found.is_empty() {
                eprintln!("No allocations found.");
                return Ok(());
            }
            let rows = found
                .iter()
                .map(|m| {
                    let owner = &m.spec.owner;
                    vec![
                        output::or_dash(m.metadata.namespace.as_ref()),
                        m.spec.pool.to_string(),
                        m.spec.address.to_string(),
                        owner.to_string(),
                        output::or_dash(owner.uid()),
                    ]
                })
                .collect();
            output::write(
                out,
                &output::table(&["NAMESPACE", "POOL", "ADDRESS", "OWNER", "UID"], rows, &[]),
            )
        }
    }
}
