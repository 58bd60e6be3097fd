//! `ipamctl report`: every pool of a store with its usage, its map, its free ranges, its
//! stored subnets and its largest holders, as data or as one self-contained HTML page
//! (inline CSS and SVG, no script, nothing fetched) for a wiki or a CI artifact. Pure: it
//! takes what was read. Counts are written as the tables write them
//! ([`readable_count`](crate::model::candidates::readable_count): `2^64 - 4`), the exact
//! value in the JSON and in the page's tooltips. This file computes the data; [`html`]
//! renders the page.

pub mod html;

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Serialize;

use crate::cli::map::{Map, drawable};
use crate::cli::output::Named;
use crate::engine::range_holder::Holder as ClaimHolder;
use crate::engine::subnet_usage::SubnetStatus;
use crate::model::candidates::Usage;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::subnet::{SubnetManifest, pool_candidates};
use crate::model::{AllocationManifest, PoolKind, PoolManifest};

/// How many holders a pool's entry names, largest first.
pub const TOP_HOLDERS: usize = 5;

/// How many free ranges a pool's entry names before it counts the rest.
pub const FREE_RANGES: usize = 12;

/// How many owners a holder's entry names.
const OWNERS: usize = 4;

/// One holder: the owners (kind/name) that share one uid (the NICs of one VM), or one owner
/// without a uid, and how many addresses they hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// The first of its owners by name, `KIND/NAME`: how the report names it.
    pub holder: String,
    /// Its owners (kind/name) in name order, as many as fit ([`OWNERS`]).
    pub owners: Vec<String>,
    /// How many owners it has in all.
    #[serde(rename = "ownerCount")]
    pub owner_count: usize,
    /// The uid its owners share, if they have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// How many addresses.
    pub addresses: usize,
}

impl Holder {
    /// The holder in one cell: `VirtualMachine/web-01/0`, or `VirtualMachine/web-01/0 and 1
    /// more` when several owners share its uid.
    pub fn name(&self) -> String {
        match self.owner_count {
            0 | 1 => self.holder.clone(),
            n => format!("{} and {} more", self.holder, n - 1),
        }
    }
}

/// A stored subnet of a pool's entry, with its usage as `subnet show` counts it.
#[derive(Clone, Debug, Serialize)]
pub struct SubnetReport {
    /// The manifest.
    #[serde(flatten)]
    pub manifest: SubnetManifest,
    /// Its usage and free ranges.
    pub status: SubnetStatus,
}

/// A pool's entry.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolReport {
    /// The manifest.
    #[serde(flatten)]
    pub manifest: PoolManifest,
    /// What the report adds.
    pub status: PoolStatus,
    /// The map, when the pool is no larger than a map draws.
    #[serde(skip)]
    pub map: Option<Map>,
}

/// The `status` of a pool's entry.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The usage figures: candidates are the pool's without what its subnets keep out
    /// (network, broadcast, gateway, reserved), so candidates = allocated among them + free.
    #[serde(flatten)]
    pub usage: Usage,
    /// The first free ranges.
    pub free_ranges: Vec<String>,
    /// How many more free ranges there are.
    pub more_free_ranges: usize,
    /// The stored subnets, in name order.
    pub subnets: Vec<SubnetReport>,
    /// How many holders there are in all.
    pub holders: usize,
    /// When every holder holds the same number of addresses (and there are two or more),
    /// that number: no holder is larger than another.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_holder_has: Option<usize>,
    /// The largest holders, largest first, then by name.
    pub largest_holders: Vec<Holder>,
    /// A supernet's prefixes: what it hands out instead of addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefixes: Option<PrefixesReport>,
}

/// What a supernet pool's entry adds: its claimed prefixes and its free space, as `pool
/// show` gives them.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefixesReport {
    /// Each claimed prefix with its owner, lowest first.
    pub claimed: Vec<ClaimedPrefix>,
    /// The share of the pool's addresses inside claimed prefixes, 0–100, one decimal.
    pub percent_claimed: f64,
    /// The largest free block (absent when the pool is full).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_free: Option<String>,
    /// Free blocks of each handed-out length.
    pub free_blocks: Vec<FreeBlocks>,
    /// Its largest holder in one cell ([`largest_claim_holder`]), as the table prints it.
    #[serde(skip)]
    pub largest_holder: String,
}

/// One claimed prefix of a supernet's entry.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimedPrefix {
    /// The prefix, in CIDR form.
    pub prefix: String,
    /// Its owner, `KIND/NAME`.
    pub owner: String,
    /// The owner's uid, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Who holds it by name: `VPC tenant-1/prod/a1` for a VPC's range, else the owner.
    pub holder: String,
    /// The VPC whose range it is (namespace, name, uid), if it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vpc: Option<crate::engine::range_holder::VpcHolder>,
}

/// How many free blocks of one length a supernet has.
#[derive(Clone, Debug, Serialize)]
pub struct FreeBlocks {
    /// The length.
    pub length: u8,
    /// How many: a number up to 2^53, a decimal string above, as every JSON count
    /// ([`crate::model::candidates::exact`]).
    #[serde(serialize_with = "crate::model::candidates::exact")]
    pub count: u128,
}

impl PrefixesReport {
    /// The entry of a supernet `pool` whose claims are `claims`, each with its holder.
    fn of(pool: &PoolManifest, claims: &[(PrefixClaimManifest, ClaimHolder)]) -> PrefixesReport {
        let manifests: Vec<PrefixClaimManifest> = claims.iter().map(|(c, _)| c.clone()).collect();
        let usage = crate::engine::prefix::usage(pool, &manifests);
        let mut claimed: Vec<&(PrefixClaimManifest, ClaimHolder)> = claims.iter().collect();
        claimed.sort_by_key(|(c, _)| c.spec.prefix);
        let bits = u32::from(pool.spec.cidr.max_prefix_len());
        let size = |len: u8| 2f64.powi(i32::try_from(bits - u32::from(len)).unwrap_or(0));
        let inside: f64 = usage.claimed.iter().map(|p| size(p.prefix_len())).sum();
        let percent = inside / size(pool.spec.cidr.prefix_len()) * 100.0;
        PrefixesReport {
            claimed: claimed
                .iter()
                .map(|(c, h)| ClaimedPrefix {
                    prefix: c.spec.prefix.to_string(),
                    owner: c.spec.owner.to_string(),
                    uid: c.spec.owner.uid().map(ToString::to_string),
                    holder: h.display(),
                    vpc: h.vpc.clone(),
                })
                .collect(),
            percent_claimed: (percent * 10.0).round() / 10.0,
            largest_free: usage.largest.map(|b| b.to_string()),
            free_blocks: free_blocks(&usage),
            largest_holder: largest_claim_holder(&claimed),
        }
    }
}

/// A supernet's largest holder in one cell: the holder whose claims cover the most
/// addresses, named as `pool show` names it ([`ClaimHolder::display`]: `VPC t/x/red`), with
/// its prefix's length (`VPC t/x/red (/52)`), or how many it holds when a hand edit gave it
/// more than one (`FloatingIP/a (2 prefixes)`); `every holder has a /56` when two or more
/// cover as much, each alike (no holder is larger, none is named at random); `-` without
/// claims.
fn largest_claim_holder(claimed: &[&(PrefixClaimManifest, ClaimHolder)]) -> String {
    // Per holder (its name and uid): the addresses covered and the lengths of its prefixes.
    let mut by: BTreeMap<(String, Option<String>), (u128, Vec<u8>)> = BTreeMap::new();
    for (c, h) in claimed {
        let p = c.spec.prefix;
        let size = 1u128
            .checked_shl(u32::from(p.max_prefix_len() - p.prefix_len()))
            .unwrap_or(u128::MAX);
        let uid = h.owner.uid().map(ToString::to_string);
        let entry = by.entry((h.display(), uid)).or_default();
        entry.0 = entry.0.saturating_add(size);
        entry.1.push(p.prefix_len());
    }
    let holding = |lengths: &[u8]| match lengths {
        [one] => format!("/{one}"),
        many => format!("{} prefixes", many.len()),
    };
    let mut all: Vec<(String, u128, String)> = by
        .into_iter()
        .map(|((name, _), (size, lengths))| (name, size, holding(&lengths)))
        .collect();
    // Largest first, then by name: the order `BTreeMap` gave, kept among equals.
    all.sort_by_key(|h| std::cmp::Reverse(h.1));
    match all.as_slice() {
        [] => "-".into(),
        [first, _, ..] if all.iter().all(|h| h.1 == first.1 && h.2 == first.2) => {
            let a = if first.2.starts_with('/') { "a " } else { "" };
            format!("every holder has {a}{}", first.2)
        }
        [first, ..] => format!("{} ({})", first.0, first.2),
    }
}

/// A supernet's free blocks of each handed-out length, as `pool show` and the report give
/// them.
pub fn free_blocks(usage: &crate::engine::prefix::Usage) -> Vec<FreeBlocks> {
    usage
        .free
        .iter()
        .map(|(length, n)| FreeBlocks {
            length: *length,
            count: *n,
        })
        .collect()
}

impl PoolStatus {
    /// The largest holder in one cell: `NAME (N)`, `every holder has N` when none is larger,
    /// `-` without allocations.
    pub fn largest_holder(&self) -> String {
        if let Some(p) = &self.prefixes {
            return p.largest_holder.clone();
        }
        match (self.every_holder_has, self.largest_holders.first()) {
            (Some(n), _) => format!("every holder has {n}"),
            (None, Some(h)) => format!("{} ({})", h.name(), h.addresses),
            (None, None) => "-".into(),
        }
    }
}

impl Named for PoolReport {
    fn resource(&self) -> String {
        self.manifest.resource()
    }
}

/// The entry of `pool`, whose allocations are `held`, whose stored subnets are `subnets`
/// (with their usage) and, for a supernet, whose prefix claims are `claims` (each with its
/// holder by name).
pub fn pool_report(
    pool: PoolManifest,
    held: &[AllocationManifest],
    subnets: Vec<(SubnetManifest, SubnetStatus)>,
    claims: &[(PrefixClaimManifest, ClaimHolder)],
) -> PoolReport {
    let supernet = pool.spec.kind == PoolKind::Supernet;
    let taken: Vec<IpAddr> = held.iter().map(|m| m.spec.address).collect();
    let manifests: Vec<SubnetManifest> = subnets.iter().map(|(m, _)| m.clone()).collect();
    let candidates = pool_candidates(&pool, &manifests);
    let usage = Usage::of_candidates(&candidates, &taken);
    let mut free =
        candidates.format_spans(&candidates.clone().without(taken.iter().copied()).spans());
    let more_free_ranges = free.len().saturating_sub(FREE_RANGES);
    free.truncate(FREE_RANGES);
    let name = match &pool.metadata.namespace {
        Some(ns) => format!("{ns}/{}", pool.metadata.name),
        None => pool.metadata.name.clone(),
    };
    // A supernet is drawn by its prefixes (`prefix_map`), not address by address.
    let map = (!supernet && drawable(pool.spec.cidr)).then(|| {
        let map = Map::new(&name, &pool, &manifests, None, &taken);
        if map.per_address() {
            map.with_owners(
                held.iter()
                    .map(|m| (m.spec.address, m.spec.owner.with_uid())),
            )
        } else {
            map
        }
    });
    let all = holders(held);
    let every_holder_has = match all.as_slice() {
        [first, _, ..] if all.iter().all(|h| h.addresses == first.addresses) => {
            Some(first.addresses)
        }
        _ => None,
    };
    let count = all.len();
    PoolReport {
        status: PoolStatus {
            usage,
            free_ranges: free,
            more_free_ranges,
            subnets: subnets
                .into_iter()
                .map(|(manifest, status)| SubnetReport { manifest, status })
                .collect(),
            holders: count,
            every_holder_has,
            largest_holders: all.into_iter().take(TOP_HOLDERS).collect(),
            prefixes: supernet.then(|| PrefixesReport::of(&pool, claims)),
        },
        manifest: pool,
        map,
    }
}

/// Every holder of `held` (by uid, or by owner where there is none), largest first, then by
/// name, then by uid: the same order whatever order the allocations were read in.
fn holders(held: &[AllocationManifest]) -> Vec<Holder> {
    let mut by: BTreeMap<String, (Vec<String>, Option<String>, usize)> = BTreeMap::new();
    for m in held {
        let owner = &m.spec.owner;
        let key = match owner.uid() {
            Some(uid) => format!("uid {uid}"),
            None => format!("owner {owner}"),
        };
        let entry = by.entry(key).or_default();
        let name = owner.to_string();
        if !entry.0.contains(&name) {
            entry.0.push(name);
        }
        entry.1 = owner.uid().map(|u| u.to_string());
        entry.2 += 1;
    }
    let mut all: Vec<Holder> = by
        .into_values()
        .map(|(mut owners, uid, addresses)| {
            owners.sort();
            let owner_count = owners.len();
            let holder = owners[0].clone();
            owners.truncate(OWNERS);
            Holder {
                holder,
                owners,
                owner_count,
                uid,
                addresses,
            }
        })
        .collect();
    all.sort_by(|a, b| {
        b.addresses
            .cmp(&a.addresses)
            .then_with(|| a.holder.cmp(&b.holder))
            .then_with(|| a.uid.cmp(&b.uid))
    });
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Owner, PoolName, Uid};

    fn held(pool: &PoolName, n: u8, owner: &str, uid: Option<&str>) -> AllocationManifest {
        let owner = Owner::parse(owner, uid.map(|u| Uid::new(u).unwrap())).unwrap();
        AllocationManifest::new(pool, None, IpAddr::from([10u8, 0, 0, n]), owner)
    }

    #[test]
    fn holders_are_counted_by_uid_largest_first() {
        let pool = PoolName::new("p").unwrap();
        let all = [
            held(&pool, 1, "VirtualMachine/web-01/0", Some("u1")),
            held(&pool, 2, "VirtualMachine/web-01/1", Some("u1")),
            held(&pool, 3, "FloatingIP/f", None),
            held(&pool, 4, "VirtualMachine/db/0", Some("u2")),
        ];
        let top = holders(&all);
        assert_eq!(top[0].holder, "VirtualMachine/web-01/0");
        assert_eq!(top[0].name(), "VirtualMachine/web-01/0 and 1 more");
        assert_eq!(top[0].uid.as_deref(), Some("u1"));
        assert_eq!(top[0].addresses, 2);
        assert_eq!(
            top[0].owners,
            ["VirtualMachine/web-01/0", "VirtualMachine/web-01/1"]
        );
        assert_eq!(top.len(), 3);
        // Ties by name, whatever the uids.
        assert_eq!(top[1].holder, "FloatingIP/f");
        assert_eq!(top[2].holder, "VirtualMachine/db/0");
    }

    #[test]
    fn a_supernets_largest_holder_covers_the_most_addresses() {
        let pool = PoolName::new("sn").unwrap();
        let claim = |prefix: &str, owner: &str| {
            let owner = Owner::parse(owner, None).unwrap();
            let m = PrefixClaimManifest::new(&pool, None, prefix.parse().unwrap(), owner.clone());
            (m, ClaimHolder { owner, vpc: None })
        };
        let cell = |claims: &[(PrefixClaimManifest, ClaimHolder)]| {
            largest_claim_holder(&claims.iter().collect::<Vec<_>>())
        };
        assert_eq!(cell(&[]), "-");
        let a = claim("2001:db8::/56", "FloatingIP/a");
        let b = claim("2001:db8:0:100::/56", "FloatingIP/b");
        let big = claim("2001:db8:0:1000::/52", "FloatingIP/z");
        assert_eq!(cell(&[a.clone(), b.clone()]), "every holder has a /56");
        assert_eq!(
            cell(&[a.clone(), big.clone(), b.clone()]),
            "FloatingIP/z (/52)"
        );
        // Two claims of one owner (a hand edit) are counted together: 2 /56s beat one.
        let a2 = claim("2001:db8:0:200::/56", "FloatingIP/a");
        assert_eq!(cell(&[a, b, a2]), "FloatingIP/a (2 prefixes)");
    }
}
