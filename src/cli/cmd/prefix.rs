//! `ipamctl allocate --prefix-length N` / `--prefix PREFIX`: claim a child prefix of a
//! supernet pool and print it in CIDR form.

use std::io::Write;

use crate::cli::output::{self, Action, Change};
use crate::cli::{AllocateArgs, GlobalArgs};
use crate::engine::prefix::Want;
use crate::error::{Error, Result};
use crate::model::Owner;
use crate::store::Store;

pub fn allocate(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &AllocateArgs,
    owner: Owner,
    out: &mut dyn Write,
) -> Result<()> {
    let [pool] = args.pools.as_slice() else {
        return Err(Error::usage(
            "--prefix-length and --prefix claim from one pool; name exactly one",
        ));
    };
    if args.dry_run {
        return Err(Error::usage(
            "--dry-run is not supported with --prefix-length or --prefix yet",
        ));
    }
    let pool = super::pool_ref(g, pool)?;
    let want = match (args.prefix_length, &args.prefix) {
        (Some(len), None) => Want::Length(len),
        (None, Some(p)) => Want::Exact(super::prefix("--prefix", p)?),
        _ => {
            return Err(Error::usage(
                "give one of --prefix-length N and --prefix PREFIX",
            ));
        }
    };
    let claimed = crate::engine::prefix::claim(store, &pool, &owner, want)?;
    if g.output.is_none() {
        return output::line(out, &claimed.manifest.spec.prefix.to_string());
    }
    let action = if claimed.created {
        Action::Created
    } else {
        Action::Existing
    };
    output::write_changes(
        out,
        g.output,
        &[Change::new(claimed.manifest, action)],
        true,
    )
}
