//! `ipamctl list`: allocations, sorted by namespace (cluster first), pool, then address.

use std::io::Write;

use crate::alloc;
use crate::cli::{GlobalArgs, ListArgs, OutputFormat};
use crate::error::Result;
use crate::model::{AllocationManifest, PoolName, parse_allocation_name};
use crate::parallel::parallel_map;
use crate::store::{ObjectKind, Store};
use crate::{output, yaml};

/// Reads every allocation of the selected scopes that passes the filters, sorted.
///
/// Only files whose name matches `--pool` and `--address` are read, spread over the cores
/// (reading and decoding thousands of small files is all this command does); with `--owner`
/// or `--uid`, only the files the store's owner look-up cannot rule out. Warnings about
/// broken files come in listing order, as from a single thread.
pub fn collect(
    store: &(dyn Store + Sync),
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
        let ns = ns.as_ref();
        if !filter.is_empty() {
            // The owner index answers which files can match: only those are read.
            let held = alloc::allocations_of(store, ns, pool.as_ref(), &filter)?;
            found.extend(
                held.into_iter()
                    .filter(|m| address.is_none_or(|a| a == m.spec.address)),
            );
            continue;
        }
        let names: Vec<String> = store
            .list(ObjectKind::Allocation, ns)?
            .into_iter()
            .filter(|name| {
                parse_allocation_name(name).is_some_and(|(p, addr)| {
                    pool.as_ref().is_none_or(|want| want.as_str() == p)
                        && address.is_none_or(|a| a == addr)
                })
            })
            .collect();
        let read = parallel_map(&names, |name| alloc::read_allocation(store, ns, name));
        for (name, outcome) in names.iter().zip(read) {
            match outcome? {
                Some(Ok(m)) => found.push(m),
                Some(Err(why)) => eprintln!(
                    "warning: {}: {why} (skipped; run `ipamctl check`)",
                    store.locate(ObjectKind::Allocation, ns, name)
                ),
                None => {}
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

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ListArgs,
    out: &mut dyn Write,
) -> Result<()> {
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
