//! `ipamctl --store URL import DIR`: a state directory into a database, all or nothing.

use std::io::Write;

use crate::cli::output::{self, Action, Change, Whole};
use crate::cli::{GlobalArgs, OutputFormat, TransferArgs};
use crate::engine::transfer;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::registry::{self, Location};

pub fn run(db: &dyn Store, g: &GlobalArgs, args: &TransferArgs, out: &mut dyn Write) -> Result<()> {
    if g.namespace.is_some() {
        return Err(Error::usage(
            "`import` reads every namespace; drop `--namespace`",
        ));
    }
    let source = registry::open(&Location::Dir(Some(args.dir.clone())), &super::config(1))?;
    let copied = transfer::import_dir(&*source, db)?;
    // A diagnostic, as `check`'s summary is: every kind, so that it adds up with what was
    // already there.
    output::diagnostic(&format!(
        "imported {copied} from {} into {} ({} already there)",
        args.dir.display(),
        db.describe(),
        copied.unchanged
    ));
    let action = if copied.written() == 0 {
        Action::Unchanged
    } else {
        Action::Configured
    };
    if matches!(
        g.output,
        None | Some(OutputFormat::Table | OutputFormat::Wide)
    ) {
        let line = match action {
            // Where from and where to are on stderr: stdout stays the same for the same
            // outcome, whatever the paths.
            Action::Unchanged => {
                "nothing to import: the database already holds every object of the state directory\n"
                    .to_owned()
            }
            _ => "imported the state directory into the database\n".to_owned(),
        };
        return output::write(out, &line);
    }
    let made = Whole {
        kind: "Schema",
        name: "ipamctl".into(),
        version: None,
        copied: Some(copied),
    };
    output::write_changes(out, g.output, &[Change::new(made, action)], true)
}
