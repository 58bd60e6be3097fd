//! `ipamctl quota list`: each quota's ceilings against what its namespace holds.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use crate::cli::output::{self, Named};
use crate::cli::{GlobalArgs, QuotaCommand};
use crate::engine::quota::Usage;
use crate::engine::scope::Scope;
use crate::error::Result;
use crate::model::kind::{API_VERSION, QUOTA_KIND};
use crate::store::Store;

pub fn run(
    store: &dyn Store,
    g: &GlobalArgs,
    command: &QuotaCommand,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        QuotaCommand::List(_) => list(store, g, out),
    }
}

/// One quota as `-o json|yaml|name` show it: the manifest's name and ceilings, as
/// Kubernetes shows a `ResourceQuota`, with what is held of each in `status.used`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: ShownMetadata<'a>,
    spec: ShownSpec,
    status: ShownStatus,
}

#[derive(Serialize)]
struct ShownMetadata<'a> {
    name: &'a str,
    namespace: &'a str,
}

#[derive(Serialize)]
struct ShownSpec {
    hard: BTreeMap<&'static str, u64>,
}

#[derive(Serialize)]
struct ShownStatus {
    used: BTreeMap<&'static str, u64>,
}

impl Named for Shown<'_> {
    fn resource(&self) -> String {
        format!("quota/{}", self.metadata.name)
    }
}

/// The rows of one quota together (they come sorted by namespace and quota).
fn shown(rows: &[Usage]) -> Vec<Shown<'_>> {
    let mut out: Vec<Shown<'_>> = Vec::new();
    for row in rows {
        let same = out.last().is_some_and(|s| {
            s.metadata.namespace == row.namespace.as_str() && s.metadata.name == row.quota
        });
        if !same {
            out.push(Shown {
                api_version: API_VERSION,
                kind: QUOTA_KIND,
                metadata: ShownMetadata {
                    name: &row.quota,
                    namespace: row.namespace.as_str(),
                },
                spec: ShownSpec {
                    hard: BTreeMap::new(),
                },
                status: ShownStatus {
                    used: BTreeMap::new(),
                },
            });
        }
        let last = out.last_mut().expect("pushed above");
        last.spec.hard.insert(row.resource, row.limit);
        last.status.used.insert(row.resource, row.used);
    }
    out
}

fn list(store: &dyn Store, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let ns = super::namespace(g)?;
    let rows = crate::engine::quota_list::list(store, &Scope::everything(), ns)?;
    show_list(&rows, g, out)
}

/// Prints `quota list`'s rows (here, or answered by a server: [`crate::cli::remote`]).
pub(crate) fn show_list(rows: &[Usage], g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    if output::write_list(out, g.output, &shown(rows))? {
        return Ok(());
    }
    if rows.is_empty() {
        output::diagnostic("No quotas found.");
        return Ok(());
    }
    let table = rows
        .iter()
        .map(|u| {
            vec![
                u.namespace.to_string(),
                u.quota.clone(),
                u.resource.to_owned(),
                u.used.to_string(),
                u.limit.to_string(),
            ]
        })
        .collect();
    let headers = ["NAMESPACE", "QUOTA", "RESOURCE", "USED", "LIMIT"];
    output::write(out, &output::table(&headers, table, &[3, 4], g.no_headers))
}
