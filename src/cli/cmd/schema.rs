//! `ipamctl schema`: the JSON Schemas of the manifests.

use std::io::Write;

use crate::cli::{OutputFormat, SchemaArgs};
use crate::cli::{output, schema};
use crate::error::Result;
use crate::yaml;

pub fn run(args: &SchemaArgs, format: Option<OutputFormat>, out: &mut dyn Write) -> Result<()> {
    let kinds = match args.kind {
        Some(kind) => vec![kind],
        None => crate::cli::schema::KINDS.to_vec(),
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
                .map(|k| format!("schema/{}\n", crate::cli::schema::file_stem(*k)))
                .collect();
            output::write(out, &names)
        }
    }
}
