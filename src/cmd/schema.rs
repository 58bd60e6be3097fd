//! `ipamctl schema`: the JSON Schemas of the manifests.

use std::io::Write;

use crate::cli::SchemaArgs;
use crate::error::Result;
use crate::{output, schema};

pub fn run(args: &SchemaArgs, out: &mut dyn Write) -> Result<()> {
    let value = match args.kind {
        Some(kind) => schema::of(kind),
        None => schema::all(),
    };
    output::write(out, &output::json(&value))
}
