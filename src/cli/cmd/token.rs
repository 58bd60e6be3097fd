//! `ipamctl token create|list|revoke`: the tokens a server accepts, in the file `--tokens`
//! names ([`crate::engine::token`]). Only `create` ever prints a secret, once, alone.

use std::io::Write;

use serde::Serialize;

use crate::cli::output::{self, Action, Change, Named};
use crate::cli::{GlobalArgs, OutputFormat, TokenCommand};
use crate::engine::token::{self, NewToken};
use crate::error::{Error, Result};
use crate::model::token::TokenRecord;

pub fn run(g: &GlobalArgs, command: &TokenCommand, out: &mut dyn Write) -> Result<()> {
    match command {
        TokenCommand::Create(args) => {
            // The secret alone is the output: a document around it would be one more place
            // a script could copy it from.
            if g.output.is_some_and(|o| o != OutputFormat::Table) {
                return Err(Error::Usage {
                    message: "`token create` prints the secret alone; drop `-o`".into(),
                    hint: Some(format!(
                        "the token as data: ipamctl token list --tokens {} -o json",
                        args.file.tokens.display()
                    )),
                });
            }
            let new = NewToken {
                name: args.name.clone(),
                namespaces: args.namespaces.clone(),
                verbs: args.verbs.clone(),
                cluster: args.cluster,
            };
            let (record, secret) = token::create(&args.file.tokens, &new)?;
            output::diagnostic(&format!("token/{} created", record.name));
            output::line(out, secret.expose())
        }
        TokenCommand::List(args) => {
            let shown: Vec<Shown> = token::list(&args.tokens)?.iter().map(Shown::of).collect();
            if output::write_list(out, g.output, &shown)? {
                return Ok(());
            }
            let rows = shown
                .iter()
                .map(|t| {
                    vec![
                        t.name.clone(),
                        t.namespaces.join(","),
                        t.verbs.join(","),
                        if t.cluster { "yes" } else { "no" }.to_owned(),
                        t.creation_timestamp.clone(),
                    ]
                })
                .collect();
            let headers = ["NAME", "NAMESPACES", "VERBS", "CLUSTER", "CREATED"];
            output::write(out, &output::table(&headers, rows, &[], g.no_headers))
        }
        TokenCommand::Revoke(args) => {
            let record = token::revoke(&args.file.tokens, &args.name)?;
            let change = Change::new(Shown::of(&record), Action::Revoked);
            output::write_changes(out, g.output, &[change], true)
        }
    }
}

/// A token as listed: everything its record holds but the hash.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown {
    kind: &'static str,
    name: String,
    namespaces: Vec<String>,
    verbs: Vec<String>,
    cluster: bool,
    creation_timestamp: String,
}

impl Shown {
    fn of(record: &TokenRecord) -> Shown {
        Shown {
            kind: "Token",
            name: record.name.to_string(),
            namespaces: record.namespaces.clone(),
            verbs: record.verbs.clone(),
            cluster: record.cluster,
            creation_timestamp: String::from(record.created),
        }
    }
}

impl Named for Shown {
    fn resource(&self) -> String {
        format!("token/{}", self.name)
    }
}
