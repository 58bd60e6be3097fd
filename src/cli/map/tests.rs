//! The map's unit tests: kinds of addresses, blocks and regions, text rows, SVG escaping.

use std::net::IpAddr;

use super::*;

use crate::model::candidates::testing::{addrs, spec};
use crate::model::{PoolName, PoolRef, PoolSpec, SubnetName};

/// Pool `p` with `spec`, cluster-scoped (decoded as a manifest, so it has every field).
fn pool(spec: PoolSpec) -> PoolManifest {
    serde_json::from_value(serde_json::json!({
        "apiVersion": crate::model::API_VERSION,
        "kind": crate::model::POOL_KIND,
        "metadata": {"name": "p"},
        "spec": spec,
    }))
    .expect("a valid pool manifest")
}

/// Subnet `name` of pool `p` at `cidr` (gateway: its first host), with `reserved` entries.
fn subnet(name: &str, cidr: &str, reserved: &[&str]) -> SubnetManifest {
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

fn glyphs(map: &Map) -> String {
    map.cells.iter().map(|c| c.kind.style().glyph).collect()
}

#[test]
fn each_address_gets_its_kind() {
    let map = Map::new(
        "p",
        &pool(spec("10.0.0.0/28", Some("10.0.0.1"), &["10.0.0.4/31"])),
        &[],
        None,
        &addrs(&["10.0.0.2", "10.0.0.5"]),
    );
    assert_eq!(glyphs(&map), "-G#.x#.........-");
}

#[test]
fn a_subnets_gateway_reserved_and_edges_are_never_free() {
    let s = subnet("web", "10.0.0.8/29", &["10.0.0.10"]);
    let map = Map::new(
        "p",
        &pool(spec("10.0.0.0/27", None, &[])),
        &[s],
        None,
        &addrs(&["10.0.0.12"]),
    );
    assert_eq!(&glyphs(&map)[..17], "-.......-Gr.#..-.");
    let svg = map.svg();
    assert!(svg.contains("<title>10.0.0.9 gateway of subnet web</title>"));
    assert!(svg.contains("<title>10.0.0.10 reserved address of subnet web</title>"));
    // 30 hosts, less the subnet's network, broadcast, gateway and reserved address.
    let u = map.usage[0].1;
    assert_eq!((u.candidates, u.allocated, u.free), (26, 1, 25));
}

#[test]
fn an_allocation_on_a_subnets_gateway_is_drawn_allocated_and_counted_apart() {
    let s = subnet("web", "10.0.0.8/29", &[]);
    let map = Map::new(
        "p",
        &pool(spec("10.0.0.0/27", None, &[])),
        &[s],
        None,
        &addrs(&["10.0.0.9", "10.0.0.12"]),
    );
    assert_eq!(&glyphs(&map)[8..11], "-#.");
    let u = map.usage[0].1;
    assert_eq!((u.candidates, u.allocated, u.free), (27, 1, 26));
    assert!(map.text(false).contains(
        "pool 10.0.0.0/27: 27 candidates, 1 allocated, 26 free (3.7% used); 1 more on addresses no claim is given (ipamctl check)"
    ));
}

#[test]
fn within_marks_its_own_network_and_broadcast() {
    let map = Map::new(
        "p",
        &pool(spec("10.0.0.0/24", None, &[])),
        &[],
        Some("10.0.0.16/29".parse().unwrap()),
        &addrs(&["10.0.0.18"]),
    );
    assert_eq!(glyphs(&map), "-.#....-");
    assert_eq!(map.usage.len(), 2);
    assert_eq!(map.usage[1].1.candidates, 6);
    assert_eq!(map.usage[1].1.allocated, 1);
}

#[test]
fn slash_31_has_no_network_or_broadcast() {
    let map = Map::new("p", &pool(spec("10.0.0.0/31", None, &[])), &[], None, &[]);
    assert_eq!(glyphs(&map), "..");
}

#[test]
fn larger_than_a_slash_22_is_one_cell_per_slash_24() {
    let mut taken = addrs(&["10.0.0.5"]);
    taken.extend((0..=255).map(|i| IpAddr::from([10u8, 0, 2, i])));
    taken.extend((1..=100).map(|i| IpAddr::from([10u8, 0, 3, i])));
    let map = Map::new(
        "p",
        &pool(spec("10.0.0.0/21", Some("10.0.0.1"), &["10.0.4.0/24"])),
        &[],
        None,
        &taken,
    );
    assert_eq!(map.layout, Layout::Blocks);
    // 100 of 254 (39%) is the third step (20% to under 80%), never shaded fuller.
    assert_eq!(glyphs(&map), ":.#*x...");
    // 10.0.0.0/24 loses the network address and the gateway; 10.0.1.0/24 loses none.
    assert_eq!(map.cells[0].fill, Some((1, 254)));
    assert_eq!(map.cells[1].fill, Some((0, 256)));
    assert_eq!(map.cells[7].fill, Some((0, 255)));
}

#[test]
fn a_slash_24_of_a_large_pool_loses_what_its_subnet_keeps() {
    let s = subnet("web", "10.0.1.0/24", &["10.0.1.2"]);
    let map = Map::new("p", &pool(spec("10.0.0.0/21", None, &[])), &[s], None, &[]);
    assert_eq!(map.cells[1].fill, Some((0, 256 - 4)));
}

#[test]
fn a_slash_22_is_still_one_cell_per_address() {
    let map = Map::new("p", &pool(spec("10.0.0.0/22", None, &[])), &[], None, &[]);
    assert_eq!((map.layout, map.cells.len()), (Layout::Addresses, 1024));
}

#[test]
fn a_large_ipv6_pool_is_one_cell_per_subnet_and_slash_64_in_use() {
    let subnets = [
        subnet("web6", "fd00:70:0:1::/64", &[]),
        subnet("idle6", "fd00:70:0:9::/64", &[]),
    ];
    let taken = addrs(&[
        "fd00:70:0:1::2",
        "fd00:70:0:1::3",
        "fd00:70:0:ffff::1",
        "fd00:70:0:ffff::2:0",
    ]);
    let map = Map::new(
        "p",
        &pool(spec("fd00:70::/48", None, &[])),
        &subnets,
        None,
        &taken,
    );
    assert_eq!(map.layout, Layout::Regions);
    let text = map.text(false);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "p fd00:70::/48: one cell per subnet, and per /64 in use outside the subnets"
    );
    assert_eq!(
        lines[1],
        "fd00:70:0:1::/64     :  subnet web6: 2 of 2^64 - 2 candidates allocated"
    );
    assert_eq!(
        lines[2],
        "fd00:70:0:9::/64     .  subnet idle6: 0 of 2^64 - 2 candidates allocated"
    );
    assert_eq!(
        lines[3],
        "fd00:70:0:ffff::/64  :  2 of 2^64 candidates allocated"
    );
    let u = map.usage[0].1;
    assert_eq!(u.candidates, u.free + 4, "every allocation is a candidate");
    // The regions add up to the pool's allocations.
    let held: u128 = map.cells.iter().map(|c| c.fill.unwrap().0).sum();
    assert_eq!(held, 4);
}

#[test]
fn an_empty_ipv6_pool_is_one_region() {
    let map = Map::new("p", &pool(spec("fd00::/48", None, &[])), &[], None, &[]);
    assert_eq!(map.cells.len(), 1);
    assert_eq!(map.cells[0].kind, Kind::Empty);
    assert!(
        map.text(false)
            .contains("fd00::/48  .  0 of 2^80 - 1 candidates allocated")
    );
}

#[test]
fn text_rows_are_labelled_and_slash_24s_separated() {
    let map = Map::new("p", &pool(spec("10.0.0.0/23", None, &[])), &[], None, &[]);
    let text = map.text(false);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "p 10.0.0.0/23: one cell per address");
    assert_eq!(lines[1], "10.0.0.0    -....... ........ ........ ........");
    assert_eq!(lines[9], "");
    assert!(lines[10].starts_with("10.0.1.0    ........ "));
    assert!(!text.contains('\x1b'));
}

#[test]
fn colour_wraps_runs_of_glyphs() {
    let map = Map::new(
        "p",
        &pool(spec("10.0.0.0/29", Some("10.0.0.1"), &[])),
        &[],
        None,
        &[],
    );
    let text = map.text(true);
    assert!(text.contains("\x1b[35m-\x1b[0m\x1b[1;34mG\x1b[0m\x1b[32m.....\x1b[0m"));
}

#[test]
fn svg_escapes_the_title() {
    let map = Map::new("a&b", &pool(spec("10.0.0.0/30", None, &[])), &[], None, &[]);
    let svg = map.svg();
    assert!(svg.contains("<title>a&amp;b 10.0.0.0/30"));
    assert_eq!(svg.matches(r#"class="cell "#).count(), 4);
}
