//! `quota list` through a server: the `quotas` query's rows, printed by the local
//! command's printer.

use std::io::Write;

use serde_json::{Value, json};

use super::documents::{self, bad_answer};
use super::transport::Client;
use crate::cli::GlobalArgs;
use crate::engine::quota::Usage;
use crate::error::Result;
use crate::model::Namespace;
use crate::model::quota::Resource;

/// `quota list`.
pub fn list(client: &mut Client, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    // Exit 2 on a namespace no quota could have, as locally, before anything is sent.
    let ns = crate::engine::request::field::namespace(g.namespace.as_deref())?;
    let document = "query Quotas($namespace: String) {
  quotas(namespace: $namespace) { namespace quota resource used limit }
}";
    let variables = json!({"namespace": ns.map(|n| n.to_string())});
    let data = documents::run(client, document, variables, false)?;
    let url = client.url().to_owned();
    let rows = documents::each(&data, "quotas", |row| usage(&url, row))?;
    crate::cli::cmd::quota::show_list(&rows, g, out)
}

/// A `QuotaUsage` as the engine's [`Usage`].
fn usage(url: &str, row: &Value) -> Result<Usage> {
    let text = |key: &str| row[key].as_str().unwrap_or_default();
    let count = |key: &str| {
        row[key]
            .as_u64()
            .ok_or_else(|| bad_answer(url, &format!("`{key}` is not a count")))
    };
    let resource = Resource::ALL
        .iter()
        .map(|r| r.name())
        .find(|name| *name == text("resource"))
        .ok_or_else(|| bad_answer(url, "a quota of a resource this ipamctl does not know"))?;
    Ok(Usage {
        namespace: Namespace::new(text("namespace")).map_err(|e| bad_answer(url, &e))?,
        quota: text("quota").to_owned(),
        resource,
        used: count("used")?,
        limit: count("limit")?,
    })
}
