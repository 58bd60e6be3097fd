//! `ipamctl init`: make a directory a state directory, or create a database's schema.

use std::io::Write;

use crate::cli::output::{self, Action, Change, Whole};
use crate::cli::{GlobalArgs, InitArgs};
use crate::error::{Error, Result};
use crate::store::fs::FsStore;
use crate::store::pg::PgStore;
use crate::store::registry::Location;

pub fn run(g: &GlobalArgs, args: &InitArgs, out: &mut dyn Write) -> Result<()> {
    let (made, action) = if let Location::Database(url) = super::location(g)? {
        if args.dir.is_some() {
            return Err(Error::usage(
                "`init DIR` makes a state directory; with `--store` it takes no directory",
            ));
        }
        let target = crate::store::registry::target(&url, &super::config(1))?;
        let (before, now, shown) = PgStore::init(&target)?;
        let (action, note) = match before {
            Some(v) if v == now => (
                Action::Unchanged,
                format!("ipamctl schema already at version {now} in {shown}"),
            ),
            Some(v) => (
                Action::Configured,
                format!("upgraded the ipamctl schema from version {v} to {now} in {shown}"),
            ),
            None => (
                Action::Created,
                format!("created the ipamctl schema, version {now}, in {shown}"),
            ),
        };
        output::diagnostic(&note);
        let made = Whole {
            kind: "Schema",
            name: "ipamctl".into(),
            version: Some(now),
            copied: None,
        };
        (made, action)
    } else {
        let dir = args
            .dir
            .clone()
            .or_else(|| g.state_dir.clone())
            .unwrap_or_else(|| ".".into());
        let action = if FsStore::init(&dir)? {
            Action::Created
        } else {
            Action::Unchanged
        };
        let made = Whole {
            kind: "StateDirectory",
            name: dir.display().to_string(),
            version: None,
            copied: None,
        };
        (made, action)
    };
    output::write_changes(out, g.output, &[Change::new(made, action)], true)
}
