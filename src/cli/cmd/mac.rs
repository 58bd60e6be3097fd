//! `ipamctl mac set`: give a NIC's allocation a new MAC.

use std::io::Write;

use crate::cli::output::{self, Action, Change};
use crate::cli::{GlobalArgs, MacCommand};
use crate::engine::mac::SetRequest;
use crate::error::Result;
use crate::model::Owner;
use crate::store::Store;

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    command: &MacCommand,
    out: &mut dyn Write,
) -> Result<()> {
    let MacCommand::Set(args) = command;
    let req = SetRequest {
        pool: super::pool_ref(g, &args.pool)?,
        address: super::address("ADDRESS", &args.address)?,
        owner: super::flag(
            "--owner",
            Owner::parse(&args.owner, super::uid(args.uid.as_deref())?),
        )?,
        mac: crate::engine::request::field::mac_choice(&args.mac)?,
    };
    let set = crate::engine::mac::set(store, &req)?;
    let changes: Vec<Change<_>> = set
        .changes
        .iter()
        .map(|(before, after)| {
            let action = if before == after {
                Action::Unchanged
            } else {
                Action::Configured
            };
            Change::new(after, action)
        })
        .collect();
    output::write_changes(out, g.output, &changes, true)
}
