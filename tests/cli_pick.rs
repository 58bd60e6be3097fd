//! `spec.pick: hashed`, through the real binary: an owner's first claim is the candidate at
//! the documented SHA-256 position (computed here by `sha256sum`, not by ipamctl's code),
//! the walk from there passes taken, excluded and cooling addresses and wraps around; the
//! command and the batch give the same addresses; dual stack, `--subnet` and `--within`
//! each use their pool's pick; the edges of small prefixes and the top of the IPv6 space.
//! With `IPAMCTL_TEST_STORE=postgres` every command here runs on PostgreSQL too; the
//! tests that compare the stores directly are in `tests/pg_pick.rs`.

mod common;

#[path = "pick/oracle.rs"]
mod oracle;

use std::collections::BTreeSet;

use common::{Test, code};
use oracle::{Oracle, key, pool_yaml};

/// `t` with `manifests` applied.
fn applied(t: Test, manifests: &str) -> Test {
    let input = t.input("pools.yaml", manifests);
    t.args(["apply", "-f", &input]).run().then()
}

/// Runs `allocate ARGS`, asserting exit 0; returns the address(es) printed and the state.
fn claim(t: Test, args: &[&str]) -> (Vec<String>, Test) {
    let mut all = vec!["allocate"];
    all.extend_from_slice(args);
    let ran = t.args(all).run();
    let got = ran.stdout.lines().map(str::to_owned).collect();
    (got, ran.then())
}

#[test]
fn the_first_claims_in_a_hashed_pool_are_the_documented_positions_walked_in_order() {
    let edge = Oracle::v4(
        "10.0.0.0/24",
        Some("10.0.0.1"),
        &["10.0.0.2/31", "10.0.0.200/29"],
    );
    let vpc = Oracle::v4("10.42.0.0/24", None, &[]);
    let mut t = applied(
        Test::new("empty"),
        &(pool_yaml(
            "edge",
            None,
            "10.0.0.0/24",
            Some("10.0.0.1"),
            &["10.0.0.2/31", "10.0.0.200/29"],
            "hashed",
        ) + &pool_yaml(
            "vpc-h",
            Some("acme/prod"),
            "10.42.0.0/24",
            None,
            &[],
            "hashed",
        )),
    );
    // A dry run names the start itself, and writes nothing.
    for i in 0..5 {
        let owner = format!("FloatingIP/fip-{i}");
        let expected = edge.address(edge.start(key("", "edge", &owner)));
        t = t
            .args(["allocate", "edge", "--owner", &owner, "--dry-run"])
            .stdout(&format!("{expected}\n"))
            .unchanged()
            .run()
            .then();
    }
    // Claims, one after another: each the first free candidate from its owner's start on.
    let (mut edge_taken, mut vpc_taken) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..16 {
        let owner = format!("VirtualMachine/vm-{i}/0");
        let want = edge
            .walk(edge.start(key("", "edge", &owner)), &edge_taken)
            .unwrap();
        edge_taken.insert(want);
        let mut got;
        (got, t) = claim(t, &["edge", "--owner", &owner]);
        assert_eq!(got, [edge.address(want)], "{owner}");
        // In a namespace: the namespace is part of the key.
        let want = vpc
            .walk(vpc.start(key("acme/prod", "vpc-h", &owner)), &vpc_taken)
            .unwrap();
        vpc_taken.insert(want);
        (got, t) = claim(t, &["vpc-h", "-n", "acme/prod", "--owner", &owner]);
        assert_eq!(got, [vpc.address(want)], "{owner}");
    }
    // Not the lowest: the 16 claims are spread over the pool, far past its first 16 candidates.
    assert!(
        edge_taken.iter().max() > edge.candidates.get(120),
        "{edge_taken:?}"
    );
    // The uid is no part of the key: with it, an owner starts where it would without it.
    let owner = "FloatingIP/fip-uid";
    let want = edge
        .walk(edge.start(key("", "edge", owner)), &edge_taken)
        .unwrap();
    let (got, _) = claim(
        t,
        &[
            "edge",
            "--owner",
            owner,
            "--uid",
            "0b6f0000-0000-4000-8000-00000000000a",
        ],
    );
    assert_eq!(got, [edge.address(want)]);
}

#[test]
fn a_hashed_walk_passes_taken_excluded_and_cooling_addresses_and_wraps_to_the_lowest() {
    // Candidates .2 .3 .4 .6: .1 is the gateway, .5 excluded.
    let w = Oracle::v4("10.9.0.0/29", Some("10.9.0.1"), &["10.9.0.5"]);
    let mut t = applied(
        Test::new("empty"),
        &pool_yaml(
            "w",
            None,
            "10.9.0.0/29",
            Some("10.9.0.1"),
            &["10.9.0.5"],
            "hashed\n  reuseAfter: 10m",
        ),
    );
    let starting_at =
        |addr: &str| w.owner_starting_at(addr, |i| format!("FloatingIP/o-{i}"), "", "w");
    let (a, b, c) = (
        starting_at("10.9.0.4"),
        starting_at("10.9.0.6"),
        starting_at("10.9.0.3"),
    );
    let mut got;
    (got, t) = claim(
        t,
        &["w", "--owner", "FloatingIP/t1", "--address", "10.9.0.4"],
    );
    assert_eq!(got, ["10.9.0.4"]);
    // A starts at .4 (taken): past it and the excluded .5, to .6.
    (got, t) = claim(t, &["w", "--owner", &a]);
    assert_eq!(got, ["10.9.0.6"]);
    // B starts at .6, the last candidate, now taken: around to the lowest, .2.
    (got, t) = claim(t, &["w", "--owner", &b]);
    assert_eq!(got, ["10.9.0.2"]);
    // .3 released by another owner cools down: C, starting at .3, passes it, .4 and .6,
    // wraps past .2 and finds nothing.
    (got, t) = claim(
        t,
        &["w", "--owner", "FloatingIP/t2", "--address", "10.9.0.3"],
    );
    assert_eq!(got, ["10.9.0.3"]);
    t = t
        .args(["release", "w", "10.9.0.3", "--owner", "FloatingIP/t2"])
        .run()
        .then();
    let ran = t
        .args(["allocate", "w", "--owner", &c, "--dry-run", "--explain"])
        .status(code::EXHAUSTED)
        .run();
    assert!(
        ran.stderr.contains(&format!(
            "pick hashed: from 10.9.0.3 (where `{c}` starts) up, then from the lowest"
        )) && ran
            .stderr
            .contains("1 released address waits out reuseAfter 10m"),
        "{}",
        ran.stderr
    );
    t = ran
        .then()
        .args(["allocate", "w", "--owner", &c])
        .fails(code::EXHAUSTED)
        .run()
        .then();
    // Its owner gets it back, whatever its start.
    (got, _) = claim(t, &["w", "--owner", "FloatingIP/t2"]);
    assert_eq!(got, ["10.9.0.3"]);
}

#[test]
fn the_smallest_prefixes_and_the_top_of_the_ipv6_space_fill_whole_without_overflow() {
    let top = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126";
    let pools = [
        ("p31", "10.0.0.0/31", Oracle::v4("10.0.0.0/31", None, &[])),
        ("p32", "10.0.0.7/32", Oracle::v4("10.0.0.7/32", None, &[])),
        ("p0", "0.0.0.0/31", Oracle::v4("0.0.0.0/31", None, &[])),
        (
            "p255",
            "255.255.255.252/30",
            Oracle::v4("255.255.255.252/30", None, &[]),
        ),
        ("p127", "2001:db8::/127", Oracle::v6("2001:db8::/127", None)),
        (
            "p128",
            "2001:db8::7/128",
            Oracle::v6("2001:db8::7/128", None),
        ),
        ("ptop", top, Oracle::v6(top, None)),
    ];
    let manifests: String = pools
        .iter()
        .map(|(name, cidr, _)| pool_yaml(name, None, cidr, None, &[], "hashed"))
        .collect();
    let mut t = applied(Test::new("empty"), &manifests);
    for (name, _, oracle) in &pools {
        let mut taken = BTreeSet::new();
        for i in 0..oracle.candidates.len() {
            let owner = format!("FloatingIP/{name}-{i}");
            let want = oracle
                .walk(oracle.start(key("", name, &owner)), &taken)
                .unwrap();
            taken.insert(want);
            let got;
            (got, t) = claim(t, &[name, "--owner", &owner]);
            assert_eq!(got, [oracle.address(want)], "{name} {owner}");
        }
        assert_eq!(taken.len(), oracle.candidates.len(), "{name}");
        // Full: the next owner is exit 5, whatever its start, and nothing changes.
        t = t
            .args(["allocate", name, "--owner", "FloatingIP/one-more"])
            .fails(code::EXHAUSTED)
            .run()
            .then();
    }
}

#[test]
fn the_command_and_the_batch_give_each_owner_the_same_address_at_30_percent_use() {
    let edge = Oracle::v4("192.0.2.0/24", Some("192.0.2.1"), &[]);
    let manifests = pool_yaml(
        "edge",
        None,
        "192.0.2.0/24",
        Some("192.0.2.1"),
        &[],
        "hashed",
    );
    // 76 of 253 candidates held, claimed by the pool's own pick.
    let base: String = (0..76)
        .map(|i| format!("{{\"pool\":\"edge\",\"owner\":\"FloatingIP/base-{i}\"}}\n"))
        .collect();
    let owners: Vec<String> = (0..20)
        .map(|i| format!("VirtualMachine/new-{i}/0"))
        .collect();
    let filled = || {
        let t = applied(Test::new("empty"), &manifests);
        let input = t.input("base.jsonl", &base);
        t.args(["allocate", "-f", &input, "-o", "name"])
            .run()
            .then()
    };
    // The oracle: every claim in order, the base's too.
    let mut taken = BTreeSet::new();
    let mut expected = Vec::new();
    let base_owners = (0..76).map(|i| format!("FloatingIP/base-{i}"));
    for (n, owner) in base_owners.chain(owners.iter().cloned()).enumerate() {
        let addr = edge
            .walk(edge.start(key("", "edge", &owner)), &taken)
            .unwrap();
        taken.insert(addr);
        if n >= 76 {
            expected.push(edge.address(addr));
        }
    }
    let mut t = filled();
    assert_eq!(t.files().len(), 1 + 76, "{:?}", t.files());
    let mut by_command = Vec::new();
    for owner in &owners {
        let got;
        (got, t) = claim(t, &["edge", "--owner", owner]);
        by_command.extend(got);
    }
    assert_eq!(by_command, expected);
    let t = filled();
    let lines: String = owners
        .iter()
        .map(|o| format!("{{\"pool\":\"edge\",\"owner\":\"{o}\"}}\n"))
        .collect();
    let input = t.input("new.jsonl", &lines);
    let ran = t.args(["allocate", "-f", &input, "-o", "json"]).run();
    let by_batch: Vec<String> = ran
        .stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["address"]
                .as_str()
                .unwrap_or_else(|| panic!("{l}"))
                .to_owned()
        })
        .collect();
    assert_eq!(by_batch, expected);
}

#[test]
fn dual_stack_subnets_and_within_each_walk_their_own_candidates_by_their_own_pick() {
    let v6_lo: u128 = "fd00:42::".parse::<std::net::Ipv6Addr>().unwrap().into();
    let manifests = pool_yaml("v4", Some("acme/prod"), "10.42.0.0/16", None, &[], "lowest")
        + &pool_yaml(
            "v6",
            Some("acme/prod"),
            "fd00:42::/64",
            Some("fd00:42::1"),
            &[],
            "hashed",
        )
        + &pool_yaml("h4", Some("acme/prod"), "10.43.0.0/16", None, &[], "hashed");
    let t = applied(Test::new("empty"), &manifests);
    let owner = "VirtualMachine/db-01/0";
    // v4 keeps `lowest`: its first host; v6 is hashed: ::2 + key mod (2^64 - 2).
    let (got, t) = claim(t, &["v4", "v6", "-n", "acme/prod", "--owner", owner]);
    let v6_start = v6_lo + 2 + key("acme/prod", "v6", owner) % ((1u128 << 64) - 2);
    assert_eq!(
        got,
        [
            "10.42.0.1".to_owned(),
            std::net::Ipv6Addr::from(v6_start).to_string()
        ]
    );
    // A subnet of h4: candidates .3-.254 of 10.43.1.0/24 (gateway .1, reserved .2).
    let t = t
        .args([
            "subnet",
            "create",
            "web",
            "-n",
            "acme/prod",
            "--pool",
            "h4",
            "--cidr",
            "10.43.1.0/24",
            "--reserved",
            "10.43.1.2",
        ])
        .run()
        .then();
    let web = Oracle::v4("10.43.1.0/24", Some("10.43.1.1"), &["10.43.1.2"]);
    let (got, t) = claim(
        t,
        &["h4", "-n", "acme/prod", "--subnet", "web", "--owner", owner],
    );
    let want = web.start(key("acme/prod", "h4", owner));
    assert_eq!(got, [web.address(want)]);
    // `--within` a /26 of h4 (outside the subnet): its host addresses.
    let within = Oracle::v4("10.43.7.64/26", None, &[]);
    let node = "Node/10.43.7.64/26";
    let (got, _) = claim(
        t,
        &[
            "h4",
            "-n",
            "acme/prod",
            "--within",
            "10.43.7.64/26",
            "--owner",
            node,
        ],
    );
    assert_eq!(
        got,
        [within.address(within.start(key("acme/prod", "h4", node)))]
    );
}

#[test]
fn pick_changes_by_apply_and_lowest_leaves_the_manifest_as_it_was() {
    let lowest = pool_yaml("edge", None, "10.0.0.0/24", Some("10.0.0.1"), &[], "lowest");
    let hashed = pool_yaml("edge", None, "10.0.0.0/24", Some("10.0.0.1"), &[], "hashed");
    let without = lowest.replace("  pick: lowest\n", "");
    let t = applied(Test::new("empty"), &without);
    let bytes = t.read("cluster/ipampools/edge.yaml");
    assert!(!bytes.contains("pick"), "{bytes}");
    // `pick: lowest` is the default: unchanged, and left out.
    let input = t.input("lowest.yaml", &lowest);
    let t = t
        .args(["apply", "-f", &input])
        .stdout("ipampool/edge unchanged\n")
        .unchanged()
        .run()
        .then();
    let input = t.input("hashed.yaml", &hashed);
    let t = t
        .args(["apply", "-f", &input])
        .stdout("ipampool/edge configured\n")
        .run()
        .then();
    assert!(
        t.read("cluster/ipampools/edge.yaml")
            .contains("\n  pick: hashed\n")
    );
    let ran = t.args(["pool", "show", "edge"]).run();
    assert!(
        ran.stdout.contains("Pick:        hashed\n"),
        "{}",
        ran.stdout
    );
    let ran = ran
        .then()
        .args(["pool", "show", "edge", "-o", "json"])
        .run();
    let json: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["spec"]["pick"], "hashed");
    // And back: the file is byte for byte what it was.
    let t = ran.then();
    let input = t.input("back.yaml", &without);
    let t = t
        .args(["apply", "-f", &input])
        .stdout("ipampool/edge configured\n")
        .run()
        .then();
    assert_eq!(t.read("cluster/ipampools/edge.yaml"), bytes);
}

#[test]
fn a_pick_that_is_not_one_of_the_two_or_on_a_supernet_is_refused() {
    let t = Test::new("empty");
    let bad = pool_yaml("edge", None, "10.0.0.0/24", None, &[], "random");
    let input = t.input("bad.yaml", &bad);
    let ran = t.args(["apply", "-f", &input]).fails(code::INVALID).run();
    assert!(
        ran.stderr
            .contains("line 8 column 9: unknown variant `random`, expected one of lowest, hashed"),
        "{}",
        ran.stderr
    );
    let supernet = pool_yaml("sup", None, "10.0.0.0/8", None, &[], "hashed")
        .replace("kind: public", "kind: supernet");
    let t = ran.then();
    let input = t.input("sup.yaml", &supernet);
    let ran = t.args(["apply", "-f", &input]).fails(code::INVALID).run();
    assert!(
        ran.stderr
            .contains("spec.pick: a supernet hands out prefixes by best fit"),
        "{}",
        ran.stderr
    );
}

#[test]
fn diff_names_a_change_of_pick() {
    let lowest = pool_yaml("edge", None, "10.0.0.0/24", None, &[], "lowest");
    let t = applied(Test::new("empty").file_store_only(), &lowest);
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(t.state())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.org")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.org")
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "base"]);
    let input = t.input(
        "hashed.yaml",
        &lowest.replace("pick: lowest", "pick: hashed"),
    );
    let t = t.args(["apply", "-f", &input]).run().then();
    let ran = t.args(["diff", "HEAD"]).status(1).run();
    assert!(
        ran.stdout.contains("pool-changed  ipampool/edge")
            && ran.stdout.contains("pick lowest -> hashed"),
        "{}",
        ran.stdout
    );
}
