//! `ipamctl report`: every pool's usage, map, free ranges, subnets and largest holders;
//! `-o html` writes them as one self-contained page.

use std::io::Write;

use crate::cli::output;
use crate::cli::report::{self, PoolReport};
use crate::cli::{FormatArg, GlobalArgs, OutputFormat};
use crate::error::Result;
use crate::model::candidates::readable_count;
use crate::model::{AllocationManifest, Owner, OwnerFilter, PoolKind, PoolName, PoolRef, Uid};
use crate::store::Store;

/// Names a VPC router among `entry`'s largest holders (its uplinks: `VPC/router` with the
/// VPC's uid) as its VPC, `VPC NAMESPACE/NAME` ([`crate::engine::range_holder`]).
fn name_vpc_routers(store: &dyn Store, entry: &mut PoolReport) -> Result<()> {
    let mut resolver = crate::engine::range_holder::Holders::new(store);
    for h in &mut entry.status.largest_holders {
        let Some(uid) = h.uid.as_deref().and_then(|u| Uid::new(u).ok()) else {
            continue;
        };
        if h.owners != ["VPC/router"] {
            continue;
        }
        let Ok(owner) = Owner::parse("VPC/router", Some(uid)) else {
            continue;
        };
        let named = resolver.of_owner(&owner, None)?;
        if named.vpc.is_some() {
            h.holder = named.display();
            h.owners = vec![named.display()];
        }
    }
    Ok(())
}

pub fn run(store: &dyn Store, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let mut pools = Vec::new();
    for ns in super::scopes(store, g)? {
        let ns_ref = ns.as_ref();
        // Printed scope by scope, after the warnings of reading that scope's allocations.
        let mut warnings = crate::engine::warning::Warnings::default();
        let held = crate::engine::allocate::allocations_of(
            store,
            ns_ref,
            None,
            &OwnerFilter::default(),
            &mut warnings,
        );
        output::warn(&warnings);
        let held = held?;
        let mut warnings = crate::engine::warning::Warnings::default();
        let read = crate::engine::pool::pools_of(store, ns_ref, &mut warnings);
        output::warn(&warnings);
        let mut subnets =
            crate::engine::subnet_usage::list(store, std::slice::from_ref(&ns), None)?;
        for manifest in read? {
            let mine: Vec<AllocationManifest> = held
                .iter()
                .filter(|m| m.spec.pool.as_str() == manifest.metadata.name)
                .cloned()
                .collect();
            let (theirs, rest) = subnets
                .into_iter()
                .partition(|(s, _)| s.spec.pool.as_str() == manifest.metadata.name);
            subnets = rest;
            let claims = if manifest.spec.kind == PoolKind::Supernet {
                let pool = PoolRef {
                    namespace: manifest.metadata.namespace.clone(),
                    name: super::flag("pool", PoolName::new(&manifest.metadata.name))?,
                };
                let mut resolver = crate::engine::range_holder::Holders::new(store);
                let mut claims = Vec::new();
                for c in crate::engine::prefix::pool_claims(store, &pool)? {
                    let holder = resolver.of(&c)?;
                    claims.push((c, holder));
                }
                claims
            } else {
                Vec::new()
            };
            let mut entry = report::pool_report(manifest, &mine, theirs, &claims);
            name_vpc_routers(store, &mut entry)?;
            pools.push(entry);
        }
    }
    if g.format == Some(FormatArg::Html) {
        return output::write(out, &report::html::page("ipamctl report", &pools));
    }
    if output::write_list(out, g.output, &pools)? {
        return Ok(());
    }
    table(&pools, g, out)
}

fn table(pools: &[PoolReport], g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    if pools.is_empty() {
        output::diagnostic("No pools found.");
        return Ok(());
    }
    let wide = g.output == Some(OutputFormat::Wide);
    let rows = pools
        .iter()
        .map(|p| {
            let m = &p.manifest;
            let s = &p.status;
            // A supernet's row counts prefixes: claimed, the largest free block, the share
            // of its addresses claimed.
            let (allocated, free, used) = match &s.prefixes {
                Some(p) => (
                    format!("{} prefixes", p.claimed.len()),
                    p.largest_free
                        .as_ref()
                        .map_or_else(|| "none".into(), |b| format!("largest {b}")),
                    format!("{:.1}%", p.percent_claimed),
                ),
                None => (
                    s.usage.allocated.to_string(),
                    readable_count(s.usage.free),
                    format!("{:.1}%", s.usage.percent_used),
                ),
            };
            let mut row = vec![
                output::or_dash(m.metadata.namespace.as_ref()),
                m.metadata.name.clone(),
                m.spec.cidr.to_string(),
                allocated,
                free,
                used,
                s.largest_holder(),
            ];
            if wide {
                row.push(if s.free_ranges.is_empty() {
                    "none".into()
                } else {
                    s.free_ranges.join(",")
                });
            }
            row
        })
        .collect();
    let mut headers = vec![
        "NAMESPACE",
        "NAME",
        "CIDR",
        "ALLOCATED",
        "FREE",
        "USED",
        "LARGEST HOLDER",
    ];
    if wide {
        headers.push("FREE RANGES");
    }
    output::write(
        out,
        &output::table(&headers, rows, &[3, 4, 5], g.no_headers),
    )
}
