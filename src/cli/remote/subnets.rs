//! `subnet list`, `subnet show`, `subnet create` and `subnet delete` through a server: the
//! arguments validated by the local command's constructors, and the answer's manifests
//! decoded with the same codec and printed by the local command's printer.

use std::io::Write;

use serde_json::{Value, json};

use super::documents::{self, bad_answer, texts};
use super::reads::usage_of;
use super::transport::Client;
use crate::cli::cmd::subnet as local;
use crate::cli::{GlobalArgs, SubnetCreateArgs, SubnetDeleteArgs, SubnetNameArgs};
use crate::engine::admin::{SubnetCreate, SubnetDelete};
use crate::engine::subnet::Put;
use crate::engine::subnet_usage::SubnetStatus;
use crate::error::{Error, Result};
use crate::model::subnet::SubnetManifest;
use crate::yaml;

/// The fields of a `SubnetShown` this client reads.
const SHOWN: &str =
    "manifest usage { candidates allocated offCandidates free percentUsed freeRanges }";

/// `subnet list`.
pub fn list(
    client: &mut Client,
    g: &GlobalArgs,
    pool: Option<&str>,
    out: &mut dyn Write,
) -> Result<()> {
    if let Some(p) = pool {
        crate::engine::request::field::flag("--pool", crate::model::PoolName::new(p))?;
    }
    let document = format!(
        "query Subnets($namespace: String, $pool: String) {{ subnetsShown(namespace: $namespace, pool: $pool) {{ {SHOWN} }} }}"
    );
    let variables = json!({"namespace": g.namespace, "pool": pool});
    let data = documents::run(client, &document, variables, false)?;
    let url = client.url().to_owned();
    let listed = documents::each(&data, "subnetsShown", |s| shown(&url, s))?;
    local::show_list(&listed, g, out)
}

/// `subnet show`.
pub fn show(
    client: &mut Client,
    g: &GlobalArgs,
    args: &SubnetNameArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let ns = crate::engine::request::field::namespace(g.namespace.as_deref())?;
    let name = local::name(&args.name)?;
    let document = format!(
        "query Subnet($name: String!, $namespace: String) {{ subnetShown(name: $name, namespace: $namespace) {{ {SHOWN} }} }}"
    );
    let variables = json!({"name": args.name, "namespace": g.namespace});
    let data = documents::run(client, &document, variables, false)?;
    if data["subnetShown"].is_null() {
        return Err(Error::NotFound {
            message: crate::engine::subnet::missing(ns.as_ref(), &name),
            hint: None,
        });
    }
    let (s, status) = shown(client.url(), &data["subnetShown"])?;
    local::show_one(&s, &status, g, out)
}

/// A `SubnetShown` as its manifest and status.
fn shown(url: &str, s: &Value) -> Result<(SubnetManifest, SubnetStatus)> {
    let m = subnet(url, s)?;
    let status = SubnetStatus {
        usage: usage_of(url, &s["usage"])?,
        free_ranges: texts(&s["usage"]["freeRanges"]),
    };
    Ok((m, status))
}

/// The `Subnet` document an answer carries.
fn subnet(url: &str, v: &Value) -> Result<SubnetManifest> {
    yaml::decode_subnet(documents::manifest(url, v)?).map_err(|e| bad_answer(url, &e))
}

/// `subnet create`.
pub fn create(
    client: &mut Client,
    g: &GlobalArgs,
    args: &SubnetCreateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let input = local::create_input(g, args);
    // Exit 2 on what the local command refuses, before anything is sent.
    SubnetCreate::new(&input)?;
    let document = "mutation CreateSubnet($input: CreateSubnetInput!, $dryRun: Boolean) {
  createSubnetDone(input: $input, dryRun: $dryRun) { action manifest }
}";
    let variables = json!({
        "input": {
            "name": input.name,
            "namespace": input.namespace,
            "pool": input.pool,
            "cidr": input.cidr,
            "prefixLength": input.prefix_length,
            "gateway": input.gateway,
            "reserved": input.reserved,
        },
        "dryRun": input.dry_run,
    });
    let data = documents::run(client, document, variables, !input.dry_run)?;
    let done = &data["createSubnetDone"];
    let put = match done["action"].as_str() {
        Some("CREATED") => Put::Created,
        Some("CONFIGURED") => Put::Configured,
        Some("UNCHANGED") => Put::Unchanged,
        _ => return Err(bad_answer(client.url(), "a subnet put no way it knows")),
    };
    let m = subnet(client.url(), done)?;
    local::show_created(&m, put, args, g, out)
}

/// `subnet delete`.
pub fn delete(
    client: &mut Client,
    g: &GlobalArgs,
    args: &SubnetDeleteArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let input = local::delete_input(g, args);
    SubnetDelete::new(&input)?;
    let document = "mutation DeleteSubnet($name: String!, $namespace: String, $ignoreNotFound: Boolean, $dryRun: Boolean) {
  deleteSubnetDone(name: $name, namespace: $namespace, ignoreNotFound: $ignoreNotFound, dryRun: $dryRun) { absent manifest }
}";
    let target = (
        input.name.as_str(),
        input.namespace.as_deref(),
        input.ignore_not_found,
        input.dry_run,
    );
    let deletion = documents::delete(client, (document, "deleteSubnetDone"), target, subnet)?;
    local::show_deleted(deletion, args.dry_run, g, out)
}
