//! `ipamctl --store URL import DIR`: a state directory into a database, all or nothing.

use std::io::Write;

use crate::cli::output::{self, Action, Change, Whole};
use crate::cli::{GlobalArgs, TransferArgs};
use crate::engine::transfer;
use crate::error::{Error, Result};
use crate::store::fs::FsStore;
use crate::store::pg::PgStore;

pub fn run(db: &PgStore, g: &GlobalArgs, args: &TransferArgs, out: &mut dyn Write) -> Result<()> {
    if g.namespace.is_some() {
        return Err(Error::usage(
            "`import` reads every namespace; drop `--namespace`",
        ));
    }
    let source = FsStore::open(&args.dir)?;
    let copied = transfer::import_dir(&source, db)?;
    eprintln!(
        "imported {} pools and {} allocations into {} ({} already there)",
        copied.pools,
        copied.allocations,
        db.describe(),
        copied.unchanged
    );
    let action = if copied.pools + copied.allocations == 0 {
        Action::Unchanged
    } else {
        Action::Configured
    };
    let made = Whole {
        kind: "Schema",
        name: "ipamctl".into(),
        version: None,
        copied: Some(copied),
    };
    output::write_changes(out, g.output, &[Change::new(made, action)], true)
}
