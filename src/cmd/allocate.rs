//! `ipamctl allocate`: claim an address and print it.

use std::io::Write;

use crate::alloc::{self, Allocated, Request};
use crate::cli::{AllocateArgs, GlobalArgs, OutputFormat};
use crate::error::{Error, Result};
use crate::model::Owner;
use crate::store::Store;
use crate::{output, yaml};

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
    let allocated = match (&args.zone, &args.pool) {
        (Some(zone), None) => alloc::allocate_zone(store, zone, &owner, args.dry_run)?,
        (None, Some(pool)) => alloc::allocate(store, &request(g, args, pool, owner)?)?,
        _ => return Err(Error::usage("allocate takes either POOL or `--zone ZONE`")),
    };
    render(&allocated, args.dry_run, g, out)
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

fn render(allocated: &Allocated, dry_run: bool, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
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
    let manifest = allocated.manifest();
    match g.output {
        Some(OutputFormat::Json) => output::write(out, &output::json(manifest)),
        Some(OutputFormat::Yaml) => output::write(out, &yaml::encode(manifest)),
        Some(OutputFormat::Table) | None => output::line(out, &manifest.spec.address.to_string()),
    }
}
