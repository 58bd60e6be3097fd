//! `ipamctl allocate`: which address comes out, idempotency, `--within`, `--reserved`,
//! `--address`, `--dry-run`, output formats, and the errors around them.

mod common;

use common::{Test, code, uid};

const VM: &str = "VirtualMachine/web-01/0";

/// `allocate vpc-main -n acme/prod --owner <owner> [extra...]`.
fn vpc_main<'a>(owner: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["allocate", "vpc-main", "-n", "acme/prod", "--owner", owner];
    args.extend_from_slice(extra);
    args
}

#[test]
fn allocate_prints_the_lowest_candidate_alone_on_stdout() {
    let ran = Test::new("seed")
        .args(vpc_main(VM, &["--uid", uid::WEB01]))
        .stdout("10.42.0.1\n")
        .stderr("")
        .run();
    assert_eq!(
        ran.files(),
        [
            "cluster/ipampools/public-zone-a.yaml",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-1.yaml",
            "namespaces/acme/prod/ipampools/vpc-main.yaml",
        ]
    );
    // Named `<pool>-<a-b-c-d>`, in the pool's namespace, labelled, owner split at the first `/`.
    insta::assert_snapshot!(common::redact_time(&ran.read("namespaces/acme/prod/ipallocations/vpc-main-10-42-0-1.yaml")), @r#"
    apiVersion: pivirt.hu/v1
    kind: IPAllocation
    metadata:
      name: vpc-main-10-42-0-1
      namespace: acme/prod
      creationTimestamp: "[TIME]"
      labels:
        pivirt.hu/managed-by: director
    spec:
      pool: vpc-main
      address: "10.42.0.1"
      owner:
        kind: VirtualMachine
        uid: 0f8fad5b-d9cb-469f-a165-70867728950e
        name: web-01/0
    "#);
}

#[test]
fn allocate_skips_gateway_and_excludes() {
    let ran = Test::new("seed")
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-1"])
        .stdout("203.0.113.4\n")
        .run();
    // A public pool's allocations are cluster-scoped: no namespace key.
    insta::assert_snapshot!(common::redact_time(&ran.read("cluster/ipallocations/public-zone-a-203-0-113-4.yaml")), @r#"
    apiVersion: pivirt.hu/v1
    kind: IPAllocation
    metadata:
      name: public-zone-a-203-0-113-4
      creationTimestamp: "[TIME]"
      labels:
        pivirt.hu/managed-by: director
    spec:
      pool: public-zone-a
      address: "203.0.113.4"
      owner:
        kind: FloatingIP
        name: fip-1
    "#);
}

#[test]
fn allocate_is_idempotent_for_the_same_owner() {
    Test::new("seed")
        .args(vpc_main(VM, &["--uid", uid::WEB01]))
        .stdout("10.42.0.1\n")
        .run()
        .then()
        .args(vpc_main(VM, &["--uid", uid::WEB01]))
        .stdout("10.42.0.1\n")
        .unchanged()
        .run();
}

#[test]
fn allocate_returns_the_held_address_in_a_populated_pool() {
    // web-02/0 holds 10.42.0.9 although lower addresses are free.
    Test::new("populated")
        .args(vpc_main("VirtualMachine/web-02/0", &["--uid", uid::WEB02]))
        .stdout("10.42.0.9\n")
        .run();
}

#[test]
fn allocate_fills_gaps_lowest_first() {
    // populated holds .2, .9 and .10 of vpc-main: new owners get .1, then .3.
    Test::new("populated")
        .args(vpc_main("VirtualMachine/db-01/0", &[]))
        .stdout("10.42.0.1\n")
        .run()
        .then()
        .args(vpc_main("VirtualMachine/db-02/0", &[]))
        .stdout("10.42.0.3\n")
        .run();
}

#[test]
fn allocate_identity_includes_the_uid() {
    // Same kind and name, another or a missing uid: not that owner, and not a second one
    // either (an owner's name is one identity per pool: `tests/cli_identity.rs`).
    let ran = Test::new("seed")
        .args(vpc_main(VM, &["--uid", uid::WEB01]))
        .stdout("10.42.0.1\n")
        .run()
        .then()
        .args(vpc_main(VM, &["--uid", uid::WEB02]))
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(vpc_main(VM, &[]))
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(vpc_main("VirtualMachine/web-02/0", &[]))
        .stdout("10.42.0.2\n")
        .run()
        .then()
        .args(vpc_main("VirtualMachine/web-02/0", &[]))
        .stdout("10.42.0.2\n")
        .run();
    // Without `--uid` the file has no `uid` key.
    let file = ran.read("namespaces/acme/prod/ipallocations/vpc-main-10-42-0-2.yaml");
    assert!(!file.contains("uid"), "{file}");
}

#[test]
fn allocate_from_a_pool_without_gateway_starts_after_cidr_excludes() {
    // lab/nogw is 10.0.0.0/24 without gateway, excluding 10.0.0.0/28 and 10.0.0.100.
    Test::new("small-pools")
        .args(["allocate", "nogw", "-n", "lab", "--owner", "FloatingIP/a"])
        .stdout("10.0.0.16\n")
        .run();
}

#[test]
fn allocate_without_gateway_or_excludes_starts_at_the_first_host() {
    Test::new("race")
        .args(["allocate", "race", "--owner", "FloatingIP/a"])
        .stdout("10.7.0.1\n")
        .run();
}

#[test]
fn allocate_skips_a_single_exclude_in_the_middle() {
    Test::new("small-pools")
        .args([
            "allocate",
            "nogw",
            "-n",
            "lab",
            "--owner",
            "FloatingIP/a",
            "--within",
            "10.0.0.96/29",
            "--reserved",
            "10.0.0.97",
            "--reserved",
            "10.0.0.98",
            "--reserved",
            "10.0.0.99",
        ])
        .stdout("10.0.0.101\n")
        .run();
}

#[test]
fn allocate_from_a_slash_31_gives_both_addresses_then_exhausts() {
    let ran = Test::new("small-pools")
        .args(["allocate", "p31", "--owner", "FloatingIP/a"])
        .stdout("198.51.100.0\n")
        .run()
        .then()
        .args(["allocate", "p31", "--owner", "FloatingIP/b"])
        .stdout("198.51.100.1\n")
        .run()
        .then()
        .args(["allocate", "p31", "--owner", "FloatingIP/c"])
        .fails(code::EXHAUSTED)
        .run();
    insta::assert_snapshot!(ran.stderr, @"error: pool `p31` is exhausted: no free address in 198.51.100.0-198.51.100.1");
}

#[test]
fn allocate_from_a_slash_32_gives_its_one_address() {
    Test::new("small-pools")
        .args(["allocate", "p32", "--owner", "FloatingIP/a"])
        .stdout("198.51.100.8\n")
        .run()
        .then()
        .args(["allocate", "p32", "--owner", "FloatingIP/b"])
        .fails(code::EXHAUSTED)
        .run();
}

#[test]
fn allocate_from_a_slash_30_skips_network_broadcast_and_gateway() {
    // 198.51.100.4/30 with gateway .5: only .6 is a candidate.
    Test::new("small-pools")
        .args(["allocate", "p30", "--owner", "FloatingIP/a"])
        .stdout("198.51.100.6\n")
        .run()
        .then()
        .args(["allocate", "p30", "--owner", "FloatingIP/b"])
        .fails(code::EXHAUSTED)
        .run();
}

#[test]
fn allocate_within_the_last_subnet_of_the_pool_skips_both_broadcasts() {
    // 10.42.255.252/30 ends the /16: its network (.252) and the shared broadcast (.255) are
    // never handed out.
    let within = ["--within", "10.42.255.252/30"];
    let ran = Test::new("seed")
        .args(vpc_main("VirtualMachine/a/0", &within))
        .stdout("10.42.255.253\n")
        .run()
        .then()
        .args(vpc_main("VirtualMachine/b/0", &within))
        .stdout("10.42.255.254\n")
        .run()
        .then()
        .args(vpc_main("VirtualMachine/c/0", &within))
        .fails(code::EXHAUSTED)
        .run();
    insta::assert_snapshot!(ran.stderr, @"error: pool `acme/prod/vpc-main` is exhausted: no free address in 10.42.255.253-10.42.255.254 (after `--within`/`--reserved`)");
}

#[test]
fn allocate_within_a_subnet_skips_its_network_address() {
    Test::new("populated")
        .args(vpc_main(
            "VirtualMachine/a/0",
            &["--within", "10.42.1.0/24"],
        ))
        .stdout("10.42.1.1\n")
        .run();
}

#[test]
fn allocate_within_outside_the_pool_is_invalid() {
    let ran = Test::new("seed")
        .args(vpc_main(VM, &["--within", "10.43.0.0/24"]))
        .fails(code::INVALID)
        .run();
    insta::assert_snapshot!(ran.stderr, @"error: --within: `10.43.0.0/24` does not lie inside pool `acme/prod/vpc-main` (10.42.0.0/16)");
}

#[test]
fn allocate_within_larger_than_the_pool_is_invalid() {
    Test::new("seed")
        .args(vpc_main(VM, &["--within", "10.0.0.0/8"]))
        .fails(code::INVALID)
        .run();
}

#[test]
fn allocate_skips_reserved_addresses() {
    Test::new("seed")
        .args(vpc_main(
            VM,
            &["--reserved", "10.42.0.1", "--reserved", "10.42.0.2"],
        ))
        .stdout("10.42.0.3\n")
        .run();
}

#[test]
fn allocate_address_claims_that_free_address() {
    let ran = Test::new("populated")
        .args(vpc_main(
            "VirtualMachine/db-01/0",
            &["--address", "10.42.0.5"],
        ))
        .stdout("10.42.0.5\n")
        .run();
    assert!(ran.exists("namespaces/acme/prod/ipallocations/vpc-main-10-42-0-5.yaml"));
    assert!(!ran.exists("namespaces/acme/prod/ipallocations/vpc-main-10-42-0-1.yaml"));
}

#[test]
fn allocate_address_held_by_another_owner_is_conflict() {
    let ran = Test::new("populated")
        .args(vpc_main(
            "VirtualMachine/db-01/0",
            &["--address", "10.42.0.9"],
        ))
        .fails(code::CONFLICT)
        .run();
    insta::assert_snapshot!(ran.stderr, @"error: 10.42.0.9 in pool `acme/prod/vpc-main` is held by `VirtualMachine/web-02/0`");
}

#[test]
fn allocate_address_already_held_by_the_same_owner_is_success() {
    Test::new("populated")
        .args(vpc_main(
            "VirtualMachine/web-02/0",
            &["--uid", uid::WEB02, "--address", "10.42.0.9"],
        ))
        .stdout("10.42.0.9\n")
        .run();
}

#[test]
fn allocate_address_that_is_not_a_candidate_is_invalid() {
    let cases = [
        ("public-zone-a", "203.0.113.1", "it is the pool's gateway"),
        ("public-zone-a", "203.0.113.2", "it is excluded by the pool"),
        (
            "public-zone-a",
            "203.0.113.0",
            "network or broadcast address",
        ),
        (
            "public-zone-a",
            "203.0.113.255",
            "network or broadcast address",
        ),
        ("public-zone-a", "198.51.100.7", "outside the pool's prefix"),
    ];
    for (pool, address, why) in cases {
        let ran = Test::new("seed")
            .args([
                "allocate",
                pool,
                "--owner",
                "FloatingIP/fip-1",
                "--address",
                address,
            ])
            .fails(code::INVALID)
            .run();
        assert!(ran.stderr.contains(why), "{address}: {}", ran.stderr);
    }
}

#[test]
fn allocate_address_inside_a_cidr_exclude_is_invalid() {
    Test::new("small-pools")
        .args([
            "allocate",
            "nogw",
            "-n",
            "lab",
            "--owner",
            "FloatingIP/a",
            "--address",
            "10.0.0.5",
        ])
        .stderr("error: --address: 10.0.0.5 is not a candidate of this request: it is excluded by the pool\n")
        .fails(code::INVALID)
        .run();
}

#[test]
fn allocate_address_outside_within_or_reserved_is_invalid() {
    let ran = Test::new("seed")
        .args(vpc_main(
            VM,
            &["--within", "10.42.1.0/24", "--address", "10.42.0.5"],
        ))
        .fails(code::INVALID)
        .run();
    assert!(ran.stderr.contains("outside `--within`"), "{}", ran.stderr);
    let ran = Test::new("seed")
        .args(vpc_main(
            VM,
            &["--reserved", "10.42.0.5", "--address", "10.42.0.5"],
        ))
        .fails(code::INVALID)
        .run();
    assert!(ran.stderr.contains("`--reserved`"), "{}", ran.stderr);
}

#[test]
fn allocate_for_an_owner_whose_address_breaks_within_is_conflict_naming_it() {
    let ran = Test::new("populated")
        .args(vpc_main(
            VM,
            &["--uid", uid::WEB01, "--within", "10.42.1.0/24"],
        ))
        .fails(code::CONFLICT)
        .run();
    insta::assert_snapshot!(ran.stderr, @r"
    error: owner `VirtualMachine/web-01/0` already holds 10.42.0.2 in pool `acme/prod/vpc-main`, which does not satisfy `--within`
    hint: release it first: ipamctl release vpc-main 10.42.0.2 -n acme/prod --owner VirtualMachine/web-01/0 --uid 0f8fad5b-d9cb-469f-a165-70867728950e
    ");
}

#[test]
fn allocate_for_an_owner_whose_address_breaks_address_or_reserved_is_conflict() {
    let ran = Test::new("populated")
        .args(vpc_main(
            VM,
            &["--uid", uid::WEB01, "--address", "10.42.0.3"],
        ))
        .fails(code::CONFLICT)
        .run();
    assert!(
        ran.stderr.contains("already holds 10.42.0.2"),
        "{}",
        ran.stderr
    );
    let ran = Test::new("populated")
        .args(vpc_main(
            VM,
            &["--uid", uid::WEB01, "--reserved", "10.42.0.2"],
        ))
        .fails(code::CONFLICT)
        .run();
    assert!(
        ran.stderr.contains("already holds 10.42.0.2"),
        "{}",
        ran.stderr
    );
}

#[test]
fn allocate_for_an_owner_whose_address_satisfies_the_request_returns_it() {
    Test::new("populated")
        .args(vpc_main(
            VM,
            &[
                "--uid",
                uid::WEB01,
                "--within",
                "10.42.0.0/24",
                "--reserved",
                "10.42.0.1",
            ],
        ))
        .stdout("10.42.0.2\n")
        .run();
}

#[test]
fn allocate_dry_run_prints_the_address_and_writes_nothing() {
    Test::new("seed")
        .args(vpc_main(VM, &["--dry-run"]))
        .stdout("10.42.0.1\n")
        .stderr("dry run: `VirtualMachine/web-01/0` would claim 10.42.0.1; nothing written\n")
        .unchanged()
        .run();
}

#[test]
fn allocate_dry_run_json_prints_the_manifest_it_would_write() {
    let ran = Test::new("populated")
        .args(vpc_main(
            "VirtualMachine/web-05/0",
            &["--dry-run", "-o", "json"],
        ))
        .unchanged()
        .run();
    insta::assert_snapshot!(ran.stdout);
}

#[test]
fn allocate_dry_run_for_an_owner_that_holds_an_address_reports_it() {
    Test::new("populated")
        .args(vpc_main(VM, &["--uid", uid::WEB01, "--dry-run"]))
        .stdout("10.42.0.2\n")
        .stderr("dry run: `VirtualMachine/web-01/0` already holds 10.42.0.2; nothing written\n")
        .run();
}

#[test]
fn allocate_dry_run_in_a_full_pool_is_exhausted() {
    Test::new("small-pools")
        .args(["allocate", "p32", "--owner", "FloatingIP/a"])
        .run()
        .then()
        .args(["allocate", "p32", "--owner", "FloatingIP/b", "--dry-run"])
        .fails(code::EXHAUSTED)
        .run();
}

#[test]
fn allocate_output_json_prints_the_manifest() {
    let ran = Test::new("seed")
        .args(vpc_main(VM, &["--uid", uid::WEB01, "-o", "json"]))
        .run();
    insta::assert_snapshot!(ran.stdout);
    let value: serde_json::Value = serde_json::from_str(&ran.stdout).expect("valid JSON");
    assert_eq!(value["spec"]["address"], "10.42.0.1");
}

#[test]
fn allocate_output_yaml_prints_the_file_as_written_and_what_was_done() {
    let ran = Test::new("seed")
        .args(vpc_main(VM, &["--uid", uid::WEB01, "-o", "yaml"]))
        .run();
    let file = common::redact_time(
        &ran.read("namespaces/acme/prod/ipallocations/vpc-main-10-42-0-1.yaml"),
    );
    assert_eq!(ran.stdout, format!("{file}status:\n  action: created\n"));
    // Asked again: the same allocation, which the owner already held.
    let again = ran
        .then()
        .args(vpc_main(VM, &["--uid", uid::WEB01, "-o", "yaml"]))
        .run();
    assert_eq!(again.stdout, format!("{file}status:\n  action: existing\n"));
}

#[test]
fn allocate_from_an_unknown_pool_is_not_found() {
    Test::new("seed")
        .args(["allocate", "nope", "--owner", "FloatingIP/fip-1"])
        .stderr("error: pool `nope` not found (cluster-scoped)\n")
        .fails(code::NOT_FOUND)
        .run();
}

#[test]
fn allocate_from_a_pool_in_another_scope_says_where_it_is() {
    let ran = Test::new("seed")
        .args(["allocate", "vpc-main", "--owner", VM])
        .fails(code::NOT_FOUND)
        .run();
    insta::assert_snapshot!(ran.stderr, @r"
    error: pool `vpc-main` not found (cluster-scoped)
    hint: a pool `vpc-main` exists in namespace `acme/prod` (pass `-n acme/prod`)
    ");
    let ran = Test::new("seed")
        .args([
            "allocate",
            "public-zone-a",
            "-n",
            "acme/prod",
            "--owner",
            "FloatingIP/fip-1",
        ])
        .fails(code::NOT_FOUND)
        .run();
    assert!(
        ran.stderr.contains("cluster-scoped (omit `-n`)"),
        "{}",
        ran.stderr
    );
}

#[test]
fn allocate_after_release_reuses_the_lowest_address() {
    Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "10.42.0.2",
            "-n",
            "acme/prod",
            "--force",
        ])
        .run()
        .then()
        .args(vpc_main(
            "VirtualMachine/db-01/0",
            &["--within", "10.42.0.0/28"],
        ))
        .stdout("10.42.0.1\n")
        .run()
        .then()
        .args(vpc_main(
            "VirtualMachine/db-02/0",
            &["--within", "10.42.0.0/28"],
        ))
        .stdout("10.42.0.2\n")
        .run();
}

#[test]
fn allocate_without_owner_is_a_usage_error() {
    let ran = Test::new("seed")
        .args(["allocate", "public-zone-a"])
        .status(code::INVALID)
        .run();
    assert!(ran.stderr.contains("--owner"), "{}", ran.stderr);
}
