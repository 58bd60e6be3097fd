//! `ipamctl init`: make a directory a state directory.

use std::io::Write;

use crate::cli::{GlobalArgs, InitArgs};
use crate::error::Result;
use crate::output;
use crate::store::fs::FsStore;

pub fn run(g: &GlobalArgs, args: &InitArgs, out: &mut dyn Write) -> Result<()> {
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
