//! End to end, a guest gets its address: two network namespaces joined by a veth pair, a
//! DHCP server (dnsmasq, then Kea) serving `ipamctl dhcp export` on one side, busybox's
//! `udhcpc` on the other with a NIC's MAC on its end. It gets exactly the allocated address,
//! the subnet's gateway as its router and its host name; a MAC without a reservation gets no
//! address. Only TEST-NET addresses, only namespaces this test made (removed however it
//! ends, with every process it started), every wait bounded.

mod host;

use std::path::PathBuf;

use host::Lab;
use host::netns::{Net, server_log};

/// The lab's export of pool `lab` in `format`, for a Kea listening on `interface`.
fn lab_with_export(format: &str, interface: &str) -> (Lab, PathBuf) {
    let lab = Lab::new();
    let path = lab.export(format, "lab", interface);
    (lab, path)
}

const WEB01: &str = "ip=192.0.2.2 mask=24 router=192.0.2.1 hostname=web-01";
const WEB01_1: &str = "ip=192.0.2.3 mask=24 router=192.0.2.1 hostname=web-01-1";

#[test]
// One `ignore` naming every missing tool (a second `cfg_attr(ignore)` would be unused).
#[cfg_attr(
    any(not(has_root), not(has_dnsmasq), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs dnsmasq: apt-get install dnsmasq-base; needs busybox's udhcpc: apt-get install busybox"
)]
fn dnsmasq_serving_the_export_gives_a_guest_its_address_router_and_name() {
    let mut net = Net::new("d");
    let (lab, conf) = lab_with_export("dnsmasq", &net.server_if());
    let dir = lab.tmp.path();
    net.serve_dnsmasq(&conf, dir);
    let log = || server_log(dir);
    assert_eq!(
        net.ask("52:54:00:00:00:01", dir).as_deref(),
        Some(WEB01),
        "{}",
        log()
    );
    assert_eq!(
        net.ask("52:54:00:00:00:02", dir).as_deref(),
        Some(WEB01_1),
        "{}",
        log()
    );
    let none = net.ask("52:54:00:00:00:99", dir);
    assert_eq!(none, None, "a MAC without a reservation: {}", log());
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_kea), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs busybox's udhcpc: apt-get install busybox"
)]
fn kea_serving_the_export_gives_a_guest_its_address_router_and_name() {
    let mut net = Net::new("k");
    let (lab, conf) = lab_with_export("kea4", &net.server_if());
    let dir = lab.tmp.path();
    net.serve_kea4(&conf, dir);
    let log = || server_log(dir);
    assert_eq!(
        net.ask("52:54:00:00:00:01", dir).as_deref(),
        Some(WEB01),
        "{}",
        log()
    );
    assert_eq!(
        net.ask("52:54:00:00:00:02", dir).as_deref(),
        Some(WEB01_1),
        "{}",
        log()
    );
    let none = net.ask("52:54:00:00:00:99", dir);
    assert_eq!(none, None, "a MAC without a reservation: {}", log());
}
