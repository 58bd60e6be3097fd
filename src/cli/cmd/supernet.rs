//! `pool show` and `pool list` of a supernet pool: its claimed prefixes, the largest free
//! block and the exact count of free blocks of each handed-out length.

use std::io::Write;

use serde::Serialize;

use crate::cli::output;
use crate::cli::report::{FreeBlocks, free_blocks};
use crate::cli::{GlobalArgs, OutputFormat};
use crate::engine::prefix::Usage;
use crate::engine::range_holder::{Holder, VpcHolder};
use crate::error::Result;
use crate::model::candidates::readable_count;
use crate::model::{PoolManifest, PoolRef};
use crate::store::Store;
use crate::yaml;

/// The `status` of a supernet's `pool show -o json|yaml`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SupernetStatus {
    /// Claimed prefixes, lowest first.
    claimed: Vec<String>,
    /// The largest free block (absent when the pool is full).
    #[serde(skip_serializing_if = "Option::is_none")]
    largest_free: Option<String>,
    /// Free blocks of each handed-out length.
    free_blocks: Vec<FreeBlocks>,
    /// `pool show` only: each claim with its holder, lowest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    claims: Option<Vec<ClaimHolder>>,
}

/// A claimed prefix and who holds it, in `pool show -o json|yaml` of a supernet.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimHolder {
    prefix: String,
    /// The owner as stored (`VPC/router`).
    owner: String,
    /// The owner's uid, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    /// The holder by name: `VPC tenant-1/prod/a1` for a VPC's range, else the owner.
    holder: String,
    /// The VPC whose range it is: namespace, name and uid.
    #[serde(skip_serializing_if = "Option::is_none")]
    vpc: Option<VpcHolder>,
}

/// `Free /56: 255, /64: 65280` as one cell.
pub fn free_cell(usage: &Usage) -> String {
    let counts: Vec<String> = usage
        .free
        .iter()
        .map(|(len, n)| format!("/{len}: {}", readable_count(*n)))
        .collect();
    counts.join(", ")
}

/// A supernet's `status`, as `pool show` and `pool list` print it in JSON and YAML.
pub fn status(usage: &Usage) -> SupernetStatus {
    SupernetStatus {
        claimed: usage.claimed.iter().map(|p| p.to_string()).collect(),
        largest_free: usage.largest.map(|b| b.to_string()),
        free_blocks: free_blocks(usage),
        claims: None,
    }
}

/// `pool show` of a supernet.
pub fn show(
    store: &dyn Store,
    g: &GlobalArgs,
    pool: &PoolRef,
    manifest: &PoolManifest,
    out: &mut dyn Write,
) -> Result<()> {
    let (usage, claims) = crate::engine::supernet::show(store, pool, manifest)?;
    let held: Vec<_> = claims
        .into_iter()
        .map(|(c, h)| (c.spec.prefix, h))
        .collect();
    print(manifest, &usage, &held, g, out)
}

/// Prints a supernet as `pool show` does (here, or answered by a server:
/// [`crate::cli::remote`]): its free space `usage` and its claims `held`, lowest first.
pub(crate) fn print(
    manifest: &PoolManifest,
    usage: &Usage,
    held: &[(ipnet::IpNet, Holder)],
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let mut status = status(usage);
    status.claims = Some(
        held.iter()
            .map(|(prefix, h)| ClaimHolder {
                prefix: prefix.to_string(),
                owner: h.owner.to_string(),
                uid: h.owner.uid().map(|u| u.to_string()),
                holder: h.display(),
                vpc: h.vpc.clone(),
            })
            .collect(),
    );
    match g.output {
        Some(OutputFormat::Json) => output::write(
            out,
            &output::json(&super::pool_status::with_status(manifest, status)),
        ),
        Some(OutputFormat::Yaml) => output::write(
            out,
            &yaml::encode(&super::pool_status::with_status(manifest, status)),
        ),
        Some(OutputFormat::Name) => output::line(out, &output::Named::resource(manifest)),
        Some(OutputFormat::Table | OutputFormat::Wide) | None => {
            let spec = &manifest.spec;
            let bounds = spec.prefix_lengths.unwrap_or_default().range(spec.cidr);
            let fields = [
                ("Name", manifest.metadata.name.clone()),
                (
                    "Namespace",
                    output::or_dash(manifest.metadata.namespace.as_ref()),
                ),
                ("Kind", spec.kind.to_string()),
                ("CIDR", spec.cidr.to_string()),
                (
                    "Lengths",
                    format!("/{} to /{}", bounds.start(), bounds.end()),
                ),
                ("Exclude", super::pool_status::excludes(spec)),
                ("Claimed", format!("{} prefixes", usage.claimed.len())),
                (
                    "Largest free",
                    usage
                        .largest
                        .map_or_else(|| "none".into(), |b| b.to_string()),
                ),
                ("Free blocks", free_cell(usage)),
            ];
            for (key, value) in fields {
                output::line(out, &format!("{:<13} {value}", format!("{key}:")))?;
            }
            // Each claim under the fields, with its holder by name.
            let width = held
                .iter()
                .map(|(p, _)| p.to_string().len())
                .max()
                .unwrap_or(0);
            for (prefix, h) in held {
                let prefix = prefix.to_string();
                output::line(out, &format!("  {prefix:<width$}  {}", h.display()))?;
            }
            Ok(())
        }
    }
}
