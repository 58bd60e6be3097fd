//! `pool show --map` through a server: `poolMap` answers what the map draws (the pool, its
//! subnets, its usage, the addresses held inside the view), checked and drawn by the local
//! command's own functions ([`crate::cli::cmd::pool_map`]); a supernet is drawn from
//! `poolShown`'s claims, as `pool show` of one prints them.

use std::io::Write;
use std::net::IpAddr;

use serde_json::{Value, json};

use super::super::documents::{self, POOL_SHOWN, bad_answer, texts};
use super::super::supernets;
use super::super::transport::Client;
use crate::cli::cmd::pool_map;
use crate::cli::{GlobalArgs, PoolShowArgs};
use crate::engine::pool::Drawn;
use crate::engine::range_holder::Holder;
use crate::error::{Error, Result};
use crate::model::candidates::{address, ordinal};
use crate::model::{PoolKind, PoolRef};
use crate::yaml;

/// What the map of an address pool draws; its holders only when `$owners`.
const POOL_MAP: &str =
    "query PoolMap($name: String!, $namespace: String, $within: String, $owners: Boolean) {
  poolMap(name: $name, namespace: $namespace, within: $within, owners: $owners) {
    manifest
    subnets
    usage { candidates allocated offCandidates free percentUsed }
    held
    owners { address holder }
  }
}";

/// `pool show --map`.
pub fn pool_map(
    client: &mut Client,
    g: &GlobalArgs,
    args: &PoolShowArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let pool = crate::engine::request::field::pool_ref(g.namespace.as_deref(), &args.pool)?;
    // A `--within` that does not parse is not sent: the local checks refuse it (exit 2) once
    // the pool is known to exist and to be an address pool, as the local command does.
    let within = args
        .within
        .as_deref()
        .filter(|w| crate::engine::request::field::prefix("--within", w).is_ok());
    let mut variables = json!({"name": args.pool, "namespace": g.namespace, "within": within});
    let data = documents::run(client, POOL_MAP, variables.clone(), false)?;
    let url = client.url().to_owned();
    let answer = &data["poolMap"];
    if answer.is_null() {
        return Err(Error::NotFound {
            message: crate::store::read::pool_missing(&pool),
            hint: None,
        });
    }
    let text = documents::manifest(&url, answer)?;
    let manifest = yaml::decode_pool(text).map_err(|e| bad_answer(&url, &e))?;
    pool_map::refuse_format(g, &pool)?;
    if manifest.spec.kind == PoolKind::Supernet {
        let claims = supernet_claims(client, g, &pool)?;
        return pool_map::draw_supernet(g, &pool, &manifest, &claims, out);
    }
    let within = pool_map::view(args, &pool, &manifest)?;
    let subnets = texts(&answer["subnets"])
        .iter()
        .map(|s| yaml::decode_subnet(s).map_err(|e| bad_answer(&url, &e)))
        .collect::<Result<_>>()?;
    let drawn = Drawn {
        held: held(&url, &answer["held"], within.unwrap_or(manifest.spec.cidr))?,
        manifest,
        subnets,
        usage: super::usage_of(&url, &answer["usage"])?,
    };
    // Asked only by an SVG map of addresses: the holders are every allocation's to read.
    let mut owners = || {
        variables["owners"] = Value::Bool(true);
        let data = documents::run(client, POOL_MAP, variables.clone(), false)?;
        owners_of(&url, &data["poolMap"]["owners"])
    };
    pool_map::print(g, args, &pool, &drawn, within, &mut owners, out)
}

/// A supernet's claims as its map names them, from `poolShown`.
fn supernet_claims(
    client: &mut Client,
    g: &GlobalArgs,
    pool: &PoolRef,
) -> Result<Vec<(ipnet::IpNet, String)>> {
    let variables = json!({"name": pool.name.as_str(), "namespace": g.namespace});
    let data = documents::run(client, POOL_SHOWN, variables, false)?;
    let url = client.url().to_owned();
    if data["poolShown"].is_null() {
        return Err(Error::NotFound {
            message: crate::store::read::pool_missing(pool),
            hint: None,
        });
    }
    Ok(supernets::claims(&url, &data["poolShown"]["claims"])?
        .into_iter()
        .map(|(c, vpc)| {
            let holder = Holder {
                owner: c.spec.owner,
                vpc,
            };
            (c.spec.prefix, holder.display())
        })
        .collect())
}

/// The held addresses of `poolMap`, its runs (`FIRST-LAST` or one address) spelled out;
/// each must lie inside `view` (a run the server cannot have meant is refused, never
/// spelled out).
fn held(url: &str, runs: &Value, view: ipnet::IpNet) -> Result<Vec<IpAddr>> {
    let mut held = Vec::new();
    for run in texts(runs) {
        let (first, last) = run.split_once('-').unwrap_or((&run, &run));
        let parse = |a: &str| -> Result<IpAddr> {
            a.parse()
                .map_err(|_| bad_answer(url, &format!("`{run}` is not an address or a run")))
        };
        let (first, last) = (parse(first)?, parse(last)?);
        let (lo, hi) = (ordinal(first), ordinal(last));
        if !view.contains(&first) || !view.contains(&last) || hi < lo {
            return Err(bad_answer(url, &format!("`{run}` is not a run")));
        }
        held.extend((lo..=hi).map(|n| address(first.is_ipv6(), n)));
    }
    Ok(held)
}

/// The `owners` of `poolMap`, as the map's tooltips take them.
fn owners_of(url: &str, owners: &Value) -> Result<Vec<(IpAddr, String)>> {
    owners
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let a = o["address"]
                .as_str()
                .and_then(|a| a.parse().ok())
                .ok_or_else(|| bad_answer(url, "an owner without its address"))?;
            Ok((a, o["holder"].as_str().unwrap_or_default().to_owned()))
        })
        .collect()
}
