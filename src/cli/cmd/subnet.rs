//! `ipamctl subnet create|list|show|delete`.

use std::io::Write;

use serde::Serialize;

use crate::cli::output::{self, Action, Change, Named};
use crate::cli::{
    GlobalArgs, OutputFormat, SubnetCommand, SubnetCreateArgs, SubnetDeleteArgs, SubnetListArgs,
    SubnetNameArgs,
};
use crate::engine::admin::{
    self, CreateSubnetInput, DeleteSubnetInput, Deletion, SubnetCreate, SubnetDelete,
};
use crate::engine::scope::Scope;
use crate::engine::subnet::Put;
use crate::engine::subnet_usage::SubnetStatus;
use crate::error::Result;
use crate::model::PoolRef;
use crate::model::candidates::{readable_count, readable_with_exact};
use crate::model::subnet::SubnetManifest;
use crate::model::{PoolName, SubnetName};
use crate::store::Store;
use crate::yaml;

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    command: &SubnetCommand,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        SubnetCommand::Create(args) => create(store, g, args, out),
        SubnetCommand::List(args) => list(store, g, args, out),
        SubnetCommand::Show(args) => show(store, g, args, out),
        SubnetCommand::Delete(args) => delete(store, g, args, out),
    }
}

/// A subnet's name, validated (exit 2 naming `NAME`).
pub(crate) fn name(s: &str) -> Result<SubnetName> {
    super::flag("NAME", SubnetName::new(s))
}

fn create(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &SubnetCreateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let request = SubnetCreate::new(&create_input(g, args))?;
    let (manifest, put) = admin::create_subnet(store, &Scope::everything(), &request)?;
    show_created(&manifest, put, args, g, out)
}

/// `subnet create`'s arguments as the engine's input.
pub(crate) fn create_input(g: &GlobalArgs, args: &SubnetCreateArgs) -> CreateSubnetInput {
    CreateSubnetInput {
        name: args.name.clone(),
        namespace: g.namespace.clone(),
        pool: args.pool.clone(),
        cidr: args.cidr.clone(),
        prefix_length: args.prefix_length,
        gateway: args.gateway.clone(),
        reserved: args.reserved.clone(),
        dry_run: args.dry_run,
    }
}

/// Prints what `subnet create` did (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show_created(
    manifest: &SubnetManifest,
    put: Put,
    args: &SubnetCreateArgs,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let action = Action::from(put).planned(args.dry_run);
    if g.output.is_some() {
        return output::write_changes(out, g.output, &[Change::new(manifest, action)], true);
    }
    output::diagnostic(&format!("{} {action}", manifest.resource()));
    // A carved subnet prints its prefix (it was chosen), a given one its gateway.
    if args.cidr.is_none() {
        return output::line(out, &manifest.spec.cidr.to_string());
    }
    output::line(out, &manifest.gateway().to_string())
}

/// A subnet manifest with `status` after `spec`.
#[derive(Serialize)]
struct WithStatus<'a> {
    #[serde(flatten)]
    manifest: &'a SubnetManifest,
    status: &'a SubnetStatus,
}

impl Named for WithStatus<'_> {
    fn resource(&self) -> String {
        self.manifest.resource()
    }
}

/// The reserved entries as a table cell.
fn reserved(s: &SubnetManifest) -> String {
    if s.spec.reserved.is_empty() {
        return "-".into();
    }
    let all: Vec<String> = s.spec.reserved.iter().map(|r| r.to_string()).collect();
    all.join(", ")
}

fn list(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &SubnetListArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let pool = args
        .pool
        .as_deref()
        .map(|p| super::flag("--pool", PoolName::new(p)))
        .transpose()?;
    let scopes = super::scopes(store, g)?;
    let listed = crate::engine::subnet_usage::list(store, &scopes, pool.as_ref())?;
    show_list(&listed, g, out)
}

/// Prints `subnet list`'s subnets (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show_list(
    listed: &[(SubnetManifest, SubnetStatus)],
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let rows: Vec<WithStatus<'_>> = listed
        .iter()
        .map(|(manifest, status)| WithStatus { manifest, status })
        .collect();
    if output::write_list(out, g.output, &rows)? {
        return Ok(());
    }
    if rows.is_empty() {
        output::diagnostic("No subnets found.");
        return Ok(());
    }
    let table = rows
        .iter()
        .map(|r| {
            let (m, u) = (r.manifest, &r.status.usage);
            vec![
                output::or_dash(m.metadata.namespace.as_ref()),
                m.metadata.name.clone(),
                m.spec.pool.to_string(),
                m.spec.cidr.to_string(),
                m.gateway().to_string(),
                reserved(m),
                readable_count(u.candidates),
                u.allocated.to_string(),
                readable_count(u.free),
                format!("{:.1}%", u.percent_used),
            ]
        })
        .collect();
    let headers = [
        "NAMESPACE",
        "NAME",
        "POOL",
        "CIDR",
        "GATEWAY",
        "RESERVED",
        "CANDIDATES",
        "ALLOCATED",
        "FREE",
        "USED",
    ];
    output::write(
        out,
        &output::table(&headers, table, &[6, 7, 8, 9], g.no_headers),
    )
}

fn show(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &SubnetNameArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let ns = super::namespace(g)?;
    let (s, status) = crate::engine::subnet_usage::show(store, ns.as_ref(), &name(&args.name)?)?;
    show_one(&s, &status, g, out)
}

/// Prints `subnet show`'s subnet (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show_one(
    s: &SubnetManifest,
    status: &SubnetStatus,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let shown = WithStatus {
        manifest: s,
        status,
    };
    match g.output {
        Some(OutputFormat::Json) => output::write(out, &output::json(&shown)),
        Some(OutputFormat::Yaml) => output::write(out, &yaml::encode(&shown)),
        Some(OutputFormat::Name) => output::line(out, &s.resource()),
        Some(OutputFormat::Table | OutputFormat::Wide) | None => {
            let u = &shown.status.usage;
            let free = &shown.status.free_ranges;
            let fields = [
                ("Name", s.metadata.name.clone()),
                ("Namespace", output::or_dash(s.metadata.namespace.as_ref())),
                ("Pool", s.spec.pool.to_string()),
                ("CIDR", s.spec.cidr.to_string()),
                ("Gateway", s.gateway().to_string()),
                ("Reserved", reserved(s)),
                ("Candidates", readable_with_exact(u.candidates)),
                ("Allocated", u.allocated.to_string()),
                (
                    "Free",
                    format!(
                        "{} ({:.1}% used)",
                        readable_with_exact(u.free),
                        u.percent_used
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
            for (key, value) in fields {
                output::line(out, &format!("{:<12} {value}", format!("{key}:")))?;
            }
            Ok(())
        }
    }
}

fn delete(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &SubnetDeleteArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let request = SubnetDelete::new(&delete_input(g, args))?;
    let deleted = admin::delete_subnet(store, &Scope::everything(), &request)?;
    show_deleted(deleted, args.dry_run, g, out)
}

/// `subnet delete`'s arguments as the engine's input.
pub(crate) fn delete_input(g: &GlobalArgs, args: &SubnetDeleteArgs) -> DeleteSubnetInput {
    DeleteSubnetInput {
        name: args.name.clone(),
        namespace: g.namespace.clone(),
        ignore_not_found: args.ignore_not_found,
        dry_run: args.dry_run,
    }
}

/// Prints what `subnet delete` did (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show_deleted(
    deleted: Deletion<SubnetManifest>,
    dry_run: bool,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let deleted = match deleted {
        Deletion::Deleted(deleted) => deleted,
        Deletion::Absent(message) => {
            output::diagnostic(&format!("note: {message}; nothing to delete"));
            return Ok(());
        }
    };
    let action = Action::Deleted.planned(dry_run);
    output::write_changes(out, g.output, &[Change::new(&deleted, action)], true)
}

/// The pool of a stored subnet, for `list --subnet`.
pub(super) fn pool_and_prefix(
    store: &dyn Store,
    g: &GlobalArgs,
    name_arg: &str,
) -> Result<(PoolRef, ipnet::IpNet)> {
    let ns = super::namespace(g)?;
    let s = crate::engine::subnet::load(store, ns.as_ref(), &name(name_arg)?)?;
    Ok((s.pool(), s.spec.cidr))
}
