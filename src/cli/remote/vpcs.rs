//! `vpc get`, `vpc list`, `vpc create` and `vpc delete` through a server: the VPC (or what
//! was done to it) made again from its parts' manifests as stored (its pools, its router's
//! uplinks, the ranges it drew from supernets) and printed by the local command's printer.

use std::io::Write;

use serde_json::{Value, json};

use super::documents::{self, bad_answer};
use super::transport::Client;
use crate::cli::cmd::vpc as local;
use crate::cli::{GlobalArgs, VpcCreateArgs, VpcDeleteArgs};
use crate::engine::admin::{VpcCreate, VpcCreated, VpcDelete};
use crate::engine::vpc::{Created, Deleted, Made, Removal, Vpc, VpcMetadata};
use crate::error::{Error, Result};
use crate::model::{Namespace, Uid};
use crate::yaml;

/// `vpc create`'s mutation: what was done to each object.
const CREATE: &str = "mutation CreateVpc($input: CreateVpcInput!, $dryRun: Boolean) {
  createVpcDone(input: $input, dryRun: $dryRun) {
    uid
    claims { action manifest }
    pools { action manifest }
    uplink { action manifest }
  }
}";

/// `vpc delete`'s mutation: what was removed.
const DELETE: &str = "mutation DeleteVpc($name: String!, $namespace: String!, $ignoreNotFound: Boolean, $dryRun: Boolean) {
  deleteVpcDone(name: $name, namespace: $namespace, ignoreNotFound: $ignoreNotFound, dryRun: $dryRun) {
    absent
    removed { kind manifest }
    kept { code exit message hint }
  }
}";

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

/// `vpc create`.
pub fn create(
    client: &mut Client,
    g: &GlobalArgs,
    args: &VpcCreateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    // Exit 2 on what the local command refuses, before anything is sent.
    let (ns, _) = local::vpc_pool(g, &args.name, false)?;
    let input = local::create_input(args, &ns)?;
    VpcCreate::new(&input)?;
    let from_pools: Vec<Value> = input
        .from_pools
        .iter()
        .map(|f| json!({"pool": f.pool, "prefixLength": f.prefix_length}))
        .collect();
    let variables = json!({
        "input": {
            "name": input.name,
            "namespace": input.namespace,
            "cidrs": input.cidrs,
            "fromPools": from_pools,
            "uid": input.uid,
            "macPrefixes": input.mac_prefixes,
            "uplinkZone": input.uplink_zone,
        },
        "dryRun": input.dry_run,
    });
    let data = documents::run(client, CREATE, variables, !input.dry_run)?;
    let made = created(client.url(), &data["createVpcDone"])?;
    local::show_created(made, args.dry_run, g, out)
}

/// A `VpcCreation` as the engine's [`VpcCreated`].
fn created(url: &str, v: &Value) -> Result<VpcCreated> {
    let bad = |why: String| bad_answer(url, &why);
    let made = |h: &Value| match h["action"].as_str() {
        Some("EXISTING") => Made::Existing,
        _ => Made::Created,
    };
    let claims = documents::each(v, "claims", |h| {
        let m = yaml::decode_prefix_claim(documents::manifest(url, h)?).map_err(bad)?;
        Ok((m, made(h)))
    })?;
    let pools = documents::each(v, "pools", |h| {
        let m = yaml::decode_pool(documents::manifest(url, h)?).map_err(bad)?;
        Ok((m, made(h)))
    })?;
    let uplink = match &v["uplink"] {
        Value::Null => None,
        h => Some(documents::allocated(url, h)?),
    };
    let uid = Uid::parse_uuid(v["uid"].as_str().unwrap_or_default()).map_err(bad)?;
    Ok(VpcCreated {
        created: Created { uid, claims, pools },
        uplink,
    })
}

/// `vpc delete`.
pub fn delete(
    client: &mut Client,
    g: &GlobalArgs,
    args: &VpcDeleteArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let input = local::delete_input(g, args)?;
    VpcDelete::new(&input)?;
    let target = (
        input.name.as_str(),
        Some(input.namespace.as_str()),
        input.ignore_not_found,
        input.dry_run,
    );
    let deletion = documents::delete(client, (DELETE, "deleteVpcDone"), target, |url, d| {
        Ok(Deleted {
            removed: documents::each(d, "removed", |r| removal(url, r))?,
            kept: (!d["kept"].is_null()).then(|| documents::answered(&d["kept"])),
        })
    })?;
    local::show_deleted(deletion, args.dry_run, g, out)
}

/// A `Removed` as the engine's [`Removal`].
fn removal(url: &str, r: &Value) -> Result<Removal> {
    let text = documents::manifest(url, r)?;
    let bad = |why: String| bad_answer(url, &why);
    Ok(match r["kind"].as_str() {
        Some("ALLOCATION") => Removal::Allocation(yaml::decode_allocation(text).map_err(bad)?),
        Some("SUBNET") => Removal::Subnet(yaml::decode_subnet(text).map_err(bad)?),
        Some("POOL") => Removal::Pool(yaml::decode_pool(text).map_err(bad)?),
        Some("PREFIX_CLAIM") => Removal::Claim(yaml::decode_prefix_claim(text).map_err(bad)?),
        _ => return Err(bad("a removal of no kind it knows".into())),
    })
}
