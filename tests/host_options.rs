//! End to end, a guest is told the options of its subnet: `spec.dhcp` of pool `lab` (DNS
//! servers, domain, MTU, NTP server, lease time) and an extra route, served by dnsmasq and
//! by Kea from `ipamctl dhcp export`, read by busybox's `udhcpc` in a network namespace with
//! a NIC's MAC. Only TEST-NET addresses, only namespaces this test made (removed however it
//! ends, with every process it started), every wait bounded.

mod host;

use std::path::Path;

use host::Lab;
use host::netns::Net;

/// Pool `lab` of [`host::POOLS`] with options.
const LAB_WITH_OPTIONS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: lab}
spec:
  cidr: 192.0.2.0/24
  kind: public
  gateway: 192.0.2.1
  dhcp:
    dnsServers: [192.0.2.53, 198.51.100.53]
    domain: lab.example
    leaseTime: 2h
    mtu: 1400
    ntpServers: [192.0.2.123]
    routes:
    - {to: 198.51.100.0/24, via: 192.0.2.254}
";

/// What udhcpc's script sees for `web-01` (MAC :01): its address, router and name, and
/// every option. `routes` is the classless static routes option: the default route via the
/// gateway first (a client that gets option 121 ignores `routers`), then the extra one.
const WEB01: &str = "ip=192.0.2.2 mask=24 router=192.0.2.1 hostname=web-01 \
dns=192.0.2.53 198.51.100.53 domain=lab.example mtu=1400 ntp=192.0.2.123 \
routes=0.0.0.0/0 192.0.2.1 198.51.100.0/24 192.0.2.254 lease=7200";

/// How a test starts the server of an export (`conf`, its files in `dir`).
type Serve = fn(&mut Net, &Path, &Path) -> std::path::PathBuf;
/// How a client asks with a MAC: [`Net::ask_options`] or [`Net::ask6_options`].
type Ask = fn(&Net, &str, &Path) -> Option<String>;

/// Applies `options` (a pool of [`host::POOLS`] with `spec.dhcp`), serves the export of
/// `pool` in `format` with `serve` (and its tag for the namespaces), and asks with web-01's
/// MAC: the guest must be told `expected`.
fn guest_is_told(
    options: &str,
    pool: &str,
    format: &str,
    serve: (Serve, &str),
    ask: Ask,
    expected: &str,
) {
    let lab = Lab::new();
    lab.apply(options);
    let mut net = Net::new(serve.1);
    let vs = net.server_if();
    let conf = lab.export(format, pool, &vs);
    let dir = lab.tmp.path();
    (serve.0)(&mut net, &conf, dir);
    let log = || std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    assert_eq!(
        ask(&net, "52:54:00:00:00:01", dir).as_deref(),
        Some(expected),
        "{}",
        log()
    );
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_dnsmasq), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs dnsmasq: apt-get install dnsmasq-base; needs busybox's udhcpc: apt-get install busybox"
)]
fn dnsmasq_tells_the_guest_its_dns_servers_domain_mtu_ntp_and_routes() {
    let serve: Serve = Net::serve_dnsmasq;
    let options = LAB_WITH_OPTIONS;
    guest_is_told(
        options,
        "lab",
        "dnsmasq",
        (serve, "o"),
        Net::ask_options,
        WEB01,
    );
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_kea), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs busybox's udhcpc: apt-get install busybox"
)]
fn kea_tells_the_guest_its_dns_servers_domain_mtu_ntp_and_routes() {
    let serve: Serve = Net::serve_kea4;
    let options = LAB_WITH_OPTIONS;
    guest_is_told(
        options,
        "lab",
        "kea4",
        (serve, "p"),
        Net::ask_options,
        WEB01,
    );
}

/// Pool `lab-v6` of [`host::POOLS`] with the options DHCPv6 carries.
const LAB_V6_WITH_OPTIONS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: lab-v6}
spec:
  cidr: '2001:db8:1::/64'
  kind: public
  dhcp:
    dnsServers: ['2001:db8:1::53']
    domain: lab.example
    ntpServers: ['2001:db8:1::123']
";

/// What dhclient's script sees for `web-01` (MAC :01) over DHCPv6: its host name is the
/// reservation's, though the client proposed `guest`.
const WEB01_V6: &str =
    "ip6=2001:db8:1::1/128 dns=2001:db8:1::53 domain=lab.example. ntp=2001:db8:1::123 host=web-01";

#[test]
#[cfg_attr(
    any(not(has_root), not(has_kea), not(has_dhclient)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs ISC dhclient: apt-get install isc-dhcp-client"
)]
fn kea6_tells_the_guest_its_dns_servers_domain_and_ntp() {
    let serve: Serve = Net::serve_kea6;
    let options = LAB_V6_WITH_OPTIONS;
    guest_is_told(
        options,
        "lab-v6",
        "kea6",
        (serve, "q"),
        Net::ask6_options,
        WEB01_V6,
    );
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_dnsmasq), not(has_dhclient)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs dnsmasq: apt-get install dnsmasq-base; needs ISC dhclient: apt-get install isc-dhcp-client"
)]
fn dnsmasq_tells_the_dhcpv6_guest_its_dns_servers_domain_and_ntp() {
    let serve: Serve = Net::serve_dnsmasq;
    let options = LAB_V6_WITH_OPTIONS;
    guest_is_told(
        options,
        "lab-v6",
        "dnsmasq",
        (serve, "r"),
        Net::ask6_options,
        WEB01_V6,
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn postgres_keeps_the_options_and_exports_the_file_stores_bytes() {
    let lab = Lab::new();
    lab.apply(LAB_WITH_OPTIONS);
    let formats = ["kea4", "kea6", "dnsmasq"];
    let on_files = formats.map(|f| lab.stdout(&["dhcp", "export", "--format", f]));
    assert!(on_files[0].contains("\"interface-mtu\""), "{}", on_files[0]);
    let db = lab.into_database();
    let on_db = formats.map(|f| db.stdout(&["dhcp", "export", "--format", f]));
    assert_eq!(on_db, on_files);
    // The pool as the database holds it, through `export`: the options as written.
    let out = db.tmp.path().join("exported");
    db.ok(&["export", out.to_str().unwrap()]);
    let pool = std::fs::read_to_string(out.join("cluster/ipampools/lab.yaml")).unwrap();
    assert!(
        pool.contains("  dhcp:\n    dnsServers:\n    - \"192.0.2.53\"\n    - \"198.51.100.53\"\n    domain: lab.example\n    leaseTime: 2h\n    mtu: 1400\n"),
        "{pool}"
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn postgres_check_reports_an_option_edited_in_the_database() {
    let db = host::pg::Db::new();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    db.apply(tmp.path(), host::POOLS);
    db.apply(tmp.path(), LAB_WITH_OPTIONS);
    db.assert_check_clean();
    // A hand edit of the row, past every writer of ipamctl.
    db.sql()
        .execute(
            "UPDATE ipamctl.pools SET manifest = convert_to(replace(convert_from(manifest, 'UTF8'), \
             'mtu: 1400', 'mtu: 40'), 'UTF8') WHERE name = 'lab'",
            &[],
        )
        .expect("edit the row");
    let out = db.run(["check"]);
    host::pg::assert_code(&out, 1);
    let report = host::pg::stdout(&out);
    assert!(
        report.contains("spec.dhcp.mtu: 40 is out of range; an IPv4 MTU is 68 to 65535"),
        "{report}"
    );
    // And no server is told it: the export skips the pool, as it skips any pool it cannot
    // read, with a warning naming the field.
    let out = db.run(["dhcp", "export", "--format", "kea4"]);
    host::pg::assert_code(&out, 0);
    assert!(
        host::pg::stderr(&out).contains("warning: ipampool lab: spec.dhcp.mtu: 40 is out of range"),
        "{}",
        host::pg::stderr(&out)
    );
    assert!(!host::pg::stdout(&out).contains("interface-mtu"));
}
