//! Features that compose: a stored subnet binds every claim of its pool, whatever the
//! claim's flags; usage adds up with subnets; dual-stack NICs claim a subnet in each family
//! in one request. Every test drives the real binary, on both stores (the harness runs them
//! on PostgreSQL with `IPAMCTL_TEST_STORE=postgres`).

mod common;

use common::{Test, list_items};

const NS: [&str; 2] = ["-n", "acme/prod"];

/// `allocate vpc-main -n acme/prod --owner OWNER [extra...]`.
fn allocate<'a>(owner: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["allocate", "vpc-main", "--owner", owner];
    args.extend_from_slice(&NS);
    args.extend_from_slice(extra);
    args
}

/// The `subnets` fixture (vpc-main 10.42.0.0/16 with subnet `web` 10.42.1.0/24, gateway
/// .1) plus subnet `db` 10.42.2.0/24 with gateway .254 and 10.42.2.10 reserved.
fn two_subnets() -> Test {
    Test::new("subnets")
        .args([
            "subnet",
            "create",
            "db",
            "--pool",
            "vpc-main",
            "--cidr",
            "10.42.2.0/24",
            "--gateway",
            "10.42.2.254",
            "--reserved",
            "10.42.2.10",
            "-n",
            "acme/prod",
        ])
        .stdout("10.42.2.254\n")
        .run()
        .then()
}

#[test]
fn address_of_a_subnets_gateway_reserved_or_edge_is_refused_naming_the_subnet_and_role() {
    for (addr, role) in [
        ("10.42.1.1", "is the gateway of subnet `web` (10.42.1.0/24)"),
        ("10.42.1.0", "is the network address of subnet `web`"),
        ("10.42.1.255", "is the broadcast address of subnet `web`"),
        (
            "10.42.2.10",
            "is a reserved address of subnet `db` (10.42.2.0/24)",
        ),
        ("10.42.2.254", "is the gateway of subnet `db`"),
    ] {
        let ran = two_subnets()
            .args(allocate("VirtualMachine/oops/0", &["--address", addr]))
            .fails(4)
            .unchanged()
            .run();
        assert!(
            ran.stderr.contains(&format!("error: {addr} {role}")),
            "{addr}: {}",
            ran.stderr
        );
    }
}

#[test]
fn a_plain_claim_and_within_skip_every_subnets_gateway_and_edges() {
    // vpc-main has no gateway of its own: without the subnets, 10.42.1.0/24's first host
    // would go to `--within`, and 10.42.0.255 … 10.42.1.1 to plain claims in turn.
    two_subnets()
        .args(allocate(
            "VirtualMachine/w/0",
            &["--within", "10.42.2.0/24"],
        ))
        .stdout("10.42.2.1\n")
        .run()
        .then()
        .args(allocate(
            "VirtualMachine/w/1",
            &["--within", "10.42.2.8/29", "--dry-run"],
        ))
        // .8 is the /29's network address, .9 the first host, .10 db's reserved address.
        .stdout("10.42.2.9\n")
        .run()
        .then()
        .args(allocate(
            "VirtualMachine/w/2",
            &["--within", "10.42.1.0/24"],
        ))
        .stdout("10.42.1.2\n")
        .run();
}

#[test]
fn plain_claims_walk_past_a_subnet_without_touching_its_reserved_addresses() {
    // A /30 pool-less walk: a /16 with subnet `edge` 10.42.0.0/30 at its bottom keeps .0
    // (network of both), .1 (edge's gateway) and .3 (edge's broadcast); .2 is edge's only host.
    let mut t = Test::new("subnets")
        .args([
            "subnet",
            "create",
            "edge",
            "--pool",
            "vpc-main",
            "--cidr",
            "10.42.0.0/30",
            "-n",
            "acme/prod",
        ])
        .stdout("10.42.0.1\n")
        .run()
        .then();
    for (i, want) in ["10.42.0.2", "10.42.0.4", "10.42.0.5"].iter().enumerate() {
        let owner = format!("VirtualMachine/p{i}/0");
        t = t
            .args(allocate(&owner, &[]))
            .stdout(&format!("{want}\n"))
            .run()
            .then();
    }
}

#[test]
fn a_zone_claim_skips_the_gateway_of_a_subnet_of_a_public_pool() {
    // public-zone-a 203.0.113.0/24 (gateway .1, .2 and .3 excluded); subnet `fip` on
    // 203.0.113.4/30 has gateway .5 and edges .4 and .7: the first zone claim gets .6.
    Test::new("subnets")
        .args([
            "subnet",
            "create",
            "fip",
            "--pool",
            "public-zone-a",
            "--cidr",
            "203.0.113.4/30",
        ])
        .stdout("203.0.113.5\n")
        .run()
        .then()
        .args(["allocate", "--zone", "zone-a", "--owner", "FloatingIP/a"])
        .stdout("203.0.113.6\n")
        .run()
        .then()
        .args(["allocate", "--zone", "zone-a", "--owner", "FloatingIP/b"])
        .stdout("203.0.113.8\n")
        .run();
}

#[test]
fn usage_adds_up_with_subnets_in_pool_list_pool_show_and_subnet_show() {
    let t = two_subnets()
        .args(allocate("VirtualMachine/a/0", &["--subnet", "web"]))
        .stdout("10.42.1.2\n")
        .run()
        .then()
        .args(allocate("VirtualMachine/b/0", &[]))
        .stdout("10.42.0.1\n")
        .run()
        .then();
    // The /16 has 65534 hosts; web keeps 3 (network, broadcast, gateway), db 4 (network,
    // broadcast, gateway, reserved): 65527 candidates, 2 allocated.
    let ran = t
        .args(["pool", "show", "vpc-main", "-n", "acme/prod", "-o", "json"])
        .run();
    let status: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let usage = &status["status"];
    assert_eq!(usage["candidates"], 65527, "{}", ran.stdout);
    assert_eq!(usage["allocated"], 2, "{}", ran.stdout);
    assert_eq!(usage["free"], 65525, "{}", ran.stdout);
    let free: Vec<&str> = usage["freeRanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(
        free.starts_with(&["10.42.0.2-10.42.0.255", "10.42.1.3-10.42.1.254"]),
        "{free:?}"
    );
    assert!(
        free.contains(&"10.42.2.1-10.42.2.9") && free.contains(&"10.42.2.11-10.42.2.253"),
        "{free:?}"
    );
    let ran = ran
        .then()
        .args(["pool", "list", "-n", "acme/prod", "-o", "json"])
        .run();
    let vpc = list_items(&ran.stdout)
        .into_iter()
        .find(|p| p["metadata"]["name"] == "vpc-main")
        .unwrap();
    assert_eq!(vpc["status"]["candidates"], 65527, "{}", ran.stdout);
    assert_eq!(vpc["status"]["free"], 65525, "{}", ran.stdout);
}

#[test]
fn check_reports_an_allocation_written_by_hand_on_a_subnets_gateway() {
    let t = Test::new("subnets").file_store_only();
    t.write(
        "namespaces/acme/prod/ipallocations/vpc-main-10-42-1-1.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAllocation\nmetadata:\n  name: vpc-main-10-42-1-1\n  namespace: acme/prod\nspec:\n  pool: vpc-main\n  address: \"10.42.1.1\"\n  owner:\n    kind: VirtualMachine\n    name: oops/0\n",
    );
    let ran = t.args(["check"]).status(1).run();
    assert!(
        ran.stdout.contains("namespaces/acme/prod/ipallocations/vpc-main-10-42-1-1.yaml")
            && ran.stdout.contains(
                "address 10.42.1.1 is the gateway of subnet `web` (10.42.1.0/24) of pool `acme/prod/vpc-main`"
            )
            && ran.stdout.contains("ipamctl release vpc-main 10.42.1.1 -n acme/prod --owner VirtualMachine/oops/0"),
        "{}",
        ran.stdout
    );
}

/// The `dual-stack` fixture with subnet `web` (10.42.1.0/24) of vpc-main and `web6`
/// (`v6cidr`) of vpc-main-v6.
fn dual_stack_subnets(v6cidr: &str) -> Test {
    let subnet = |name: &'static str, pool: &'static str, cidr: &str| -> Vec<String> {
        [
            "subnet",
            "create",
            name,
            "--pool",
            pool,
            "--cidr",
            cidr,
            "-n",
            "acme/prod",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    Test::new("dual-stack")
        .args(subnet("web", "vpc-main", "10.42.1.0/24"))
        .run()
        .then()
        .args(subnet("web6", "vpc-main-v6", v6cidr))
        .run()
        .then()
}

const DUAL: [&str; 10] = [
    "allocate",
    "vpc-main",
    "vpc-main-v6",
    "-n",
    "acme/prod",
    "--owner",
    "VirtualMachine/db-01/0",
    "--subnet",
    "web",
    "--subnet",
];

#[test]
fn a_dual_stack_nic_claims_a_subnet_in_each_family_in_one_request() {
    let mut args = DUAL.to_vec();
    args.push("web6");
    dual_stack_subnets("fd00:42:0:1::/64")
        .args(&args)
        .stdout("10.42.1.2\nfd00:42:0:1::2\n")
        .run()
        .then()
        // Asked again: the same two addresses, nothing written.
        .args(&args)
        .stdout("10.42.1.2\nfd00:42:0:1::2\n")
        .unchanged()
        .run();
}

#[test]
fn a_dual_stack_claim_whose_second_subnet_is_full_takes_nothing() {
    // web6 is a /127 whose gateway is its first address: one address left, taken first.
    let mut args = DUAL.to_vec();
    args.push("web6");
    let t = dual_stack_subnets("fd00:42:0:1::/127")
        .args([
            "allocate",
            "vpc-main-v6",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/other/0",
            "--subnet",
            "web6",
        ])
        .stdout("fd00:42:0:1::1\n")
        .run()
        .then();
    let ran = t.args(&args).fails(5).unchanged().run();
    assert!(
        ran.stderr.contains("subnet `web6`") && ran.stderr.contains("is exhausted"),
        "{}",
        ran.stderr
    );
}

#[test]
fn subnet_is_given_once_per_pool() {
    dual_stack_subnets("fd00:42:0:1::/64")
        .args(&DUAL[..9])
        .fails(2)
        .unchanged()
        .stderr("error: --subnet is given once per pool, in the order of the pools: 2 pools, 1 `--subnet`\n")
        .run()
        .then()
        .args([
            "allocate",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/x/0",
            "--subnet",
            "web",
            "--subnet",
            "web",
        ])
        .fails(2)
        .unchanged()
        .run();
}

#[test]
fn a_broken_file_that_names_the_owner_stops_its_claim_and_no_one_elses() {
    const UID: &str = "5a23c1d4-0b7e-4c8f-9f2a-6d1e3b4c5a69";
    let router = ["--owner", "VPC/router", "--uid", UID];
    let t = Test::new("seed")
        .file_store_only()
        .args(allocate(router[1], &router[2..]))
        .stdout("10.42.0.1\n")
        .run()
        .then();
    let file = "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-1.yaml";
    let mut text = t.read(file);
    text.push_str("garbage: [appended\n");
    t.write(file, &text);
    // The owner it may be: no second address, exit 1 naming the file and `ipamctl check`.
    let ran = t
        .args(allocate(router[1], &router[2..]))
        .fails(1)
        .unchanged()
        .run();
    assert!(
        ran.stderr.starts_with(&format!("error: {file}: does not parse and may be the allocation of `VPC/router` (it names its uid)"))
            && ran.stderr.contains("run `ipamctl check`"),
        "{}",
        ran.stderr
    );
    // The same owner without its uid is named by kind and name.
    let ran = ran
        .then()
        .args(allocate("VPC/router", &[]))
        .fails(1)
        .unchanged()
        .run();
    assert!(
        ran.stderr.contains("(it names its kind and name)"),
        "{}",
        ran.stderr
    );
    // Anyone else claims as before, past the broken file's address, with a warning.
    let ran = ran
        .then()
        .args(allocate("VirtualMachine/web-01/0", &[]))
        .stdout("10.42.0.2\n")
        .run();
    assert!(
        ran.stderr.contains("warning:") && ran.stderr.contains(file),
        "{}",
        ran.stderr
    );
}

#[test]
fn the_command_line_beats_the_environment() {
    // An exported IPAMCTL_STORE (a database nobody could reach) and `-d`: the directory.
    Test::new("seed")
        .file_store_only()
        .env("IPAMCTL_STORE", "postgresql://ipam@127.0.0.1:1/unreachable")
        .args(["pool", "list", "-o", "name"])
        .stdout("ipampool/public-zone-a\nipampool/vpc-main\n")
        .run()
        .then()
        // `-d` after the subcommand too.
        .no_state_flag()
        .env("IPAMCTL_STORE", "postgresql://ipam@127.0.0.1:1/unreachable")
        .args(["pool", "list", "-o", "name", "-d", "state"])
        .stdout("ipampool/public-zone-a\nipampool/vpc-main\n")
        .run()
        .then()
        // Both flags on the command line still name two stores.
        .args(["pool", "list", "--store", "postgresql://ipam@127.0.0.1:1/x"])
        .fails(2)
        .run();
}

/// An allocation manifest of pool `vpc-s` in `acme/s` for `10.9.H.L`, as ipamctl writes it.
fn vpc_s_allocation(i: usize) -> (String, String) {
    let (h, l) = (i / 250, 1 + i % 250);
    let name = format!("vpc-s-10-9-{h}-{l}");
    let text = format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAllocation\nmetadata:\n  name: {name}\n  namespace: acme/s\nspec:\n  pool: vpc-s\n  address: \"10.9.{h}.{l}\"\n  owner:\n    kind: VirtualMachine\n    name: vm-{i}/0\n"
    );
    (format!("namespaces/acme/s/ipallocations/{name}.yaml"), text)
}

#[test]
fn an_interrupted_vpc_delete_says_what_it_did_refuses_claims_and_a_second_run_finishes() {
    let t = Test::without_state()
        .file_store_only()
        .no_state_flag()
        .args(["init", "state"])
        .run()
        .then()
        .args([
            "vpc",
            "create",
            "s",
            "-n",
            "acme/s",
            "--cidr",
            "10.9.0.0/16",
        ])
        .run()
        .then()
        .args([
            "subnet",
            "create",
            "web",
            "-n",
            "acme/s",
            "--pool",
            "vpc-s",
            "--cidr",
            "10.9.200.0/24",
        ])
        .run()
        .then();
    // 3,000 allocations: the releases take a while, and SIGINT comes once they have begun.
    for i in 0..3000 {
        let (path, text) = vpc_s_allocation(i);
        t.write(&path, &text);
    }
    let pool_file = t.path("namespaces/acme/s/ipampools/vpc-s.yaml");
    let child = common::spawn_piped(t.command(["vpc", "delete", "s", "-n", "acme/s"]));
    // SIGINT once the pools are marked (the handler is installed before that).
    let marked = std::time::Instant::now();
    while !std::fs::read_to_string(&pool_file)
        .unwrap_or_default()
        .contains("deletionTimestamp")
    {
        assert!(marked.elapsed().as_secs() < 60, "the pool was never marked");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // … and releases have begun.
    let dir = t.path("namespaces/acme/s/ipallocations");
    while std::fs::read_dir(&dir).map_or(0, |d| d.count()) >= 3000 {
        assert!(marked.elapsed().as_secs() < 60, "no release began");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let out = child.wait_with_output().expect("vpc delete");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stdout}{stderr}");
    let released = stdout.lines().filter(|l| l.ends_with(" released")).count();
    assert!(
        released > 0 && released < 3000,
        "{released} released:\n{stderr}"
    );
    assert!(
        stderr.starts_with("error: interrupted: VPC `s` is partly deleted")
            && stderr.contains("hint: run `ipamctl vpc delete s -n acme/s` again to finish"),
        "{stderr}"
    );
    // The half-deleted VPC takes no claim, and check says why.
    let ran = t
        .args([
            "allocate",
            "vpc-s",
            "-n",
            "acme/s",
            "--owner",
            "VirtualMachine/new/0",
        ])
        .fails(4)
        .unchanged()
        .run();
    assert!(ran.stderr.contains("is being deleted"), "{}", ran.stderr);
    let ran = ran.then().args(["check"]).run();
    assert!(
        ran.stdout.contains("is being deleted since"),
        "{}",
        ran.stdout
    );
    // The second run finishes, listing the subnet it removes with the pool.
    let ran = ran
        .then()
        .args(["vpc", "delete", "s", "-n", "acme/s"])
        .run();
    assert!(
        ran.stdout
            .ends_with("subnet/web deleted\nipampool/vpc-s deleted\n"),
        "{}",
        ran.stdout
    );
    assert_eq!(
        ran.stdout
            .lines()
            .filter(|l| l.ends_with(" released"))
            .count(),
        3000 - released
    );
}

#[test]
fn names_that_do_not_exist_get_a_suggestion() {
    // An IPv6-only VPC, whose pool is asked for by its IPv4 name in the last case.
    let mut t = Test::new("subnets")
        .args([
            "vpc",
            "create",
            "v6only",
            "-n",
            "acme/prod",
            "--cidr",
            "fd00:99::/48",
        ])
        .run()
        .then();
    let claim = ["--owner", "FloatingIP/x", "-n", "acme/prod"];
    for (args, hint) in [
        (&["allocate", "vpc-mian"][..], "vpc-main"),
        (&["pool", "list", "-n", "acme/prdo"][..], "acme/prod"),
        (&["allocate", "vpc-main", "--subnet", "wbe"][..], "web"),
        (&["vpc", "get", "mian"][..], "main"),
        (&["allocate", "vpc-v6only"][..], "vpc-v6only-v6"),
    ] {
        let mut argv = args.to_vec();
        if args[0] == "allocate" {
            argv.extend(claim);
        } else if args[0] == "vpc" {
            argv.extend(["-n", "acme/prod"]);
        }
        let ran = t.args(&argv).fails(3).unchanged().run();
        assert!(
            ran.stderr
                .contains(&format!("hint: did you mean `{hint}`?")),
            "{argv:?}: {}",
            ran.stderr
        );
        t = ran.then();
    }
}
