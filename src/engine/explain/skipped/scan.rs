//! The scan behind an explanation: the spans a walk passed before the chosen address, and
//! for each address the reason that blocks it and how far that reason runs, so that no
//! prefix is ever enumerated address by address.

use ipnet::IpNet;

use super::{Reason, Request};
use crate::model::candidates::{Span, address, ordinal};
use crate::model::subnet::off_limits_role;

/// The spans a walk passed before `chosen` (ordinals) in a pool whose addresses are `pool`:
/// from the pool's first address (or `start`) up to the address before `chosen`, wrapping
/// from the pool's last address to its first; the whole pool, from `start` around, when
/// nothing was chosen.
pub(super) fn walked((first, top): Span, start: Option<u128>, chosen: Option<u128>) -> Vec<Span> {
    let start = start.unwrap_or(first);
    let before = |a: u128| a.checked_sub(1);
    let spans = match chosen {
        Some(c) if c >= start => vec![(start, before(c))],
        Some(c) => vec![(start, Some(top)), (first, before(c))],
        None => vec![(start, Some(top)), (first, before(start))],
    };
    spans
        .into_iter()
        .filter_map(|(lo, hi)| hi.filter(|&hi| hi >= lo).map(|hi| (lo, hi)))
        .collect()
}

/// The request, arranged for finding the reason at an address and how far it extends.
pub(super) struct Scan<'a> {
    req: &'a Request<'a>,
    /// Addresses where the reason may change: every single-address reason and the address
    /// after it, every span's start and the address after its end. Sorted, deduplicated.
    breaks: Vec<u128>,
    taken: Vec<u128>,
    reserved: Vec<u128>,
    cooling: Vec<u128>,
}

/// The network and last address of `net`, as ordinals.
pub(super) fn span_of(net: IpNet) -> Span {
    crate::model::candidates::span_of(net)
}

/// Is `net` long enough that its first (and, in IPv4, last) address is handed out?
pub(super) fn edges_used(net: IpNet) -> bool {
    net.prefix_len() + 1 >= net.max_prefix_len()
}

impl<'a> Scan<'a> {
    pub(super) fn new(req: &'a Request<'a>) -> Scan<'a> {
        let mut singles: Vec<u128> = Vec::new();
        let mut spans: Vec<Span> = Vec::new();
        singles.extend(<[u128; 2]>::from(span_of(req.spec.cidr)));
        if let Some(w) = req.within {
            spans.push(span_of(w));
            singles.extend(<[u128; 2]>::from(span_of(w)));
        }
        singles.extend(req.spec.gateway.map(ordinal));
        spans.extend(req.spec.exclude.iter().map(|e| span_of(e.net())));
        spans.extend(req.subnets.iter().flat_map(|s| s.off_limits()).map(span_of));
        let mut taken: Vec<u128> = req.taken.iter().copied().map(ordinal).collect();
        taken.sort_unstable();
        let mut reserved: Vec<u128> = req.reserved.iter().copied().map(ordinal).collect();
        reserved.sort_unstable();
        let mut cooling: Vec<u128> = req.cooling.iter().copied().map(ordinal).collect();
        cooling.sort_unstable();
        singles.extend(&taken);
        singles.extend(&reserved);
        singles.extend(&cooling);
        // The address after the very last one does not exist: no break there.
        let mut breaks: Vec<u128> = singles
            .iter()
            .flat_map(|&s| [Some(s), s.checked_add(1)])
            .chain(
                spans
                    .iter()
                    .flat_map(|&(lo, hi)| [Some(lo), hi.checked_add(1)]),
            )
            .flatten()
            .collect();
        breaks.sort_unstable();
        breaks.dedup();
        Scan {
            req,
            breaks,
            taken,
            reserved,
            cooling,
        }
    }

    /// The last address of a run that starts at `a` and crosses no break.
    pub(super) fn run_end(&self, a: u128, natural_end: u128) -> u128 {
        let i = self.breaks.partition_point(|&b| b <= a);
        let before_break = self.breaks.get(i).map_or(u128::MAX, |&b| b - 1);
        natural_end.min(before_break)
    }

    /// The reason `a` is skipped and the last address of the run it starts.
    pub(super) fn reason_at(&self, a: u128) -> (Reason, u128) {
        let req = self.req;
        let cidr = req.spec.cidr;
        let v6 = cidr.addr().is_ipv6();
        let addr = address(v6, a);
        if !edges_used(cidr) && addr == cidr.network() {
            return (
                if v6 {
                    Reason::PoolAnycast
                } else {
                    Reason::PoolNetwork
                },
                a,
            );
        }
        if !v6 && !edges_used(cidr) && addr == cidr.broadcast() {
            return (Reason::PoolBroadcast, a);
        }
        if let Some(w) = req.within {
            let (lo, hi) = span_of(w);
            if a < lo {
                return (Reason::OutsideWithin(w), self.run_end(a, lo - 1));
            }
            if a > hi {
                return (Reason::OutsideWithin(w), self.run_end(a, u128::MAX));
            }
            if !edges_used(w) && addr == w.network() {
                return (
                    if v6 {
                        Reason::WithinAnycast(w)
                    } else {
                        Reason::WithinNetwork(w)
                    },
                    a,
                );
            }
            if !v6 && !edges_used(w) && addr == w.broadcast() {
                return (Reason::WithinBroadcast(w), a);
            }
        }
        if req.spec.gateway == Some(addr) {
            return (Reason::Gateway, a);
        }
        if let Some(e) = req.spec.exclude.iter().find(|e| e.net().contains(&addr)) {
            let end = span_of(e.net()).1;
            return (Reason::Excluded(*e), self.run_end(a, end));
        }
        if let Some((subnet, role)) = off_limits_role(req.subnets, addr) {
            let end = subnet
                .off_limits()
                .into_iter()
                .find(|net| net.contains(&addr))
                .map_or(a, |net| span_of(net).1);
            let reason = Reason::Subnet(subnet.metadata.name.clone(), role);
            return (reason, self.run_end(a, end));
        }
        if self.reserved.binary_search(&a).is_ok() {
            return (Reason::Reserved, a);
        }
        if self.taken.binary_search(&a).is_ok() {
            return (Reason::Taken, a);
        }
        if self.cooling.binary_search(&a).is_ok() {
            let window = req.spec.reuse_after.as_ref();
            return (
                Reason::Cooling(window.map_or(String::new(), |w| w.to_string())),
                a,
            );
        }
        (Reason::Free, self.run_end(a, u128::MAX))
    }
}
