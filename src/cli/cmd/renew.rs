//! `ipamctl renew`: a lease renewed, by its owner or its address.

use std::io::Write;

use crate::cli::output::{self, Action, Change};
use crate::cli::{GlobalArgs, RenewArgs};
use crate::engine::lease::{Held, parse_ttl, renew};
use crate::engine::scope::Scope;
use crate::error::Result;
use crate::model::Owner;
use crate::store::Store;

pub fn run(store: &dyn Store, g: &GlobalArgs, args: &RenewArgs, out: &mut dyn Write) -> Result<()> {
    let pool = super::pool_ref(g, &args.pool)?;
    let held = match (&args.owner, &args.address) {
        (Some(owner), _) => Held::Owner(super::flag(
            "--owner",
            Owner::parse(owner, super::uid(args.uid.as_deref())?),
        )?),
        (None, Some(address)) => Held::Address(super::address("ADDRESS", address)?),
        (None, None) => unreachable!("clap requires ADDRESS or --owner"),
    };
    let ttl = parse_ttl("--ttl", &args.ttl)?;
    let lease = renew(store, &Scope::everything(), &pool, &held, ttl, args.dry_run)?;
    if g.output.is_none() {
        if args.dry_run {
            output::diagnostic(&format!(
                "dry run: {} would lapse at {}; nothing written",
                lease.spec.address,
                lease
                    .spec
                    .expires_at
                    .map_or(String::new(), |t| t.to_string())
            ));
        }
        return output::line(out, &lease.spec.address.to_string());
    }
    let action = if args.dry_run {
        Action::WouldConfigure
    } else {
        Action::Renewed
    };
    output::write_changes(out, g.output, &[Change::new(lease, action)], true)
}
