//! `dhcp export` and `dns export` read by the servers that use them: `kea-dhcp4 -t`,
//! `kea-dhcp6 -t`, `dnsmasq --test` and `named-checkzone` accept every file, on the file
//! store and on PostgreSQL (which give the same bytes); the same state gives the same bytes,
//! an unrelated subnet leaves the others' ids; a MAC held twice and an owner with no host
//! name are refused, naming them.

mod host;

use host::{Lab, validates};
use serde_json::Value;

const KEA: &str = "needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server";
const DNSMASQ: &str = "needs dnsmasq: apt-get install dnsmasq-base";
const NAMED: &str = "needs named-checkzone: apt-get install bind9-utils";

fn exports(lab: &Lab) -> [String; 3] {
    ["kea4", "kea6", "dnsmasq"].map(|f| lab.stdout(&["dhcp", "export", "--format", f]))
}

/// Each format through its server's validator, and what it reserves.
fn check_formats(lab: &Lab) -> [String; 3] {
    let [kea4, kea6, dnsmasq] = exports(lab);
    let files = [
        lab.file("kea4.json", &kea4),
        lab.file("kea6.json", &kea6),
        lab.file("dnsmasq.conf", &dnsmasq),
    ];
    validates("kea-dhcp4", &[std::path::Path::new("-t"), &files[0]]);
    validates("kea-dhcp6", &[std::path::Path::new("-t"), &files[1]]);
    validates(
        "dnsmasq",
        &[
            std::path::Path::new("--test"),
            std::path::Path::new("-C"),
            &files[2],
        ],
    );

    let v4: Value = serde_json::from_str(&kea4).expect("JSON");
    let subnets = v4["Dhcp4"]["subnet4"].as_array().expect("subnet4");
    // `edge` has the stored subnet `web`; `lab` none, so it is one subnet itself.
    let cidrs: Vec<&str> = subnets
        .iter()
        .map(|s| s["subnet"].as_str().unwrap())
        .collect();
    assert_eq!(cidrs, ["203.0.113.0/25", "192.0.2.0/24"]);
    let lab4 = &subnets[1];
    assert_eq!(lab4["option-data"][0]["name"], "routers");
    assert_eq!(lab4["option-data"][0]["data"], "192.0.2.1");
    assert!(lab4.get("pools").is_none(), "reservations only: {lab4}");
    assert_eq!(
        lab4["reservations"],
        serde_json::json!([
            {"hw-address": "52:54:00:00:00:01", "ip-address": "192.0.2.2", "hostname": "web-01"},
            {"hw-address": "52:54:00:00:00:02", "ip-address": "192.0.2.3", "hostname": "web-01-1"},
        ])
    );
    let ids: Vec<u64> = subnets.iter().map(|s| s["id"].as_u64().unwrap()).collect();
    assert!(
        ids.iter().all(|&id| id > 0 && id < 1 << 32) && ids[0] != ids[1],
        "{ids:?}"
    );
    assert_eq!(
        v4["Dhcp4"]["interfaces-config"]["interfaces"],
        serde_json::json!(["*"])
    );

    let v6: Value = serde_json::from_str(&kea6).expect("JSON");
    assert_eq!(
        v6["Dhcp6"]["subnet6"][0]["reservations"],
        serde_json::json!([{"hw-address": "52:54:00:00:00:01", "ip-addresses": ["2001:db8:1::1"], "hostname": "web-01"}])
    );
    assert!(dnsmasq.contains("dhcp-host=52:54:00:00:00:01,192.0.2.2,[2001:db8:1::1],web-01\n"));
    assert!(dnsmasq.contains("dhcp-host=52:54:00:00:00:03,203.0.113.2,hv-1\n"));
    assert!(
        dnsmasq.contains(",192.0.2.0,static,255.255.255.0\n"),
        "{dnsmasq}"
    );
    assert!(
        !dnsmasq.contains("192.0.2.4"),
        "db/0 has no MAC, so no reservation"
    );
    [kea4, kea6, dnsmasq]
}

#[test]
// One `ignore` naming every missing tool (a second `cfg_attr(ignore)` would be unused).
#[cfg_attr(
    any(not(has_kea), not(has_dnsmasq)),
    ignore = "needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs dnsmasq: apt-get install dnsmasq-base"
)]
fn each_dhcp_format_passes_its_servers_validator() {
    let _ = (KEA, DNSMASQ);
    check_formats(&Lab::new());
}

#[test]
#[cfg_attr(
    any(not(has_kea), not(has_dnsmasq), not(has_postgres)),
    ignore = "needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs dnsmasq: apt-get install dnsmasq-base; needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn postgres_exports_the_same_bytes_as_the_file_store() {
    let lab = Lab::new();
    let files = exports(&lab);
    let db = lab.into_database();
    assert_eq!(check_formats(&db), files);
}

#[test]
fn the_same_state_gives_the_same_bytes_and_a_new_subnet_moves_no_id() {
    let lab = Lab::new();
    let first = exports(&lab);
    assert_eq!(exports(&lab), first);
    let ids = host::kea4_ids;
    let before = ids(&first[0]);
    lab.apply(
        "apiVersion: pivirt.hu/v1\nkind: Subnet\nmetadata: {name: api}\nspec: {pool: edge, cidr: 203.0.113.128/25}\n",
    );
    lab.nic("lab", "VirtualMachine/new/0", Some("52:54:00:00:00:09"));
    let after = ids(&exports(&lab)[0]);
    assert_eq!(after.len(), 3, "{after:?}");
    for kept in &before {
        assert!(after.contains(kept), "{kept:?} moved: {after:?}");
    }
}

#[test]
fn a_mac_on_two_owners_is_refused_for_dnsmasq_naming_both() {
    let lab = Lab::new();
    lab.apply(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: other}\nspec: {cidr: 198.51.100.0/24, kind: public}\n",
    );
    // Another pool, so the allocator's per-pool arbiter has nothing to say: a dnsmasq file
    // serves both segments and matches clients by MAC alone.
    lab.nic("other", "VirtualMachine/app/0", Some("52:54:00:00:00:02"));
    let out = lab.run(&["dhcp", "export", "--format", "dnsmasq"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.starts_with("error: MAC 52:54:00:00:00:02 is held by `VirtualMachine/web-01/1`"),
        "{err}"
    );
    assert!(
        err.contains("`VirtualMachine/app/0` (198.51.100.1"),
        "{err}"
    );
    assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1);
    // Kea keeps reservations per subnet: the two are in different subnets, so that is fine.
    lab.ok(&["dhcp", "export", "--format", "kea4"]);
}

#[test]
fn a_mac_twice_in_one_subnet_is_refused_for_kea_too() {
    let lab = Lab::new();
    lab.nic("lab", "VirtualMachine/app/0", Some("52:54:00:00:00:01"));
    let out = lab.run(&["dhcp", "export", "--format", "kea4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("VirtualMachine/web-01/0") && err.contains("VirtualMachine/app/0"),
        "{err}"
    );
}

#[test]
fn an_owner_whose_name_is_not_a_host_name_is_refused_not_mangled() {
    let lab = Lab::new();
    lab.nic("lab", "VirtualMachine/app.lab/0", Some("52:54:00:00:00:07"));
    let out = lab.run(&["dhcp", "export", "--format", "dnsmasq"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("VirtualMachine/app.lab/0") && err.contains("has dots"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // Two owners that would share one host name: `web-01/1` is `web-01-1` already.
    let lab = Lab::new();
    lab.nic(
        "lab",
        "VirtualMachine/web-01-1/0",
        Some("52:54:00:00:00:08"),
    );
    let out = lab.run(&["dhcp", "export", "--format", "kea4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("both have the host name `web-01-1`"), "{err}");
}

#[test]
fn filters_narrow_the_export_and_a_missing_name_is_exit_3() {
    let lab = Lab::new();
    let only = lab.stdout(&["dhcp", "export", "--format", "dnsmasq", "--subnet", "web"]);
    assert!(only.contains("hv-1") && !only.contains("web-01"), "{only}");
    let pools = lab.stdout(&[
        "dhcp", "export", "--format", "dnsmasq", "--pool", "lab", "--pool", "lab-v6",
    ]);
    assert!(
        !pools.contains("hv-1") && pools.contains("[2001:db8:1::1]"),
        "{pools}"
    );
    let out = lab.run(&["dhcp", "export", "--format", "kea4", "--pool", "nope"]);
    assert_eq!(out.status.code(), Some(3));
}

fn zone_files(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("read the zone directory")
        .map(|e| e.expect("an entry").path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).expect("read a zone file"),
            )
        })
        .collect();
    files.sort();
    files
}

/// Every zone file through `named-checkzone`.
fn check_zones(dir: &std::path::Path) {
    for (file, _) in zone_files(dir) {
        if let Some(zone) = file.strip_suffix(".zone") {
            validates(
                "named-checkzone",
                &[std::path::Path::new(zone), &dir.join(&file)],
            );
        }
    }
}

fn serial(text: &str) -> u32 {
    let line = text
        .lines()
        .find(|l| l.ends_with(" ; serial"))
        .expect("a serial");
    line.trim()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .expect("a number")
}

#[test]
#[cfg_attr(
    not(has_named_checkzone),
    ignore = "needs named-checkzone: apt-get install bind9-utils"
)]
fn dns_zones_pass_named_checkzone_and_the_serial_rises_with_the_records() {
    let _ = NAMED;
    let lab = Lab::new();
    let out = lab.tmp.path().join("zones");
    let o = out.to_str().unwrap();
    let args = [
        "dns",
        "export",
        "--zone",
        "lab.example.com",
        "--out",
        o,
        "--ns",
        "ns1.example.net",
    ];
    // The subnet `web` is a /25: its reverse names are in a /24 zone it does not fill.
    let refused = lab.run(&args);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains("subnet `web` of pool `edge`") && err.contains("--reverse-enclosing"),
        "{err}"
    );
    assert!(!out.exists(), "nothing written when refused");

    let mut args = args.to_vec();
    args.push("--reverse-enclosing");
    let printed = lab.stdout(&args);
    assert!(
        printed.contains("lab.example.com.zone created\n"),
        "{printed}"
    );
    check_zones(&out);
    let files = zone_files(&out);
    let names: Vec<&str> = files.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        names,
        [
            "0.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.zone",
            "113.0.203.in-addr.arpa.zone",
            "2.0.192.in-addr.arpa.zone",
            "lab.example.com.zone",
            "named.conf",
        ]
    );
    let forward = &files[3].1;
    for record in [
        "web-01 IN A 192.0.2.2\n",
        "web-01 IN AAAA 2001:db8:1::1\n",
        "web-01-1 IN A 192.0.2.3\n",
        "db IN A 192.0.2.4\n",
        "hv-1 IN A 203.0.113.2\n",
    ] {
        assert!(forward.contains(record), "{record} missing:\n{forward}");
    }
    assert!(!forward.contains("fip"), "a floating IP has no host name");
    assert!(files[2].1.contains("2 IN PTR web-01.lab.example.com.\n"));
    assert!(
        files[4]
            .1
            .contains("zone \"2.0.192.in-addr.arpa\" { type primary; file \"")
    );
    let first = serial(forward);
    assert!(
        first > 1_700_000_000,
        "the state's newest change, a Unix time: {first}"
    );

    // Again: nothing changed, nothing rewritten.
    let again = lab.stdout(&args);
    assert!(
        !again.contains("created") && !again.contains("configured"),
        "{again}"
    );
    assert_eq!(zone_files(&out), files);

    // A new NIC in `lab`: its forward and reverse zones get new records and a higher
    // serial; the others keep their records, at the state's new serial (tests/host_dns.rs).
    lab.nic("lab", "VirtualMachine/new/0", None);
    let third = lab.stdout(&args);
    assert!(
        third.contains("lab.example.com.zone configured\n"),
        "{third}"
    );
    let now = zone_files(&out);
    assert!(serial(&now[3].1) > first);
    assert!(serial(&now[2].1) > first);
    assert!(now[3].1.contains("new IN A "), "{}", now[3].1);
    let records = |text: &str| text.split("; minimum").nth(1).unwrap().to_owned();
    assert_eq!(records(&now[1].1), records(&files[1].1));
    check_zones(&out);
}

#[test]
#[cfg_attr(
    any(not(has_named_checkzone), not(has_postgres)),
    ignore = "needs named-checkzone: apt-get install bind9-utils; needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn dns_export_on_postgres_writes_the_file_stores_zones() {
    let lab = Lab::new();
    let files = lab.tmp.path().join("files");
    let args = |dir: &std::path::Path| {
        let d = dir.to_str().unwrap().to_owned();
        vec![
            "dns".to_owned(),
            "export".into(),
            "--zone".into(),
            "lab.example.com".into(),
            "--out".into(),
            d,
            "--ns".into(),
            "ns1.example.net".into(),
            "--reverse-enclosing".into(),
        ]
    };
    let a = args(&files);
    lab.ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let db = lab.into_database();
    let database = db.tmp.path().join("database");
    let b = args(&database);
    db.ok(&b.iter().map(String::as_str).collect::<Vec<_>>());
    check_zones(&database);
    let strip = |files: Vec<(String, String)>, dir: &std::path::Path| -> Vec<(String, String)> {
        files
            .into_iter()
            .map(|(f, t)| {
                // Each store dates its own changes: the serials differ, nothing else.
                let t = t.replace(dir.to_str().unwrap(), "DIR");
                match f.ends_with(".zone") {
                    true => (f, t.replace(&serial(&t).to_string(), "SERIAL")),
                    false => (f, t),
                }
            })
            .collect()
    };
    assert_eq!(
        strip(zone_files(&database), &database),
        strip(zone_files(&files), &files)
    );
}

#[test]
fn a_reservation_of_a_multicast_address_is_refused() {
    let lab = Lab::new();
    lab.apply(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: top}\nspec: {cidr: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126', kind: public}\n",
    );
    let address = lab.nic("top", "Node/top", Some("52:54:00:00:00:0a"));
    let out = lab.run(&["dhcp", "export", "--format", "kea6"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{address} is a multicast address")),
        "{err}"
    );
    // Without that pool the rest exports.
    lab.ok(&["dhcp", "export", "--format", "kea6", "--pool", "lab-v6"]);
}

#[test]
fn the_dnsmasq_file_reads_as_documented() {
    let lab = Lab::new();
    insta::assert_snapshot!(lab.stdout(&["dhcp", "export", "--format", "dnsmasq"]), @r"
# Written by `ipamctl dhcp export --format dnsmasq`: reservations only; a client
# without a dhcp-host line below gets no address.

# subnet `web` of pool `edge` 203.0.113.0/25
dhcp-range=set:ipamctl-2468896008,203.0.113.0,static,255.255.255.128
dhcp-option=tag:ipamctl-2468896008,option:router,203.0.113.1

# pool `lab` 192.0.2.0/24
dhcp-range=set:ipamctl-3297135722,192.0.2.0,static,255.255.255.0
dhcp-option=tag:ipamctl-3297135722,option:router,192.0.2.1

# pool `lab-v6` 2001:db8:1::/64
dhcp-range=set:ipamctl-3532260195,2001:db8:1::,static,64

dhcp-host=52:54:00:00:00:01,192.0.2.2,[2001:db8:1::1],web-01
dhcp-host=52:54:00:00:00:02,192.0.2.3,web-01-1
dhcp-host=52:54:00:00:00:03,203.0.113.2,hv-1
    ");
}

#[test]
fn a_node_named_by_its_prefix_gets_no_record_and_with_a_mac_is_refused() {
    let lab = Lab::new();
    let address = lab.nic("lab", "Node/192.0.2.0/24", None);
    let out = lab.tmp.path().join("zones");
    let o = out.to_str().unwrap();
    let args = [
        "dns",
        "export",
        "--zone",
        "lab.example.com",
        "--out",
        o,
        "--ns",
        "ns1.example.net",
        "--pool",
        "lab",
    ];
    lab.ok(&args);
    let reverse = std::fs::read_to_string(out.join("2.0.192.in-addr.arpa.zone")).unwrap();
    let last = address.rsplit('.').next().unwrap();
    assert!(!reverse.contains(&format!("\n{last} IN PTR")), "{reverse}");
    assert!(
        reverse.contains("\n2 IN PTR web-01.lab.example.com.\n"),
        "{reverse}"
    );
    // With a MAC it needs a host name for its reservation, and has none.
    let lab = Lab::new();
    lab.nic("lab", "Node/192.0.2.0/24", Some("52:54:00:00:00:0b"));
    let out = lab.run(&["dhcp", "export", "--format", "kea4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`Node/192.0.2.0/24` is named by its prefix"),
        "{err}"
    );
}
