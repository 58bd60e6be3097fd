//! Stored subnets: `subnet create|list|show|delete`, `allocate --subnet`, `list --subnet`,
//! `pool show --within`, Subnet manifests in `apply -f`, and the races around them (real
//! processes).

mod common;

use std::time::Duration;

use common::budget::Budget;
use common::{Test, code, list_items, spawn_piped};

const NS: [&str; 2] = ["-n", "acme/prod"];

/// `subnet create NAME -n acme/prod --pool vpc-main --cidr CIDR [extra...]`.
fn create<'a>(name: &'a str, cidr: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "subnet", "create", name, "--pool", "vpc-main", "--cidr", cidr,
    ];
    args.extend_from_slice(&NS);
    args.extend_from_slice(extra);
    args
}

/// `allocate vpc-main -n acme/prod --owner OWNER [extra...]`.
fn allocate<'a>(owner: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["allocate", "vpc-main", "--owner", owner];
    args.extend_from_slice(&NS);
    args.extend_from_slice(extra);
    args
}

/// The seed fixture (two empty pools) with subnet `web` = 10.42.1.0/24 of `vpc-main`.
fn with_web() -> Test {
    Test::new("seed")
        .args(create("web", "10.42.1.0/24", &[]))
        .stdout("10.42.1.1\n")
        .stderr("subnet/web created\n")
        .run()
        .then()
}

#[test]
fn node_and_vm_on_one_subnet_never_get_its_gateway() {
    // The README's VPC example: a VM and the host's Node address on one subnet, in either
    // order; neither repeats the gateway, and neither gets it.
    let ran = with_web()
        .args(allocate("Node/10.42.1.0/24", &["--subnet", "web"]))
        .stdout("10.42.1.2\n")
        .run()
        .then()
        .args(allocate("VirtualMachine/db-01/0", &["--subnet", "web"]))
        .stdout("10.42.1.3\n")
        .run();
    insta::assert_snapshot!(ran.read("namespaces/acme/prod/subnets/web.yaml"), @r#"
    apiVersion: pivirt.hu/v1
    kind: Subnet
    metadata:
      name: web
      namespace: acme/prod
    spec:
      pool: vpc-main
      cidr: 10.42.1.0/24
      gateway: "10.42.1.1"
    "#);
}

#[test]
fn a_subnet_keeps_its_gateway_reserved_network_and_broadcast() {
    let t = Test::new("seed")
        .args(create(
            "tiny",
            "10.42.2.0/29",
            &[
                "--gateway",
                "10.42.2.6",
                "--reserved",
                "10.42.2.1",
                "--reserved",
                "10.42.2.2/31",
            ],
        ))
        .stdout("10.42.2.6\n")
        .run()
        .then();
    let mut t = t;
    // .0 network, .1 and .2-.3 reserved, .6 gateway, .7 broadcast: .4 and .5 only.
    for (i, expected) in ["10.42.2.4\n", "10.42.2.5\n"].into_iter().enumerate() {
        let owner = format!("VirtualMachine/vm-{i}/0");
        t = t
            .args(allocate(&owner, &["--subnet", "tiny"]))
            .stdout(expected)
            .run()
            .then();
    }
    let ran = t
        .args(allocate("VirtualMachine/vm-9/0", &["--subnet", "tiny"]))
        .fails(code::EXHAUSTED)
        .run();
    assert!(
        ran.stderr
            .contains("subnet `tiny` (10.42.2.0/29) of pool `acme/prod/vpc-main` is exhausted"),
        "{}",
        ran.stderr
    );
    ran.then()
        .args(allocate(
            "VirtualMachine/vm-9/0",
            &["--subnet", "tiny", "--address", "10.42.2.6"],
        ))
        .fails(code::CONFLICT)
        .stderr("error: 10.42.2.6 is the gateway of subnet `tiny` (10.42.2.0/29) of pool `acme/prod/vpc-main`\nhint: no claim is given it; `--subnet tiny` without `--address` claims a free address of it\n")
        .run();
}

#[test]
fn subnet_create_is_idempotent_and_guards_its_pool_and_siblings() {
    let t = with_web()
        // The same spec again: success, so a retry loop is safe.
        .args(create("web", "10.42.1.0/24", &[]))
        .stdout("10.42.1.1\n")
        .stderr("subnet/web unchanged\n")
        .run()
        .then();
    let t = t
        .args(create("web", "10.42.1.0/25", &[]))
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(create("db", "10.42.1.128/25", &[]))
        .fails(code::CONFLICT)
        .stderr("error: subnet `db` (10.42.1.128/25) overlaps subnet `web` (10.42.1.0/24) of pool `acme/prod/vpc-main`\n")
        .run()
        .then()
        .args(create("wide", "10.0.0.0/8", &[]))
        .fails(code::CONFLICT)
        .stderr("error: subnet `wide` (10.0.0.0/8) does not lie inside pool `acme/prod/vpc-main` (10.42.0.0/16)\n")
        .run()
        .then()
        .args(create("db", "10.42.2.0/24", &["--gateway", "10.42.3.1"]))
        .fails(code::INVALID)
        .run()
        .then();
    t.args([
        "subnet",
        "create",
        "db",
        "--pool",
        "nope",
        "--cidr",
        "10.42.2.0/24",
        "-n",
        "acme/prod",
    ])
    .fails(code::NOT_FOUND)
    .run();
}

#[test]
fn a_subnet_whose_gateway_is_already_allocated_is_refused() {
    Test::new("seed")
        .args(allocate(
            "VirtualMachine/web-01/0",
            &["--within", "10.42.1.0/24"],
        ))
        .stdout("10.42.1.1\n")
        .run()
        .then()
        .args(create("web", "10.42.1.0/24", &[]))
        .fails(code::CONFLICT)
        .run();
}

#[test]
fn subnet_show_and_list_give_the_usage() {
    let ran = with_web()
        .args(allocate("VirtualMachine/web-01/0", &["--subnet", "web"]))
        .run()
        .then()
        .args(["subnet", "show", "web", "-n", "acme/prod", "-o", "json"])
        .run();
    let shown: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(shown["kind"], "Subnet");
    assert_eq!(shown["status"]["candidates"], 253);
    assert_eq!(shown["status"]["allocated"], 1);
    assert_eq!(shown["status"]["free"], 252);
    assert_eq!(
        shown["status"]["freeRanges"],
        serde_json::json!(["10.42.1.3-10.42.1.254"])
    );
    let ran = ran.then().args(["subnet", "list", "-o", "json"]).run();
    let items = list_items(&ran.stdout);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "web");
    let ran = ran
        .then()
        .args(["list", "--subnet", "web", "-n", "acme/prod", "-o", "name"])
        .stdout("ipallocation/vpc-main-10-42-1-2\n")
        .run();
    // `pool show --within` gives the same figures without drawing a map: the subnet's
    // gateway is no candidate of any claim, so it is not free either.
    let ran = ran
        .then()
        .args([
            "pool",
            "show",
            "vpc-main",
            "-n",
            "acme/prod",
            "--within",
            "10.42.1.0/24",
            "-o",
            "json",
        ])
        .run();
    let shown: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(shown["status"]["candidates"], 253);
    assert_eq!(shown["status"]["allocated"], 1);
    assert_eq!(
        shown["status"]["freeRanges"],
        serde_json::json!(["10.42.1.3-10.42.1.254"])
    );
}

#[test]
fn subnet_delete_waits_for_its_allocations_and_retries_are_safe() {
    let t = with_web()
        .args(allocate("VirtualMachine/web-01/0", &["--subnet", "web"]))
        .run()
        .then()
        .args(["subnet", "delete", "web", "-n", "acme/prod"])
        .fails(code::CONFLICT)
        .stderr("error: subnet `web` (10.42.1.0/24) of pool `acme/prod/vpc-main` still holds 1 allocation\nhint: release them first: ipamctl list --subnet web -n acme/prod\n")
        .run()
        .then()
        .args(["release", "vpc-main", "10.42.1.2", "-n", "acme/prod", "--force"])
        .run()
        .then()
        .args(["subnet", "delete", "web", "-n", "acme/prod"])
        .stdout("subnet/web deleted\n")
        .run()
        .then();
    assert!(!t.exists("namespaces/acme/prod/subnets/web.yaml"));
    t.args(["subnet", "delete", "web", "-n", "acme/prod"])
        .fails(code::NOT_FOUND)
        .run()
        .then()
        .args([
            "subnet",
            "delete",
            "web",
            "-n",
            "acme/prod",
            "--ignore-not-found",
        ])
        .unchanged()
        .run();
}

#[test]
fn apply_creates_updates_and_checks_subnets() {
    let t = Test::new("seed");
    let input = t.input(
        "subnets.yaml",
        "apiVersion: pivirt.hu/v1\nkind: Subnet\nmetadata:\n  name: web\n  namespace: acme/prod\nspec:\n  pool: vpc-main\n  cidr: 10.42.1.0/24\n",
    );
    let t = t
        .args(["apply", "-f", &input])
        .stdout("subnet/web created\n")
        .run()
        .then()
        .args(["apply", "-f", &input])
        .stdout("subnet/web unchanged\n")
        .run()
        .then();
    // The gateway was filled in, as `subnet create` does.
    assert!(
        t.read("namespaces/acme/prod/subnets/web.yaml")
            .contains("gateway: \"10.42.1.1\"")
    );
    let wider = t.input(
        "wider.yaml",
        "apiVersion: pivirt.hu/v1\nkind: Subnet\nmetadata:\n  name: web\n  namespace: acme/prod\nspec:\n  pool: vpc-main\n  cidr: 10.42.1.0/24\n  reserved: [10.42.1.0/28]\n",
    );
    let t = t
        .args(["apply", "-f", &wider])
        .stdout("subnet/web configured\n")
        .run()
        .then()
        .args(allocate("Node/web", &["--subnet", "web"]))
        .stdout("10.42.1.16\n")
        .run()
        .then();
    let orphan = t.input(
        "orphan.yaml",
        "apiVersion: pivirt.hu/v1\nkind: Subnet\nmetadata:\n  name: lost\n  namespace: acme/prod\nspec:\n  pool: nope\n  cidr: 10.42.1.0/24\n",
    );
    t.args(["apply", "-f", &orphan])
        .fails(code::NOT_FOUND)
        .run();
}

#[test]
fn deleting_the_pool_takes_its_subnets() {
    let t = Test::new("seed")
        .args([
            "subnet",
            "create",
            "edge",
            "--pool",
            "public-zone-a",
            "--cidr",
            "203.0.113.0/28",
        ])
        .stdout("203.0.113.1\n")
        .run()
        .then()
        .args(["pool", "delete", "public-zone-a"])
        .run()
        .then();
    assert!(!t.exists("cluster/subnets/edge.yaml"));
}

#[test]
fn check_reports_overlapping_and_orphan_subnets() {
    let t = with_web().file_store_only();
    t.write(
        "namespaces/acme/prod/subnets/db.yaml",
        "apiVersion: pivirt.hu/v1\nkind: Subnet\nmetadata:\n  name: db\n  namespace: acme/prod\nspec:\n  pool: vpc-main\n  cidr: 10.42.1.128/25\n  gateway: \"10.42.1.129\"\n",
    );
    t.write(
        "namespaces/acme/prod/subnets/lost.yaml",
        "apiVersion: pivirt.hu/v1\nkind: Subnet\nmetadata:\n  name: lost\n  namespace: acme/prod\nspec:\n  pool: gone\n  cidr: 10.9.0.0/24\n  gateway: \"10.9.0.1\"\n",
    );
    let ran = t.args(["check"]).status(code::FAILURE).run();
    assert!(
        ran.stdout
            .contains("subnet `web` (10.42.1.0/24) overlaps subnet `db` (10.42.1.128/25)"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("subnet of pool `gone`, which does not exist")
    );
}

/// Concurrent `subnet create`s of overlapping prefixes: exactly one wins, whatever the
/// interleaving (the pool's exclusive lock is the arbiter).
#[test]
fn concurrent_overlapping_subnet_creates_let_exactly_one_in() {
    let t = Test::new("seed").file_store_only();
    // Every round, in at most 60 s.
    let rounds = Budget::new("subnet create rounds", 3, Duration::from_secs(60)).at_least(3);
    for round in rounds.rounds() {
        let children: Vec<_> = (0..6)
            .map(|i| {
                let name = format!("r{round}-{i}");
                // Nested prefixes: every pair overlaps.
                let cidr = format!("10.42.{}.0/{}", 10 + round, 24 + i);
                spawn_piped(t.command(create(&name, &cidr, &[])))
            })
            .collect();
        let won = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .filter(|o| {
                let status = o.status.code().unwrap();
                assert!(status == 0 || status == code::CONFLICT, "{o:?}");
                status == 0
            })
            .count();
        assert_eq!(won, 1, "round {round}");
    }
    t.args(["check"]).run();
}

/// `subnet delete` racing claims into the subnet: either the subnet stays (and holds them)
/// or it goes and nobody claimed inside it, never a deleted subnet with allocations.
#[test]
fn subnet_delete_never_races_a_claim_into_it() {
    let mut t = Test::new("seed").file_store_only();
    // Every round, in at most 60 s.
    let rounds = Budget::new("subnet delete rounds", 4, Duration::from_secs(60)).at_least(4);
    for round in rounds.rounds() {
        let name = format!("s{round}");
        let cidr = format!("10.42.{}.0/24", 20 + round);
        t = t.args(create(&name, &cidr, &[])).run().then();
        let mut children: Vec<_> = (0..4)
            .map(|i| {
                let owner = format!("VirtualMachine/r{round}-{i}/0");
                spawn_piped(t.command(allocate(&owner, &["--subnet", &name])))
            })
            .collect();
        children.insert(
            round,
            spawn_piped(t.command(["subnet", "delete", &name, "-n", "acme/prod"])),
        );
        for c in children {
            let o = c.wait_with_output().unwrap();
            let status = o.status.code().unwrap();
            // A claim after the delete finds no subnet (3); a delete after a claim is 4.
            assert!(
                [0, code::NOT_FOUND, code::CONFLICT].contains(&status),
                "{o:?}"
            );
        }
        let subnet_left = t.exists(&format!("namespaces/acme/prod/subnets/{name}.yaml"));
        let inside = std::fs::read_dir(t.path("namespaces/acme/prod/ipallocations"))
            .map(|d| {
                d.filter(|e| {
                    let n = e.as_ref().unwrap().file_name();
                    n.to_string_lossy()
                        .starts_with(&format!("vpc-main-10-42-{}-", 20 + round))
                })
                .count()
            })
            .unwrap_or(0);
        assert!(
            subnet_left || inside == 0,
            "round {round}: subnet deleted while {inside} allocations were claimed into it"
        );
    }
}

#[test]
fn explain_names_the_subnets_gateway_as_the_subnets() {
    let ran = with_web()
        .args(allocate(
            "Node/web",
            &["--subnet", "web", "--dry-run", "--explain"],
        ))
        .stdout("10.42.1.2\n")
        .unchanged()
        .run();
    assert!(
        ran.stderr.contains("(10.42.0.0/16, within 10.42.1.0/24)")
            && ran
                .stderr
                .contains("10.42.1.1              the gateway of subnet `web`")
            && ran
                .stderr
                .contains("-> 10.42.1.2: the lowest free candidate"),
        "{}",
        ran.stderr
    );
}

/// `subnet create NAME --pool P --prefix-length N [extra...]` in acme/prod.
fn carve<'a>(name: &'a str, len: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "subnet",
        "create",
        name,
        "--pool",
        "vpc-main",
        "--prefix-length",
        len,
    ];
    args.extend_from_slice(&NS);
    args.extend_from_slice(extra);
    args
}

/// Best fit: each carve takes the lowest block inside the smallest free aligned block that
/// holds it, so a /25 goes into the /23 left beside a /24 and not into the free /17 further
/// up; the same name again returns what it has; another length under that name is exit 4.
#[test]
fn carved_subnets_take_the_best_fit_block_and_a_retry_gets_the_same() {
    let t = with_web() // web = 10.42.1.0/24: 10.42.0.0/24 and 10.42.2.0/23 are free beside it
        .args(carve("a", "24", &[]))
        .stdout("10.42.0.0/24\n")
        .stderr("subnet/a created\n")
        .run()
        .then()
        .args(carve("b", "25", &[]))
        .stdout("10.42.2.0/25\n")
        .run()
        .then()
        .args(carve("c", "25", &[]))
        .stdout("10.42.2.128/25\n")
        .run()
        .then()
        .args(carve("d", "23", &[]))
        .stdout("10.42.4.0/23\n")
        .run()
        .then()
        .args(carve("a", "24", &[]))
        .stdout("10.42.0.0/24\n")
        .stderr("subnet/a unchanged\n")
        .unchanged()
        .run()
        .then()
        .args(carve("a", "26", &[]))
        .fails(code::CONFLICT)
        .unchanged()
        .run();
    assert!(
        t.stderr
            .contains("subnet `a` of pool `acme/prod/vpc-main` exists as 10.42.0.0/24, not a /26"),
        "{}",
        t.stderr
    );
    // A carved subnet is an ordinary one: its gateway is its first host, claims keep to it.
    t.then()
        .args(allocate("VirtualMachine/web-01/0", &["--subnet", "b"]))
        .stdout("10.42.2.2\n")
        .run()
        .then()
        .args(["check"])
        .run();
}

/// A block whose gateway, network or broadcast address an allocation holds is passed over:
/// carving never takes an address from its holder.
#[test]
fn a_carve_passes_over_a_block_that_would_take_an_allocated_address() {
    let t = Test::new("seed")
        .args(allocate(
            "VirtualMachine/db-01/0",
            &["--address", "10.42.0.1"],
        ))
        .stdout("10.42.0.1\n")
        .run()
        .then()
        .args(allocate(
            "VirtualMachine/db-02/0",
            &["--address", "10.42.1.255"],
        ))
        .stdout("10.42.1.255\n")
        .run()
        .then()
        // 10.42.0.0/24 would make 10.42.0.1 its gateway, 10.42.1.0/24 10.42.1.255 its
        // broadcast address: the lowest /24 that harms nobody is 10.42.2.0/24.
        .args(carve("app", "24", &[]))
        .stdout("10.42.2.0/24\n")
        .run()
        .then()
        // Best fit again: the smallest free block that holds a /25 is 10.42.3.0/24, beside
        // `app` (the passed-over blocks were never taken).
        .args(carve("small", "25", &[]))
        .stdout("10.42.3.0/25\n")
        .run();
    t.then().args(["check"]).run();
}

/// No free block of the length: exit 5 naming the pool, the length and the largest free
/// block; a length the pool cannot hold is exit 2, and `--cidr` with `--prefix-length` is a
/// usage error. None of them changes anything.
#[test]
fn a_carve_that_does_not_fit_is_exit_5_naming_the_largest_free_block() {
    let t = Test::new("seed")
        .args(carve("left", "17", &[]))
        .stdout("10.42.0.0/17\n")
        .run()
        .then()
        .args(carve("right", "18", &[]))
        .stdout("10.42.128.0/18\n")
        .run()
        .then()
        .args(carve("big", "17", &[]))
        .fails(code::EXHAUSTED)
        .unchanged()
        .run();
    assert!(
        t.stderr.contains(
            "pool `acme/prod/vpc-main` has no free /17: the largest free block is 10.42.192.0/18"
        ),
        "{}",
        t.stderr
    );
    let t = t
        .then()
        .args(carve("wide", "12", &[]))
        .fails(code::INVALID)
        .unchanged()
        .run();
    assert!(
        t.stderr
            .contains("/12 does not fit pool `acme/prod/vpc-main` (10.42.0.0/16)"),
        "{}",
        t.stderr
    );
    let t = t
        .then()
        .args(carve("both", "24", &["--cidr", "10.42.9.0/24"]))
        .status(code::INVALID)
        .unchanged()
        .run();
    assert!(
        t.stderr
            .contains("'--prefix-length <N>' cannot be used with '--cidr <CIDR>'"),
        "{}",
        t.stderr
    );
}

/// 16 concurrent carves of a /24 in a /16 (real processes): 16 distinct subnets that
/// overlap nowhere, the lowest 16 /24s, and `check` is clean.
#[test]
fn concurrent_carves_get_disjoint_subnets() {
    let t = Test::new("seed");
    let children: Vec<_> = (0..16)
        .map(|i| spawn_piped(t.command(carve(&format!("s{i}"), "24", &[]))))
        .collect();
    let mut got: Vec<ipnet::IpNet> = children
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{o:?}");
            String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
        })
        .collect();
    got.sort();
    let want: Vec<ipnet::IpNet> = (0..16)
        .map(|i| format!("10.42.{i}.0/24").parse().unwrap())
        .collect();
    assert_eq!(got, want, "16 distinct /24s, the lowest ones");
    let listed = t
        .command(["subnet", "list", "-n", "acme/prod", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(
        list_items(&String::from_utf8(listed.stdout).unwrap()).len(),
        16
    );
    t.args(["check"]).run();
}

/// A carve composes with cooldown: an address released in a pool with `reuseAfter` is kept
/// for its last owner, so a carve never makes it a gateway, network or broadcast address.
#[test]
fn a_carve_passes_over_a_block_that_would_take_a_cooling_address() {
    let t = Test::new("seed");
    let file = t.input(
        "cool.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: vpc-main, namespace: acme/prod}\nspec: {cidr: 10.42.0.0/16, kind: private, reuseAfter: 1h}\n",
    );
    let t = t
        .args(["apply", "-f", &file])
        .run()
        .then()
        .args(allocate(
            "VirtualMachine/db-01/0",
            &["--address", "10.42.0.1"],
        ))
        .stdout("10.42.0.1\n")
        .run()
        .then()
        .args([
            "release",
            "vpc-main",
            "10.42.0.1",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/db-01/0",
        ])
        .run()
        .then()
        // 10.42.0.1 is cooling for db-01/0: 10.42.0.0/24 would make it its gateway.
        .args(carve("app", "24", &[]))
        .stdout("10.42.1.0/24\n")
        .run();
    t.then().args(["check"]).run();
}

/// `subnet create --cidr` composes with cooldown as a carve does: a subnet that would make
/// an address cooling for its last owner its gateway (or its network, broadcast or a
/// reserved address) is exit 4, naming the address and the pool's `reuseAfter`, and
/// nothing is written; another range is created.
#[test]
fn a_subnet_given_by_cidr_never_takes_a_cooling_address() {
    let t = Test::new("seed");
    let file = t.input(
        "cool.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: vpc-main, namespace: acme/prod}\nspec: {cidr: 10.42.0.0/16, kind: private, reuseAfter: 1h}\n",
    );
    t.args(["apply", "-f", &file])
        .run()
        .then()
        .args(allocate("VirtualMachine/db-01/0", &["--address", "10.42.0.1"]))
        .stdout("10.42.0.1\n")
        .run()
        .then()
        .args([
            "release",
            "vpc-main",
            "10.42.0.1",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/db-01/0",
        ])
        .run()
        .then()
        .args(create("app", "10.42.0.0/24", &[]))
        .fails(code::CONFLICT)
        .stderr(
            "error: 10.42.0.1 of subnet `app` would be its gateway, but it is cooling: pool \
             `acme/prod/vpc-main`'s reuseAfter keeps it for the owner that released it\n\
             hint: wait until the cooldown ends (`ipamctl history 10.42.0.1` shows the release), or pick another range\n",
        )
        .unchanged()
        .run()
        .then()
        .args(create("app", "10.42.1.0/24", &[]))
        .stdout("10.42.1.1\n")
        .run();
}
