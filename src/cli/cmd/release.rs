//! `ipamctl release`: free one address, or every allocation the selectors pick.

use std::io::Write;

use crate::cli::output::{self, Action, Change, Held};
use crate::cli::{GlobalArgs, ReleaseArgs};
use crate::engine::executor::{Done, Executor, Request};
use crate::engine::request::{Freed, ReleaseInput, ReleaseRequest};
use crate::engine::scope::Scope;
use crate::error::Result;
use crate::store::Store;

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ReleaseArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let request = Request::Release(Box::new(ReleaseRequest::new(
        &input(g, args),
        &Scope::everything(),
    )?));
    let Done::Freed(freed, _) = super::told(Executor::one(store, &request))? else {
        unreachable!("a release request frees")
    };
    show(&freed, args, g, out)
}

/// Prints what a release freed (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show(
    freed: &Freed,
    args: &ReleaseArgs,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    if let Some(note) = &freed.note {
        output::diagnostic(note);
    }
    let action = Action::Released.planned(args.dry_run);
    let changes: Vec<_> = freed
        .addresses
        .iter()
        .map(Held::Address)
        .chain(freed.prefixes.iter().map(Held::Prefix))
        .map(|m| Change::new(m, action))
        .collect();
    output::write_changes(out, g.output, &changes, false)
}

/// The request the command line stands for, as the engine takes it.
pub(crate) fn input(g: &GlobalArgs, args: &ReleaseArgs) -> ReleaseInput {
    ReleaseInput {
        pool: args.pool.clone(),
        address: args.address.clone(),
        namespace: g.namespace.clone(),
        select: super::list::select_input(&args.select),
        force: args.force,
        ignore_not_found: args.ignore_not_found,
        dry_run: args.dry_run,
    }
}

/// The one note `release -f` prints for the `unchanged` of its `all` requests that had
/// nothing to release, in place of the note each would print alone: a teardown run again
/// would otherwise print hundreds of them, all alike.
pub(super) fn note_nothing_released(unchanged: usize, all: usize) {
    if unchanged > 0 {
        output::diagnostic(&format!(
            "note: {unchanged} of {all} requests had nothing to release (no allocation matches, or the address or prefix is not held): each answers `unchanged`"
        ));
    }
}
