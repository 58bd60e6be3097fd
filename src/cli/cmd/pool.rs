//! `ipamctl pool create|list|show|delete`.

use std::io::Write;

use serde::Serialize;

use super::pool_status::{excludes, vpc_of, with_status};
use crate::cli::output::{self, Action, Change, Named};
use crate::cli::{
    GlobalArgs, OutputFormat, PoolCommand, PoolCreateArgs, PoolDeleteArgs, PoolShowArgs,
};
use crate::engine::admin::{self, CreatePublicPoolInput, DeletePoolInput, PoolDelete, PublicPool};
use crate::engine::scope::Scope;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::PoolManifest;
use crate::model::PoolRef;
use crate::model::candidates::{Usage, readable_count, readable_with_exact};
use crate::store::Store;
use crate::yaml;

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    command: &PoolCommand,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        PoolCommand::Create(arg) => create(store, g, arg, out),
        PoolCommand::List => list(store, g, out),
        PoolCommand::Show(arg) => show(store, g, arg, out),
        PoolCommand::Delete(arg) => delete(store, g, arg, out),
    }
}

/// `pool create`: a public pool, through the engine call the API's `createPublicPool` makes.
fn create(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &PoolCreateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let pool = PublicPool::new(&create_input(g, args)?)?;
    let (manifest, put) = admin::create_public_pool(store, &Scope::everything(), &pool)?;
    show_created(&manifest, put, args.dry_run, g, out)
}

/// The input `pool create` stands for: exit 2 with `-n` (a public pool is cluster-scoped).
pub(crate) fn create_input(g: &GlobalArgs, args: &PoolCreateArgs) -> Result<CreatePublicPoolInput> {
    if g.namespace.is_some() {
        return Err(Error::usage(
            "a public pool is cluster-scoped: leave out `-n` (`apply` makes a namespace's pools)",
        ));
    }
    Ok(CreatePublicPoolInput {
        name: args.name.clone(),
        cidr: args.cidr.clone(),
        gateway: args.gateway.clone(),
        exclude: args.exclude.clone(),
        zone: args.zone.clone(),
        dry_run: args.dry_run,
    })
}

/// Prints what `pool create` did (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show_created(
    manifest: &PoolManifest,
    put: crate::engine::subnet::Put,
    dry_run: bool,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let action = Action::from(put).planned(dry_run);
    output::write_changes(out, g.output, &[Change::new(manifest, action)], true)
}

/// The `status` of `pool show`: the usage figures (in table order), then the free ranges.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShowStatus {
    #[serde(flatten)]
    usage: Usage,
    free_ranges: Vec<String>,
    /// The pool's stored subnets with their usage, by name (absent when it has none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    subnets: Vec<ShownSubnet>,
}

/// A stored subnet in `pool show -o json|yaml`: its name and prefix, then its usage as
/// `subnet show` counts it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ShownSubnet {
    pub name: String,
    pub cidr: String,
    #[serde(flatten)]
    pub status: crate::engine::subnet_usage::SubnetStatus,
}

/// A pool's `status` in `pool list -o json|yaml`: an address pool's usage, or a supernet's.
#[derive(Serialize)]
#[serde(untagged)]
enum ListStatus<'a> {
    Addresses(&'a Usage),
    Supernet(super::supernet::SupernetStatus),
}

/// Each pool's `status` for `pool list -o json|yaml`: a supernet's is its prefixes'
/// (claimed, largest free, free blocks), not an address pool's usage.
fn list_statuses<'a>(
    supernet: Supernet<'_>,
    pools: &'a [(PoolManifest, Usage)],
) -> Result<Vec<ListStatus<'a>>> {
    let mut statuses = Vec::new();
    for (m, u) in pools {
        statuses.push(if m.spec.kind == crate::model::PoolKind::Supernet {
            let usage = supernet(m)?;
            ListStatus::Supernet(super::supernet::status(&usage))
        } else {
            ListStatus::Addresses(u)
        });
    }
    Ok(statuses)
}

fn list(store: &dyn Store, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let scopes = super::scopes(store, g)?;
    let mut warnings = Warnings::default();
    let listed = crate::engine::pool::list(store, &scopes, &mut warnings);
    output::warn(&warnings);
    let pools = listed?;
    let supernet = |m: &PoolManifest| {
        let pool = PoolRef {
            namespace: m.metadata.namespace.clone(),
            name: super::flag("pool", crate::model::PoolName::new(&m.metadata.name))?,
        };
        crate::engine::supernet::usage(store, &pool, m)
    };
    show_list(&pools, &supernet, g, out)
}

/// A supernet's prefixes' usage, as `pool list` asks for it.
pub(crate) type Supernet<'a> = &'a dyn Fn(&PoolManifest) -> Result<crate::engine::prefix::Usage>;

/// Prints pools with their usage (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show_list(
    pools: &[(PoolManifest, Usage)],
    supernet: Supernet<'_>,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    if g.output.is_some() {
        let statuses = list_statuses(supernet, pools)?;
        let values: Vec<_> = pools
            .iter()
            .zip(statuses)
            .map(|((m, _), s)| with_status(m, s))
            .collect();
        if output::write_list(out, g.output, &values)? {
            return Ok(());
        }
    }
    if pools.is_empty() {
        output::diagnostic("No pools found.");
        return Ok(());
    }
    let wide = g.output == Some(OutputFormat::Wide);
    let rows = pools
        .iter()
        .map(|(m, u)| {
            let mut row = vec![
                output::or_dash(m.metadata.namespace.as_ref()),
                m.metadata.name.clone(),
                m.spec.kind.to_string(),
                m.spec.cidr.to_string(),
                output::or_dash(m.spec.zone.as_ref()),
                readable_count(u.candidates),
                u.allocated.to_string(),
                readable_count(u.free),
                format!("{:.1}%", u.percent_used),
            ];
            if m.spec.kind == crate::model::PoolKind::Supernet {
                // A supernet counts prefixes: its claims, and its free blocks by length.
                if let Ok(s) = supernet(m) {
                    row[5] = "-".into();
                    row[6] = s.claimed.len().to_string();
                    row[7] = super::supernet::free_cell(&s);
                    row[8] = "-".into();
                }
            }
            if wide {
                row.push(output::or_dash(m.spec.gateway));
                row.push(excludes(&m.spec));
            }
            row
        })
        .collect();
    let mut headers = vec![
        "NAMESPACE",
        "NAME",
        "KIND",
        "CIDR",
        "ZONE",
        "CANDIDATES",
        "ALLOCATED",
        "FREE",
        "USED",
    ];
    if wide {
        headers.extend(["GATEWAY", "EXCLUDE"]);
    }
    output::write(
        out,
        &output::table(&headers, rows, &[5, 6, 7, 8], g.no_headers),
    )
}

fn show(store: &dyn Store, g: &GlobalArgs, args: &PoolShowArgs, out: &mut dyn Write) -> Result<()> {
    let pool = super::pool_ref(g, &args.pool)?;
    let shown = crate::engine::pool::show(store, &Scope::everything(), &pool)?;
    let manifest = &shown.manifest;
    if manifest.spec.kind == crate::model::PoolKind::Supernet && !args.map {
        return super::supernet::show(store, g, &pool, manifest, out);
    }
    if args.map {
        return super::pool_map::draw(store, g, args, &pool, shown, out);
    }
    let within = super::pool_map::within(args, &pool, manifest)?;
    let (usage, free) = shown.usage(within);
    let subnets: Vec<ShownSubnet> = crate::engine::subnet_usage::list(
        store,
        std::slice::from_ref(&pool.namespace),
        Some(&pool.name),
    )?
    .into_iter()
    .map(|(s, status)| ShownSubnet {
        name: s.metadata.name.clone(),
        cidr: s.spec.cidr.to_string(),
        status,
    })
    .collect();
    let shown = PoolShown {
        pool: &pool,
        manifest,
        within,
        usage,
        free,
        subnets,
    };
    show_pool(shown, g, out)
}

/// What `pool show` prints of an address pool.
pub(crate) struct PoolShown<'a> {
    pub pool: &'a PoolRef,
    pub manifest: &'a PoolManifest,
    pub within: Option<ipnet::IpNet>,
    pub usage: Usage,
    pub free: Vec<String>,
    pub subnets: Vec<ShownSubnet>,
}

/// Prints an address pool (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show_pool(shown: PoolShown<'_>, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let PoolShown {
        pool,
        manifest,
        within,
        usage,
        free,
        subnets,
    } = shown;
    match g.output {
        Some(OutputFormat::Json) => {
            let status = ShowStatus {
                usage,
                free_ranges: free,
                subnets,
            };
            output::write(out, &output::json(&with_status(manifest, status)))
        }
        Some(OutputFormat::Yaml) => {
            let status = ShowStatus {
                usage,
                free_ranges: free,
                subnets,
            };
            output::write(out, &yaml::encode(&with_status(manifest, status)))
        }
        Some(OutputFormat::Name) => output::line(out, &manifest.resource()),
        Some(OutputFormat::Table | OutputFormat::Wide) | None => {
            let mut fields = fields(manifest, &usage, &free, within);
            if let (Some(vpc), Some(uid)) =
                (vpc_of(pool, manifest), crate::model::vpc::vpc_uid(manifest))
            {
                fields.insert(2, ("VPC", format!("{vpc} (uid {uid})")));
            }
            for (key, value) in fields {
                output::line(out, &format!("{:<12} {value}", format!("{key}:")))?;
            }
            // Shown only when it has some, so a pool without subnets reads as it did.
            if !subnets.is_empty() {
                output::line(out, "Subnets:")?;
                let width = subnets.iter().map(|s| s.name.len()).max().unwrap_or(0);
                let cidrs = subnets.iter().map(|s| s.cidr.len()).max().unwrap_or(0);
                for s in &subnets {
                    let u = &s.status.usage;
                    output::line(
                        out,
                        &format!(
                            "  {:<width$}  {:<cidrs$}  {} of {} candidates allocated, {} free ({:.1}% used)",
                            s.name,
                            s.cidr,
                            u.allocated,
                            readable_count(u.candidates),
                            readable_count(u.free),
                            u.percent_used
                        ),
                    )?;
                }
            }
            Ok(())
        }
    }
}

/// The `Key: value` lines of `pool show` in table form.
fn fields(
    manifest: &PoolManifest,
    usage: &Usage,
    free: &[String],
    within: Option<ipnet::IpNet>,
) -> Vec<(&'static str, String)> {
    let spec = &manifest.spec;
    let mut fields = vec![
        ("Name", manifest.metadata.name.clone()),
        (
            "Namespace",
            output::or_dash(manifest.metadata.namespace.as_ref()),
        ),
        ("Kind", spec.kind.to_string()),
        ("CIDR", spec.cidr.to_string()),
        ("Gateway", output::or_dash(spec.gateway)),
        ("Exclude", excludes(spec)),
        ("Zone", output::or_dash(spec.zone.as_ref())),
        ("Candidates", readable_with_exact(usage.candidates)),
        ("Allocated", usage.allocated.to_string()),
        (
            "Free",
            format!(
                "{} ({:.1}% used)",
                readable_with_exact(usage.free),
                usage.percent_used
            ),
        ),
        (
            "Free ranges",
            if free.is_empty() {
                "none".into()
            } else {
                free.join(", ")
            },
        ),
    ];
    // Shown only when set, so a pool without them reads as it always did.
    let extra = [
        (
            "Reuse after",
            spec.reuse_after.as_ref().map(|r| r.to_string()),
        ),
        ("Within", within.map(|w| w.to_string())),
        (
            "Pick",
            (!spec.pick.is_lowest()).then(|| spec.pick.to_string()),
        ),
    ];
    let mut at = 7; // after Zone
    for (key, value) in extra {
        if let Some(value) = value {
            fields.insert(at, (key, value));
            at += 1;
        }
    }
    fields
}

fn delete(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &PoolDeleteArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let request = PoolDelete::new(&delete_input(g, args))?;
    let manifest = admin::delete_pool(store, &Scope::everything(), &request)?;
    show_deleted(&manifest, args.dry_run, g, out)
}

/// The input `pool delete` stands for.
pub(crate) fn delete_input(g: &GlobalArgs, args: &PoolDeleteArgs) -> DeletePoolInput {
    DeletePoolInput {
        name: args.pool.clone(),
        namespace: g.namespace.clone(),
        dry_run: args.dry_run,
    }
}

/// Prints what `pool delete` deleted (here, or answered by a server:
/// [`crate::cli::remote`]).
pub(crate) fn show_deleted(
    manifest: &PoolManifest,
    dry_run: bool,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let action = Action::Deleted.planned(dry_run);
    output::write_changes(out, g.output, &[Change::new(manifest, action)], true)
}
