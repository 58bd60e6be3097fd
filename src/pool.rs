//! Candidate addresses of a pool: pure arithmetic on `u32` intervals, no I/O.
//!
//! A [`Candidates`] is a host range minus a sorted set of blocked intervals (gateway,
//! excludes, `--reserved`, the `--within` subnet's edges, taken addresses). Everything is
//! inclusive `u32` ranges, so 255.255.255.255 needs no special case and nothing overflows.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::model::PoolSpec;

/// An inclusive range of addresses as `u32`s.
pub type Span = (u32, u32);

/// The usable host addresses of `net`, as `ipnet`'s `hosts()` yields them: without network
/// and broadcast for prefixes shorter than /31; both addresses of a /31; the one of a /32.
pub fn host_span(net: Ipv4Net) -> Span {
    let first = u32::from(net.network());
    let last = u32::from(net.broadcast());
    if net.prefix_len() >= 31 {
        (first, last)
    } else {
        (first + 1, last - 1)
    }
}

/// Sorts and merges overlapping or adjacent spans.
fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_unstable();
    let mut merged: Vec<Span> = Vec::with_capacity(spans.len());
    for (lo, hi) in spans {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

fn span_of(net: Ipv4Net) -> Span {
    (u32::from(net.network()), u32::from(net.broadcast()))
}

/// The addresses a request may be given, ascending.
#[derive(Clone, Debug)]
pub struct Candidates {
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
    /// # use ipamctl::pool::Candidates;
    /// # let spec: ipamctl::model::PoolSpec = serde_json::from_str(
    /// #     r#"{"cidr":"10.0.0.0/30","kind":"public","gateway":"10.0.0.1"}"#).unwrap();
    /// let first: Vec<_> = Candidates::of_pool(&spec).iter().map(|a| a.to_string()).collect();
    /// assert_eq!(first, ["10.0.0.2"]);
    /// ```
    pub fn of_pool(spec: &PoolSpec) -> Candidates {
        let mut blocked: Vec<Span> = spec.exclude.iter().map(|e| span_of(e.net())).collect();
        blocked.extend(spec.gateway.map(|g| (u32::from(g), u32::from(g))));
        Candidates {
            range: host_span(spec.cidr),
            blocked: merge(blocked),
        }
    }

    /// Narrows to `within` (which the caller checked lies inside the pool), skipping its own
    /// network and broadcast addresses as well.
    pub fn within(mut self, within: Ipv4Net) -> Candidates {
        let (lo, hi) = host_span(within);
        self.range = (self.range.0.max(lo), self.range.1.min(hi));
        self
    }

    /// Removes more addresses (reserved, taken).
    pub fn without(mut self, addrs: impl IntoIterator<Item = Ipv4Addr>) -> Candidates {
        let mut blocked = std::mem::take(&mut self.blocked);
        blocked.extend(addrs.into_iter().map(|a| (u32::from(a), u32::from(a))));
        self.blocked = merge(blocked);
        self
    }

    /// Removes whole prefixes (a subnet's reserved entries).
    pub fn without_nets(mut self, nets: impl IntoIterator<Item = Ipv4Net>) -> Candidates {
        let mut blocked = std::mem::take(&mut self.blocked);
        blocked.extend(nets.into_iter().map(span_of));
        self.blocked = merge(blocked);
        self
    }

    /// Is `addr` a candidate?
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        let a = u32::from(addr);
        let in_range = self.range.0 <= a && a <= self.range.1;
        in_range && !self.blocked_at(a)
    }

    fn blocked_at(&self, a: u32) -> bool {
        let i = self.blocked.partition_point(|&(_, hi)| hi < a);
        self.blocked.get(i).is_some_and(|&(lo, _)| lo <= a)
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

    /// How many candidates there are.
    pub fn count(&self) -> u64 {
        self.spans()
            .iter()
            .map(|&(lo, hi)| u64::from(hi - lo) + 1)
            .sum()
    }

    /// The candidates, ascending; never a network/broadcast address of a prefix shorter
    /// than /31, never a blocked one.
    pub fn iter(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.spans()
            .into_iter()
            .flat_map(|(lo, hi)| (lo..=hi).map(Ipv4Addr::from))
    }

    /// A readable description of the range, for errors: `10.0.0.1-10.0.0.254 of 10.0.0.0/24`.
    pub fn describe(&self) -> String {
        let (lo, hi) = self.range;
        if lo > hi {
            return "an empty range".into();
        }
        format!("{}-{}", Ipv4Addr::from(lo), Ipv4Addr::from(hi))
    }
}

/// How full a pool is. `allocated` counts every allocation of the pool, `free` the
/// candidates nobody holds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Number of candidates.
    pub candidates: u64,
    /// Number of allocations.
    pub allocated: u64,
    /// Candidates not allocated.
    pub free: u64,
    /// Share of candidates allocated, 0–100, one decimal.
    pub percent_used: f64,
}

impl Usage {
    /// The usage of a pool whose allocations hold `taken`.
    pub fn of(spec: &PoolSpec, taken: &[Ipv4Addr]) -> Usage {
        Usage::count(&Candidates::of_pool(spec), taken)
    }

    /// The usage of the `within` subnet of a pool whose allocations hold `taken`: its
    /// candidates as `allocate --within` sees them, the allocations inside it.
    pub fn within(spec: &PoolSpec, within: Ipv4Net, taken: &[Ipv4Addr]) -> Usage {
        let inside: Vec<Ipv4Addr> = taken
            .iter()
            .copied()
            .filter(|a| within.contains(a))
            .collect();
        Usage::count(&Candidates::of_pool(spec).within(within), &inside)
    }

    /// `taken` are all allocations of the range; only those that are `candidates` count
    /// against `free`.
    fn count(candidates: &Candidates, taken: &[Ipv4Addr]) -> Usage {
        let held = taken.iter().filter(|a| candidates.contains(**a)).count() as u64;
        Usage::from_counts(candidates, taken.len() as u64, held)
    }

    /// The usage from counts: `allocated` allocations of the range, `held` of them among
    /// `candidates` (a store that counts without listing answers these).
    pub fn from_counts(candidates: &Candidates, allocated: u64, held: u64) -> Usage {
        let total = candidates.count();
        let held = held.min(total);
        let percent_used = if total == 0 {
            0.0
        } else {
            (held as f64 * 1000.0 / total as f64).round() / 10.0
        };
        Usage {
            candidates: total,
            allocated,
            free: total - held,
            percent_used,
        }
    }
}

/// Formats spans compactly: `10.42.1.8-10.42.1.254, 10.42.2.1`.
pub fn format_spans(spans: &[Span]) -> Vec<String> {
    spans
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                Ipv4Addr::from(lo).to_string()
            } else {
                format!("{}-{}", Ipv4Addr::from(lo), Ipv4Addr::from(hi))
            }
        })
        .collect()
}

/// Builders shared by the unit tests of the modules that reason about pools.
#[cfg(test)]
pub(crate) mod testing {
    use std::net::Ipv4Addr;

    use crate::model::PoolSpec;

    /// A public pool's spec.
    pub fn spec(cidr: &str, gateway: Option<&str>, exclude: &[&str]) -> PoolSpec {
        let json = serde_json::json!({
            "cidr": cidr, "kind": "public", "gateway": gateway, "exclude": exclude,
        });
        serde_json::from_value(json).unwrap()
    }

    /// Parsed addresses.
    pub fn addrs(list: &[&str]) -> Vec<Ipv4Addr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::pool::testing::spec;

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

    proptest! {
        #[test]
        fn iteration_yields_only_sorted_unblocked_hosts(
            base in any::<u32>(), len in 22u8..=32, gw in any::<u32>(), ex in proptest::collection::vec(any::<u32>(), 0..8),
        ) {
            let net = Ipv4Net::new(Ipv4Addr::from(base), len).unwrap().trunc();
            let (lo, hi) = host_span(net);
            let size = u64::from(hi - lo) + 1;
            let pick = |x: u32| Ipv4Addr::from(lo + (u64::from(x) % size) as u32);
            let gateway = pick(gw);
            let excludes: Vec<Ipv4Addr> = ex.iter().map(|&x| pick(x)).collect();
            let ex_str: Vec<String> = excludes.iter().map(|a| a.to_string()).collect();
            let ex_ref: Vec<&str> = ex_str.iter().map(String::as_str).collect();
            let c = Candidates::of_pool(&spec(&net.to_string(), Some(&gateway.to_string()), &ex_ref));
            let got: Vec<Ipv4Addr> = c.iter().collect();
            let expected: Vec<Ipv4Addr> = net.hosts().filter(|a| *a != gateway && !excludes.contains(a)).collect();
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(c.count(), expected.len() as u64);
            for a in net.hosts() {
                prop_assert_eq!(c.contains(a), expected.contains(&a));
            }
        }
    }
}
