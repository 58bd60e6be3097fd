//! `ipamctl pool list|show|delete`.

use std::io::{IsTerminal, Write};
use std::net::IpAddr;

use serde::Serialize;

use crate::cli::map::{self, Map};
use crate::cli::output::{self, Action, Change, Named};
use crate::cli::{FormatArg, GlobalArgs, OutputFormat, PoolCommand, PoolDeleteArgs, PoolShowArgs};
use crate::error::{Error, Result};
use crate::model::candidates::{Candidates, Usage, readable_count};
use crate::model::{Namespace, PoolManifest, PoolName};
use crate::model::{PoolRef, pool_addresses};
use crate::store::{self, LockMode, ObjectKind, Store};
use crate::yaml;

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    command: &PoolCommand,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        PoolCommand::List => list(store, g, out),
        PoolCommand::Show(arg) => show(store, g, arg, out),
        PoolCommand::Delete(arg) => delete(store, g, arg, out),
    }
}

/// Addresses taken in `pool`, from the listing alone (no file is read).
fn taken(store: &dyn Store, ns: Option<&Namespace>, pool: &PoolName) -> Result<Vec<IpAddr>> {
    let names = store.list(ObjectKind::Allocation, ns)?;
    Ok(pool_addresses(&names, pool).collect())
}

/// `spec.exclude` as a table cell.
fn excludes(spec: &crate::model::PoolSpec) -> String {
    if spec.exclude.is_empty() {
        return "-".into();
    }
    let all: Vec<String> = spec.exclude.iter().map(|e| e.to_string()).collect();
    all.join(", ")
}

impl<S> Named for WithStatus<'_, S> {
    fn resource(&self) -> String {
        self.manifest.resource()
    }
}

/// A pool manifest with `status` added after `spec`; the manifest keeps its file key order.
#[derive(Serialize)]
struct WithStatus<'a, S> {
    #[serde(flatten)]
    manifest: &'a PoolManifest,
    status: S,
}

/// The manifest with `status` added.
fn with_status<S: Serialize>(manifest: &PoolManifest, status: S) -> WithStatus<'_, S> {
    WithStatus { manifest, status }
}

/// The `status` of `pool show`: the usage figures (in table order), then the free ranges.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShowStatus {
    #[serde(flatten)]
    usage: Usage,
    free_ranges: Vec<String>,
}

/// The pools of scope `ns` in name order; one that does not parse, or has an invalid name,
/// is warned about and skipped.
pub(super) fn pools_of(store: &dyn Store, ns: Option<&Namespace>) -> Result<Vec<PoolManifest>> {
    let mut names = store.list(ObjectKind::Pool, ns)?;
    names.sort();
    let mut pools = Vec::new();
    for name in names {
        let Ok(name) = PoolName::new(&name) else {
            eprintln!(
                "warning: {}: not a valid pool name (skipped; run `ipamctl check`)",
                store.locate(ObjectKind::Pool, ns, &name)
            );
            continue;
        };
        let pool = PoolRef {
            namespace: ns.cloned(),
            name,
        };
        match crate::store::read::load_pool(store, &pool) {
            Ok(m) => pools.push(m),
            Err(Error::NotFound { .. }) => continue, // deleted since the listing
            Err(e) => eprintln!("warning: {e} (skipped; run `ipamctl check`)"),
        }
    }
    Ok(pools)
}

fn list(store: &dyn Store, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let mut pools = Vec::new();
    for ns in super::scopes(store, g)? {
        // Listed only if the store cannot count (the file store: one listing per scope).
        let mut entries: Option<Vec<String>> = None;
        for manifest in pools_of(store, ns.as_ref())? {
            let name = manifest.name();
            let candidates = Candidates::of_pool(&manifest.spec);
            let usage = match store.count_held(ns.as_ref(), &name, &candidates)? {
                Some((allocated, held)) => Usage::from_counts(&candidates, allocated, held),
                None => {
                    let entries = match &mut entries {
                        Some(e) => e,
                        None => entries.insert(store.list(ObjectKind::Allocation, ns.as_ref())?),
                    };
                    let taken: Vec<IpAddr> = pool_addresses(entries, &name).collect();
                    Usage::of(&manifest.spec, &taken)
                }
            };
            pools.push((manifest, usage));
        }
    }
    let values: Vec<_> = pools.iter().map(|(m, u)| with_status(m, u)).collect();
    if output::write_list(out, g.output, &values)? {
        return Ok(());
    }
    {
        {
            if pools.is_empty() {
                eprintln!("No pools found.");
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
    }
}

fn show(store: &dyn Store, g: &GlobalArgs, args: &PoolShowArgs, out: &mut dyn Write) -> Result<()> {
    let pool = super::pool_ref(g, &args.pool)?;
    let manifest = crate::store::read::load_pool(store, &pool)?;
    let taken = taken(store, pool.namespace.as_ref(), &pool.name)?;
    if args.map {
        return draw(store, g, args, &pool, &manifest, &taken, out);
    }
    let within = within(args, &pool, &manifest)?;
    let (usage, candidates) = match within {
        Some(w) => (
            Usage::within(&manifest.spec, w, &taken),
            Candidates::of_pool(&manifest.spec).within(w),
        ),
        None => (
            Usage::of(&manifest.spec, &taken),
            Candidates::of_pool(&manifest.spec),
        ),
    };
    let free = candidates.format_spans(&candidates.clone().without(taken.iter().copied()).spans());
    match g.output {
        Some(OutputFormat::Json) => {
            let status = ShowStatus {
                usage,
                free_ranges: free,
            };
            output::write(out, &output::json(&with_status(&manifest, status)))
        }
        Some(OutputFormat::Yaml) => {
            let status = ShowStatus {
                usage,
                free_ranges: free,
            };
            output::write(out, &yaml::encode(&with_status(&manifest, status)))
        }
        Some(OutputFormat::Name) => output::line(out, &manifest.resource()),
        Some(OutputFormat::Table | OutputFormat::Wide) | None => {
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
            ];
            let mut at = 7; // after Zone
            for (key, value) in extra {
                if let Some(value) = value {
                    fields.insert(at, (key, value));
                    at += 1;
                }
            }
            for (key, value) in fields {
                output::line(out, &format!("{:<12} {value}", format!("{key}:")))?;
            }
            Ok(())
        }
    }
}

/// `--within` of `pool show`, checked to lie inside the pool (exit 2 if not).
fn within(
    args: &PoolShowArgs,
    pool: &PoolRef,
    manifest: &PoolManifest,
) -> Result<Option<ipnet::IpNet>> {
    let cidr = manifest.spec.cidr;
    let within = args
        .within
        .as_deref()
        .map(|w| super::prefix("--within", w))
        .transpose()?;
    if let Some(w) = within
        && !cidr.contains(&w)
    {
        return Err(Error::invalid(
            "--within",
            format!("`{w}` does not lie inside pool `{pool}` ({cidr})"),
        ));
    }
    Ok(within)
}

/// `pool show --map`: the address map, as text or (`-o svg`) an SVG document.
fn draw(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &PoolShowArgs,
    pool: &PoolRef,
    manifest: &PoolManifest,
    taken: &[IpAddr],
    out: &mut dyn Write,
) -> Result<()> {
    if let Some(format @ (FormatArg::Json | FormatArg::Yaml | FormatArg::Name)) = g.format {
        let name = match format {
            FormatArg::Json => "json",
            FormatArg::Yaml => "yaml",
            _ => "name",
        };
        return Err(Error::Usage {
            message: format!("`--map` draws text or `-o svg`, not `-o {name}`"),
            hint: Some(format!(
                "drop `--map` for the pool's data: ipamctl pool show {}",
                pool.name
            )),
        });
    }
    let cidr = manifest.spec.cidr;
    let within = within(args, pool, manifest)?;
    let view = within.unwrap_or(cidr);
    if !map::drawable(view) {
        return Err(Error::Usage {
            message: format!(
                "{view} is too large to draw (the map goes up to a /{})",
                map::LARGEST_VIEW
            ),
            hint: Some(format!(
                "narrow it: ipamctl pool show {}{} --map --within {}",
                pool.name,
                pool.namespace
                    .as_ref()
                    .map(|ns| format!(" -n {ns}"))
                    .unwrap_or_default(),
                ipnet::IpNet::new(view.network(), 16)
                    .expect("16 is a valid prefix length")
                    .trunc()
            )),
        });
    }
    let map = Map::new(&pool.to_string(), &manifest.spec, within, taken);
    if g.format == Some(FormatArg::Svg) {
        let map = if map.per_address() {
            map.with_owners(owners(store, pool)?)
        } else {
            map
        };
        return output::write(out, &map.svg());
    }
    let no_color = std::env::var_os("NO_COLOR");
    let colour = output::use_colour(
        args.color,
        std::io::stdout().is_terminal(),
        no_color.as_deref(),
    );
    output::write(out, &map.text(colour))
}

/// Who holds each address of `pool`, as `KIND/NAME (uid U)`: the tooltips of the SVG map.
pub(super) fn owners(store: &dyn Store, pool: &PoolRef) -> Result<Vec<(IpAddr, String)>> {
    let mut warnings = crate::engine::warning::Warnings::default();
    let held = crate::engine::allocate::allocations_of(
        store,
        pool.namespace.as_ref(),
        Some(&pool.name),
        &crate::model::OwnerFilter::default(),
        &mut warnings,
    )?;
    output::warn(&warnings);
    Ok(held
        .into_iter()
        .map(|m| (m.spec.address, m.spec.owner.with_uid()))
        .collect())
}

fn delete(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &PoolDeleteArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let pool = super::pool_ref(g, &args.pool)?;
    let manifest = crate::store::read::load_pool(store, &pool)?;
    if args.dry_run {
        delete_locked(store, &pool, true)?;
    } else {
        store::atomically(store, || delete_locked(store, &pool, false))?;
    }
    let action = Action::Deleted.planned(args.dry_run);
    output::write_changes(out, g.output, &[Change::new(manifest, action)], true)
}

/// Deletes `pool` under its exclusive lock if no allocation holds an address in it; a dry
/// run only checks, without the lock.
fn delete_locked(store: &dyn Store, pool: &PoolRef, dry_run: bool) -> Result<()> {
    let ns = pool.namespace.as_ref();
    // Exclusive: no allocate can be between reading this pool and claiming (invariant 6).
    let _lock = (!dry_run)
        .then(|| store.lock_pool(ns, &pool.name, LockMode::Exclusive))
        .transpose()?;
    let held = taken(store, ns, &pool.name)?.len();
    if held > 0 {
        return Err(Error::Conflict {
            message: format!(
                "pool `{pool}` still has {held} allocation{}",
                if held == 1 { "" } else { "s" }
            ),
            hint: Some(format!(
                "release them first: ipamctl list --pool {}{}",
                pool.name,
                ns.map(|n| format!(" -n {n}")).unwrap_or_default()
            )),
        });
    }
    if !dry_run {
        // Its subnets and cooldown records are part of it: they go first, so a crash leaves
        // the pool (and running the command again finishes the job), never an orphan.
        crate::engine::subnet::delete_of_pool(store, pool)?;
        crate::engine::cooldown::forget_pool(store, pool)?;
        if !store.delete(ObjectKind::Pool, ns, pool.name.as_str())? {
            return Err(crate::store::read::pool_not_found(store, pool));
        }
    }
    Ok(())
}

/// A count as [`readable_count`] writes it, with the exact value after it when that differs:
/// `2^64 - 4 (18446744073709551612)`.
fn readable_with_exact(n: u128) -> String {
    match readable_count(n) {
        short if short == n.to_string() => short,
        short => format!("{short} ({n})"),
    }
}
