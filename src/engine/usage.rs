//! What a pool's stored subnets keep out of its candidates, as the views (the map, the SVG,
//! the report) draw and count them: each subnet's network and broadcast address (IPv6: its
//! subnet-router anycast address), its gateway and its reserved entries are never free, so a
//! pool's candidates are its own ([`Candidates::of_pool`]) without them, and its usage adds
//! up: candidates = allocated among them + free.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::error::Result;
use crate::model::candidates::{Candidates, Span, Usage, address, host_span, span_of};
use crate::model::subnet::SubnetManifest;
use crate::model::{PoolRef, PoolSpec};
use crate::store::Store;

/// Why a subnet keeps an address out of every claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Its network or broadcast address (IPv6: its subnet-router anycast address).
    NetworkBroadcast,
    /// Its gateway.
    Gateway,
    /// One of its reserved entries.
    Reserved,
}

impl Role {
    /// How messages and tooltips name it: `gateway`, `reserved`, `network/broadcast`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::NetworkBroadcast => "network/broadcast",
            Role::Gateway => "gateway",
            Role::Reserved => "reserved",
        }
    }
}

/// One range a subnet keeps out: its addresses (inclusive ordinals), why, and whose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    /// The addresses, as ordinals of the subnet's family.
    pub span: Span,
    /// Why.
    pub role: Role,
    /// The subnet's name.
    pub subnet: String,
}

/// The ranges `subnet` keeps out, ascending: network and broadcast first where its prefix
/// has them, then the gateway, then the reserved entries (a reserved entry may overlap the
/// gateway; the first role found for an address is the one drawn).
pub fn kept_by(subnet: &SubnetManifest) -> Vec<Kept> {
    let cidr = subnet.spec.cidr;
    let (first, last) = span_of(cidr);
    let (lo, hi) = host_span(cidr);
    let name = &subnet.metadata.name;
    let mut kept = Vec::new();
    let mut push = |span: Span, role: Role| {
        kept.push(Kept {
            span,
            role,
            subnet: name.clone(),
        })
    };
    if lo > first {
        push((first, lo - 1), Role::NetworkBroadcast);
    }
    if hi < last {
        push((hi + 1, last), Role::NetworkBroadcast);
    }
    let g = crate::model::candidates::ordinal(subnet.gateway());
    push((g, g), Role::Gateway);
    for r in &subnet.spec.reserved {
        push(span_of(r.net()), Role::Reserved);
    }
    kept
}

/// Every range the `subnets` keep out, sorted by their first address.
pub fn kept(subnets: &[SubnetManifest]) -> Vec<Kept> {
    let mut all: Vec<Kept> = subnets.iter().flat_map(kept_by).collect();
    all.sort_by(|a, b| a.span.cmp(&b.span).then(a.role.cmp(&b.role)));
    all
}

/// The role of address `a` (an ordinal) among the sorted `kept`, if a subnet keeps it.
pub fn role_of(kept: &[Kept], a: u128) -> Option<&Kept> {
    // Spans of distinct subnets never overlap (subnets of a pool are disjoint); within one
    // subnet a reserved entry may cover the gateway: the gateway wins, as it is checked first.
    let upto = kept.partition_point(|k| k.span.0 <= a);
    kept[..upto]
        .iter()
        .filter(|k| k.span.1 >= a)
        .min_by_key(|k| match k.role {
            Role::Gateway => 0,
            Role::NetworkBroadcast => 1,
            Role::Reserved => 2,
        })
}

/// The candidates of `pool` whose stored subnets are `subnets`: the pool's own, without
/// every subnet's network, broadcast, gateway and reserved addresses.
pub fn pool_candidates(pool: &PoolSpec, subnets: &[SubnetManifest]) -> Candidates {
    let v6 = pool.cidr.addr().is_ipv6();
    let nets = kept(subnets).into_iter().flat_map(|k| nets_of(v6, k.span));
    Candidates::of_pool(pool).without_nets(nets)
}

/// The usage of `pool` (whose subnets are `subnets` and whose allocations hold `taken`),
/// counted over [`pool_candidates`], narrowed to `within` if given: allocated counts every
/// allocation of the range, free the candidates nobody holds.
pub fn pool_usage(
    pool: &PoolSpec,
    subnets: &[SubnetManifest],
    within: Option<IpNet>,
    taken: &[IpAddr],
) -> Usage {
    let mut candidates = pool_candidates(pool, subnets);
    if let Some(w) = within {
        candidates = candidates.within(w);
    }
    let inside: Vec<IpAddr> = taken
        .iter()
        .copied()
        .filter(|a| within.is_none_or(|w| w.contains(a)))
        .collect();
    let held = inside.iter().filter(|a| candidates.contains(**a)).count() as u64;
    Usage::from_counts(&candidates, inside.len() as u64, held)
}

/// The stored subnets of `pool`, in name order.
pub fn subnets_of(store: &dyn Store, pool: &PoolRef) -> Result<Vec<SubnetManifest>> {
    crate::engine::subnet::list(store, pool.namespace.as_ref(), Some(&pool.name))
}

/// The fewest prefixes that cover `span` exactly (a reserved /28 is one; a gateway one /32).
fn nets_of(v6: bool, (mut lo, hi): Span) -> Vec<IpNet> {
    let bits: u32 = if v6 { 128 } else { 32 };
    let mut nets = Vec::new();
    while lo <= hi {
        // The largest aligned block starting at `lo` that ends at or before `hi`.
        let mut size_bits = if lo == 0 {
            bits
        } else {
            lo.trailing_zeros().min(bits)
        };
        let mask = |b: u32| {
            if b >= 128 {
                u128::MAX
            } else {
                (1u128 << b) - 1
            }
        };
        while size_bits > 0 && lo + mask(size_bits) > hi {
            size_bits -= 1;
        }
        let net = IpNet::new(address(v6, lo), (bits - size_bits) as u8)
            .expect("a prefix length within the family");
        nets.push(net);
        let end = lo + mask(size_bits);
        if end >= hi {
            break;
        }
        lo = end + 1;
    }
    nets
}

/// Builders shared by the unit tests of the modules that draw and count subnets.
#[cfg(test)]
pub(crate) mod testing {
    use crate::model::subnet::SubnetManifest;
    use crate::model::{PoolName, PoolRef, SubnetName};

    /// Subnet `name` of cluster-scoped pool `p`, at `cidr` (gateway: its first host), with
    /// `reserved` entries.
    pub fn subnet(name: &str, cidr: &str, reserved: &[&str]) -> SubnetManifest {
        let pool = PoolRef {
            namespace: None,
            name: PoolName::new("p").expect("a valid name"),
        };
        SubnetManifest::new(
            &SubnetName::new(name).expect("a valid name"),
            &pool,
            cidr.parse().expect("a valid prefix"),
            None,
            reserved
                .iter()
                .map(|r| r.to_string().try_into().expect("a valid entry"))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(cidr: &str) -> PoolSpec {
        crate::model::candidates::testing::spec(cidr, None, &[])
    }

    fn subnet(cidr: &str, reserved: &[&str]) -> SubnetManifest {
        testing::subnet("web", cidr, reserved)
    }

    #[test]
    fn a_subnet_keeps_its_edges_gateway_and_reserved_out_of_the_pool() {
        let p = pool("10.0.0.0/24");
        let s = subnet("10.0.0.16/29", &["10.0.0.20/31"]);
        let u = pool_usage(&p, std::slice::from_ref(&s), None, &[]);
        // 254 hosts without .16 and .23 (edges), .17 (gateway), .20-.21 (reserved).
        assert_eq!(u.candidates, 254 - 5);
        let k = kept(&[s]);
        assert_eq!(role_of(&k, 17).map(|k| k.role), None, "not in the subnet");
        let at = |last: u8| role_of(&k, 0x0a00_0000 + u128::from(last)).map(|k| k.role);
        assert_eq!(at(16), Some(Role::NetworkBroadcast));
        assert_eq!(at(17), Some(Role::Gateway));
        assert_eq!(at(18), None);
        assert_eq!(at(21), Some(Role::Reserved));
        assert_eq!(at(23), Some(Role::NetworkBroadcast));
    }

    #[test]
    fn usage_adds_up_with_an_allocation_on_a_kept_address() {
        let p = pool("10.0.0.0/24");
        let s = subnet("10.0.0.16/29", &[]);
        let taken: Vec<IpAddr> = vec!["10.0.0.17".parse().unwrap(), "10.0.0.18".parse().unwrap()];
        let u = pool_usage(&p, &[s], None, &taken);
        assert_eq!(u.allocated, 2);
        assert_eq!(u.candidates, 254 - 3);
        assert_eq!(u.free, u.candidates - 1, "only .18 is a held candidate");
    }

    #[test]
    fn spans_become_the_fewest_prefixes() {
        let nets = nets_of(false, (0x0a00_0001, 0x0a00_0006));
        let shown: Vec<String> = nets.iter().map(|n| n.to_string()).collect();
        assert_eq!(
            shown,
            ["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"]
        );
        assert_eq!(nets_of(true, (0, u128::MAX)).len(), 1);
        assert_eq!(nets_of(false, (0, u128::from(u32::MAX)))[0].prefix_len(), 0);
    }
}
