//! Addresses as `u128` ordinals and inclusive spans of them: the arithmetic every
//! [`super::Candidates`] answer is made of, one implementation for both families.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// An inclusive range of addresses as `u128`s (of one family, known from context).
pub type Span = (u128, u128);

/// An address as a number: an IPv4 address is its `u32` value, an IPv6 address its `u128`.
pub fn ordinal(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The address of ordinal `n` in the family of `like` (for IPv4, `n` fits 32 bits).
pub fn address(v6: bool, n: u128) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(n))
    } else {
        IpAddr::V4(Ipv4Addr::from(n as u32))
    }
}

/// All addresses of `net`, as ordinals.
pub fn span_of(net: IpNet) -> Span {
    (ordinal(net.network()), ordinal(net.broadcast()))
}

/// The usable host addresses of `net`. IPv4, as `ipnet`'s `hosts()` yields them: without
/// network and broadcast for prefixes shorter than /31; both addresses of a /31; the one of
/// a /32. IPv6 has no broadcast: every address but the subnet-router anycast address (the
/// all-zeros one, RFC 4291 §2.6.1) for prefixes shorter than /127; every address of a /127
/// (RFC 6164) and of a /128.
pub fn host_span(net: IpNet) -> Span {
    let (first, last) = span_of(net);
    match net {
        IpNet::V4(_) if net.prefix_len() >= 31 => (first, last),
        IpNet::V4(_) => (first + 1, last - 1),
        IpNet::V6(_) if net.prefix_len() >= 127 => (first, last),
        IpNet::V6(_) => (first + 1, last),
    }
}

/// Sorts and merges overlapping or adjacent spans.
pub(super) fn merge(mut spans: Vec<Span>) -> Vec<Span> {
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

/// The number of addresses in `span`; saturates at `u128::MAX` for the whole IPv6 space
/// (2^128 addresses), which no pool has: `::/0` has no subnet-router anycast address to
/// hand out either.
pub fn span_len(&(lo, hi): &Span) -> u128 {
    (hi - lo).saturating_add(1)
}
