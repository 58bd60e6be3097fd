//! Candidate addresses of a pool: pure arithmetic on `u128` intervals, no I/O.
//!
//! A [`Candidates`] is a host range minus a sorted set of blocked intervals (gateway,
//! excludes, `--reserved`, the `--within` subnet's edges, taken addresses). Everything is
//! inclusive ranges of addresses as `u128` (an IPv4 address is its `u32` value), so both
//! families share one implementation, 255.255.255.255 and ffff:…:ffff need no special case,
//! nothing overflows, and no prefix is ever enumerated: every answer costs time in the
//! number of blocked intervals, whatever the prefix's size.
//!
//! The `u128` span arithmetic is in `candidates/span.rs`, how counts are written in
//! `candidates/count.rs`.

mod count;
mod span;

pub use count::{MAX_EXACT_JSON, exact, readable_count, readable_with_exact};
use span::merge;
pub use span::{Span, address, host_span, ordinal, span_len, span_of};

use std::net::IpAddr;

use ipnet::IpNet;

use crate::model::PoolSpec;

/// The addresses a request may be given, ascending.
#[derive(Clone, Debug)]
pub struct Candidates {
    /// IPv6 (else IPv4): how ordinals turn back into addresses.
    v6: bool,
    range: Span,
    /// Sorted, merged, non-overlapping.
    blocked: Vec<Span>,
}

impl Candidates {
    /// The pool's candidates: every host address of `spec.cidr` except the gateway and the
    /// excludes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use ipamctl::model::candidates::Candidates;
    /// # let spec: ipamctl::model::PoolSpec = serde_json::from_str(
    /// #     r#"{"cidr":"10.0.0.0/30","kind":"public","gateway":"10.0.0.1"}"#).unwrap();
    /// let first: Vec<_> = Candidates::of_pool(&spec).iter().map(|a| a.to_string()).collect();
    /// assert_eq!(first, ["10.0.0.2"]);
    /// # let spec: ipamctl::model::PoolSpec = serde_json::from_str(
    /// #     r#"{"cidr":"fd00::/64","kind":"public","gateway":"fd00::1"}"#).unwrap();
    /// let first: Vec<_> = Candidates::of_pool(&spec).iter().take(2).map(|a| a.to_string()).collect();
    /// assert_eq!(first, ["fd00::2", "fd00::3"]);
    /// ```
    pub fn of_pool(spec: &PoolSpec) -> Candidates {
        let mut blocked: Vec<Span> = spec.exclude.iter().map(|e| span_of(e.net())).collect();
        blocked.extend(spec.gateway.map(|g| (ordinal(g), ordinal(g))));
        Candidates {
            v6: matches!(spec.cidr, IpNet::V6(_)),
            range: host_span(spec.cidr),
            blocked: merge(blocked),
        }
    }

    /// Is this a range of IPv6 addresses?
    pub fn is_v6(&self) -> bool {
        self.v6
    }

    /// Narrows to `within` (which the caller checked lies inside the pool), skipping its own
    /// network and broadcast addresses (IPv6: its subnet-router anycast address) as well.
    pub fn within(mut self, within: IpNet) -> Candidates {
        let (lo, hi) = host_span(within);
        self.range = (self.range.0.max(lo), self.range.1.min(hi));
        self
    }

    /// Narrows to exactly `addr` (`--address`), if it is a candidate.
    pub fn only(mut self, addr: IpAddr) -> Candidates {
        let a = ordinal(addr);
        self.range = (self.range.0.max(a), self.range.1.min(a));
        self
    }

    /// Removes more addresses (reserved, taken).
    pub fn without(mut self, addrs: impl IntoIterator<Item = IpAddr>) -> Candidates {
        let mut blocked = std::mem::take(&mut self.blocked);
        let v6 = self.v6;
        // Consecutive addresses become one span as they come: a pool's taken addresses,
        // listed in order, are mostly runs, so the sort below has a few spans to sort, not
        // one per address (50,000 of them cost a batch's request a third of its CPU).
        let mut run: Option<Span> = None;
        for a in addrs.into_iter().filter(|a| a.is_ipv6() == v6).map(ordinal) {
            match &mut run {
                Some((lo, hi)) if *lo <= a && a <= *hi => {}
                Some((_, hi)) if hi.checked_add(1) == Some(a) => *hi = a,
                _ => blocked.extend(run.replace((a, a))),
            }
        }
        blocked.extend(run);
        self.blocked = merge(blocked);
        self
    }

    /// Removes spans of this range's family (the runs of a pool's taken addresses): a step
    /// per span, not per address.
    pub fn without_spans(mut self, spans: impl IntoIterator<Item = Span>) -> Candidates {
        let mut blocked = std::mem::take(&mut self.blocked);
        blocked.extend(spans);
        self.blocked = merge(blocked);
        self
    }

    /// Removes whole prefixes (a subnet's reserved entries).
    pub fn without_nets(mut self, nets: impl IntoIterator<Item = IpNet>) -> Candidates {
        let mut blocked = std::mem::take(&mut self.blocked);
        blocked.extend(nets.into_iter().map(span_of));
        self.blocked = merge(blocked);
        self
    }

    /// Is `addr` a candidate?
    pub fn contains(&self, addr: IpAddr) -> bool {
        if addr.is_ipv6() != self.v6 {
            return false;
        }
        let a = ordinal(addr);
        let in_range = self.range.0 <= a && a <= self.range.1;
        in_range && !self.blocked_at(a)
    }

    fn blocked_at(&self, a: u128) -> bool {
        let i = self.blocked.partition_point(|&(_, hi)| hi < a);
        self.blocked.get(i).is_some_and(|&(lo, _)| lo <= a)
    }

    /// The host range before anything is blocked, as ordinals (`lo > hi` when empty).
    pub fn range(&self) -> Span {
        self.range
    }

    /// The candidate spans: the range with blocked spans cut out, ascending.
    pub fn spans(&self) -> Vec<Span> {
        let (lo, hi) = self.range;
        if lo > hi {
            return Vec::new();
        }
        let mut spans = Vec::new();
        let mut next = Some(lo);
        for &(blo, bhi) in &self.blocked {
            let Some(start) = next else { break };
            if bhi < start {
                continue;
            }
            if blo > hi {
                break;
            }
            if blo > start {
                spans.push((start, blo - 1));
            }
            next = bhi.checked_add(1);
        }
        if let Some(start) = next
            && start <= hi
        {
            spans.push((start, hi));
        }
        spans
    }

    /// How many candidates there are: up to 2^128 - 1, so a `u128`.
    pub fn count(&self) -> u128 {
        self.spans().iter().map(span_len).sum()
    }

    /// The `k`-th candidate (from 0, ascending), as an ordinal; `None` past the last. A step
    /// per span, whatever the prefix's size.
    pub fn nth(&self, mut k: u128) -> Option<u128> {
        for span in self.spans() {
            let len = span_len(&span);
            if k < len {
                return Some(span.0 + k);
            }
            k -= len;
        }
        None
    }

    /// Where a hashed pick ([`crate::model::pick`]) of the owner whose key is `key` starts:
    /// the candidate at position `key mod count`, as an ordinal; `None` when there is none.
    /// Call it on the request's candidates before taken and cooling addresses are cut out,
    /// so that the start moves only when the pool, its subnets or the request's narrowing
    /// do, never with other owners' claims.
    pub fn hashed_start(&self, key: u128) -> Option<u128> {
        match self.count() {
            0 => None,
            count => self.nth(key % count),
        }
    }

    /// The walk of a hashed pick from `start`: the candidates at or above it, then (wrapping
    /// around) those below it. Together they are exactly `self`'s candidates, each once;
    /// ascending within each part. No arithmetic overflows at either end of the space.
    pub fn wrapped_at(self, start: u128) -> (Candidates, Candidates) {
        let (lo, hi) = self.range;
        // Each part keeps only the blocked spans that reach into it (a hashed pool's taken
        // addresses are thousands of runs, copied for each request).
        let reach_up = self.blocked.partition_point(|&(_, bhi)| bhi < start);
        let reach_down = self.blocked.partition_point(|&(blo, _)| blo < start);
        let upper = Candidates {
            v6: self.v6,
            range: (lo.max(start), hi),
            blocked: self.blocked[reach_up..].to_vec(),
        };
        let mut lower = self;
        lower.blocked.truncate(reach_down);
        lower.range = match start.checked_sub(1) {
            Some(below) => (lo, hi.min(below)),
            // Nothing lies below ordinal 0: an empty range (`lo > hi`).
            None => (1, 0),
        };
        (upper, lower)
    }

    /// The address of ordinal `n` in this range's family.
    pub fn address(&self, n: u128) -> IpAddr {
        address(self.v6, n)
    }

    /// The candidates, ascending; never a network/broadcast address of an IPv4 prefix
    /// shorter than /31 nor the subnet-router anycast address of an IPv6 prefix shorter than
    /// /127, never a blocked one. Lazy: taking the first few of a /64 costs nothing more.
    pub fn iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        let v6 = self.v6;
        self.spans()
            .into_iter()
            .flat_map(move |(lo, hi)| (lo..=hi).map(move |n| address(v6, n)))
    }

    /// A readable description of the range, for errors: `10.0.0.1-10.0.0.254`.
    pub fn describe(&self) -> String {
        let (lo, hi) = self.range;
        if lo > hi {
            return "an empty range".into();
        }
        format!("{}-{}", self.address(lo), self.address(hi))
    }

    /// Formats spans of this range's family compactly: `10.42.1.8-10.42.1.254, 10.42.2.1`.
    pub fn format_spans(&self, spans: &[Span]) -> Vec<String> {
        spans
            .iter()
            .map(|&(lo, hi)| {
                if lo == hi {
                    self.address(lo).to_string()
                } else {
                    format!("{}-{}", self.address(lo), self.address(hi))
                }
            })
            .collect()
    }
}

/// How full a pool is: `candidates = allocated + free` always. `allocated` counts the
/// allocations on candidates, `free` the candidates nobody holds, and `offCandidates` the
/// allocations on addresses no claim is given (a gateway, an exclude, a subnet's reserved
/// address: written by hand or before the pool changed, which `ipamctl check` reports). An IPv6 pool has up to 2^128 - 1 candidates: JSON carries each
/// count as a number while it is at most 2^53 (exact in every JSON reader, `jq` and
/// JavaScript included), as a decimal string above.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Number of candidates.
    #[serde(serialize_with = "exact")]
    pub candidates: u128,
    /// Number of allocations on candidates.
    pub allocated: u64,
    /// Number of allocations on addresses that are not candidates (omitted when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub off_candidates: u64,
    /// Candidates not allocated.
    #[serde(serialize_with = "exact")]
    pub free: u128,
    /// Share of candidates allocated, 0–100, one decimal.
    pub percent_used: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// The usage of a pool whose allocations hold `taken`.
    pub fn of(spec: &PoolSpec, taken: &[IpAddr]) -> Usage {
        Usage::count(&Candidates::of_pool(spec), taken)
    }

    /// The usage of a range whose candidates are `candidates` (a pool's with its subnets,
    /// see [`crate::model::subnet::pool_candidates`]) and whose allocations hold `taken`.
    pub fn of_candidates(candidates: &Candidates, taken: &[IpAddr]) -> Usage {
        Usage::count(candidates, taken)
    }

    /// The usage of the `within` subnet of a pool whose allocations hold `taken`: its
    /// candidates as `allocate --within` sees them, the allocations inside it.
    pub fn within(spec: &PoolSpec, within: IpNet, taken: &[IpAddr]) -> Usage {
        let inside: Vec<IpAddr> = taken
            .iter()
            .copied()
            .filter(|a| within.contains(a))
            .collect();
        Usage::count(&Candidates::of_pool(spec).within(within), &inside)
    }

    /// `taken` are all allocations of the range; only those that are `candidates` count
    /// against `free`.
    fn count(candidates: &Candidates, taken: &[IpAddr]) -> Usage {
        let held = taken.iter().filter(|a| candidates.contains(**a)).count() as u64;
        Usage::from_counts(candidates, taken.len() as u64, held)
    }

    /// The usage from counts: `allocated` allocations of the range, `held` of them among
    /// `candidates` (a store that counts without listing answers these).
    pub fn from_counts(candidates: &Candidates, allocated: u64, held: u64) -> Usage {
        let total = candidates.count();
        let held = u128::from(held).min(total);
        let percent_used = if total == 0 {
            0.0
        } else {
            (held as f64 * 1000.0 / total as f64).round() / 10.0
        };
        Usage {
            candidates: total,
            allocated: held as u64,
            off_candidates: allocated.saturating_sub(held as u64),
            free: total - held,
            percent_used,
        }
    }
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use proptest::prelude::*;

    use crate::model::candidates::testing::spec;

    fn all(c: &Candidates) -> Vec<String> {
        c.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn slash_30_has_two_hosts_minus_gateway() {
        let c = Candidates::of_pool(&spec("10.0.0.0/30", Some("10.0.0.1"), &[]));
        assert_eq!(all(&c), ["10.0.0.2"]);
    }

    #[test]
    fn slash_31_and_32_follow_rfc_3021() {
        assert_eq!(
            all(&Candidates::of_pool(&spec("10.0.0.0/31", None, &[]))),
            ["10.0.0.0", "10.0.0.1"]
        );
        assert_eq!(
            all(&Candidates::of_pool(&spec("10.0.0.7/32", None, &[]))),
            ["10.0.0.7"]
        );
    }

    #[test]
    fn top_of_the_address_space_does_not_overflow() {
        let c = Candidates::of_pool(&spec("255.255.255.255/32", None, &[]));
        assert_eq!(all(&c), ["255.255.255.255"]);
        let c = Candidates::of_pool(&spec("255.255.255.252/30", None, &["255.255.255.254"]));
        assert_eq!(all(&c), ["255.255.255.253"]);
        let c = Candidates::of_pool(&spec("255.255.255.254/31", None, &[]))
            .without(["255.255.255.255".parse().unwrap()]);
        assert_eq!(all(&c), ["255.255.255.254"]);
    }

    #[test]
    fn excludes_accept_prefixes() {
        let c = Candidates::of_pool(&spec(
            "10.0.0.0/28",
            Some("10.0.0.1"),
            &["10.0.0.0/29", "10.0.0.9"],
        ));
        assert_eq!(
            all(&c),
            [
                "10.0.0.8",
                "10.0.0.10",
                "10.0.0.11",
                "10.0.0.12",
                "10.0.0.13",
                "10.0.0.14"
            ]
        );
        assert_eq!(c.count(), 6);
    }

    #[test]
    fn within_skips_the_subnets_edges() {
        let c = Candidates::of_pool(&spec("10.0.0.0/24", None, &[]))
            .within("10.0.0.248/29".parse().unwrap());
        assert_eq!(
            all(&c),
            [
                "10.0.0.249",
                "10.0.0.250",
                "10.0.0.251",
                "10.0.0.252",
                "10.0.0.253",
                "10.0.0.254"
            ]
        );
    }

    #[test]
    fn ipv6_skips_the_subnet_router_anycast_address_but_not_in_a_127_or_128() {
        let c = Candidates::of_pool(&spec("2001:db8::/126", None, &[]));
        assert_eq!(all(&c), ["2001:db8::1", "2001:db8::2", "2001:db8::3"]);
        let c = Candidates::of_pool(&spec("2001:db8::/127", None, &[]));
        assert_eq!(all(&c), ["2001:db8::", "2001:db8::1"]);
        let c = Candidates::of_pool(&spec("2001:db8::7/128", None, &[]));
        assert_eq!(all(&c), ["2001:db8::7"]);
    }

    #[test]
    fn the_top_of_the_ipv6_space_does_not_overflow() {
        let c = Candidates::of_pool(&spec(
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126",
            None,
            &[],
        ))
        .without(["ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe".parse().unwrap()]);
        assert_eq!(
            all(&c),
            [
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd",
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
            ]
        );
        let c = Candidates::of_pool(&spec("::/0", None, &[]));
        assert_eq!(c.count(), u128::MAX);
        assert_eq!(c.iter().next().unwrap().to_string(), "::1");
    }

    #[test]
    fn a_64_is_counted_and_cut_without_enumerating_it() {
        let c = Candidates::of_pool(&spec(
            "fd00::/64",
            Some("fd00::1"),
            &["fd00::8000:0:0:0/65"],
        ));
        assert_eq!(c.count(), (1u128 << 63) - 2);
        let taken: Vec<IpAddr> = (2..50_002u128)
            .map(|n| address(true, (0xfd00u128 << 112) + n))
            .collect();
        let c = c.without(taken);
        assert_eq!(c.iter().next().unwrap().to_string(), "fd00::c352");
        assert_eq!(c.count(), (1u128 << 63) - 2 - 50_000);
    }

    #[test]
    fn counts_read_well_in_a_table_and_exactly_in_json() {
        assert_eq!(readable_count(254), "254");
        assert_eq!(readable_count((1 << 64) - 1), "2^64 - 1");
        assert_eq!(readable_count(1 << 64), "2^64");
        assert_eq!(readable_count(u128::MAX), "2^128 - 1");
        assert_eq!(readable_count(3 * (1 << 60)), "3.5e18");
        let u = Usage {
            candidates: (1 << 64) - 2,
            allocated: 1,
            off_candidates: 0,
            free: 1 << 53,
            percent_used: 0.0,
        };
        let json = serde_json::to_value(u).unwrap();
        assert_eq!(json["candidates"], "18446744073709551614");
        assert_eq!(json["free"], 9007199254740992u64);
    }

    proptest! {
        #[test]
        fn ipv6_iteration_matches_an_oracle_for_small_prefixes(
            base in any::<u128>(), len in 119u8..=128, gw in any::<u128>(),
            ex in proptest::collection::vec((any::<u128>(), 124u8..=128), 0..6),
        ) {
            let net = ipnet::Ipv6Net::new(std::net::Ipv6Addr::from(base), len).unwrap().trunc();
            let first = u128::from(net.network());
            let size = u128::from(net.broadcast()) - first + 1;
            let gateway = std::net::Ipv6Addr::from(first + gw % size);
            let excludes: Vec<ipnet::Ipv6Net> = ex
                .iter()
                .map(|&(x, l)| ipnet::Ipv6Net::new(std::net::Ipv6Addr::from(first + x % size), l.max(len)).unwrap().trunc())
                .collect();
            let ex_str: Vec<String> = excludes.iter().map(|e| e.to_string()).collect();
            let ex_ref: Vec<&str> = ex_str.iter().map(String::as_str).collect();
            let c = Candidates::of_pool(&spec(&net.to_string(), Some(&gateway.to_string()), &ex_ref));
            // The oracle: every address of the prefix, one by one, tested against the rules.
            let expected: Vec<IpAddr> = (0..size)
                .map(|i| std::net::Ipv6Addr::from(first + i))
                .filter(|a| len >= 127 || *a != net.network())
                .filter(|a| *a != gateway && !excludes.iter().any(|e| e.contains(a)))
                .map(IpAddr::V6)
                .collect();
            let got: Vec<IpAddr> = c.iter().collect();
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(c.count(), expected.len() as u128);
            for i in 0..size {
                let a = IpAddr::V6(std::net::Ipv6Addr::from(first + i));
                prop_assert_eq!(c.contains(a), expected.contains(&a));
            }
        }

        #[test]
        fn without_blocks_exactly_the_addresses_given_in_any_order_with_runs_and_repeats(
            taken in proptest::collection::vec(0u32..80, 0..60),
            runs in proptest::collection::vec((0u32..80, 1u32..12), 0..4),
        ) {
            let pool = spec("10.9.0.0/25", None, &[]);
            let at = |x: u32| IpAddr::V4(std::net::Ipv4Addr::from(0x0a09_0000 + x));
            let mut given: Vec<IpAddr> = taken.iter().map(|&x| at(x)).collect();
            for (start, len) in runs {
                given.extend((start..start + len).map(at));
            }
            let candidates = Candidates::of_pool(&pool);
            let free = candidates.clone().without(given.iter().copied());
            for x in 0..128 {
                let a = at(x);
                prop_assert_eq!(free.contains(a), candidates.contains(a) && !given.contains(&a), "{}", a);
            }
        }

        #[test]
        fn the_first_free_ipv6_candidate_of_a_large_prefix_is_a_candidate(
            base in any::<u128>(), len in 0u8..=96, gw in any::<u128>(),
            taken in proptest::collection::vec(0u128..64, 0..40),
            ex in proptest::collection::vec((0u128..64, 122u8..=128), 0..4),
        ) {
            let net = ipnet::Ipv6Net::new(std::net::Ipv6Addr::from(base), len).unwrap().trunc();
            let first = u128::from(net.network());
            let size = (u128::from(net.broadcast()) - first).saturating_add(1);
            let at = |x: u128| std::net::Ipv6Addr::from(first + x % size);
            let excludes: Vec<String> = ex.iter().map(|&(x, l)| ipnet::Ipv6Net::new(at(x), l).unwrap().trunc().to_string()).collect();
            let ex_ref: Vec<&str> = excludes.iter().map(String::as_str).collect();
            let pool = spec(&net.to_string(), Some(&at(gw % 64).to_string()), &ex_ref);
            let taken: Vec<IpAddr> = taken.iter().map(|&x| IpAddr::V6(at(x))).collect();
            let pool_candidates = Candidates::of_pool(&pool);
            let free = pool_candidates.clone().without(taken.iter().copied());
            let chosen = free.iter().next().expect("a large prefix has free candidates");
            prop_assert!(pool_candidates.contains(chosen));
            prop_assert!(!taken.contains(&chosen));
            prop_assert!(IpNet::V6(net).contains(&chosen));
            // And the lowest: nothing between the network address and it is free.
            let lowest = (1..=ordinal(chosen) - first).map(|i| address(true, first + i)).find(|a| free.contains(*a));
            prop_assert_eq!(lowest, Some(chosen));
        }

        #[test]
        fn iteration_yields_only_sorted_unblocked_hosts(
            base in any::<u32>(), len in 22u8..=32, gw in any::<u32>(), ex in proptest::collection::vec(any::<u32>(), 0..8),
        ) {
            let net = ipnet::Ipv4Net::new(Ipv4Addr::from(base), len).unwrap().trunc();
            let (lo, hi) = host_span(IpNet::V4(net));
            let size = hi - lo + 1;
            let pick = |x: u32| Ipv4Addr::from((lo + u128::from(x) % size) as u32);
            let gateway = pick(gw);
            let excludes: Vec<Ipv4Addr> = ex.iter().map(|&x| pick(x)).collect();
            let ex_str: Vec<String> = excludes.iter().map(|a| a.to_string()).collect();
            let ex_ref: Vec<&str> = ex_str.iter().map(String::as_str).collect();
            let c = Candidates::of_pool(&spec(&net.to_string(), Some(&gateway.to_string()), &ex_ref));
            let got: Vec<IpAddr> = c.iter().collect();
            let expected: Vec<IpAddr> = net.hosts().filter(|a| *a != gateway && !excludes.contains(a)).map(IpAddr::V4).collect();
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(c.count(), expected.len() as u128);
            for a in net.hosts() {
                prop_assert_eq!(c.contains(IpAddr::V4(a)), expected.contains(&IpAddr::V4(a)));
            }
        }
    }
}
