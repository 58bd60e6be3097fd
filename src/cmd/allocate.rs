//! `ipamctl allocate`: claim an address and print it.

use std::io::Write;

use crate::alloc::{self, Allocated, Request};
use crate::cli::{AllocateArgs, GlobalArgs, OutputFormat};
use crate::error::Result;
use crate::model::Owner;
use crate::store::Store;
use crate::{output, yaml};

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &AllocateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let request = Request {
        pool: super::pool_ref(g, &args.pool)?,
        owner: super::flag(
            "--owner",
            Owner::parse(&args.owner, super::uid(args.uid.as_deref())?),
        )?,
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
    };
    let allocated = alloc::allocate(store, &request)?;
    if let Allocated::WouldCreate(m) | Allocated::Existing(m) = &allocated
        && args.dry_run
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
