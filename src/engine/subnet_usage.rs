//! Subnets with their usage, as `subnet list` and `subnet show` give them: how many of a
//! subnet's candidates the allocations of its pool hold, and its free ranges.

use std::net::IpAddr;

use serde::Serialize;

use crate::error::Result;
use crate::model::candidates::Usage;
use crate::model::subnet::SubnetManifest;
use crate::model::{Namespace, PoolName, SubnetName, pool_addresses};
use crate::store::read::load_pool;
use crate::store::{ObjectKind, Store};

/// A subnet's usage: the figures, then its free ranges (the `status` of its views).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    /// Candidates, allocated, free and the share used, of the subnet alone.
    #[serde(flatten)]
    pub usage: Usage,
    /// The free candidates, as [`crate::model::candidates::Candidates::format_spans`]
    /// writes them.
    pub free_ranges: Vec<String>,
}

/// The usage of `s` given the names of its scope's allocations (`names`); exit 3 if its
/// pool does not exist.
fn status(store: &dyn Store, s: &SubnetManifest, names: &[String]) -> Result<SubnetStatus> {
    let pool = load_pool(store, &s.pool())?;
    let candidates = s.candidates(&pool);
    let inside: Vec<IpAddr> = pool_addresses(names, &s.spec.pool)
        .filter(|a| s.spec.cidr.contains(a))
        .collect();
    let held = inside.iter().filter(|a| candidates.contains(**a)).count() as u64;
    let usage = Usage::from_counts(&candidates, inside.len() as u64, held);
    let free = candidates.format_spans(&candidates.clone().without(inside).spans());
    Ok(SubnetStatus {
        usage,
        free_ranges: free,
    })
}

/// `subnet list`: the subnets of `scopes` (of `pool` only, if given), scope by scope in
/// name order, each with its usage. Every subnet is read before any usage is counted.
pub fn list(
    store: &dyn Store,
    scopes: &[Option<Namespace>],
    pool: Option<&PoolName>,
) -> Result<Vec<(SubnetManifest, SubnetStatus)>> {
    let mut subnets: Vec<(Option<Namespace>, SubnetManifest)> = Vec::new();
    for ns in scopes {
        for s in crate::engine::subnet::list(store, ns.as_ref(), pool)? {
            subnets.push((ns.clone(), s));
        }
    }
    let mut rows = Vec::new();
    // One listing of allocations per scope: the subnets come scope by scope.
    let mut names: Option<(Option<Namespace>, Vec<String>)> = None;
    for (ns, s) in subnets {
        if names.as_ref().is_none_or(|(at, _)| *at != ns) {
            names = Some((ns.clone(), store.list(ObjectKind::Allocation, ns.as_ref())?));
        }
        let listed = &names.as_ref().expect("set above").1;
        let status = status(store, &s, listed)?;
        rows.push((s, status));
    }
    Ok(rows)
}

/// `subnet show`: the subnet `name` of scope `ns` (exit 3 if it does not exist) with its
/// usage.
pub fn show(
    store: &dyn Store,
    ns: Option<&Namespace>,
    name: &SubnetName,
) -> Result<(SubnetManifest, SubnetStatus)> {
    let s = crate::engine::subnet::load(store, ns, name)?;
    let names = store.list(ObjectKind::Allocation, ns)?;
    let status = status(store, &s, &names)?;
    Ok((s, status))
}
