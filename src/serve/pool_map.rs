//! `poolMap`: what `pool show --map` draws of an address pool ([`crate::engine::pool::Drawn`]),
//! for a caller whose scope reads the pool: its manifest and subnets, the whole pool's
//! usage, and only the addresses held inside the view, as runs of consecutive addresses
//! (a pool allocated lowest first is a few runs however many it holds); the holders of
//! those addresses only when asked (an SVG map of addresses names them).

use std::net::IpAddr;

use async_graphql::SimpleObject;

use super::objects::Figures;
use crate::engine::scope::Scope;
use crate::engine::warning::Warnings;
use crate::error::Result;
use crate::model::PoolRef;
use crate::model::candidates::{address, ordinal};
use crate::store::Store;

/// An address pool's map, as `pool show --map` draws it.
#[derive(SimpleObject, Debug)]
pub struct PoolMap {
    /// The `IPAMPool` document, as the store keeps it.
    pub manifest: String,
    /// Its stored subnets' `Subnet` documents, in name order.
    pub subnets: Vec<String>,
    /// The whole pool's usage (its `freeRanges` left out, always empty: the map does not
    /// read them).
    pub usage: Figures,
    /// The addresses held inside the view (`within`, else the pool), ascending, as runs:
    /// `10.0.0.1-10.0.0.200`, or one address alone; none when the view is too large to
    /// draw (an IPv4 view larger than a /12).
    pub held: Vec<String>,
    /// Who holds each address of the view (`KIND/NAME (uid U)`), when asked with
    /// `owners: true`; else none.
    pub owners: Vec<MapOwner>,
}

/// Who holds one address of a map: the tooltip of its cell.
#[derive(SimpleObject, Debug)]
pub struct MapOwner {
    pub address: String,
    pub holder: String,
}

/// `poolMap` of `pool` over `within` for the caller of `scope` (not found outside it), with
/// the holders of the view's addresses if `owners`.
pub fn pool_map(
    store: &dyn Store,
    scope: &Scope,
    pool: &PoolRef,
    within: Option<ipnet::IpNet>,
    owners: bool,
) -> Result<PoolMap> {
    let drawn = crate::engine::pool::map(store, scope, pool, within)?;
    let view = within.unwrap_or(drawn.manifest.spec.cidr);
    let owners = if owners && crate::engine::pool::drawable(view) {
        // Warnings (an allocation that does not parse) are the local command's to print.
        let mut warnings = Warnings::default();
        crate::engine::pool::owners(store, scope, pool, view, &mut warnings)?
    } else {
        Vec::new()
    };
    Ok(PoolMap {
        manifest: crate::yaml::encode(&drawn.manifest),
        subnets: drawn.subnets.iter().map(crate::yaml::encode).collect(),
        usage: Figures::new(&drawn.usage, Vec::new()),
        held: runs(&drawn.held),
        owners: owners
            .into_iter()
            .map(|(a, holder)| MapOwner {
                address: a.to_string(),
                holder,
            })
            .collect(),
    })
}

/// The ascending addresses `held` as runs of consecutive addresses: `FIRST-LAST`, or one
/// address alone.
fn runs(held: &[IpAddr]) -> Vec<String> {
    let mut runs: Vec<(IpAddr, u128, u128)> = Vec::new();
    for &a in held {
        let n = ordinal(a);
        match runs.last_mut() {
            Some((first, _, last))
                if first.is_ipv6() == a.is_ipv6() && last.checked_add(1) == Some(n) =>
            {
                *last = n;
            }
            _ => runs.push((a, n, n)),
        }
    }
    runs.into_iter()
        .map(|(first, lo, hi)| {
            if lo == hi {
                first.to_string()
            } else {
                format!("{first}-{}", address(first.is_ipv6(), hi))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_addresses_are_one_run() {
        let held: Vec<IpAddr> = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.7", "10.0.1.0"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(runs(&held), ["10.0.0.1-10.0.0.3", "10.0.0.7", "10.0.1.0"]);
    }
}
