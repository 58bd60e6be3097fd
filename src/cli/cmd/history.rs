//! `ipamctl history ADDRESS | --owner K/N | --uid UID`: who held an address, or what an
//! owner held, and when: from `git log` of the allocation files in a state directory, from
//! the events table on a database (read by [`crate::engine::history`]).

use std::io::Write;

use crate::cli::output::{self, Named};
use crate::cli::{GlobalArgs, HistoryArgs, OutputFormat};
use crate::engine::history::{self, Entry};
use crate::engine::range_holder::Holders;
use crate::error::Result;
use crate::model::PoolName;
use crate::store::Store;

impl Named for Entry {
    fn resource(&self) -> String {
        self.object.clone()
    }
}

/// Where an entry is: its address, or its prefix.
fn at(e: &Entry) -> String {
    match (&e.address, &e.prefix) {
        (Some(a), _) => a.to_string(),
        (None, Some(p)) => p.clone(),
        (None, None) => "-".into(),
    }
}

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &HistoryArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let subject = history::Subject {
        address: args
            .address
            .as_deref()
            .filter(|a| !a.contains('/'))
            .map(|a| super::address("ADDRESS", a))
            .transpose()?,
        prefix: args
            .address
            .as_deref()
            .filter(|a| a.contains('/'))
            .map(|a| super::prefix("ADDRESS", a))
            .transpose()?,
        pool: args
            .pool
            .as_deref()
            .map(|p| super::flag("--pool", PoolName::new(p)))
            .transpose()?,
        filter: super::owner_filter(args.owner.as_deref(), args.uid.as_deref())?,
    };
    let scopes = super::scopes(store, g)?;
    let entries = history::of(store, &scopes, &subject)?;
    if entries.is_empty() {
        output::diagnostic("No history found.");
    }
    if output::write_list(out, g.output, &entries)? || entries.is_empty() {
        return Ok(());
    }
    table(store, &entries, g, out)
}

/// The entries as a table, oldest first.
fn table(store: &dyn Store, entries: &[Entry], g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let wide = g.output == Some(OutputFormat::Wide);
    // A VPC's range or uplink reads as the VPC, while a VPC's pools carry its uid.
    let mut holders = Holders::new(store);
    let rows = entries
        .iter()
        .map(|e| {
            let owner = holders.display_text(&e.owner, e.uid.as_deref())?;
            let mut row = vec![
                e.date.clone(),
                output::or_dash(e.commit.as_ref()),
                e.author.clone(),
                e.action.clone(),
                output::or_dash(e.namespace.as_ref()),
                e.pool.clone(),
                at(e),
                owner,
                output::or_dash(e.uid.as_ref()),
            ];
            if wide {
                row.push(output::or_dash(e.mac.as_ref()));
                row.push(output::or_dash(e.subject.as_ref()));
            }
            Ok(row)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut headers = vec![
        "DATE",
        "COMMIT",
        "AUTHOR",
        "ACTION",
        "NAMESPACE",
        "POOL",
        "ADDRESS",
        "OWNER",
        "UID",
    ];
    if wide {
        headers.extend(["MAC", "SUBJECT"]);
    }
    output::write(out, &output::table(&headers, rows, &[], g.no_headers))
}
