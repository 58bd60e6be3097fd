//! `dhcp leases` and `metrics --dhcp-leases` on lease files written here (the real servers'
//! files are in tests/host_leases.rs): each drift's row and exit code, the output forms, and
//! hostile lease files (a FIFO, a device behind a symlink, a directory, binary bytes, the
//! wrong format), each refused with one `error:` line naming it, quickly, state untouched.
//! Under `IPAMCTL_TEST_STORE=postgres` the commands run on PostgreSQL.

mod common;

use std::os::unix::fs::symlink;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Test, assert_one_error, code, promtool};

/// `lab` (192.0.2.0/24) holding web-01 at .2 with MAC :01, web-02 at .3 with :02, db at .4
/// without a MAC.
fn lab() -> Test {
    let mut t = Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(
            "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: lab}\n\
             spec: {cidr: 192.0.2.0/24, kind: public, gateway: 192.0.2.1}\n",
        )
        .run()
        .then();
    for (owner, mac) in [
        ("VirtualMachine/web-01/0", Some("52:54:00:00:00:01")),
        ("VirtualMachine/web-02/0", Some("52:54:00:00:00:02")),
        ("VirtualMachine/db/0", None),
    ] {
        t = t.args(["allocate", "lab", "--owner", owner]);
        if let Some(mac) = mac {
            t = t.args(["--mac", mac]);
        }
        t = t.run().then();
    }
    t
}

/// dnsmasq's lease file (leases ending in 2100): web-01 leased by its MAC, .3 by another
/// MAC, .9 (nobody's) leased, .4 (db) leased long ago; web-02's MAC never seen.
const DNSMASQ: &str = "\
4102444800 52:54:00:00:00:01 192.0.2.2 web-01 01:52:54:00:00:00:01
4102444800 52:54:00:00:00:77 192.0.2.3 intruder *
4102444800 52:54:00:00:00:09 192.0.2.9 * *
1700000000 52:54:00:00:00:04 192.0.2.4 db *
4102444800 52:54:00:00:00:05 198.51.100.7 elsewhere *
";

const AT: &str = "2026-12-06T12:00:00Z";

#[test]
fn each_drift_is_a_row_and_drift_exits_1() {
    let t = lab();
    let file = t.input("dnsmasq.leases", DNSMASQ);
    let ran = t
        .args(["dhcp", "leases", "--format", "dnsmasq", &file, "--at", AT])
        .status(code::FAILURE)
        .unchanged()
        .run();
    let rows: Vec<Vec<&str>> = ran
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "DRIFT",
            "NAMESPACE",
            "POOL",
            "SUBNET",
            "ADDRESS",
            "OWNER",
            "MAC",
            "LEASED-TO",
            "LEASE-ENDS"
        ]
    );
    let firsts: Vec<(&str, &str)> = rows[1..].iter().map(|r| (r[0], r[4])).collect();
    assert_eq!(
        firsts,
        [
            ("other-mac", "192.0.2.3"),
            ("expired", "192.0.2.4"),
            ("unheld", "192.0.2.9")
        ],
        "{}",
        ran.stdout
    );
    // other-mac names the allocation's MAC and the lease's.
    assert_eq!(
        rows[1][5..8],
        [
            "VirtualMachine/web-02/0",
            "52:54:00:00:00:02",
            "52:54:00:00:00:77"
        ]
    );
    assert_eq!(
        ran.stderr,
        "3 drifts: 1 unheld, 1 other-mac, 0 never-leased, 1 expired (4 leases on 1 segment, 2 reservations, 1 outside the scope, not judged)\n"
    );
    let ran = ran
        .then()
        .args([
            "dhcp", "leases", "--format", "dnsmasq", &file, "--at", AT, "-o", "name",
        ])
        .status(code::FAILURE)
        .run();
    assert_eq!(
        ran.stdout,
        "other-mac/192.0.2.3\nexpired/192.0.2.4\nunheld/192.0.2.9\n"
    );
    // Only web-01's lease, at a time it holds: no drift but web-02's reservation.
    let file = ran.input("one.leases", &DNSMASQ[..DNSMASQ.find('\n').unwrap() + 1]);
    let ran = ran
        .then()
        .args([
            "dhcp", "leases", "--format", "dnsmasq", &file, "--at", AT, "-o", "json",
        ])
        .status(code::FAILURE)
        .run();
    let items = common::list_items(&ran.stdout);
    assert_eq!(items.len(), 1, "{}", ran.stdout);
    assert_eq!(items[0]["kind"], "never-leased");
    assert_eq!(items[0]["owner"], "VirtualMachine/web-02/0");
    assert_eq!(items[0]["mac"], "52:54:00:00:00:02");
    // Read from stdin, after web-02 has leased too: no drift, exit 0, nothing on stdout.
    let both = format!(
        "{}4102444800 52:54:00:00:00:02 192.0.2.3 web-02 *\n",
        &DNSMASQ[..DNSMASQ.find('\n').unwrap() + 1]
    );
    ran.then()
        .args(["dhcp", "leases", "--format", "dnsmasq", "-", "--at", AT])
        .stdin(&both)
        .stdout("")
        .stderr("0 drifts: 0 unheld, 0 other-mac, 0 never-leased, 0 expired (2 leases on 1 segment, 2 reservations)\n")
        .run();
}

#[test]
fn a_scope_that_names_nothing_or_a_bad_time_is_refused() {
    let t = lab();
    let file = t.input("dnsmasq.leases", DNSMASQ);
    let ran = t
        .args([
            "dhcp", "leases", "--format", "dnsmasq", &file, "--pool", "nope",
        ])
        .fails(code::NOT_FOUND)
        .unchanged()
        .run();
    assert_one_error(&ran.stderr);
    let ran = ran
        .then()
        .args([
            "dhcp", "leases", "--format", "dnsmasq", &file, "--at", "tomorrow",
        ])
        .fails(code::INVALID)
        .unchanged()
        .run();
    assert!(
        ran.stderr.contains("--at: invalid time `tomorrow`"),
        "{}",
        ran.stderr
    );
}

/// Each hostile lease file is exit 2 with one `error:` line naming it, in well under a
/// second (a FIFO with no writer is never waited on), and the state is as it was.
#[test]
fn a_hostile_lease_file_is_refused_naming_it() {
    let t = lab();
    let dir = t.root().to_owned();
    let fifo = dir.join("leases.fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    let zero = dir.join("leases.zero");
    symlink("/dev/zero", &zero).expect("a symlink to /dev/zero");
    let subdir = dir.join("leases.d");
    std::fs::create_dir(&subdir).expect("mkdir");
    let binary = dir.join("leases.bin");
    std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x12]).expect("write");
    let kea = t.input(
        "kea.csv",
        "address,hwaddr,client_id,valid_lifetime,expire,subnet_id,fqdn_fwd,fqdn_rev,hostname,state,user_context\n",
    );
    let mut t = t;
    for (format, file, says) in [
        (
            "dnsmasq",
            fifo.to_str().unwrap(),
            "is a FIFO, not a regular file",
        ),
        (
            "kea4",
            zero.to_str().unwrap(),
            "is a character device, not a regular file",
        ),
        (
            "kea4",
            subdir.to_str().unwrap(),
            "is a directory, not a regular file",
        ),
        ("dnsmasq", binary.to_str().unwrap(), "is not UTF-8 text"),
        ("dnsmasq", &kea, "line 1: `address,hwaddr,"),
        (
            "kea4",
            &t.input("d.leases", DNSMASQ),
            "line 1: the header has no `address` column",
        ),
        ("kea6", &kea, "no `lease_type` column"),
    ] {
        let started = Instant::now();
        let ran = t
            .args(["dhcp", "leases", "--format", format, file])
            .fails(code::INVALID)
            .unchanged()
            .run();
        assert!(started.elapsed() < Duration::from_secs(5), "{file}: waited");
        assert_one_error(&ran.stderr);
        let name = std::path::Path::new(file)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        assert!(
            ran.stderr.contains(name) && ran.stderr.contains(says),
            "{file}: {}",
            ran.stderr
        );
        t = ran.then();
    }
    let ran = t
        .args(["metrics", "--dhcp-leases", "kea5=/x"])
        .fails(code::INVALID)
        .run();
    assert!(
        ran.stderr.contains("`kea5` is no lease file format"),
        "{}",
        ran.stderr
    );
}

#[test]
#[cfg_attr(
    not(has_promtool),
    ignore = "needs promtool: apt-get install prometheus"
)]
fn lease_drift_metrics_pass_promtool() {
    let t = lab();
    let file = t.input("dnsmasq.leases", DNSMASQ);
    let ran = t
        .args(["metrics", "--dhcp-leases", &format!("dnsmasq={file}")])
        .run();
    let series = "ipamctl_dhcp_lease_drift{namespace=\"\",pool=\"lab\",subnet=\"\",format=\"dnsmasq\",drift=\"unheld\"} 1\n";
    assert!(ran.stdout.contains(series), "{}", ran.stdout);
    promtool(&["check", "metrics"], &ran.stdout);
}
