//! End to end, a DHCPv6 guest on a directly attached link gets its reserved address: Kea's
//! `Dhcp6` and dnsmasq serve `ipamctl dhcp export` on one end of a veth pair between two
//! network namespaces, ISC `dhclient -6` runs on the other with a NIC's MAC on its end (its
//! DUID is made of that MAC). Kea picks a DHCPv6 subnet for a client on a link only by the
//! subnet's `interface`, which the export takes from `--interface`; without it (or with
//! several) no directly attached client gets an address, and the export says so.

mod host;

use host::Lab;
use host::netns::{Net, server_log};

#[test]
#[cfg_attr(
    any(not(has_root), not(has_kea), not(has_dhclient)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs ISC dhclient: apt-get install isc-dhcp-client"
)]
fn kea6_serving_the_export_gives_a_directly_attached_guest_its_address() {
    let lab = Lab::new();
    let dir = lab.tmp.path();
    let mut net = Net::new("6k");
    let vs = net.server_if();
    let conf = lab.export("kea6", "lab-v6", &vs);
    let text = std::fs::read_to_string(&conf).expect("the export");
    net.serve_kea6(&conf, dir);
    let log = || server_log(dir);
    assert_eq!(
        net.ask6("52:54:00:00:00:01", dir).as_deref(),
        Some("ip6=2001:db8:1::1/128"),
        "{}",
        log()
    );
    assert_eq!(
        net.ask6("52:54:00:00:00:99", dir),
        None,
        "a MAC without a reservation: {}",
        log()
    );
    // What made the difference: the subnet is on the link the client is on.
    let config: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        config["Dhcp6"]["subnet6"][0]["interface"],
        vs.as_str(),
        "{text}"
    );
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_dnsmasq), not(has_dhclient)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs dnsmasq: apt-get install dnsmasq-base; needs ISC dhclient: apt-get install isc-dhcp-client"
)]
fn dnsmasq_serving_the_export_gives_a_dhcpv6_guest_its_address() {
    let lab = Lab::new();
    let dir = lab.tmp.path();
    let mut net = Net::new("6d");
    let text = lab.stdout(&["dhcp", "export", "--format", "dnsmasq", "--pool", "lab-v6"]);
    let conf = lab.file("dnsmasq.conf", &text);
    net.serve_dnsmasq(&conf, dir);
    let log = || server_log(dir);
    assert_eq!(
        net.ask6("52:54:00:00:00:01", dir).as_deref(),
        Some("ip6=2001:db8:1::1/128"),
        "{}",
        log()
    );
}

#[test]
fn kea6_without_one_interface_says_no_attached_client_gets_an_address() {
    let lab = Lab::new();
    let out = lab.run(&["dhcp", "export", "--format", "kea6"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.starts_with("warning: ") && err.contains("--interface"),
        "{err}"
    );
    let config: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(config["Dhcp6"]["subnet6"][0].get("interface").is_none());
    let out = lab.run(&[
        "dhcp",
        "export",
        "--format",
        "kea6",
        "--interface",
        "eth0",
        "--interface",
        "eth1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--interface") && err.contains("--subnet"),
        "{err}"
    );
    // Kea4 selects a subnet by the interface's address: several interfaces are fine.
    lab.ok(&[
        "dhcp",
        "export",
        "--format",
        "kea4",
        "--interface",
        "eth0",
        "--interface",
        "eth1",
    ]);
}
