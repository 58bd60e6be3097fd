//! `pool create` and `pool delete` through a server: the arguments validated by the local
//! command's constructors, sent as `createPublicPoolDone` and `deletePool`, and the pool's
//! manifest in the answer printed by the local command's printer.

use std::io::Write;

use serde_json::{Value, json};

use super::documents::{self, bad_answer};
use super::transport::Client;
use crate::cli::cmd::pool as local;
use crate::cli::{GlobalArgs, PoolCreateArgs, PoolDeleteArgs};
use crate::engine::admin::{PoolDelete, PublicPool};
use crate::engine::subnet::Put;
use crate::error::Result;
use crate::model::PoolManifest;

/// `pool create`'s mutation: how the pool came to be, and the pool.
const CREATE: &str = "mutation CreatePublicPool($input: CreatePublicPoolInput!, $dryRun: Boolean) {
  createPublicPoolDone(input: $input, dryRun: $dryRun) { action manifest }
}";

/// `pool delete`'s mutation: the pool deleted.
const DELETE: &str = "mutation DeletePool($name: String!, $namespace: String, $dryRun: Boolean) {
  deletePool(name: $name, namespace: $namespace, dryRun: $dryRun) { manifest }
}";

/// `pool create`.
pub fn create(
    client: &mut Client,
    g: &GlobalArgs,
    args: &PoolCreateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    // Exit 2 on what the local command refuses, before anything is sent.
    let input = local::create_input(g, args)?;
    PublicPool::new(&input)?;
    let variables = json!({
        "input": {
            "name": input.name,
            "cidr": input.cidr,
            "gateway": input.gateway,
            "exclude": input.exclude,
            "zone": input.zone,
        },
        "dryRun": input.dry_run,
    });
    let data = documents::run(client, CREATE, variables, !input.dry_run)?;
    let done = &data["createPublicPoolDone"];
    let put = match done["action"].as_str() {
        Some("CREATED") => Put::Created,
        Some("UNCHANGED") => Put::Unchanged,
        _ => return Err(bad_answer(client.url(), "a pool put no way it knows")),
    };
    let m = pool(client.url(), done)?;
    local::show_created(&m, put, args.dry_run, g, out)
}

/// `pool delete`.
pub fn delete(
    client: &mut Client,
    g: &GlobalArgs,
    args: &PoolDeleteArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let input = local::delete_input(g, args);
    PoolDelete::new(&input)?;
    let variables = json!({
        "name": input.name,
        "namespace": input.namespace,
        "dryRun": input.dry_run,
    });
    let data = documents::run(client, DELETE, variables, !input.dry_run)?;
    let m = pool(client.url(), &data["deletePool"])?;
    local::show_deleted(&m, args.dry_run, g, out)
}

/// The `IPAMPool` document an answer carries.
fn pool(url: &str, v: &Value) -> Result<PoolManifest> {
    crate::yaml::decode_pool(documents::manifest(url, v)?).map_err(|e| bad_answer(url, &e))
}
