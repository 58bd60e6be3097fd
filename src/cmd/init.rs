//! `ipamctl init`: make a directory a state directory.

use std::io::Write;

use crate::cli::{GlobalArgs, InitArgs};
use crate::error::{Error, Result};
use crate::output;
use crate::store::fs::FsStore;
use crate::store::pg::PgStore;

pub fn run(g: &GlobalArgs, args: &InitArgs, out: &mut dyn Write) -> Result<()> {
    if let Some(url) = super::database(g)? {
        if args.dir.is_some() {
            return Err(Error::usage(
                "`init DIR` makes a state directory; with `--store` it takes no directory",
            ));
        }
        let (before, now, shown) = PgStore::init(url)?;
        let line = match before {
            Some(v) if v == now => format!("ipamctl schema already at version {now} in {shown}"),
            Some(v) => format!("upgraded the ipamctl schema from version {v} to {now} in {shown}"),
            None => format!("created the ipamctl schema, version {now}, in {shown}"),
        };
        return output::line(out, &line);
    }
    let dir = args
        .dir
        .clone()
        .or_else(|| g.state_dir.clone())
        .unwrap_or_else(|| ".".into());
    let verb = if FsStore::init(&dir)? {
        "initialized"
    } else {
        "already initialized"
    };
    output::line(
        out,
        &format!("{verb} ipamctl state directory in {}", dir.display()),
    )
}
