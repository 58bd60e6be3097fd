//! `ipamctl allocate`: claim an address and print it.

use std::io::Write;

use crate::cli::output::{self, Action, Change};
use crate::cli::{AllocateArgs, GlobalArgs};
use crate::engine::allocate::{Allocated, Request};
use crate::engine::explain;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::{Owner, SubnetName, allocation_name};
use crate::store::Store;

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &AllocateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let owner = super::flag(
        "--owner",
        Owner::parse(&args.owner, super::uid(args.uid.as_deref())?),
    )?;
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
            allocated?
        }
        (None, [_, _, ..]) => return allocate_all(store, g, args, owner, out),
        (None, [pool]) => {
            let req = request(g, args, pool, owner)?;
            let allocated = crate::engine::allocate::allocate(store, &req, &mut warnings);
            output::warn(&warnings);
            if args.explain {
                explain(store, &req, &allocated)?;
            }
            allocated?
        }
        _ => return Err(Error::usage("allocate takes either POOL or `--zone ZONE`")),
    };
    render(&allocated, args.dry_run, g, out)
}

/// One address in each of several pools, all or nothing (dual stack).
fn allocate_all(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &AllocateArgs,
    owner: Owner,
    out: &mut dyn Write,
) -> Result<()> {
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
    let requests = args
        .pools
        .iter()
        .map(|pool| request(g, args, pool, owner.clone()))
        .collect::<Result<Vec<_>>>()?;
    let mut warnings = Warnings::default();
    let allocated = crate::engine::allocate::allocate_all(store, &requests, &mut warnings);
    output::warn(&warnings);
    let allocated = allocated?;
    for a in &allocated {
        dry_run_note(a, args.dry_run);
    }
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
    output::write_changes(out, g.output, &changes, false)
}

fn request(g: &GlobalArgs, args: &AllocateArgs, pool: &str, owner: Owner) -> Result<Request> {
    Ok(Request {
        pool: super::pool_ref(g, pool)?,
        owner,
        within: args
            .within
            .as_deref()
            .map(|w| super::prefix("--within", w))
            .transpose()?,
        subnet: args
            .subnet
            .as_deref()
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
    })
}

/// `--explain`: why the dry run's address is the one (on stderr). An exhausted pool is
/// explained too, before its error is reported.
fn explain(store: &dyn Store, req: &Request, allocated: &Result<Allocated>) -> Result<()> {
    let chosen = match allocated {
        Ok(Allocated::Existing(m)) => {
            eprintln!(
                "explain: `{}` already holds {} in pool `{}`; an owner gets its address back, so no candidate is considered",
                m.spec.owner, m.spec.address, req.pool
            );
            return Ok(());
        }
        Ok(Allocated::Created(m) | Allocated::WouldCreate(m)) => Some(m.spec.address),
        Err(Error::Exhausted { .. }) => None,
        Err(_) => return Ok(()),
    };
    if let (Some(addr), Some(_)) = (req.address, chosen) {
        eprintln!("explain: `--address` asks for {addr} alone, and nobody holds it");
        return Ok(());
    }
    let (pool, taken) = crate::store::read::pool_state(store, &req.pool)?;
    // A stored subnet is explained as what it stands for: its prefix, and its gateway and
    // reserved addresses as `--reserved` (a reserved prefix is listed address by address,
    // up to the explanation's cap of lines anyway).
    let (within_net, reserved) = match &req.subnet {
        Some(name) => {
            let s = crate::engine::subnet::load(store, req.pool.namespace.as_ref(), name)?;
            let mut reserved = req.reserved.clone();
            reserved.push(s.gateway());
            for r in &s.spec.reserved {
                let (lo, hi) = crate::model::candidates::span_of(r.net());
                let v6 = r.net().addr().is_ipv6();
                reserved.extend(
                    (lo..=hi)
                        .take(1024)
                        .map(|n| crate::model::candidates::address(v6, n)),
                );
            }
            (Some(s.spec.cidr), reserved)
        }
        None => (req.within, req.reserved.clone()),
    };
    let within = within_net
        .map(|w| format!(", within {w}"))
        .unwrap_or_default();
    eprintln!(
        "explain: pool `{}` ({}{within}), lowest address first:",
        req.pool, pool.spec.cidr
    );
    let cooling =
        crate::engine::allocate::cooling_for(store, &req.pool, &pool, &req.owner)?.blocked;
    let input = explain::Request {
        spec: &pool.spec,
        within: within_net,
        reserved: &reserved,
        taken: &taken,
        cooling: &cooling,
    };
    let explanation = explain::explain(&input, chosen, explain::DEFAULT_CAP);
    let ns = req.pool.namespace.as_ref();
    // Only the taken addresses on the lines shown are read: at most the cap's number of files.
    let mut holder = |addr| match crate::store::read::read_allocation(
        store,
        ns,
        &allocation_name(&req.pool.name, addr),
    ) {
        Ok(Some(Ok(m))) => match m.spec.owner.uid() {
            Some(uid) => format!("`{}` (uid {uid})", m.spec.owner),
            None => format!("`{}`", m.spec.owner),
        },
        Ok(Some(Err(_))) => "an allocation file that does not parse".to_owned(),
        Ok(None) => "an allocation released since".to_owned(),
        Err(e) => format!("an allocation that cannot be read ({e})"),
    };
    for line in explanation.render(&mut holder) {
        eprintln!("{line}");
    }
    Ok(())
}

fn render(allocated: &Allocated, dry_run: bool, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    dry_run_note(allocated, dry_run);
    let manifest = allocated.manifest();
    if g.output.is_none() {
        return output::line(out, &manifest.spec.address.to_string());
    }
    output::write_changes(
        out,
        g.output,
        &[Change::new(manifest, action(allocated))],
        true,
    )
}

fn action(allocated: &Allocated) -> Action {
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
        eprintln!(
            "dry run: `{}` {verb} {}; nothing written",
            m.spec.owner, m.spec.address
        );
    }
}
