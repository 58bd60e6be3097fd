//! `ipamctl allocate`: claim an address and print it.

use std::io::Write;

use crate::cli::cmd::prefix::PrefixOutcome;
use crate::cli::output::{self, Action, Change};
use crate::cli::{AllocateArgs, GlobalArgs};
use crate::engine::allocate::{Allocated, Request};
use crate::engine::mac::MacChoice;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::{Owner, SubnetName};
use crate::store::Store;

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &AllocateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    match allocate_request(store, g, args)? {
        Got::Addresses(allocated) => render(&allocated, g, out),
        Got::Prefix(PrefixOutcome::Held(manifest, created)) => {
            if g.output.is_none() {
                return output::line(out, &manifest.spec.prefix.to_string());
            }
            let action = if created {
                Action::Created
            } else {
                Action::Existing
            };
            output::write_changes(out, g.output, &[Change::new(*manifest, action)], true)
        }
        Got::Prefix(PrefixOutcome::Would(prefix)) => output::line(out, &prefix.to_string()),
    }
}

/// What one `allocate` request got.
pub(super) enum Got {
    /// One allocation per pool, in the order of the pools (one for a pool or a zone).
    Addresses(Vec<Allocated>),
    /// A child prefix of a supernet pool.
    Prefix(PrefixOutcome),
}

/// One `allocate` request, whichever form (a pool, several, a zone, a child prefix): the
/// single command and each request of `allocate -f` run this, and nothing else, so a
/// request in a batch meets exactly the rules, locks and arbiters of the command line.
pub(super) fn allocate_request(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &AllocateArgs,
) -> Result<Got> {
    let owner = super::flag(
        "--owner",
        Owner::parse(
            args.owner.as_deref().unwrap_or_default(),
            super::uid(args.uid.as_deref())?,
        ),
    )?;
    if args.prefix_length.is_some() || args.prefix.is_some() {
        return super::prefix::allocate(store, g, args, owner).map(Got::Prefix);
    }
    let mut warnings = Warnings::default();
    let allocated = match (&args.zone, args.pools.as_slice()) {
        (Some(zone), []) => {
            let allocated = crate::engine::allocate::allocate_zone(
                store,
                zone,
                &owner,
                args.dry_run,
                &mut warnings,
            );
            output::warn(&warnings);
            vec![allocated?]
        }
        (None, [_, _, ..]) => allocate_all(store, g, args, owner)?,
        (None, [pool]) => {
            if args.subnet.len() > 1 {
                return Err(Error::usage(
                    "--subnet is given once per pool, in the order of the pools; one pool was named",
                ));
            }
            let req = request(g, args, pool, args.subnet.first(), owner)?;
            let allocated = crate::engine::allocate::allocate(store, &req, &mut warnings);
            output::warn(&warnings);
            if args.explain {
                explain(store, &req, &allocated)?;
            }
            vec![allocated?]
        }
        _ => return Err(Error::usage("allocate takes either POOL or `--zone ZONE`")),
    };
    for a in &allocated {
        dry_run_note(a, args.dry_run);
    }
    Ok(Got::Addresses(allocated))
}

/// One address in each of several pools, all or nothing (dual stack).
fn allocate_all(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &AllocateArgs,
    owner: Owner,
) -> Result<Vec<Allocated>> {
    for (set, flag) in [
        (args.within.is_some(), "--within"),
        (args.address.is_some(), "--address"),
        (args.explain, "--explain"),
    ] {
        if set {
            return Err(Error::usage(format!(
                "{flag} applies to one pool; allocate from each pool alone to use it"
            )));
        }
    }
    if !args.subnet.is_empty() && args.subnet.len() != args.pools.len() {
        return Err(Error::usage(format!(
            "--subnet is given once per pool, in the order of the pools: {} pools, {} `--subnet`",
            args.pools.len(),
            args.subnet.len()
        )));
    }
    let requests = args
        .pools
        .iter()
        .enumerate()
        .map(|(i, pool)| request(g, args, pool, args.subnet.get(i), owner.clone()))
        .collect::<Result<Vec<_>>>()?;
    let mut warnings = Warnings::default();
    let allocated = crate::engine::allocate::allocate_all(store, &requests, &mut warnings);
    output::warn(&warnings);
    allocated
}

/// The request for `pool`, with `subnet` (its `--subnet`, if any).
fn request(
    g: &GlobalArgs,
    args: &AllocateArgs,
    pool: &str,
    subnet: Option<&String>,
    owner: Owner,
) -> Result<Request> {
    Ok(Request {
        pool: super::pool_ref(g, pool)?,
        owner,
        within: args
            .within
            .as_deref()
            .map(|w| super::prefix("--within", w))
            .transpose()?,
        subnet: subnet
            .map(|n| super::flag("--subnet", SubnetName::new(n)))
            .transpose()?,
        reserved: args
            .reserved
            .iter()
            .map(|r| super::address("--reserved", r))
            .collect::<Result<_>>()?,
        address: args
            .address
            .as_deref()
            .map(|a| super::address("--address", a))
            .transpose()?,
        dry_run: args.dry_run,
        mac: args.mac.as_deref().map(mac_choice).transpose()?,
    })
}

/// `--mac`: a MAC or `auto` (exit 2 naming the value otherwise).
pub(super) fn mac_choice(text: &str) -> Result<MacChoice> {
    super::flag("--mac", MacChoice::parse(text))
}

/// `--explain`: why the dry run's address is the one (on stderr). An exhausted pool is
/// explained too, before its error is reported.
fn explain(store: &dyn Store, req: &Request, allocated: &Result<Allocated>) -> Result<()> {
    for line in crate::engine::explain::explain_request(store, req, allocated)? {
        output::diagnostic(&line.to_string());
    }
    Ok(())
}

/// The allocations of one command line: the address alone per line without `-o` (one per
/// pool), else one object (one pool) or a List (several).
fn render(allocated: &[Allocated], g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    if g.output.is_none() {
        let text: String = allocated
            .iter()
            .map(|a| format!("{}\n", a.manifest().spec.address))
            .collect();
        return output::write(out, &text);
    }
    let changes: Vec<_> = allocated
        .iter()
        .map(|a| Change::new(a.manifest(), action(a)))
        .collect();
    output::write_changes(out, g.output, &changes, allocated.len() == 1)
}

pub(super) fn action(allocated: &Allocated) -> Action {
    match allocated {
        Allocated::Existing(_) => Action::Existing,
        Allocated::Created(_) => Action::Created,
        Allocated::WouldCreate(_) => Action::WouldCreate,
    }
}

/// `--dry-run`'s line on stderr: what would be claimed, or what the owner holds already.
fn dry_run_note(allocated: &Allocated, dry_run: bool) {
    if let Allocated::WouldCreate(m) | Allocated::Existing(m) = allocated
        && dry_run
    {
        let verb = if matches!(allocated, Allocated::Existing(_)) {
            "already holds"
        } else {
            "would claim"
        };
        output::diagnostic(&format!(
            "dry run: `{}` {verb} {}; nothing written",
            m.spec.owner, m.spec.address
        ));
    }
}
