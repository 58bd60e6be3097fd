//! DHCP options in the manifests (`spec.dhcp` of a pool, the default of its subnets, and of a
//! subnet): written by `apply`, read back as written (and through `import`/`export` when run
//! with `IPAMCTL_TEST_STORE=postgres`), rendered by `dhcp export` for Kea 4, Kea 6 and
//! dnsmasq and accepted by their own validators; every bad value refused by `apply` (exit 2,
//! naming the field, state untouched) and reported by `check` in a hand-edited file.

mod common;

use common::{Test, code};
use serde_json::{Value, json};

const POOLS: &str = "\
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
    leaseTime: 12h
    mtu: 1400
    ntpServers: [192.0.2.123]
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: edge}
spec:
  cidr: 203.0.113.0/24
  kind: public
  dhcp:
    dnsServers: [203.0.113.53]
    domain: edge.example
---
apiVersion: pivirt.hu/v1
kind: Subnet
metadata: {name: web}
spec:
  pool: edge
  cidr: 203.0.113.0/25
  gateway: 203.0.113.1
  dhcp:
    domain: web.edge.example
    leaseTime: 1h
    routes:
    - {to: 198.51.100.0/24, via: 203.0.113.126}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: lab-v6}
spec:
  cidr: '2001:db8:1::/64'
  kind: public
  dhcp:
    dnsServers: ['2001:db8:1::53']
    domain: lab.example
    leaseTime: 2h
    ntpServers: ['2001:db8:1::123']
";

/// The `empty` fixture with [`POOLS`] applied.
fn applied() -> Test {
    let test = Test::new("empty");
    let file = test.input("pools.yaml", POOLS);
    test.args(["apply", "-f", &file]).run().then()
}

#[test]
fn options_are_stored_as_written_and_apply_again_changes_nothing() {
    let test = applied();
    let pool = test.read("cluster/ipampools/lab.yaml");
    assert!(
        pool.contains(
            "  dhcp:\n    dnsServers:\n    - \"192.0.2.53\"\n    - \"198.51.100.53\"\n    domain: lab.example\n    leaseTime: 12h\n    mtu: 1400\n    ntpServers:\n    - \"192.0.2.123\"\n"
        ),
        "{pool}"
    );
    let subnet = test.read("cluster/subnets/web.yaml");
    assert!(
        subnet.contains("    routes:\n    - to: 198.51.100.0/24\n      via: \"203.0.113.126\"\n"),
        "{subnet}"
    );
    let v6 = test.read("cluster/ipampools/lab-v6.yaml");
    assert!(v6.contains("    - \"2001:db8:1::53\"\n"), "{v6}");
    let file = test.input("again.yaml", POOLS);
    test.args(["apply", "-f", &file])
        .unchanged()
        .stdout("ipampool/lab unchanged\nipampool/edge unchanged\nipampool/lab-v6 unchanged\nsubnet/web unchanged\n")
        .run();
}

/// `dhcp export --format FORMAT` (on the database with `IPAMCTL_TEST_STORE=postgres`).
fn export(test: Test, format: &str) -> (String, Test) {
    let ran = test.args(["dhcp", "export", "--format", format]).run();
    (ran.stdout.clone(), ran.then())
}

fn kea(test: Test, format: &str) -> (Value, Test) {
    let (text, test) = export(test, format);
    (serde_json::from_str(&text).expect("JSON"), test)
}

#[test]
fn kea4_carries_the_options_and_a_subnet_overrides_its_pools() {
    let (v4, _) = kea(applied(), "kea4");
    let subnets = v4["Dhcp4"]["subnet4"].as_array().unwrap();
    let web = subnets
        .iter()
        .find(|s| s["subnet"] == "203.0.113.0/25")
        .unwrap();
    let lab = subnets
        .iter()
        .find(|s| s["subnet"] == "192.0.2.0/24")
        .unwrap();
    assert_eq!(
        lab["option-data"],
        json!([
            {"name": "routers", "data": "192.0.2.1"},
            {"name": "domain-name-servers", "data": "192.0.2.53, 198.51.100.53"},
            {"name": "domain-name", "data": "lab.example"},
            {"name": "interface-mtu", "data": "1400"},
            {"name": "ntp-servers", "data": "192.0.2.123"},
        ])
    );
    assert_eq!(lab["valid-lifetime"], 43200);
    // The subnet's own domain, lease time and routes; the pool's DNS server. With classless
    // routes a client ignores `routers` (RFC 3442), so the default route comes first:
    // 0.0.0.0/0 via 203.0.113.1, then 198.51.100.0/24 via 203.0.113.126.
    assert_eq!(
        web["option-data"],
        json!([
            {"name": "routers", "data": "203.0.113.1"},
            {"name": "domain-name-servers", "data": "203.0.113.53"},
            {"name": "domain-name", "data": "web.edge.example"},
            {"code": 121, "space": "dhcp4", "csv-format": false,
             "data": "00CB00710118C63364CB00717E"},
        ])
    );
    assert_eq!(web["valid-lifetime"], 3600);
}

#[test]
fn kea6_and_dnsmasq_carry_the_options_of_their_family() {
    let (v6, test) = kea(applied(), "kea6");
    let lab = &v6["Dhcp6"]["subnet6"][0];
    assert_eq!(
        lab["option-data"],
        json!([
            {"name": "dns-servers", "data": "2001:db8:1::53"},
            {"name": "domain-search", "data": "lab.example"},
            {"name": "sntp-servers", "data": "2001:db8:1::123"},
        ])
    );
    assert_eq!(lab["valid-lifetime"], 7200);
    let (text, _) = export(test, "dnsmasq");
    for line in [
        ",192.0.2.0,static,255.255.255.0,12h\n",
        ",option:dns-server,192.0.2.53,198.51.100.53\n",
        ",option:domain-name,lab.example\n",
        ",option:mtu,1400\n",
        ",option:ntp-server,192.0.2.123\n",
        ",203.0.113.0,static,255.255.255.128,1h\n",
        ",option:classless-static-route,0.0.0.0/0,203.0.113.1,198.51.100.0/24,203.0.113.126\n",
        ",2001:db8:1::,static,64,2h\n",
        ",option6:dns-server,[2001:db8:1::53]\n",
        ",option6:domain-search,lab.example\n",
        ",option6:sntp-server,[2001:db8:1::123]\n",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
}

#[test]
#[cfg_attr(
    any(not(has_kea), not(has_dnsmasq)),
    ignore = "needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs dnsmasq: apt-get install dnsmasq-base"
)]
fn every_export_with_options_passes_its_servers_validator() {
    let mut test = applied();
    for (format, program, flag) in [
        ("kea4", "kea-dhcp4", "-t"),
        ("kea6", "kea-dhcp6", "-t"),
        ("dnsmasq", "dnsmasq", "--test"),
    ] {
        let (text, next) = export(test, format);
        test = next;
        let file = test.root().join(format!("{format}.conf"));
        std::fs::write(&file, &text).unwrap();
        let mut cmd = std::process::Command::new(program);
        if program == "dnsmasq" {
            cmd.args([flag, "-C"]);
        } else {
            cmd.arg(flag);
        }
        let checked = cmd.arg(&file).output().unwrap();
        assert!(
            checked.status.success(),
            "{program} refused:\n{}{}\n{}",
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&checked.stderr),
            text
        );
    }
}

/// `POOLS` with `from` replaced by `to` (which must occur).
fn edited(from: &str, to: &str) -> String {
    assert!(POOLS.contains(from), "{from}");
    POOLS.replacen(from, to, 1)
}

#[test]
fn bad_options_are_refused_naming_the_field_and_nothing_is_written() {
    let cases = [
        (
            edited("[192.0.2.53, 198.51.100.53]", "['2001:db8::53']"),
            "spec.dhcp.dnsServers: `2001:db8::53` is an IPv6 address but the range `192.0.2.0/24` is IPv4",
        ),
        (
            edited("mtu: 1400", "mtu: 60"),
            "spec.dhcp.mtu: 60 is out of range; an IPv4 MTU is 68 to 65535",
        ),
        (
            edited("leaseTime: 12h", "leaseTime: 10s"),
            "spec.dhcp.leaseTime: `10s` must be at least 2 minutes and at most a year",
        ),
        (
            edited("domain: lab.example", "domain: lab_example"),
            "spec.dhcp.domain: `lab_example`: label `lab_example` contains '_'",
        ),
        (
            edited("via: 203.0.113.126", "via: 203.0.113.200"),
            "spec.dhcp.routes: via `203.0.113.200` is outside `203.0.113.0/25`",
        ),
        (
            edited("    leaseTime: 2h\n", "    leaseTime: 2h\n    mtu: 1400\n"),
            "spec.dhcp.mtu: DHCPv6 has no MTU option",
        ),
        (
            edited("ntpServers: [192.0.2.123]", "ntpServers: [224.0.0.1]"),
            "spec.dhcp.ntpServers: `224.0.0.1` is a multicast address",
        ),
        (
            edited("    mtu: 1400\n", "    mtu: 1400\n    colour: blue\n"),
            "unknown field `colour`",
        ),
    ];
    for (yaml, message) in cases {
        refused(Test::new("empty"), &yaml, message);
    }
}

/// `apply` of `yaml` on `test`: exit 2 with `message`, nothing written.
#[track_caller]
fn refused(test: Test, yaml: &str, message: &str) -> Test {
    let file = test.input("refused.yaml", yaml);
    let ran = test
        .args(["apply", "-f", &file])
        .fails(code::INVALID)
        .unchanged()
        .run();
    assert!(
        ran.stderr.contains(message),
        "want `{message}` in:\n{}",
        ran.stderr
    );
    ran.then()
}

#[test]
fn a_pools_route_must_reach_every_subnet_that_inherits_it() {
    // The pool's route is via 203.0.113.200, inside the pool but outside subnet `web`,
    // which inherits it: a guest on `web` could not reach that router.
    let yaml = edited(
        "    domain: edge.example\n",
        "    domain: edge.example\n    routes: [{to: 198.51.100.0/24, via: 203.0.113.200}]\n",
    )
    .replace(
        "    routes:\n    - {to: 198.51.100.0/24, via: 203.0.113.126}\n",
        "",
    );
    let message = "subnet `web` (203.0.113.0/25) of pool `edge`: spec.dhcp.routes of pool `edge`: via `203.0.113.200` is outside `203.0.113.0/25`; give the subnet routes of its own";
    refused(Test::new("empty"), &yaml, message);
    // The same route added to the pool later, over the stored subnet: refused for it too.
    let before = POOLS.replace(
        "    routes:\n    - {to: 198.51.100.0/24, via: 203.0.113.126}\n",
        "",
    );
    let test = Test::new("empty");
    let file = test.input("before.yaml", &before);
    let test = test.args(["apply", "-f", &file]).run().then();
    let edge_alone = yaml.split("---\n").nth(1).expect("pool `edge`");
    assert!(edge_alone.contains("name: edge}"), "{edge_alone}");
    refused(test, edge_alone, message);
}

#[test]
fn check_reports_a_hand_edited_option_and_an_inherited_route_out_of_reach() {
    let test = applied().file_store_only();
    let path = "cluster/subnets/web.yaml";
    let text = test.read(path);
    test.write(
        path,
        &text.replace("via: \"203.0.113.126\"", "via: \"198.51.100.1\""),
    );
    let ran = test.args(["check"]).status(code::FAILURE).run();
    assert!(
        ran.stdout.contains(
            "cluster/subnets/web.yaml  spec.dhcp.routes: via `198.51.100.1` is outside `203.0.113.0/25`"
        ),
        "{}",
        ran.stdout
    );
    // The subnet without routes of its own; its pool's by hand, via a router outside it.
    let test = ran.then();
    let own = "    routes:\n    - to: 198.51.100.0/24\n      via: \"203.0.113.126\"\n";
    assert!(text.contains(own), "{text}");
    test.write(path, &text.replace(own, ""));
    let pool = "cluster/ipampools/edge.yaml";
    let edge = test.read(pool);
    test.write(
        pool,
        &format!("{edge}    routes:\n    - to: 198.51.100.0/24\n      via: \"203.0.113.200\"\n"),
    );
    let ran = test.args(["check"]).status(code::FAILURE).run();
    assert!(
        ran.stdout.contains(
            "cluster/subnets/web.yaml  spec.dhcp.routes of pool `edge`: via `203.0.113.200` is outside `203.0.113.0/25`; give the subnet routes of its own"
        ),
        "{}",
        ran.stdout
    );
    // `dhcp export` tells no server that route.
    let ran = ran
        .then()
        .args(["dhcp", "export", "--format", "kea4"])
        .fails(code::INVALID)
        .run();
    assert!(
        ran.stderr.contains("spec.dhcp.routes of pool `edge`"),
        "{}",
        ran.stderr
    );
}

/// `program ARGS` in `dir` with a fixed git identity; its stdout, asserting exit `status`.
#[track_caller]
fn in_repo(dir: &std::path::Path, program: &str, args: &[&str], status: i32) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Ada")
        .env("GIT_AUTHOR_EMAIL", "ada@example.org")
        .env("GIT_COMMITTER_NAME", "Ada")
        .env("GIT_COMMITTER_EMAIL", "ada@example.org")
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .output()
        .expect("run it");
    assert_eq!(
        out.status.code(),
        Some(status),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn diff_shows_a_branch_that_changes_options_and_history_reads_through_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let git = |args: &[&str]| in_repo(dir, "git", args, 0);
    let ipamctl = |args: &[&str], status: i32| {
        let mut full = vec!["-d", "state"];
        full.extend_from_slice(args);
        in_repo(dir, common::BIN, &full, status)
    };
    git(&["init", "-q", "-b", "main"]);
    ipamctl(&["init", "state"], 0);
    std::fs::write(dir.join("pools.yaml"), POOLS).unwrap();
    ipamctl(&["apply", "-f", "pools.yaml"], 0);
    let address = ipamctl(
        &["allocate", "lab", "--owner", "VirtualMachine/web-01/0"],
        0,
    );
    git(&["add", "-A"]);
    git(&["commit", "-qm", "Pools with options"]);
    git(&["checkout", "-qb", "feature"]);
    let changed = edited("mtu: 1400", "mtu: 9000").replace("leaseTime: 1h", "leaseTime: 4h");
    std::fs::write(dir.join("pools.yaml"), changed).unwrap();
    ipamctl(&["apply", "-f", "pools.yaml"], 0);
    git(&["commit", "-qam", "Jumbo frames, longer leases on web"]);
    let diff: Value =
        serde_json::from_str(&ipamctl(&["diff", "main", "feature", "-o", "json"], 1)).unwrap();
    let changes: Vec<(&str, &str, &str)> = diff["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["change"].as_str().unwrap(),
                c["object"].as_str().unwrap(),
                c["was"].as_str().unwrap(),
            )
        })
        .collect();
    // What changed is named, field by field (not "metadata").
    assert_eq!(
        changes,
        [
            ("pool-changed", "ipampool/lab", "dhcp.mtu 1400 -> 9000"),
            ("subnet-changed", "subnet/web", "dhcp.leaseTime 1h -> 4h"),
        ]
    );
    let history = ipamctl(&["history", address.trim(), "-o", "json"], 0);
    assert!(history.contains("web-01/0"), "{history}");
}
