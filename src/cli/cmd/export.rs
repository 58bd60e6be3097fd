//! `ipamctl --store URL export DIR`: a database as a new state directory.

use std::io::Write;

use crate::cli::output::{self, Action, Change, Whole};
use crate::cli::{GlobalArgs, OutputFormat, TransferArgs};
use crate::engine::transfer;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::fs::FsStore;
use crate::store::registry::{self, Location};

pub fn run(db: &dyn Store, g: &GlobalArgs, args: &TransferArgs, out: &mut dyn Write) -> Result<()> {
    if g.namespace.is_some() {
        return Err(Error::usage(
            "`export` writes every namespace; drop `--namespace`",
        ));
    }
    let dir = &args.dir;
    let occupied = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_some(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(Error::io(dir, e)),
    };
    if occupied {
        return Err(Error::Usage {
            message: format!(
                "{}: not empty; export writes a new state directory",
                dir.display()
            ),
            hint: Some("give a directory that does not exist yet".into()),
        });
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    FsStore::init(dir)?;
    let target = registry::open(&Location::Dir(Some(dir.clone())), &super::config(1))?;
    let mut copied = None;
    let mut warnings = Warnings::default();
    let database = db.database().expect("`export` opens a database");
    database.snapshot(&mut || {
        warnings = Warnings::default();
        copied = Some(transfer::export(db, &*target, &mut warnings)?);
        Ok(())
    })?;
    let copied = copied.expect("the snapshot ran the copy");
    output::warn(&warnings);
    output::diagnostic(&format!("exported {copied} from {}", db.describe()));
    if matches!(
        g.output,
        None | Some(OutputFormat::Table | OutputFormat::Wide)
    ) {
        return output::write(
            out,
            &format!(
                "exported the database to the new state directory {}\n",
                dir.display()
            ),
        );
    }
    let made = Whole {
        kind: "StateDirectory",
        name: dir.display().to_string(),
        version: None,
        copied: Some(copied),
    };
    output::write_changes(out, g.output, &[Change::new(made, Action::Created)], true)
}
