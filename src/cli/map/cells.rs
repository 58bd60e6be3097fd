//! The cells of a map: what each address, block or region of a view is, from the pool, its
//! stored subnets and the taken addresses. Pure arithmetic on ordinals, as
//! [`crate::model::candidates`] does it: no prefix is ever enumerated beyond the cells drawn.

use std::net::IpAddr;

use ipnet::IpNet;

use super::kind::{Kind, Scale};
use crate::model::PoolSpec;
pub(super) use crate::model::candidates::span_of;
use crate::model::candidates::{Candidates, Span, address, host_span, readable_count, span_len};
use crate::model::subnet::{SubnetManifest, off_limits_role};

/// At most this many cells are drawn for an IPv6 view of blocks or regions.
pub(super) const MOST_V6_CELLS: usize = 4096;

/// One cell: an address, a block (a /24 or an IPv6 /120) or a region (an IPv6 subnet, or a
/// /64 in use outside the subnets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Cell {
    /// Its first address, as an ordinal.
    pub start: u128,
    pub kind: Kind,
    /// `(held, candidates)` of a block or region; `None` for an address.
    pub fill: Option<(u128, u128)>,
    /// The prefix of a region.
    pub net: Option<IpNet>,
    /// The stored subnet it is (a region), belongs to (an address it keeps out) or holds (a
    /// block: the subnets inside or over it, by name).
    pub subnet: Option<String>,
}

impl Cell {
    /// What the cell is, in words, for a tooltip or a region's line: `10.42.1.1 gateway of
    /// subnet web`, `10.0.4.0/24: 3 of 254 candidates allocated`, `subnet web6: 6 of
    /// 2^64 - 3 candidates allocated`.
    pub fn describe(&self, v6: bool, block_len: u8) -> String {
        let start = address(v6, self.start);
        match (self.fill, &self.net, &self.subnet) {
            (None, _, Some(subnet)) => {
                let role = match self.kind {
                    Kind::Reserved => "reserved address",
                    Kind::NetworkBroadcast => "network/broadcast address",
                    kind => kind.style().label,
                };
                format!("{start} {role} of subnet {subnet}")
            }
            (None, _, None) => format!("{start} {}", self.kind.style().label),
            (Some((held, count)), Some(_), subnet) => format!(
                "{}{held} of {} candidates allocated",
                subnet
                    .as_ref()
                    .map(|s| format!("subnet {s}: "))
                    .unwrap_or_default(),
                readable_count(count)
            ),
            (Some((held, count)), None, subnet) => format!(
                "{start}/{block_len}: {held} of {} candidates allocated{}",
                readable_count(count),
                subnet
                    .as_ref()
                    .map(|s| format!("; holds subnet {s}"))
                    .unwrap_or_default()
            ),
        }
    }
}

/// The cells of the addresses `first..=last` of `view` (inside pool `spec`) one per
/// address. An address is allocated if an allocation holds it (the sorted `taken`
/// ordinals), whatever else it is; else the pool's gateway; the network or broadcast address
/// of the pool or of the view; what one of the stored `subnets` keeps from every claim (its
/// gateway, reserved, network or broadcast addresses: [`off_limits_role`]); excluded by the
/// pool; or free.
pub(super) fn address_cells(
    spec: &PoolSpec,
    subnets: &[SubnetManifest],
    view: IpNet,
    (first, last): Span,
    taken: &[u128],
) -> Vec<Cell> {
    let v6 = view.addr().is_ipv6();
    let in_hosts = |a: u128, (lo, hi): Span| lo <= a && a <= hi;
    (first..=last)
        .map(|a| {
            let addr = address(v6, a);
            let mut subnet = None;
            let kind = if taken.binary_search(&a).is_ok() {
                Kind::Allocated
            } else if spec.gateway == Some(addr) {
                Kind::Gateway
            } else if !in_hosts(a, host_span(spec.cidr)) || !in_hosts(a, host_span(view)) {
                Kind::NetworkBroadcast
            } else if let Some((s, role)) = off_limits_role(subnets, addr) {
                subnet = Some(s.metadata.name.clone());
                match role {
                    "the gateway" => Kind::Gateway,
                    "a reserved address" => Kind::Reserved,
                    // The network, broadcast or subnet-router anycast address.
                    _ => Kind::NetworkBroadcast,
                }
            } else if spec.exclude.iter().any(|e| e.net().contains(&addr)) {
                Kind::Excluded
            } else {
                Kind::Free
            };
            Cell {
                start: a,
                kind,
                fill: None,
                net: None,
                subnet,
            }
        })
        .collect()
}

/// The first ordinals of the blocks of 256 addresses of `view` that the sorted `taken`
/// ordinals fall in, ascending.
pub(super) fn blocks_in_use(view: IpNet, taken: &[u128]) -> Vec<u128> {
    let (first, last) = span_of(view);
    let mut starts: Vec<u128> = taken
        .iter()
        .filter(|&&a| first <= a && a <= last)
        .map(|&a| a & !0xff)
        .collect();
    starts.dedup();
    starts
}

/// The names of the stored `subnets` (of the family of `lo..=hi`) that overlap it, joined
/// with `, `.
fn subnets_over(subnets: &[SubnetManifest], lo: u128, hi: u128) -> Option<String> {
    let names: Vec<&str> = subnets
        .iter()
        .filter(|s| {
            let (slo, shi) = span_of(s.spec.cidr);
            slo <= hi && lo <= shi
        })
        .map(|s| s.metadata.name.as_str())
        .collect();
    (!names.is_empty()).then(|| names.join(", "))
}

/// The cells of `view` one per block of 256 addresses (a /24, or an IPv6 /120), shaded by
/// the share of their `candidates` the sorted `taken` ordinals hold, each naming the stored
/// `subnets` over it. An IPv6 view is sparse: only the /120s in use, in order (the first one
/// when none is), at most [`MOST_V6_CELLS`].
pub(super) fn block_cells(
    candidates: &Candidates,
    subnets: &[SubnetManifest],
    view: IpNet,
    taken: &[u128],
) -> Vec<Cell> {
    let v6 = view.addr().is_ipv6();
    let (first, last) = span_of(view);
    let spans = candidates.spans();
    let family: Vec<SubnetManifest> = subnets
        .iter()
        .filter(|s| s.spec.cidr.addr().is_ipv6() == v6)
        .cloned()
        .collect();
    let block = |lo: u128| {
        let (held, count) = fill(candidates, &spans, taken, lo, lo + 255);
        Cell {
            start: lo,
            kind: Kind::of_block(held, count, Scale::Share),
            fill: Some((held, count)),
            net: None,
            subnet: subnets_over(&family, lo, lo + 255),
        }
    };
    if !v6 {
        return (first..=last).step_by(256).map(block).collect();
    }
    let mut starts = blocks_in_use(view, taken);
    if starts.is_empty() {
        starts.push(first);
    }
    starts.into_iter().take(MOST_V6_CELLS).map(block).collect()
}

/// A line for each stored subnet of `subnets` in `view`: its name, prefix and counts of
/// its `candidates` (those of the view) held by the sorted `taken` ordinals, and on a map of
/// blocks of `block_len`, the cell that holds a smaller subnet.
pub(super) fn subnet_lines(
    candidates: &Candidates,
    subnets: &[SubnetManifest],
    view: IpNet,
    taken: &[u128],
    block_len: Option<u8>,
) -> Vec<String> {
    let spans = candidates.spans();
    subnets
        .iter()
        .filter(|s| view.contains(&s.spec.cidr))
        .map(|s| {
            let (lo, hi) = span_of(s.spec.cidr);
            let (held, count) = fill(candidates, &spans, taken, lo, hi);
            let at = match block_len {
                Some(len) if s.spec.cidr.prefix_len() > len => format!(
                    " (in the cell {})",
                    IpNet::new(s.spec.cidr.network(), len)
                        .expect("a shorter length is valid")
                        .trunc()
                ),
                _ => String::new(),
            };
            format!(
                "subnet {} {}{at}: {held} of {} candidates allocated",
                s.metadata.name,
                s.spec.cidr,
                readable_count(count)
            )
        })
        .collect()
}

/// The cells of a large IPv6 `view`, one per region: each stored subnet inside it (in use or
/// not), and each /64 that holds allocations outside those subnets (named after the subnet
/// that holds it, if one does), in address order, at most [`MOST_V6_CELLS`]. A view with
/// neither is one region, itself. Each is shaded by how many of its `candidates` the sorted
/// `taken` ordinals hold; a /64's counts leave out the subnets inside it.
pub(super) fn region_cells(
    candidates: &Candidates,
    subnets: &[SubnetManifest],
    view: IpNet,
    taken: &[u128],
) -> Vec<Cell> {
    let spans = candidates.spans();
    let (first, last) = span_of(view);
    let inside: Vec<&SubnetManifest> = subnets
        .iter()
        .filter(|s| view.contains(&s.spec.cidr))
        .collect();
    let region = |net: IpNet, subnet: Option<String>, (held, count): (u128, u128)| Cell {
        start: span_of(net).0,
        kind: Kind::of_block(held, count, Scale::Count),
        fill: Some((held, count)),
        net: Some(net),
        subnet,
    };
    let mut cells: Vec<Cell> = inside
        .iter()
        .map(|s| {
            let (lo, hi) = span_of(s.spec.cidr);
            let counts = fill(candidates, &spans, taken, lo, hi);
            region(s.spec.cidr, Some(s.metadata.name.clone()), counts)
        })
        .collect();
    let in_a_subnet = |a: u128| {
        inside.iter().any(|s| {
            let (lo, hi) = span_of(s.spec.cidr);
            lo <= a && a <= hi
        })
    };
    let outside: Vec<u128> = taken
        .iter()
        .copied()
        .filter(|&a| first <= a && a <= last && !in_a_subnet(a))
        .collect();
    let mut starts: Vec<u128> = outside.iter().map(|a| a & !u128::from(u64::MAX)).collect();
    starts.dedup();
    for lo in starts {
        let hi = lo | u128::from(u64::MAX);
        let net = IpNet::new(address(true, lo), 64).expect("64 is a valid IPv6 prefix length");
        let (held, mut count) = fill(candidates, &spans, &outside, lo, hi);
        for s in inside.iter().filter(|s| net.contains(&s.spec.cidr)) {
            let (slo, shi) = span_of(s.spec.cidr);
            count -= fill(candidates, &spans, &[], slo, shi).1;
        }
        let holder = subnets
            .iter()
            .find(|s| s.spec.cidr.contains(&net))
            .map(|s| s.metadata.name.clone());
        cells.push(region(net, holder, (held, count)));
    }
    if cells.is_empty() {
        cells.push(region(
            view,
            None,
            fill(candidates, &spans, taken, first, last),
        ));
    }
    cells.sort_by_key(|c| c.start);
    cells.truncate(MOST_V6_CELLS);
    cells
}

/// `(held, candidates)` of `lo..=hi`: how many of the sorted `taken` ordinals in it are
/// `candidates` (whose spans are `spans`), and how many candidates it has.
fn fill(
    candidates: &Candidates,
    spans: &[Span],
    taken: &[u128],
    lo: u128,
    hi: u128,
) -> (u128, u128) {
    let v6 = candidates.is_v6();
    let held = taken[taken.partition_point(|&a| a < lo)..]
        .iter()
        .take_while(|&&a| a <= hi)
        .filter(|&&a| candidates.contains(address(v6, a)))
        .count() as u128;
    (held, overlap(spans, lo, hi))
}

/// How many addresses of the sorted, disjoint `spans` lie in `lo..=hi`.
pub(super) fn overlap(spans: &[Span], lo: u128, hi: u128) -> u128 {
    let start = spans.partition_point(|&(_, shi)| shi < lo);
    spans[start..]
        .iter()
        .take_while(|&&(slo, _)| slo <= hi)
        .map(|&(slo, shi)| span_len(&(slo.max(lo), shi.min(hi))))
        .fold(0, u128::saturating_add)
}

/// The sorted, deduplicated ordinals of the `taken` addresses of family `v6`.
pub(super) fn ordinals(taken: &[IpAddr], v6: bool) -> Vec<u128> {
    let mut sorted: Vec<u128> = taken
        .iter()
        .filter(|a| a.is_ipv6() == v6)
        .map(|&a| crate::model::candidates::ordinal(a))
        .collect();
    sorted.sort_unstable();
    sorted.dedup();
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_counts_the_intersection() {
        let spans = [(1, 3), (10, 20), (30, 30)];
        assert_eq!(overlap(&spans, 0, 100), 3 + 11 + 1);
        assert_eq!(overlap(&spans, 15, 30), 6 + 1);
        assert_eq!(overlap(&spans, 4, 9), 0);
    }
}
