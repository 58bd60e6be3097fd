//! `dhcp leases` on the lease files real servers wrote: dnsmasq, then Kea, serve the export
//! in a network namespace, busybox's `udhcpc` leases with known and unknown MACs, and the
//! state then changes under the leases (a release, a `mac set`, a new reservation). Each
//! kind of drift is reported as what the servers recorded makes it, with its exit code, on
//! the file store and on PostgreSQL.

mod host;

use std::path::{Path, PathBuf};

use host::Lab;
use host::netns::Net;

/// (drift, address) of each item of `dhcp leases -o json`.
fn drifts(json: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(json).expect("JSON");
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["kind"].as_str().unwrap_or("?").to_owned(),
                i["address"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect()
}

/// The lease report of `leases` (written by a server of `format`) for pool `lab`, with
/// `extra` flags: its exit code, drifts and summary.
fn report(
    lab: &Lab,
    format: &str,
    leases: &Path,
    extra: &[&str],
) -> (i32, Vec<(String, String)>, String) {
    let file = leases.to_str().expect("UTF-8");
    let mut args = vec![
        "dhcp", "leases", "--format", format, file, "--pool", "lab", "-o", "json",
    ];
    args.extend_from_slice(extra);
    let out = lab.run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        out.status.code().unwrap_or(-1),
        drifts(&String::from_utf8_lossy(&out.stdout)),
        stderr,
    )
}

fn pair(kind: &str, address: &str) -> (String, String) {
    (kind.to_owned(), address.to_owned())
}

/// Leases, then drift: both known NICs lease (no drift, exit 0), an unknown MAC gets
/// nothing; then a reservation is added that no guest asks for (`never-leased`), web-01/1 is
/// released (its lease is `unheld`), web-01/0's MAC is changed (its lease is `other-mac`);
/// two days on, every lease is `expired`.
///
/// `tag` names the test's namespaces (unique among the tests of this file, which run at
/// once).
fn leases_drift(format: &str, tag: &str, serve: fn(&mut Net, &Path, &Path) -> PathBuf, lab: Lab) {
    let mut net = Net::new(tag);
    let vs = net.server_if();
    let conf = lab.export(format, "lab", &vs);
    let dir = lab.tmp.path().to_owned();
    let leases = serve(&mut net, &conf, &dir);
    let log = || std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    for mac in ["52:54:00:00:00:01", "52:54:00:00:00:02"] {
        assert!(
            net.ask_options(mac, &dir).is_some(),
            "{mac} got no lease: {}",
            log()
        );
    }
    assert_eq!(
        net.ask_options("52:54:00:00:00:99", &dir),
        None,
        "{}",
        log()
    );
    net.stop_servers();
    let kind = if format == "dnsmasq" {
        "dnsmasq"
    } else {
        "kea4"
    };
    let (code, found, stderr) = report(&lab, kind, &leases, &[]);
    assert_eq!((code, found.as_slice()), (0, &[][..]), "{stderr}");
    assert!(stderr.starts_with("0 drifts: "), "{stderr}");

    lab.ok(&[
        "allocate",
        "lab",
        "--owner",
        "VirtualMachine/idle/0",
        "--mac",
        "52:54:00:00:00:0b",
    ]);
    lab.ok(&["release", "lab", "--owner", "VirtualMachine/web-01/1"]);
    lab.ok(&[
        "mac",
        "set",
        "lab",
        "192.0.2.2",
        "--owner",
        "VirtualMachine/web-01/0",
        "--mac",
        "52:54:00:00:00:0a",
    ]);
    let idle = lab.stdout(&["list", "--owner", "VirtualMachine/idle/0", "-o", "json"]);
    let idle: serde_json::Value = serde_json::from_str(&idle).expect("JSON");
    let idle = idle["items"][0]["spec"]["address"]
        .as_str()
        .expect("an address")
        .to_owned();
    let (code, found, stderr) = report(&lab, kind, &leases, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        found,
        [
            pair("other-mac", "192.0.2.2"),
            pair("unheld", "192.0.2.3"),
            pair("never-leased", &idle),
        ],
        "{stderr}"
    );
    // The same counts as metrics, per segment (zeros too), for an alert on `> 0`.
    let flag = format!("{kind}={}", leases.display());
    let metrics = lab.stdout(&["metrics", "--dhcp-leases", &flag]);
    for (drift, n) in [
        ("unheld", 1),
        ("other-mac", 1),
        ("never-leased", 1),
        ("expired", 0),
    ] {
        let series = format!(
            "ipamctl_dhcp_lease_drift{{namespace=\"\",pool=\"lab\",subnet=\"\",format=\"{kind}\",drift=\"{drift}\"}} {n}\n"
        );
        assert!(metrics.contains(&series), "no {series} in:\n{metrics}");
    }
    let (code, found, stderr) = report(&lab, kind, &leases, &["--at", "2099-01-01T00:00:00Z"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        found,
        [
            pair("expired", "192.0.2.2"),
            pair("expired", "192.0.2.3"),
            pair("never-leased", &idle),
        ],
        "{stderr}"
    );
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_dnsmasq), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs dnsmasq: apt-get install dnsmasq-base; needs busybox's udhcpc: apt-get install busybox"
)]
fn dnsmasq_leases_report_each_drift() {
    leases_drift("dnsmasq", "ld", Net::serve_dnsmasq, Lab::new());
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_kea), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs busybox's udhcpc: apt-get install busybox"
)]
fn kea_leases_report_each_drift() {
    leases_drift("kea4", "lk", Net::serve_kea4, Lab::new());
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_kea), not(has_udhcpc), not(has_postgres)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs busybox's udhcpc: apt-get install busybox; needs PostgreSQL: apt-get install postgresql"
)]
fn kea_leases_report_each_drift_on_postgres() {
    leases_drift("kea4", "lp", Net::serve_kea4, Lab::new().into_database());
}

/// Kea6's memfile, written by Kea6 serving the IPv6 export to ISC `dhclient -6`: web-01's
/// lease is no drift while it holds the address and `unheld` once it is released; a
/// reservation nobody asks for is `never-leased`.
#[test]
#[cfg_attr(
    any(not(has_root), not(has_kea), not(has_dhclient)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs ISC dhclient: apt-get install isc-dhcp-client"
)]
fn kea6_leases_report_each_drift() {
    let lab = Lab::new();
    let mut net = Net::new("l6");
    let vs = net.server_if();
    let conf = lab.export("kea6", "lab-v6", &vs);
    let dir = lab.tmp.path().to_owned();
    let leases = net.serve_kea6(&conf, &dir);
    let log = || std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    let got = net.ask6("52:54:00:00:00:01", &dir);
    assert_eq!(got.as_deref(), Some("ip6=2001:db8:1::1/128"), "{}", log());
    net.stop_servers();
    let file = leases.to_str().expect("UTF-8");
    let run = || {
        let out = lab.run(&[
            "dhcp", "leases", "--format", "kea6", file, "--pool", "lab-v6", "-o", "name",
        ]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = run();
    assert_eq!((code, stdout.as_str()), (Some(0), ""), "{stderr}");
    lab.ok(&[
        "allocate",
        "lab-v6",
        "--owner",
        "VirtualMachine/idle/0",
        "--mac",
        "52:54:00:00:00:0b",
    ]);
    lab.ok(&["release", "lab-v6", "--owner", "VirtualMachine/web-01/0"]);
    let (code, stdout, stderr) = run();
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stdout, "unheld/2001:db8:1::1\nnever-leased/2001:db8:1::2\n",
        "{stderr}"
    );
}
