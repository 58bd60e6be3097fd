//! How a pool picks among its free candidates (`spec.pick`): the lowest (the default), or
//! the first at or above a position derived from the owner's identity, wrapping around
//! (`hashed`), so that two branches claiming for different owners rarely take one address.
//!
//! The position is a pure function of the pool and the owner's kind and name, the same on
//! every machine, store, front end and version: [`key`] is SHA-256 of a documented byte
//! string, and [`crate::model::candidates::Candidates::hashed_start`] turns it into a
//! candidate. The walk from there is [`crate::model::candidates::Candidates::wrapped_at`].

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::names::{Namespace, PoolName};
use crate::model::owner::Owner;

/// `spec.pick` of a pool of addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pick {
    /// The lowest free candidate (the default; omitted from the manifest).
    #[default]
    Lowest,
    /// The first free candidate at or above a position derived from the owner's kind and
    /// name and the pool, wrapping around to the lowest: two branches claiming for
    /// different owners rarely take the same address.
    Hashed,
}

impl Pick {
    /// Is this the default, which a manifest leaves out?
    pub fn is_lowest(&self) -> bool {
        *self == Pick::Lowest
    }
}

impl fmt::Display for Pick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pick::Lowest => "lowest",
            Pick::Hashed => "hashed",
        })
    }
}

/// The hashed pick's key of `owner` in pool (`ns`, `pool`): the first 16 bytes of the
/// SHA-256 of `ipamctl-pick-v1\n<namespace>\n<pool>\n<Kind>/<name>` (UTF-8, the namespace
/// empty for a cluster-scoped pool, no newline at the end), read as a big-endian number.
///
/// The uid is left out: an owner asking without its uid (a NIC that forgot it, a pull
/// request written before the VM exists) starts where it would with it. No newline can
/// occur in a namespace, pool or owner name, so no two inputs share a byte string.
///
/// # Examples
///
/// ```
/// # use ipamctl::model::{Owner, PoolName, pick::key};
/// let owner = Owner::parse("FloatingIP/fip-a", None).unwrap();
/// let k = key(None, &PoolName::new("edge").unwrap(), &owner);
/// // The same whatever the uid: `printf 'ipamctl-pick-v1\n\nedge\nFloatingIP/fip-a' | sha256sum`.
/// let uid = ipamctl::model::Uid::parse_uuid("0b6f0000-0000-4000-8000-00000000000a").unwrap();
/// let with_uid = Owner::parse("FloatingIP/fip-a", Some(uid)).unwrap();
/// assert_eq!(k, key(None, &PoolName::new("edge").unwrap(), &with_uid));
/// ```
pub fn key(ns: Option<&Namespace>, pool: &PoolName, owner: &Owner) -> u128 {
    let text = format!(
        "ipamctl-pick-v1\n{}\n{pool}\n{}/{}",
        ns.map(Namespace::as_str).unwrap_or_default(),
        owner.kind().as_str(),
        owner.name()
    );
    let digest = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest[..16]);
    u128::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(s: &str) -> Owner {
        Owner::parse(s, None).unwrap()
    }

    #[test]
    fn the_key_is_pinned_across_versions_and_machines() {
        // `printf 'ipamctl-pick-v1\n\nedge\nFloatingIP/fip-a' | sha256sum`, first 32 digits.
        // A change here moves every hashed pool's next claims: it must be a new version of
        // the byte string, never an edit of this one.
        let k = key(
            None,
            &PoolName::new("edge").unwrap(),
            &owner("FloatingIP/fip-a"),
        );
        assert_eq!(format!("{k:032x}"), PINNED_EDGE_FIP_A);
        let ns = Namespace::new("acme/prod").unwrap();
        let k = key(
            Some(&ns),
            &PoolName::new("vpc-main").unwrap(),
            &owner("VirtualMachine/web-01/0"),
        );
        assert_eq!(format!("{k:032x}"), PINNED_ACME_WEB01);
    }

    const PINNED_EDGE_FIP_A: &str = "11fc9cba8493d42e45b6246f0934248c";
    const PINNED_ACME_WEB01: &str = "80ff2b329494bb2af8215666aea75a02";

    #[test]
    fn every_part_of_the_identity_moves_the_key_but_the_uid() {
        let pool = PoolName::new("edge").unwrap();
        let base = key(None, &pool, &owner("FloatingIP/fip-a"));
        let ns = Namespace::new("edge").unwrap();
        for other in [
            key(None, &pool, &owner("FloatingIP/fip-b")),
            key(
                None,
                &PoolName::new("edge2").unwrap(),
                &owner("FloatingIP/fip-a"),
            ),
            key(Some(&ns), &pool, &owner("FloatingIP/fip-a")),
            key(None, &pool, &owner("Node/fip-a")),
        ] {
            assert_ne!(other, base);
        }
        let uid = crate::model::Uid::parse_uuid("0b6f0000-0000-4000-8000-00000000000a").unwrap();
        let with_uid = Owner::parse("FloatingIP/fip-a", Some(uid)).unwrap();
        assert_eq!(key(None, &pool, &with_uid), base);
    }

    #[test]
    fn pick_reads_and_writes_lowercase() {
        assert_eq!(serde_json::to_string(&Pick::Hashed).unwrap(), "\"hashed\"");
        let p: Pick = serde_json::from_str("\"lowest\"").unwrap();
        assert!(p.is_lowest());
        assert!(serde_json::from_str::<Pick>("\"random\"").is_err());
    }
}

/// The hashed walk over [`crate::model::candidates::Candidates`]: where an owner starts
/// ([`Candidates::hashed_start`](crate::model::candidates::Candidates::hashed_start)) and
/// the order from there
/// ([`Candidates::wrapped_at`](crate::model::candidates::Candidates::wrapped_at)), against
/// oracles that list every address, at both ends of both address spaces.
#[cfg(test)]
mod walk_tests {
    use std::net::{IpAddr, Ipv4Addr};

    use ipnet::IpNet;
    use proptest::prelude::*;

    use crate::model::candidates::testing::spec;
    use crate::model::candidates::{Candidates, ordinal, span_of};

    fn all(c: &Candidates) -> Vec<String> {
        c.iter().map(|a| a.to_string()).collect()
    }

    /// The hashed walk of `free` from `start`, as addresses.
    fn walk(free: &Candidates, start: u128) -> Vec<String> {
        let (upper, lower) = free.clone().wrapped_at(start);
        upper
            .iter()
            .chain(lower.iter())
            .map(|a| a.to_string())
            .collect()
    }

    #[test]
    fn the_hashed_walk_wraps_at_both_ends_of_both_spaces() {
        // Ordinal 0 is a candidate of 0.0.0.0/31 and ::/127: nothing lies below it.
        for cidr in ["0.0.0.0/31", "::/127"] {
            let c = Candidates::of_pool(&spec(cidr, None, &[]));
            assert_eq!(c.hashed_start(0), Some(0));
            assert_eq!(c.hashed_start(3), Some(1));
            assert_eq!(walk(&c, 0), all(&c), "{cidr}");
            assert_eq!(walk(&c, 1).len(), 2);
            assert_eq!(walk(&c, 1)[1], all(&c)[0]);
        }
        // The last address of each space, taken: the walk wraps to the lowest free one.
        let c = Candidates::of_pool(&spec("255.255.255.252/30", None, &[]))
            .without(["255.255.255.254".parse().unwrap()]);
        assert_eq!(walk(&c, 0xffff_fffe), ["255.255.255.253"]);
        let top = Candidates::of_pool(&spec(
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126",
            None,
            &[],
        ));
        // 2^128 - 1 is 0 modulo its three candidates: the first, ::fffd.
        assert_eq!(top.hashed_start(u128::MAX), Some(u128::MAX - 2));
        assert_eq!(top.hashed_start(u128::MAX - 1), Some(u128::MAX));
        let c = top.without(["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff".parse().unwrap()]);
        assert_eq!(
            walk(&c, u128::MAX),
            [
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd",
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"
            ]
        );
        // A /32 and a /128 have one candidate, wherever the key points.
        for cidr in ["10.0.0.7/32", "2001:db8::7/128"] {
            let c = Candidates::of_pool(&spec(cidr, None, &[]));
            let only = ordinal(c.iter().next().unwrap());
            assert_eq!(c.hashed_start(u128::MAX), Some(only));
            assert_eq!(c.clone().without(c.iter()).hashed_start(1), None);
        }
        // The whole IPv6 space: 2^128 - 1 candidates, any key lands on one.
        let c = Candidates::of_pool(&spec("::/0", None, &[]));
        assert_eq!(c.hashed_start(u128::MAX), Some(1));
        assert_eq!(c.hashed_start(u128::MAX - 1), Some(u128::MAX));
    }

    #[test]
    fn the_hashed_start_skips_the_gateway_excludes_and_edges() {
        let c = Candidates::of_pool(&spec("10.0.0.0/29", Some("10.0.0.1"), &["10.0.0.4/31"]));
        // Candidates .2 .3 .6: positions 0, 1, 2.
        let starts: Vec<String> = (0..6)
            .map(|k| c.address(c.hashed_start(k).unwrap()).to_string())
            .collect();
        assert_eq!(
            starts,
            [
                "10.0.0.2", "10.0.0.3", "10.0.0.6", "10.0.0.2", "10.0.0.3", "10.0.0.6"
            ]
        );
    }

    proptest! {
        #[test]
        fn the_hashed_walk_is_every_free_candidate_once_from_the_start_around(
            base in any::<u32>(), len in 22u8..=32, gw in any::<u32>(),
            ex in proptest::collection::vec((any::<u32>(), 28u8..=32), 0..4),
            taken in proptest::collection::vec(any::<u32>(), 0..80),
            key in any::<u128>(),
        ) {
            let net = ipnet::Ipv4Net::new(Ipv4Addr::from(base), len).unwrap().trunc();
            let (first, last) = span_of(IpNet::V4(net));
            let size = last - first + 1;
            let at = |x: u32| Ipv4Addr::from((first + u128::from(x) % size) as u32);
            let excludes: Vec<String> = ex.iter().map(|&(x, l)| ipnet::Ipv4Net::new(at(x), l.max(len)).unwrap().trunc().to_string()).collect();
            let ex_ref: Vec<&str> = excludes.iter().map(String::as_str).collect();
            let pool = Candidates::of_pool(&spec(&net.to_string(), Some(&at(gw).to_string()), &ex_ref));
            let taken: Vec<IpAddr> = taken.iter().map(|&x| IpAddr::V4(at(x))).collect();
            let start = pool.hashed_start(key);
            // The start is the candidate at position key mod count, before anything is taken.
            let listed: Vec<IpAddr> = pool.iter().collect();
            prop_assert_eq!(start.map(|s| pool.address(s)), (!listed.is_empty()).then(|| listed[(key % listed.len() as u128) as usize]));
            let free = pool.clone().without(taken.iter().copied());
            let Some(start) = start else { return Ok(()) };
            // The oracle: the free candidates, ascending, rotated to begin at the first at or
            // above the start.
            let sorted: Vec<String> = free.iter().map(|a| a.to_string()).collect();
            let i = free.iter().take_while(|a| ordinal(*a) < start).count();
            let expected: Vec<String> = sorted[i..].iter().chain(&sorted[..i]).cloned().collect();
            prop_assert_eq!(walk(&free, start), expected);
        }

        #[test]
        fn the_hashed_walk_at_the_top_of_the_ipv6_space_neither_overflows_nor_loses_a_candidate(
            below_top in 0u128..4096, len in 116u8..=128, gw in 0u128..4096,
            taken in proptest::collection::vec(0u128..4096, 0..40),
            key in any::<u128>(),
        ) {
            let net = ipnet::Ipv6Net::new(std::net::Ipv6Addr::from(u128::MAX - below_top), len).unwrap().trunc();
            let (first, last) = span_of(IpNet::V6(net));
            let size = last - first + 1;
            let at = |x: u128| std::net::Ipv6Addr::from(first + x % size);
            let pool = Candidates::of_pool(&spec(&net.to_string(), Some(&at(gw).to_string()), &[]));
            let free = pool.clone().without(taken.iter().map(|&x| IpAddr::V6(at(x))));
            let Some(start) = pool.hashed_start(key) else { return Ok(()) };
            prop_assert!(pool.contains(pool.address(start)));
            let walked = walk(&free, start);
            let mut sorted = walked.clone();
            sorted.sort_by_key(|a| ordinal(a.parse().unwrap()));
            let all_free: Vec<String> = free.iter().map(|a| a.to_string()).collect();
            prop_assert_eq!(&sorted, &all_free);
            if let Some(first_walked) = walked.first() {
                let f = ordinal(first_walked.parse().unwrap());
                // The first is the lowest free at or above the start, else the lowest free.
                let above = free.iter().map(ordinal).find(|&a| a >= start);
                prop_assert_eq!(f, above.unwrap_or_else(|| ordinal(free.iter().next().unwrap())));
            }
        }

    }
}
