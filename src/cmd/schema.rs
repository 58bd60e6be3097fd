//! `ipamctl schema`: the JSON Schemas of the manifests.

use std::io::Write;

use crate::cli::{OutputFormat, SchemaArgs, SchemaKind};
use crate::error::Result;
use crate::{output, schema, yaml};

pub fn run(args: &SchemaArgs, format: Option<OutputFormat>, out: &mut dyn Write) -> Result<()> {
    let kinds = match args.kind {
        Some(kind) => vec![kind],
        None => vec![SchemaKind::Ipampool, SchemaKind::Ipallocation],
    };
    let value = match args.kind {
        Some(kind) => schema::of(kind),
        None => schema::all(),
    };
    match format {
        // A schema is a JSON document: JSON is its table form too.
        Some(OutputFormat::Json | OutputFormat::Table | OutputFormat::Wide) | None => {
            output::write(out, &output::json(&value))
        }
        Some(OutputFormat::Yaml) => output::write(out, &yaml::encode(&value)),
        Some(OutputFormat::Name) => {
            let names: String = kinds
                .iter()
                .map(|k| match k {
                    SchemaKind::Ipampool => "schema/ipampool\n",
                    SchemaKind::Ipallocation => "schema/ipallocation\n",
                })
                .collect();
            output::write(out, &names)
        }
    }
}
