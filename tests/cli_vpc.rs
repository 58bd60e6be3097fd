//! `vpc create|get|list|delete` as a retry loop sees them: a delete takes everything the VPC
//! owns (its router's uplinks in public pools too), and a repeated create or delete is
//! success, not a failure.

mod common;

use common::{Test, code, uid};

/// The `populated` fixture's VPC `main` (pool `acme/prod/vpc-main`) holds its router's
/// uplink 203.0.113.10 in the public pool `public-zone-a`.
const UPLINK: &str = "cluster/ipallocations/public-zone-a-203-0-113-10.yaml";

#[test]
fn vpc_delete_releases_the_router_uplink_and_dry_run_lists_it() {
    let test = Test::new("populated");
    assert!(test.exists(UPLINK));
    let ran = test
        .args(["vpc", "delete", "main", "-n", "acme/prod", "--dry-run"])
        .unchanged()
        .run();
    assert!(
        ran.stdout
            .starts_with("ipallocation/public-zone-a-203-0-113-10 would-release\n"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.ends_with("ipampool/vpc-main would-delete\n"),
        "{}",
        ran.stdout
    );
    let ran = ran
        .then()
        .args(["vpc", "delete", "main", "-n", "acme/prod"])
        .run();
    assert!(
        ran.stdout
            .starts_with("ipallocation/public-zone-a-203-0-113-10 released\n"),
        "{}",
        ran.stdout
    );
    assert!(!ran.exists(UPLINK));
    assert!(!ran.exists("namespaces/acme/prod/ipampools/vpc-main.yaml"));
    ran.then()
        .args(["list", "--uid", uid::VPC, "-A"])
        .stdout("")
        .stderr("No allocations found.\n")
        .run();
}

#[test]
fn vpc_delete_again_is_not_found_or_with_ignore_not_found_success() {
    let ran = Test::new("populated")
        .args(["vpc", "delete", "main", "-n", "acme/prod"])
        .run();
    let ran = ran
        .then()
        .args(["vpc", "delete", "main", "-n", "acme/prod"])
        .fails(code::NOT_FOUND)
        .run();
    ran.then()
        .args([
            "vpc",
            "delete",
            "main",
            "-n",
            "acme/prod",
            "--ignore-not-found",
        ])
        .stdout("")
        .stderr(
            "note: VPC `main` not found in namespace `acme/prod` (no pool `vpc-main`); nothing to delete\n",
        )
        .unchanged()
        .run();
}

#[test]
fn vpc_create_of_the_same_vpc_prints_its_uid_and_a_different_one_is_a_conflict() {
    fn create<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["vpc", "create", "blue", "-n", "acme/dev", "--cidr"];
        args.extend_from_slice(extra);
        args
    }
    let ran = Test::new("seed")
        .args(create(&["10.60.0.0/16"]))
        .stderr("ipampool/vpc-blue created\n")
        .run();
    let vpc_uid = ran.stdout.clone();
    assert_eq!(vpc_uid.trim().len(), 36, "{vpc_uid}");
    let ran = ran
        .then()
        .args(create(&["10.60.0.0/16"]))
        .stdout(&vpc_uid)
        .stderr("ipampool/vpc-blue existing\n")
        .unchanged()
        .run();
    let ran = ran
        .then()
        .args(create(&["10.60.0.0/16", "--uid", vpc_uid.trim()]))
        .stdout(&vpc_uid)
        .unchanged()
        .run();
    let ran = ran
        .then()
        .args(create(&["10.61.0.0/16"]))
        .fails(code::CONFLICT)
        .run();
    assert!(
        ran.stderr
            .contains("already exists in namespace `acme/dev` with CIDR 10.60.0.0/16"),
        "{}",
        ran.stderr
    );
    let ran = ran
        .then()
        .args(create(&[
            "10.60.0.0/16",
            "--uid",
            "00000000-0000-4000-8000-000000000001",
        ]))
        .fails(code::CONFLICT)
        .run();
    ran.then()
        .args(["vpc", "get", "blue", "-n", "acme/dev"])
        .stdout(&vpc_uid)
        .run();
}

#[test]
fn vpc_get_prints_the_uid_and_in_json_the_pool_and_uplinks() {
    let ran = Test::new("populated")
        .args(["vpc", "get", "main", "-n", "acme/prod"])
        .stdout(&format!("{}\n", uid::VPC))
        .run();
    let ran = ran
        .then()
        .args(["vpc", "get", "main", "-n", "acme/prod", "-o", "json"])
        .run();
    let vpc: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(vpc["kind"], "VPC");
    assert_eq!(vpc["metadata"]["uid"], uid::VPC);
    assert_eq!(vpc["pools"][0]["spec"]["cidr"], "10.42.0.0/16");
    assert_eq!(vpc["uplinks"][0]["spec"]["address"], "203.0.113.10");
    let ran = ran
        .then()
        .args(["vpc", "list"])
        .stdout(&format!(
            "NAMESPACE  NAME  UID                                   CIDR          UPLINKS\n\
             acme/prod  main  {}  10.42.0.0/16  public-zone-a/203.0.113.10\n",
            uid::VPC
        ))
        .run();
    ran.then()
        .args(["vpc", "get", "blue", "-n", "acme/prod"])
        .fails(code::NOT_FOUND)
        .run();
}
