//! `ipamctl allocate`: claim an address and print it.

use std::io::Write;

use crate::cli::output::{self, Action, Change};
use crate::cli::{AllocateArgs, GlobalArgs};
use crate::engine::allocate::Allocated;
use crate::engine::executor::{Done, Executor, Request};
use crate::engine::request::{AllocateInput, AllocateRequest, Claimed};
use crate::engine::scope::Scope;
use crate::error::Result;
use crate::store::Store;

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &AllocateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let request = Request::Allocate(Box::new(AllocateRequest::new(
        &input(g, args),
        &Scope::everything(),
    )?));
    let Done::Claimed(claimed) = super::told(Executor::one(store, &request))? else {
        unreachable!("an allocate request claims")
    };
    show(claimed, g, out)
}

/// Prints what a claim came to (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show(claimed: Claimed, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    match claimed {
        Claimed::Addresses(allocated) => render(&allocated, g, out),
        Claimed::Prefix(manifest, created) => {
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
        Claimed::WouldPrefix(prefix) => output::line(out, &prefix.to_string()),
    }
}

/// The request the command line stands for, as the engine takes it.
pub(crate) fn input(g: &GlobalArgs, args: &AllocateArgs) -> AllocateInput {
    AllocateInput {
        pools: args.pools.clone(),
        namespace: g.namespace.clone(),
        owner: args.owner.clone(),
        uid: args.uid.clone(),
        subnets: args.subnet.clone(),
        address: args.address.clone(),
        within: args.within.clone(),
        reserved: args.reserved.clone(),
        zone: args.zone.clone(),
        tenant: args.tenant.clone(),
        mac: args.mac.clone(),
        prefix_length: args.prefix_length,
        prefix: args.prefix.clone(),
        dry_run: args.dry_run,
        explain: args.explain,
        ttl: args.ttl.clone(),
    }
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
