//! `list`, `pool list` and `pool show` through a server: the selectors validated by the local command's
//! constructor, sent as variables; the answer's manifests decoded with the same codec and
//! printed by the local command's printer.

mod map;

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Value, json};

use super::documents::{self, ALLOCATIONS, POOL_SHOWN, POOLS, bad_answer, texts};
use super::supernets::{self, vpc_holder};
use super::transport::Client;
use crate::cli::cmd::pool::{PoolShown, ShownSubnet};
use crate::cli::output::Held;
use crate::cli::{GlobalArgs, ListArgs, PoolShowArgs};
use crate::engine::range_holder::Holder;
use crate::engine::subnet_usage::SubnetStatus;
use crate::error::{Error, Result};
use crate::model::candidates::Usage;
use crate::model::{Metadata, PoolKind, PoolManifest};
use crate::yaml;

/// `list`.
pub fn list(
    client: &mut Client,
    g: &GlobalArgs,
    args: &ListArgs,
    out: &mut dyn Write,
) -> Result<()> {
    // Exit 2 on a malformed selector, as locally, before anything is sent.
    crate::cli::cmd::list::query(args.pool.as_deref(), args.address.as_deref(), &args.select)?;
    if let Some(mac) = &args.mac {
        crate::engine::request::field::flag("--mac", crate::model::mac::Mac::parse(mac))?;
    }
    if let Some(h) = &args.host_name {
        crate::engine::request::field::flag("--host-name", crate::model::host_name::parse(h))?;
    }
    let s = &args.select;
    let variables = json!({
        "namespace": g.namespace,
        "pool": args.pool,
        "owner": s.owner,
        "uid": s.uid,
        "mac": args.mac,
        "selectors": {
            "address": args.address,
            "kind": s.kind,
            "within": s.within,
            "labels": s.labels,
            "tenant": s.tenant,
            "subnet": args.subnet,
            "hostName": args.host_name,
            "expired": args.expired,
        },
    });
    let data = documents::run(client, ALLOCATIONS, variables, false)?;
    let url = client.url().to_owned();
    let mut found = Vec::new();
    let mut vpcs = BTreeMap::new();
    for a in data["allocations"].as_array().into_iter().flatten() {
        let text = a["manifest"]
            .as_str()
            .ok_or_else(|| bad_answer(&url, "no manifest"))?;
        let m = yaml::decode_allocation(text).map_err(|e| bad_answer(&url, &e))?;
        if let Some(vpc) = a["vpc"].as_str() {
            vpcs.insert(key(&m.metadata), vpc_holder(&url, &m.spec.owner, vpc)?);
        }
        found.push(m);
    }
    let claims = supernets::claims(&url, &data["prefixClaims"])?;
    if claims.is_empty() {
        return crate::cli::cmd::list::show(
            &found,
            &mut |m| Ok(vpcs.get(&key(&m.metadata)).cloned()),
            g,
            out,
        );
    }
    let ranges: BTreeMap<_, _> = claims
        .iter()
        .filter_map(|(m, vpc)| Some((key(&m.metadata), vpc.clone()?)))
        .collect();
    let prefixes: Vec<_> = claims.into_iter().map(|(m, _)| m).collect();
    crate::cli::cmd::list::show_with_prefixes(
        &found,
        &prefixes,
        &mut |held| {
            Ok(match held {
                Held::Address(m) => vpcs.get(&key(&m.metadata)).cloned(),
                Held::Prefix(m) => ranges.get(&key(&m.metadata)).cloned(),
            })
        },
        g,
        out,
    )
}

fn key(m: &Metadata) -> (Option<String>, String) {
    (
        m.namespace.as_ref().map(ToString::to_string),
        m.name.clone(),
    )
}

/// `pool list`.
pub fn pool_list(client: &mut Client, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let data = documents::run(client, POOLS, json!({"namespace": g.namespace}), false)?;
    let url = client.url().to_owned();
    let pools = data["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| pool_of(&url, p))
        .collect::<Result<Vec<_>>>()?;
    // Each supernet's prefixes, or the error that kept the server from reading them.
    let answers: BTreeMap<_, &Value> = data["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(&pools)
        .map(|(p, (m, _))| (key(&m.metadata), p))
        .collect();
    let supernet = |m: &PoolManifest| {
        let p = answers
            .get(&key(&m.metadata))
            .copied()
            .unwrap_or(&Value::Null);
        if p["supernetError"].is_object() {
            Err(documents::answered(&p["supernetError"]))
        } else if p["supernet"].is_object() {
            supernets::usage(&url, &p["supernet"])
        } else {
            Err(bad_answer(&url, "a supernet without its prefixes"))
        }
    };
    crate::cli::cmd::pool::show_list(&pools, &supernet, g, out)
}

/// `pool show` of an address pool.
pub fn pool_show(
    client: &mut Client,
    g: &GlobalArgs,
    args: &PoolShowArgs,
    out: &mut dyn Write,
) -> Result<()> {
    if args.map {
        return map::pool_map(client, g, args, out);
    }
    let pool = crate::engine::request::field::pool_ref(g.namespace.as_deref(), &args.pool)?;
    // A `--within` that does not parse is not sent: the local check refuses it (exit 2)
    // once the pool is found, as the local command does, after a pool not found (exit 3).
    let within = args
        .within
        .as_deref()
        .filter(|w| crate::engine::request::field::prefix("--within", w).is_ok());
    let variables = json!({"name": args.pool, "namespace": g.namespace, "within": within});
    let data = documents::run(client, POOL_SHOWN, variables, false)?;
    let url = client.url().to_owned();
    let shown = &data["poolShown"];
    if shown.is_null() {
        return Err(Error::NotFound {
            message: crate::store::read::pool_missing(&pool),
            hint: None,
        });
    }
    let (manifest, usage) = pool_of(&url, shown)?;
    if manifest.spec.kind == PoolKind::Supernet {
        let prefixes = supernets::usage(&url, &shown["supernet"])?;
        let held: Vec<_> = supernets::claims(&url, &shown["claims"])?
            .into_iter()
            .map(|(c, vpc)| {
                let holder = Holder {
                    owner: c.spec.owner,
                    vpc,
                };
                (c.spec.prefix, holder)
            })
            .collect();
        return crate::cli::cmd::supernet::print(&manifest, &prefixes, &held, g, out);
    }
    let within = crate::cli::cmd::pool_map::within(args, &pool, &manifest)?;
    let subnets = shown["subnets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            Ok(ShownSubnet {
                name: s["name"].as_str().unwrap_or_default().to_owned(),
                cidr: s["cidr"].as_str().unwrap_or_default().to_owned(),
                status: SubnetStatus {
                    usage: usage_of(&url, &s["usage"])?,
                    free_ranges: texts(&s["usage"]["freeRanges"]),
                },
            })
        })
        .collect::<Result<_>>()?;
    let shown = PoolShown {
        pool: &pool,
        manifest: &manifest,
        within,
        usage,
        free: texts(&shown["usage"]["freeRanges"]),
        subnets,
    };
    crate::cli::cmd::pool::show_pool(shown, g, out)
}

/// A `Pool` (or a `PoolShown`) as its manifest and usage.
fn pool_of(url: &str, p: &Value) -> Result<(PoolManifest, Usage)> {
    let text = p["manifest"]
        .as_str()
        .ok_or_else(|| bad_answer(url, "no manifest"))?;
    let m = yaml::decode_pool(text).map_err(|e| bad_answer(url, &e))?;
    // `pools` gives the figures beside the manifest, `poolShown` under `usage`.
    let figures = if p["usage"].is_object() {
        &p["usage"]
    } else {
        p
    };
    Ok((m, usage_of(url, figures)?))
}

/// Usage figures as the model's [`Usage`].
pub(super) fn usage_of(url: &str, p: &Value) -> Result<Usage> {
    let count = |key: &str| -> Result<u128> {
        p[key]
            .as_str()
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| bad_answer(url, &format!("`{key}` is not a count")))
    };
    let small = |key: &str| -> Result<u64> {
        u64::try_from(count(key)?).map_err(|_| bad_answer(url, &format!("`{key}` is too large")))
    };
    let usage = Usage {
        candidates: count("candidates")?,
        allocated: small("allocated")?,
        off_candidates: small("offCandidates")?,
        free: count("free")?,
        percent_used: p["percentUsed"].as_f64().unwrap_or(0.0),
    };
    Ok(usage)
}
