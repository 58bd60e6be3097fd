//! `ipamctl mac set`: give a NIC's allocation a new MAC.

use std::io::Write;

use crate::cli::output::{self, Action, Change};
use crate::cli::{GlobalArgs, MacCommand, MacSetArgs};
use crate::engine::mac::{SetInput, SetRequest};
use crate::engine::scope::Scope;
use crate::error::Result;
use crate::model::AllocationManifest;
use crate::store::Store;

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    command: &MacCommand,
    out: &mut dyn Write,
) -> Result<()> {
    let MacCommand::Set(args) = command;
    let req = SetRequest::new(&input(g, args))?;
    let set = crate::engine::mac::set(store, &Scope::everything(), &req)?;
    let changes: Vec<_> = set.changes.iter().map(|(b, a)| (a, b != a)).collect();
    show(&changes, g, out)
}

/// The request the command line stands for, as the engine takes it.
pub(crate) fn input(g: &GlobalArgs, args: &MacSetArgs) -> SetInput {
    SetInput {
        namespace: g.namespace.clone(),
        pool: args.pool.clone(),
        address: args.address.clone(),
        owner: args.owner.clone(),
        uid: args.uid.clone(),
        mac: args.mac.clone(),
    }
}

/// Prints what `mac set` did, each allocation as it is now and whether it changed (here, or
/// answered by a server: [`crate::cli::remote`]).
pub(crate) fn show(
    changes: &[(&AllocationManifest, bool)],
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let changes: Vec<Change<_>> = changes
        .iter()
        .map(|&(now, changed)| {
            let action = if changed {
                Action::Configured
            } else {
                Action::Unchanged
            };
            Change::new(now, action)
        })
        .collect();
    output::write_changes(out, g.output, &changes, true)
}
