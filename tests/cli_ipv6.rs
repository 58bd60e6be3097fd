//! IPv6 and dual stack: every command on IPv6 pools of every shape (/64 with its first
//! candidates excluded, /120, /126, /127, /128, the all-ones address, `--within` a /64 at the
//! end of a /48), names that round-trip and refuse every other form, usage figures that fit,
//! and one request that claims in two pools or in neither.

mod common;

use std::collections::HashSet;
use std::process::{Child, Stdio};

use common::{Test, code, list_items};

const PROD: [&str; 2] = ["-n", "acme/prod"];

fn allocate(pool: &str, owner: &str) -> Vec<String> {
    ["allocate", pool, "--owner", owner]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn a_64_hands_out_its_lowest_candidates_skipping_anycast_gateway_and_excludes() {
    // ::0 is the subnet-router anycast address, ::1 the gateway, ::2-::3 and ::5 excluded.
    let ran = Test::new("dual-stack")
        .args(allocate("public-v6", "FloatingIP/fip-1"))
        .stdout("2001:db8:0:1::4\n")
        .stderr("")
        .run()
        .then()
        .args(allocate("public-v6", "FloatingIP/fip-2"))
        .stdout("2001:db8:0:1::6\n")
        .run();
    let file = "cluster/ipallocations/public-v6-2001-0db8-0000-0001-0000-0000-0000-0004.yaml";
    // Named by the eight groups in full, no `:`; the address canonical and quoted.
    insta::assert_snapshot!(common::redact_time(&ran.read(file)), @r#"
    apiVersion: pivirt.hu/v1
    kind: IPAllocation
    metadata:
      name: public-v6-2001-0db8-0000-0001-0000-0000-0000-0004
      creationTimestamp: "[TIME]"
      labels:
        pivirt.hu/managed-by: director
    spec:
      pool: public-v6
      address: "2001:db8:0:1::4"
      owner:
        kind: FloatingIP
        name: fip-1
    "#);
    // Idempotent: the owner gets its address back.
    ran.then()
        .args(allocate("public-v6", "FloatingIP/fip-1"))
        .stdout("2001:db8:0:1::4\n")
        .run();
}

#[test]
fn small_ipv6_prefixes_follow_rfc_4291_and_rfc_6164() {
    // /126: the anycast address is skipped; /127 and /128 hand out every address.
    let mut test = Test::new("dual-stack");
    for (pool, expected) in [
        (
            "v6-126",
            vec!["2001:db8:126::1", "2001:db8:126::2", "2001:db8:126::3"],
        ),
        ("v6-127", vec!["2001:db8:127::", "2001:db8:127::1"]),
        ("v6-128", vec!["2001:db8:128::5"]),
        ("v6-top", vec!["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"]),
    ] {
        for (i, addr) in expected.iter().enumerate() {
            test = test
                .args(allocate(pool, &format!("FloatingIP/f-{i}")))
                .stdout(&format!("{addr}\n"))
                .run()
                .then();
        }
        test = test
            .args(allocate(pool, "FloatingIP/one-too-many"))
            .fails(code::EXHAUSTED)
            .unchanged()
            .run()
            .then();
    }
    assert!(
        test.exists("cluster/ipallocations/v6-top-ffff-ffff-ffff-ffff-ffff-ffff-ffff-ffff.yaml")
    );
    assert!(
        test.exists("cluster/ipallocations/v6-127-2001-0db8-0127-0000-0000-0000-0000-0000.yaml")
    );
    // On PostgreSQL, what the database exported back: names and bytes as the file store's.
    test.file_store_only().args(["check"]).run();
}

#[test]
fn a_120_is_drawn_address_by_address_and_a_64_as_the_120s_in_use() {
    let test = Test::new("dual-stack")
        .args(allocate("v6-120", "FloatingIP/f-1"))
        .stdout("2001:db8:120::1\n")
        .run()
        .then();
    let ran = test.args(["pool", "show", "v6-120", "--map"]).run();
    assert!(
        ran.stdout
            .starts_with("v6-120 2001:db8:120::/120: one cell per address\n"),
        "{}",
        ran.stdout
    );
    // 256 cells: eight rows of 32, never more.
    assert_eq!(
        ran.stdout
            .lines()
            .filter(|l| l.starts_with("2001:db8:120::"))
            .count(),
        8
    );
    let ran = ran
        .then()
        .args(allocate("public-v6", "FloatingIP/f-1"))
        .run()
        .then()
        .args([
            "allocate",
            "public-v6",
            "--owner",
            "FloatingIP/f-2",
            "--address",
            "2001:db8:0:1:ffff::9",
        ])
        .stdout("2001:db8:0:1:ffff::9\n")
        .run()
        .then()
        .args(["pool", "show", "public-v6", "--map"])
        .run();
    let rows: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("2001:"))
        .collect();
    // Two /120s in use (at most four): each drawn address by address, 8 rows of 32.
    assert_eq!(rows.len(), 16, "{}", ran.stdout);
    assert!(rows[0].starts_with("2001:db8:0:1::  "), "{}", ran.stdout);
    assert!(
        rows[8].starts_with("2001:db8:0:1:ffff::  "),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains(
            "pool 2001:db8:0:1::/64: 2^64 - 5 candidates, 2 allocated, 2^64 - 7 free (0.0% used)"
        ),
        "{}",
        ran.stdout
    );
}

#[test]
fn usage_is_exact_in_json_and_readable_in_the_table() {
    let ran = Test::new("dual-stack")
        .args(allocate("public-v6", "FloatingIP/fip-1"))
        .run()
        .then()
        .args(["pool", "list", "-o", "json"])
        .run();
    let items = list_items(&ran.stdout);
    let status = |name: &str| {
        items
            .iter()
            .find(|i| i["metadata"]["name"] == name)
            .map(|i| i["status"].clone())
            .unwrap()
    };
    // Above 2^53 a count is a decimal string, so jq and JavaScript lose nothing.
    assert_eq!(status("public-v6")["candidates"], "18446744073709551611");
    assert_eq!(status("public-v6")["free"], "18446744073709551610");
    assert_eq!(status("public-v6")["allocated"], 1);
    assert_eq!(
        status("vpc-main-v6")["candidates"],
        "1208925819614629174706175"
    );
    assert_eq!(status("v6-120")["candidates"], 255);
    let ran = ran.then().args(["pool", "list"]).run();
    let row = ran
        .stdout
        .lines()
        .find(|l| l.contains("public-v6"))
        .unwrap();
    assert!(
        row.contains("2^64 - 5") && row.contains("2^64 - 6"),
        "{row}"
    );
    let ran = ran.then().args(["pool", "show", "public-v6"]).run();
    assert!(
        ran.stdout
            .contains("Candidates:  2^64 - 5 (18446744073709551611)\n"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("Free ranges: 2001:db8:0:1::6-2001:db8:0:1:ffff:ffff:ffff:ffff\n"),
        "{}",
        ran.stdout
    );
}

/// A count is written one way everywhere: `subnet list` and `subnet show` write a /64's
/// candidates as `pool list` and `pool show` do (`2^64 - 2`, the show pages with the exact
/// value after it), a supernet's free blocks too, and JSON carries each count by the one
/// rule (a number up to 2^53, a decimal string above).
#[test]
fn counts_are_written_one_way_in_every_table_and_json() {
    let exact = "18446744073709551614";
    let ran = Test::new("dual-stack")
        .args(["subnet", "create", "front", "--pool", "vpc-main-v6"])
        .args(["--cidr", "fd00:42:0:1::/64"])
        .args(PROD)
        .run()
        .then()
        .args(["pool", "show", "vpc-main-v6"])
        .args(PROD)
        .run();
    assert!(
        ran.stdout
            .contains("0 of 2^64 - 2 candidates allocated, 2^64 - 2 free (0.0% used)"),
        "{}",
        ran.stdout
    );
    let ran = ran.then().args(["subnet", "list"]).run();
    let row = ran.stdout.lines().find(|l| l.contains("front")).unwrap();
    assert_eq!(row.matches("2^64 - 2").count(), 2, "{row}");
    assert!(!row.contains(exact), "{row}");
    let ran = ran
        .then()
        .args(["subnet", "show", "front"])
        .args(PROD)
        .run();
    assert!(
        ran.stdout
            .contains(&format!("Candidates:  2^64 - 2 ({exact})\n"))
            && ran
                .stdout
                .contains(&format!("Free:        2^64 - 2 ({exact}) (0.0% used)\n")),
        "{}",
        ran.stdout
    );
    let ran = ran.then().args(["subnet", "list", "-o", "json"]).run();
    let items = list_items(&ran.stdout);
    assert_eq!(items[0]["status"]["candidates"], exact, "{}", ran.stdout);
    // A supernet's free blocks: 2^32 /48s and 2^48 /64s in a /16.
    let t = ran.then();
    let supernet = t.input(
        "sn.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: provider\nspec:\n  cidr: 2a00::/16\n  kind: supernet\n  prefixLengths: {min: 48, max: 64}\n",
    );
    let ran = t
        .args(["apply", "-f", &supernet])
        .run()
        .then()
        .args(["pool", "list"])
        .run();
    let row = ran.stdout.lines().find(|l| l.contains("provider")).unwrap();
    assert!(row.contains("/48: 4294967296, /64: 2^48"), "{row}");
    let ran = ran.then().args(["pool", "show", "provider"]).run();
    assert!(
        ran.stdout
            .contains("Free blocks:  /48: 4294967296, /64: 2^48\n"),
        "{}",
        ran.stdout
    );
    let ran = ran
        .then()
        .args(["pool", "show", "provider", "-o", "json"])
        .run();
    let shown: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let blocks = &shown["status"]["freeBlocks"];
    assert_eq!(blocks[0]["count"], 4294967296u64, "{blocks}");
    assert_eq!(blocks[1]["count"], 1u64 << 48, "{blocks}");
}

#[test]
fn within_a_64_at_the_end_of_a_48_skips_its_anycast_address() {
    Test::new("dual-stack")
        .args(["allocate", "vpc-main-v6", "--owner", "VirtualMachine/web-01/0"])
        .args(PROD)
        .args(["--within", "fd00:42:0:ffff::/64"])
        .stdout("fd00:42:0:ffff::1\n")
        .run()
        .then()
        .args(["allocate", "vpc-main-v6", "--owner", "VirtualMachine/web-02/0"])
        .args(PROD)
        .args(["--within", "fd00:42:0:ffff::/64", "--reserved", "fd00:42:0:ffff::2"])
        .stdout("fd00:42:0:ffff::3\n")
        .run()
        .then()
        // A prefix of the other family, or outside the pool, is refused naming the flag.
        .args(["allocate", "vpc-main-v6", "--owner", "VirtualMachine/web-03/0"])
        .args(PROD)
        .args(["--within", "10.42.1.0/24"])
        .fails(code::INVALID)
        .unchanged()
        .stderr("error: --within: `10.42.1.0/24` does not lie inside pool `acme/prod/vpc-main-v6` (fd00:42::/48)\n")
        .run();
}

#[test]
fn explain_and_address_speak_ipv6() {
    let ran = Test::new("dual-stack")
        .args([
            "allocate",
            "public-v6",
            "--owner",
            "FloatingIP/f-1",
            "--dry-run",
            "--explain",
        ])
        .stdout("2001:db8:0:1::4\n")
        .run();
    assert_eq!(
        ran.stderr,
        "explain: pool `public-v6` (2001:db8:0:1::/64), lowest address first:\n\
         \x20 2001:db8:0:1::                   the pool's subnet-router anycast address\n\
         \x20 2001:db8:0:1::1                  the pool's gateway\n\
         \x20 2001:db8:0:1::2-2001:db8:0:1::3  excluded by the pool (`2001:db8:0:1::2/127`)\n\
         \x20 -> 2001:db8:0:1::4: the lowest free candidate\n\
         dry run: `FloatingIP/f-1` would claim 2001:db8:0:1::4; nothing written\n"
    );
    ran.then()
        .args(["allocate", "public-v6", "--owner", "FloatingIP/f-1", "--address", "2001:db8:0:1::"])
        .fails(code::INVALID)
        .unchanged()
        .stderr("error: --address: 2001:db8:0:1:: is not a candidate of this request: it is a subnet-router anycast address (RFC 4291 §2.6.1)\n")
        .run()
        .then()
        // Any spelling in, the canonical form out.
        .args(["allocate", "public-v6", "--owner", "FloatingIP/f-1", "--address", "2001:DB8:0:1:0:0:0:00ff"])
        .stdout("2001:db8:0:1::ff\n")
        .run();
}

#[test]
fn zone_list_release_and_check_work_on_ipv6() {
    Test::new("dual-stack")
        .args(["allocate", "--zone", "zone-a", "--owner", "FloatingIP/f-1"])
        .stdout("2001:db8:0:1::4\n")
        .run()
        .then()
        .args(["list", "-A"])
        .stdout(
            "NAMESPACE  POOL       ADDRESS          OWNER           UID\n\
             -          public-v6  2001:db8:0:1::4  FloatingIP/f-1  -\n",
        )
        .run()
        .then()
        .args([
            "list",
            "--pool",
            "public-v6",
            "--address",
            "2001:db8:0:1:0::4",
            "-o",
            "name",
        ])
        .stdout("ipallocation/public-v6-2001-0db8-0000-0001-0000-0000-0000-0004\n")
        .run()
        .then()
        .args([
            "release",
            "public-v6",
            "2001:db8:0:1::4",
            "--owner",
            "FloatingIP/other",
        ])
        .fails(code::CONFLICT)
        .unchanged()
        .run()
        .then()
        .args(["release", "public-v6", "2001:db8:0:1::4", "--force"])
        .stdout("ipallocation/public-v6-2001-0db8-0000-0001-0000-0000-0000-0004 released\n")
        .run()
        .then()
        .args(["allocate", "public-v6", "--owner", "FloatingIP/f-2"])
        .stdout("2001:db8:0:1::4\n")
        .run()
        .then()
        .file_store_only()
        .args(["check"])
        .run();
}

#[test]
fn a_gateway_or_exclude_of_the_other_family_is_refused_naming_the_field() {
    let test = Test::new("empty");
    let pool = |extra: &str| {
        format!(
            "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\nspec:\n  cidr: fd00::/64\n  kind: public\n{extra}"
        )
    };
    let input = test.input("gw.yaml", &pool("  gateway: 10.0.0.1\n"));
    let ran = test
        .args(["apply", "-f", &input])
        .fails(code::INVALID)
        .unchanged()
        .run();
    assert!(
        ran.stderr.contains(
            "spec.gateway: `10.0.0.1` is an IPv4 address but spec.cidr `fd00::/64` is IPv6"
        ),
        "{}",
        ran.stderr
    );
    let test = ran.then();
    let input = test.input("ex.yaml", &pool("  exclude:\n  - 10.0.0.0/30\n"));
    let ran = test
        .args(["apply", "-f", &input])
        .fails(code::INVALID)
        .unchanged()
        .run();
    assert!(
        ran.stderr.contains(
            "spec.exclude: `10.0.0.0/30` is an IPv4 prefix but spec.cidr `fd00::/64` is IPv6"
        ),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_file_under_any_other_spelling_of_an_ipv6_name_is_reported_by_check() {
    let test = Test::new("dual-stack")
        .file_store_only()
        .args(allocate("public-v6", "FloatingIP/f-1"))
        .run()
        .then();
    let canonical = "public-v6-2001-0db8-0000-0001-0000-0000-0000-0004";
    let manifest = test.read(&format!("cluster/ipallocations/{canonical}.yaml"));
    let forms = [
        "public-v6-2001-db8-0-1-0-0-0-4", // groups not padded
        "public-v6-2001-0DB8-0000-0001-0000-0000-0000-0004", // uppercase
        "public-v6-2001-0db8-0-1--4",     // `::` as `--`
        "public-v6-2001:db8:0:1::4",      // colons
        "public-v6-2001-0db8-0000-0001-0000-0000-0004", // seven groups
    ];
    for form in forms {
        test.write(&format!("cluster/ipallocations/{form}.yaml"), &manifest);
    }
    let ran = test.args(["check"]).status(code::FAILURE).run();
    for form in forms {
        assert!(
            ran.stdout
                .contains(&format!("cluster/ipallocations/{form}.yaml")),
            "{form} not reported:\n{}",
            ran.stdout
        );
    }
    assert!(
        ran.stdout
            .contains(&format!("it should be `{canonical}.yaml`")),
        "{}",
        ran.stdout
    );
}

#[test]
fn dual_stack_allocate_claims_in_both_pools_in_order() {
    let args = |owner: &str| {
        let mut a = vec!["allocate", "vpc-main", "vpc-main-v6", "--owner"];
        a.push(owner);
        a.extend([
            "--uid",
            "0f8fad5b-d9cb-469f-a165-70867728950e",
            "-n",
            "acme/prod",
        ]);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let ran = Test::new("dual-stack")
        .args(args("VirtualMachine/web-01/0"))
        .stdout("10.42.0.1\nfd00:42::1\n")
        .run()
        .then()
        // Asked again: the same two addresses.
        .args(args("VirtualMachine/web-01/0"))
        .args(["-o", "json"])
        .run();
    let items = list_items(&ran.stdout);
    let addresses: Vec<&str> = items
        .iter()
        .map(|i| i["spec"]["address"].as_str().unwrap())
        .collect();
    assert_eq!(addresses, ["10.42.0.1", "fd00:42::1"]);
    assert!(
        items.iter().all(|i| i["status"]["action"] == "existing"),
        "{}",
        ran.stdout
    );
    ran.then()
        .args(args("VirtualMachine/web-02/0"))
        .args(["--within", "10.42.1.0/24"])
        .fails(code::INVALID)
        .unchanged()
        .stderr("error: --within applies to one pool; allocate from each pool alone to use it\n")
        .run();
}

#[test]
fn dual_stack_allocate_releases_the_first_claim_when_the_second_pool_is_exhausted() {
    let both = |owner: &str| -> Vec<String> {
        [
            "allocate",
            "tiny",
            "tiny-v6",
            "-n",
            "acme/prod",
            "--owner",
            owner,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let test = Test::new("dual-stack")
        // The owner already holds 10.9.0.1: that stays, whatever happens to the request.
        .args([
            "allocate",
            "tiny",
            "-n",
            "acme/prod",
            "--owner",
            "FloatingIP/keeper",
        ])
        .stdout("10.9.0.1\n")
        .run()
        .then()
        .args([
            "allocate",
            "tiny-v6",
            "-n",
            "acme/prod",
            "--owner",
            "FloatingIP/a",
        ])
        .stdout("fd00:9::\n")
        .run()
        .then()
        .args([
            "allocate",
            "tiny-v6",
            "-n",
            "acme/prod",
            "--owner",
            "FloatingIP/b",
        ])
        .stdout("fd00:9::1\n")
        .run()
        .then();
    // 10.9.0.2 would be claimed, then tiny-v6 is exhausted: released again, exit 5.
    let ran = test
        .args(both("FloatingIP/new"))
        .fails(code::EXHAUSTED)
        .unchanged()
        .stderr(
            "error: pool `acme/prod/tiny-v6` is exhausted: no free address in fd00:9::-fd00:9::1\n",
        )
        .run();
    ran.then()
        .args(both("FloatingIP/keeper"))
        .fails(code::EXHAUSTED)
        .unchanged()
        .run()
        .then()
        .args(["list", "--pool", "tiny", "-n", "acme/prod", "-o", "name"])
        .stdout("ipallocation/tiny-10-9-0-1\n")
        .run();
}

#[test]
fn vpc_create_with_two_ranges_makes_both_pools_and_delete_removes_both() {
    let ran = Test::new("empty")
        .args([
            "vpc",
            "create",
            "edge",
            "-n",
            "acme",
            "--uid",
            "7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10",
        ])
        .args(["--cidr", "10.60.0.0/16", "--cidr", "fd00:60::/48"])
        .stdout("7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10\n")
        .stderr("ipampool/vpc-edge created\nipampool/vpc-edge-v6 created\n")
        .run();
    insta::assert_snapshot!(ran.read("namespaces/acme/ipampools/vpc-edge-v6.yaml"), @r"
    apiVersion: pivirt.hu/v1
    kind: IPAMPool
    metadata:
      name: vpc-edge-v6
      namespace: acme
      ownerRefs:
      - kind: VPC
        uid: 7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10
        name: edge
        controller: true
    spec:
      cidr: fd00:60::/48
      kind: private
    ");
    ran.then()
        .args([
            "allocate",
            "vpc-edge",
            "vpc-edge-v6",
            "-n",
            "acme",
            "--owner",
            "VPC/router",
        ])
        .stdout("10.60.0.1\nfd00:60::1\n")
        .run()
        .then()
        // A second VPC of that name: nothing created.
        .args([
            "vpc",
            "create",
            "edge",
            "-n",
            "acme",
            "--cidr",
            "10.61.0.0/16",
            "--cidr",
            "fd00:61::/48",
        ])
        .fails(code::CONFLICT)
        .unchanged()
        .run()
        .then()
        .args([
            "vpc",
            "create",
            "two",
            "-n",
            "acme",
            "--cidr",
            "fd00:1::/48",
            "--cidr",
            "fd00:2::/48",
        ])
        .fails(code::INVALID)
        .unchanged()
        .run()
        .then()
        .args(["vpc", "delete", "edge", "-n", "acme"])
        .stdout(
            "ipallocation/vpc-edge-10-60-0-1 released\n\
             ipampool/vpc-edge deleted\n\
             ipallocation/vpc-edge-v6-fd00-0060-0000-0000-0000-0000-0000-0001 released\n\
             ipampool/vpc-edge-v6 deleted\n",
        )
        .run()
        .then()
        .args(["pool", "list", "-A", "-o", "name"])
        .stdout("")
        .run();
}

#[test]
fn thirty_two_processes_claiming_from_one_ipv6_120_get_distinct_addresses() {
    // 16 candidates: ::f0 to ::ff of the /120 (the rest excluded).
    let test = Test::new("empty");
    let input = test.input(
        "race.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: race6\nspec:\n  cidr: fd00:7::/120\n  kind: public\n  exclude:\n  - fd00:7::/121\n  - fd00:7::80/122\n  - fd00:7::c0/123\n  - fd00:7::e0/124\n",
    );
    let test = test.args(["apply", "-f", &input]).run().then();
    let children: Vec<Child> = (0..32)
        .map(|i| {
            test.command([
                "allocate",
                "race6",
                "--owner",
                &format!("FloatingIP/fip-{i}"),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ipamctl")
        })
        .collect();
    let results: Vec<(i32, String)> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().expect("wait for ipamctl");
            (
                out.status.code().expect("exits by itself"),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        })
        .collect();
    let won: Vec<&str> = results
        .iter()
        .filter(|r| r.0 == code::OK)
        .map(|r| r.1.trim_end())
        .collect();
    let exhausted = results.iter().filter(|r| r.0 == code::EXHAUSTED).count();
    assert_eq!((won.len(), exhausted), (16, 16), "{results:?}");
    let distinct: HashSet<&str> = won.iter().copied().collect();
    let expected: HashSet<String> = (0xf0..=0xff).map(|i| format!("fd00:7::{i:x}")).collect();
    assert_eq!(
        distinct,
        expected.iter().map(String::as_str).collect::<HashSet<_>>()
    );
    // On PostgreSQL, what the database exported back: names and bytes as the file store's.
    test.file_store_only().args(["check"]).run();
}
