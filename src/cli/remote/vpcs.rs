//! `vpc get` and `vpc list` through a server: the VPC made again from its parts' manifests
//! as stored (its pools, its router's uplinks, the ranges it drew from supernets) and
//! printed by the local command's printer.

use std::io::Write;

use serde_json::{Value, json};

use super::documents::{self, bad_answer};
use super::transport::Client;
use crate::cli::GlobalArgs;
use crate::engine::vpc::{Vpc, VpcMetadata};
use crate::error::{Error, Result};
use crate::model::Namespace;
use crate::yaml;

/// The fields of a `Vpc` this client reads.
const FIELDS: &str = "name namespace uid poolManifests uplinkManifests rangeManifests";

/// `vpc get NAME`.
pub fn get(client: &mut Client, g: &GlobalArgs, name: &str, out: &mut dyn Write) -> Result<()> {
    // Exit 2 without `-n` or with a name no pool could carry, as locally.
    let (ns, pools) = crate::cli::cmd::vpc::vpc_pools(g, name)?;
    let document = format!(
        "query Vpc($name: String!, $namespace: String!) {{ vpc(name: $name, namespace: $namespace) {{ {FIELDS} }} }}"
    );
    let variables = json!({"name": name, "namespace": ns.to_string()});
    let data = documents::run(client, &document, variables, false)?;
    if data["vpc"].is_null() {
        return Err(Error::NotFound {
            message: crate::engine::vpc::missing(&ns, &pools, name),
            hint: None,
        });
    }
    let vpc = vpc(client.url(), &data["vpc"])?;
    crate::cli::cmd::vpc::show(vpc, g, out)
}

/// `vpc list`.
pub fn list(client: &mut Client, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let document =
        format!("query Vpcs($namespace: String) {{ vpcs(namespace: $namespace) {{ {FIELDS} }} }}");
    let data = documents::run(client, &document, json!({"namespace": g.namespace}), false)?;
    let url = client.url().to_owned();
    let vpcs = data["vpcs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| vpc(&url, v))
        .collect::<Result<Vec<_>>>()?;
    crate::cli::cmd::vpc::show_list(&vpcs, g, out)
}

/// A `Vpc` answer as the engine's [`Vpc`].
fn vpc(url: &str, v: &Value) -> Result<Vpc> {
    let bad = |why: String| bad_answer(url, &why);
    let text = |key: &str| v[key].as_str().unwrap_or_default().to_owned();
    let texts = |key: &str| documents::texts(&v[key]);
    let metadata = VpcMetadata {
        name: text("name"),
        namespace: Namespace::new(&text("namespace")).map_err(&bad)?,
        uid: crate::model::Uid::parse_uuid(&text("uid")).map_err(&bad)?,
    };
    let pools = texts("poolManifests")
        .iter()
        .map(|t| yaml::decode_pool(t).map_err(&bad))
        .collect::<Result<_>>()?;
    let uplinks = texts("uplinkManifests")
        .iter()
        .map(|t| yaml::decode_allocation(t).map_err(&bad))
        .collect::<Result<_>>()?;
    let ranges = texts("rangeManifests")
        .iter()
        .map(|t| yaml::decode_prefix_claim(t).map_err(&bad))
        .collect::<Result<_>>()?;
    Ok(Vpc::new(metadata, pools, uplinks, ranges))
}
