//! `ipamctl vpc create|get|list|delete`: a VPC, the private pools it owns (`vpc-NAME` for
//! its IPv4 range, `vpc-NAME-v6` for its IPv6 range; dual stack: both), and its router's
//! uplinks in public pools (allocations owned by `VPC/router` with the VPC's uid).

use std::io::Write;

use crate::cli::output::{self, Action, Change, Named};
use crate::cli::{GlobalArgs, OutputFormat, VpcCommand, VpcCreateArgs, VpcDeleteArgs};
use crate::engine::admin::{
    self, CreateVpcInput, DeleteVpcInput, Deletion, FromPoolInput, VpcCreate, VpcCreated, VpcDelete,
};
use crate::engine::scope::Scope;
use crate::engine::vpc::{Made, Removal, Vpc};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::vpc::pool_name;
use crate::model::{Namespace, PoolName, PoolRef};
use crate::store::Store;
use crate::yaml;

/// Both pools a VPC named `name` may own, IPv4 first.
pub(crate) fn vpc_pools(g: &GlobalArgs, name: &str) -> Result<(Namespace, [PoolRef; 2])> {
    let (ns, v4) = vpc_pool(g, name, false)?;
    let (_, v6) = vpc_pool(g, name, true)?;
    Ok((ns, [v4, v6]))
}

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
pub(crate) fn vpc_pool(g: &GlobalArgs, name: &str, v6: bool) -> Result<(Namespace, PoolRef)> {
    let ns = super::namespace(g)?.ok_or_else(|| Error::Usage {
        message: "a VPC lives in a tenant namespace: pass `-n NS`".into(),
        hint: None,
    })?;
    let pool = super::flag("NAME", PoolName::new(&pool_name(name, v6)))?;
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
    let (ns, _) = vpc_pool(g, &args.name, false)?;
    let input = create_input(args, &ns)?;
    let mut warnings = Warnings::default();
    let made = admin::create_vpc(
        store,
        &Scope::everything(),
        &VpcCreate::new(&input)?,
        &mut warnings,
    );
    output::warn(&warnings);
    show_created(made?, args.dry_run, g, out)
}

/// Prints what `vpc create` did (here, or answered by a server: [`crate::cli::remote`]):
/// with `-o`, the pools and what was done to each; else each object's line on stderr and
/// the VPC's uid.
pub(crate) fn show_created(
    made: VpcCreated,
    dry_run: bool,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let VpcCreated { created, uplink } = made;
    let done: Vec<_> = created
        .pools
        .iter()
        .map(|(m, made)| {
            let action = match made {
                Made::Existing => Action::Existing,
                Made::Created => Action::Created.planned(dry_run),
            };
            (m, action)
        })
        .collect();
    if g.output.is_some() {
        let changes: Vec<_> = done.iter().map(|(m, a)| Change::new(*m, *a)).collect();
        return output::write_changes(out, g.output, &changes, true);
    }
    for (claim, made) in &created.claims {
        let action = match made {
            Made::Existing => Action::Existing,
            Made::Created => Action::Created,
        };
        output::diagnostic(&format!(
            "ipprefixclaim/{} {action} ({} of pool `{}`)",
            claim.metadata.name, claim.spec.prefix, claim.spec.pool
        ));
    }
    for (m, action) in &done {
        output::diagnostic(&format!("ipampool/{} {action}", m.metadata.name));
    }
    if let Some(uplink) = &uplink {
        let m = uplink.manifest();
        output::diagnostic(&format!(
            "{} {} (uplink {} in pool `{}`)",
            m.resource(),
            super::allocate::action(uplink),
            m.spec.address,
            m.spec.pool
        ));
    }
    output::line(out, created.uid.as_str())
}

/// `vpc create`'s flags as the engine's input: each `--from-pool` with its `--prefix-length`.
pub(crate) fn create_input(args: &VpcCreateArgs, ns: &Namespace) -> Result<CreateVpcInput> {
    if args.from_pool.len() != args.prefix_length.len() {
        return Err(Error::invalid(
            "--prefix-length",
            format!(
                "give one per `--from-pool`, in the same order ({} `--from-pool`, {} `--prefix-length`)",
                args.from_pool.len(),
                args.prefix_length.len()
            ),
        ));
    }
    Ok(CreateVpcInput {
        name: args.name.clone(),
        namespace: ns.to_string(),
        cidrs: args.cidr.clone(),
        from_pools: args
            .from_pool
            .iter()
            .zip(&args.prefix_length)
            .map(|(pool, &prefix_length)| FromPoolInput {
                pool: pool.clone(),
                prefix_length,
            })
            .collect(),
        uid: args.uid.clone(),
        mac_prefixes: args.mac_prefix.clone(),
        uplink_zone: args.uplink_zone.clone(),
        dry_run: args.dry_run,
    })
}

impl Named for Vpc {
    fn resource(&self) -> String {
        format!("vpc/{}", self.metadata.name)
    }
}

fn get(store: &dyn Store, g: &GlobalArgs, name: &str, out: &mut dyn Write) -> Result<()> {
    let (ns, pools) = vpc_pools(g, name)?;
    let mut warnings = Warnings::default();
    let vpc = crate::engine::vpc::get(
        store,
        &Scope::everything(),
        &ns,
        &pools,
        name,
        &mut warnings,
    );
    output::warn(&warnings);
    show(vpc?, g, out)
}

/// Prints `vpc get`'s VPC (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show(vpc: Vpc, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    match g.output {
        Some(OutputFormat::Json) => output::write_json(out, &vpc),
        Some(OutputFormat::Yaml) => output::write(out, &yaml::encode(&vpc)),
        None => output::line(out, vpc.metadata.uid.as_str()),
        Some(_) => render(out, g, &[vpc]),
    }
}

fn list(store: &dyn Store, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let scopes = super::scopes(store, g)?;
    let mut warnings = Warnings::default();
    let vpcs = crate::engine::vpc::list(store, &scopes, &mut warnings);
    output::warn(&warnings);
    show_list(&vpcs?, g, out)
}

/// Prints `vpc list`'s VPCs (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show_list(vpcs: &[Vpc], g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    if output::write_list(out, g.output, vpcs)? {
        return Ok(());
    }
    render(out, g, vpcs)
}

/// The table of `vpc list` (and `vpc get -o table|wide`).
fn render(out: &mut dyn Write, g: &GlobalArgs, vpcs: &[Vpc]) -> Result<()> {
    if let Some(OutputFormat::Name) = g.output {
        return output::write_names(out, vpcs);
    }
    let rows = vpcs
        .iter()
        .map(|v| {
            // A range drawn from a supernet says from which: `2001:db8:100::/56 (from p)`.
            let cidrs: Vec<String> = v
                .pools
                .iter()
                .map(|p| {
                    let cidr = p.spec.cidr;
                    match v.ranges.iter().find(|c| c.spec.prefix == cidr) {
                        Some(c) => format!("{cidr} (from {})", c.spec.pool),
                        None => cidr.to_string(),
                    }
                })
                .collect();
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
    let request = VpcDelete::new(&delete_input(g, args)?)?;
    // The lines are printed once the unit of work is done, and an error found after
    // releasing (files that could not be released) comes after them, as the releases stand.
    let mut warnings = Warnings::default();
    let stop = super::stop_on_signal()?;
    let deleted = admin::delete_vpc(store, &Scope::everything(), &request, &stop, &mut warnings);
    output::warn(&warnings);
    show_deleted(deleted?, args.dry_run, g, out)
}

/// `vpc delete`'s arguments as the engine's input (exit 2 without `-n` or for a name no
/// pool could carry).
pub(crate) fn delete_input(g: &GlobalArgs, args: &VpcDeleteArgs) -> Result<DeleteVpcInput> {
    let (ns, _) = vpc_pool(g, &args.name, false)?;
    Ok(DeleteVpcInput {
        name: args.name.clone(),
        namespace: ns.to_string(),
        ignore_not_found: args.ignore_not_found,
        dry_run: args.dry_run,
    })
}

/// Prints what `vpc delete` did (here, or answered by a server: [`crate::cli::remote`]),
/// then gives the error found after the releases, if any.
pub(crate) fn show_deleted(
    deleted: Deletion<crate::engine::vpc::Deleted>,
    dry_run: bool,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let deleted = match deleted {
        Deletion::Deleted(deleted) => deleted,
        // Already deleted (a retry): nothing to do, and a retry loop sees success.
        Deletion::Absent(message) => {
            output::diagnostic(&format!("note: {message}; nothing to delete"));
            crate::engine::vpc::Deleted {
                removed: Vec::new(),
                kept: None,
            }
        }
    };
    let changes: Vec<Change<Removal>> = deleted
        .removed
        .into_iter()
        .map(|r| {
            let action = match r {
                Removal::Allocation(_) | Removal::Claim(_) => Action::Released,
                Removal::Subnet(_) | Removal::Pool(_) => Action::Deleted,
            };
            Change::new(r, action.planned(dry_run))
        })
        .collect();
    output::write_changes(out, g.output, &changes, false)?;
    match deleted.kept {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

impl Named for Removal {
    fn resource(&self) -> String {
        match self {
            Removal::Allocation(m) => m.resource(),
            Removal::Subnet(m) => m.resource(),
            Removal::Pool(m) => m.resource(),
            Removal::Claim(m) => m.resource(),
        }
    }
}
