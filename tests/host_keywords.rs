//! A host name that dnsmasq would read as a keyword of `dhcp-host` is still a name. dnsmasq
//! reads a bare `ignore` as "ignore this MAC", `infinite` and a number with an optional
//! `s`/`m`/`h`/`d`/`w` (`7`, `45m`, `12h`) as a lease time (its option.c, `--dhcp-host`):
//! so `Node/ignore` would get no address and `Node/12h` no name. The export writes such a
//! name with a trailing dot, which dnsmasq reads as the name and drops. Shown with a real
//! client in a network namespace, from dnsmasq and, with the same owners, from Kea.

mod host;

use std::path::Path;

use host::Lab;
use host::netns::{Net, server_log};

/// The owners whose names are dnsmasq keywords, with their MACs.
const KEYWORDS: [(&str, &str); 5] = [
    ("ignore", "52:54:00:00:00:11"),
    ("infinite", "52:54:00:00:00:12"),
    ("12h", "52:54:00:00:00:13"),
    ("7", "52:54:00:00:00:14"),
    ("45m", "52:54:00:00:00:15"),
];

/// The lab with one `Node` per keyword in pool `lab`: (name, MAC, address).
fn lab_with_keywords() -> (Lab, Vec<(&'static str, &'static str, String)>) {
    let lab = Lab::new();
    let nodes = KEYWORDS
        .iter()
        .map(|&(name, mac)| {
            (
                name,
                mac,
                lab.nic("lab", &format!("Node/{name}"), Some(mac)),
            )
        })
        .collect();
    (lab, nodes)
}

/// Asks for each node's MAC with udhcpc, and asserts it gets its address, the router and
/// its own name.
fn each_gets_its_address_and_name(net: &Net, nodes: &[(&str, &str, String)], dir: &Path) {
    for (name, mac, address) in nodes {
        let want = format!("ip={address} mask=24 router=192.0.2.1 hostname={name}");
        assert_eq!(net.ask(mac, dir), Some(want), "{name}: {}", server_log(dir));
    }
}

#[test]
fn a_keyword_host_name_is_written_as_a_name_for_dnsmasq() {
    let (lab, nodes) = lab_with_keywords();
    let text = lab.stdout(&["dhcp", "export", "--format", "dnsmasq", "--pool", "lab"]);
    for (name, mac, address) in &nodes {
        assert!(
            text.contains(&format!("\ndhcp-host={mac},{address},{name}.\n")),
            "{name}: {text}"
        );
    }
    // An ordinary name stays as it was.
    assert!(
        text.contains("dhcp-host=52:54:00:00:00:01,192.0.2.2,web-01\n"),
        "{text}"
    );
    // Kea's JSON and the zone files have no keywords: the name as it is.
    let kea = lab.stdout(&["dhcp", "export", "--format", "kea4", "--pool", "lab"]);
    assert!(kea.contains("\"hostname\": \"ignore\""), "{kea}");
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_dnsmasq), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs dnsmasq: apt-get install dnsmasq-base; needs busybox's udhcpc: apt-get install busybox"
)]
fn dnsmasq_gives_a_guest_named_like_a_keyword_its_address_and_name() {
    let (lab, nodes) = lab_with_keywords();
    let dir = lab.tmp.path();
    let text = lab.stdout(&["dhcp", "export", "--format", "dnsmasq", "--pool", "lab"]);
    let conf = lab.file("dnsmasq.conf", &text);
    let mut net = Net::new("kd");
    net.serve_dnsmasq(&conf, dir);
    each_gets_its_address_and_name(&net, &nodes, dir);
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_kea), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs busybox's udhcpc: apt-get install busybox"
)]
fn kea_gives_a_guest_named_like_a_keyword_its_address_and_name() {
    let (lab, nodes) = lab_with_keywords();
    let dir = lab.tmp.path();
    let mut net = Net::new("kk");
    let vs = net.server_if();
    let text = lab.stdout(&[
        "dhcp",
        "export",
        "--format",
        "kea4",
        "--pool",
        "lab",
        "--interface",
        &vs,
    ]);
    let conf = lab.file("kea4.json", &text);
    net.serve_kea4(&conf, dir);
    each_gets_its_address_and_name(&net, &nodes, dir);
}
