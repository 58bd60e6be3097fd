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

/// The seed fixture with [`common::PROVIDER_V6`] applied.
fn with_provider() -> Test {
    let t = Test::new("seed");
    let file = t.input("provider.yaml", common::PROVIDER_V6);
    t.args(["apply", "-f", &file]).run().then()
}

/// `vpc create NAME -n acme/dev --from-pool provider-v6 --prefix-length 56 [extra...]`.
fn from_provider<'a>(name: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "vpc",
        "create",
        name,
        "-n",
        "acme/dev",
        "--from-pool",
        "provider-v6",
        "--prefix-length",
        "56",
    ];
    args.extend_from_slice(extra);
    args
}

/// The `vpc get -o json` of VPC `name` in acme/dev.
fn vpc_json(t: &Test, name: &str) -> serde_json::Value {
    let out = t
        .command(["vpc", "get", name, "-n", "acme/dev", "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A VPC's range drawn from a supernet: claimed by best fit, owned by `VPC/router` with the
/// VPC's uid, shown by `vpc get`/`vpc list`; the same VPC again gets the same range and uid;
/// `vpc delete` releases the range after the pool, and the next VPC gets it again.
#[test]
fn a_vpc_draws_its_range_from_a_supernet_and_gives_it_back_on_delete() {
    let ran = with_provider().args(from_provider("blue", &[])).run();
    let blue_uid = ran.stdout.trim().to_owned();
    assert!(
        ran.stderr.contains("(2001:db8::/56 of pool `provider-v6`)")
            && ran.stderr.ends_with("ipampool/vpc-blue-v6 created\n"),
        "{}",
        ran.stderr
    );
    let t = ran.then();
    let blue = vpc_json(&t, "blue");
    assert_eq!(blue["pools"][0]["spec"]["cidr"], "2001:db8::/56", "{blue}");
    assert_eq!(blue["ranges"][0]["spec"]["pool"], "provider-v6", "{blue}");
    assert_eq!(blue["ranges"][0]["spec"]["owner"]["kind"], "VPC", "{blue}");
    assert_eq!(blue["ranges"][0]["spec"]["owner"]["uid"], blue_uid.as_str());
    // A retry: the same uid, the same range, nothing written.
    let again = t
        .args(from_provider("blue", &[]))
        .stdout(&format!("{blue_uid}\n"))
        .unchanged()
        .run();
    let t = again.then().args(from_provider("red", &[])).run().then();
    assert_eq!(
        vpc_json(&t, "red")["pools"][0]["spec"]["cidr"],
        "2001:db8:0:100::/56"
    );
    let listed = t.args(["vpc", "list", "-n", "acme/dev"]).run();
    assert!(
        listed.stdout.contains("2001:db8::/56 (from provider-v6)"),
        "{}",
        listed.stdout
    );
    let deleted = listed
        .then()
        .args(["vpc", "delete", "blue", "-n", "acme/dev"])
        .run();
    assert!(
        deleted.stdout.ends_with("ipampool/vpc-blue-v6 deleted\nipprefixclaim/provider-v6-2001-0db8-0000-0000-0000-0000-0000-0000-56 released\n"),
        "{}",
        deleted.stdout
    );
    // The range is free again: the next VPC gets it.
    let t = deleted
        .then()
        .args(from_provider("green", &[]))
        .run()
        .then();
    assert_eq!(
        vpc_json(&t, "green")["pools"][0]["spec"]["cidr"],
        "2001:db8::/56"
    );
    t.args(["check"]).run();
}

/// A dual-stack VPC: its IPv4 range given, its IPv6 range drawn; a crash between the claim
/// and the pools (the pool's file gone) is mended by running it again, which adopts the
/// claim's uid and gets the same range, not a second one.
#[test]
fn a_vpc_create_run_again_after_a_crash_gets_the_range_it_claimed() {
    let ran = with_provider()
        .args(from_provider("blue", &["--cidr", "10.60.0.0/16"]))
        .run();
    let uid = ran.stdout.trim().to_owned();
    assert!(
        ran.stderr.contains("ipampool/vpc-blue created\n")
            && ran.stderr.contains("ipampool/vpc-blue-v6 created\n"),
        "{}",
        ran.stderr
    );
    let t = ran.then();
    // As if the process had died after its claim: neither pool was written.
    t.remove("namespaces/acme/dev/ipampools/vpc-blue.yaml");
    t.remove("namespaces/acme/dev/ipampools/vpc-blue-v6.yaml");
    let ran = t
        .args(from_provider("blue", &["--cidr", "10.60.0.0/16"]))
        .stdout(&format!("{uid}\n"))
        .run();
    assert!(
        ran.stderr.contains(
            "ipprefixclaim/provider-v6-2001-0db8-0000-0000-0000-0000-0000-0000-56 existing"
        ),
        "{}",
        ran.stderr
    );
    let t = ran.then();
    assert_eq!(
        vpc_json(&t, "blue")["pools"][1]["spec"]["cidr"],
        "2001:db8::/56"
    );
    let claims = t
        .files()
        .into_iter()
        .filter(|f| f.contains("ipprefixclaims/"))
        .count();
    assert_eq!(claims, 1, "one claim, not a second: {:?}", t.files());
    // Two ranges of one family, or a `--from-pool` without its length: exit 2.
    t.args(from_provider("bad", &["--cidr", "2001:db8:1::/56"]))
        .fails(code::INVALID)
        .unchanged()
        .run()
        .then()
        .args([
            "vpc",
            "create",
            "bad",
            "-n",
            "acme/dev",
            "--from-pool",
            "provider-v6",
            "--from-pool",
            "provider-v6",
            "--prefix-length",
            "56",
        ])
        .fails(code::INVALID)
        .unchanged()
        .run();
}

/// 16 `vpc create --from-pool` at once (real processes) from one /48: 16 distinct /56s,
/// every VPC with its own, and `check` clean.
#[test]
fn concurrent_vpc_creates_from_one_supernet_get_distinct_ranges() {
    let t = with_provider();
    let children: Vec<_> = (0..16)
        .map(|i| common::spawn_piped(t.command(from_provider(&format!("v{i}"), &[]))))
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    let mut ranges: Vec<String> = (0..16)
        .map(|i| {
            vpc_json(&t, &format!("v{i}"))["pools"][0]["spec"]["cidr"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    ranges.sort();
    ranges.dedup();
    assert_eq!(ranges.len(), 16, "{ranges:?}");
    let want: Vec<String> = (0..16)
        .map(|i| {
            if i == 0 {
                "2001:db8::/56".to_owned()
            } else {
                format!("2001:db8:0:{:x}00::/56", i)
            }
        })
        .collect();
    let mut want = want;
    want.sort();
    assert_eq!(ranges, want, "the lowest 16 /56s of the /48");
    t.args(["check"]).run();
}

/// A supernet hands out prefixes: a subnet of one, given or carved, is exit 2 saying how
/// to claim a child prefix instead.
#[test]
fn a_supernet_has_no_subnets() {
    let mut t = with_provider();
    for how in [["--cidr", "2001:db8::/64"], ["--prefix-length", "64"]] {
        let ran = t
            .args(["subnet", "create", "s", "--pool", "provider-v6"])
            .args(how)
            .fails(code::INVALID)
            .unchanged()
            .run();
        assert!(
            ran.stderr.contains("pool `provider-v6` is a supernet"),
            "{}",
            ran.stderr
        );
        t = ran.then();
    }
}

/// VPC `a` (dual stack) with VM `web/0` holding an address in each of its pools: the state
/// in which the name `a-v6` means VPC `a`'s IPv6 pool to a derivation that ignores identity.
fn dual_stack_vpc_a() -> common::Ran {
    Test::new("empty")
        .args(["vpc", "create", "a", "-n", "t"])
        .args(["--cidr", "10.70.0.0/16", "--cidr", "fd00:70::/48"])
        .run()
        .then()
        .args(["allocate", "vpc-a", "vpc-a-v6", "-n", "t"])
        .args(["--owner", "VirtualMachine/web/0"])
        .run()
}

/// Issue 31, finding 1: `vpc delete a-v6` deleted VPC `a`'s IPv6 pool (whose name is what
/// VPC `a-v6`'s IPv4 pool would be), released the VM's address, and exited 0; `vpc get a-v6`
/// answered with `a`'s uid. Now a VPC command acts only on pools whose owner reference is
/// the VPC asked for: there is no VPC `a-v6`, so both are "not found" and nothing changes.
#[test]
fn vpc_delete_or_get_of_a_v6_never_touches_vpc_a() {
    let ran = dual_stack_vpc_a();
    let ran = ran
        .then()
        .args(["vpc", "get", "a-v6", "-n", "t"])
        .fails(code::NOT_FOUND)
        .run();
    let ran = ran
        .then()
        .args(["vpc", "delete", "a-v6", "-n", "t"])
        .fails(code::NOT_FOUND)
        .run();
    assert!(ran.exists("namespaces/t/ipampools/vpc-a-v6.yaml"));
    let ran = ran
        .then()
        .args(["vpc", "get", "a", "-n", "t", "-o", "json"])
        .run();
    let vpc: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(vpc["pools"].as_array().map(Vec::len), Some(2), "{vpc}");
}

/// A VPC name ending in `-v6` would name its IPv4 pool as VPC `a`'s IPv6 pool: refused
/// (exit 2), so that no two VPCs map to one pool name.
#[test]
fn vpc_create_refuses_a_name_ending_in_v6() {
    let ran = dual_stack_vpc_a();
    ran.then()
        .args(["vpc", "create", "a-v6", "-n", "t", "--cidr", "10.71.0.0/16"])
        .fails(code::INVALID)
        .run();
    Test::new("empty")
        .args(["vpc", "create", "b-v6", "-n", "t", "--cidr", "10.71.0.0/16"])
        .fails(code::INVALID)
        .run();
}

/// State made before the rule (VPC `b-v6`, whose IPv4 pool is named `vpc-b-v6`, as VPC
/// `b`'s IPv6 pool would be): `check` warns about a VPC whose name could collide, and `vpc
/// get`/`vpc delete b-v6` still find that VPC's own pool by its owner reference.
#[test]
fn check_reports_a_vpc_named_like_another_vpcs_ipv6_pool() {
    let test = Test::new("empty");
    test.write(
        "namespaces/t/ipampools/vpc-b-v6.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: vpc-b-v6\n  namespace: t\n  ownerRefs:\n  - kind: VPC\n    uid: 0b0e7d1c-53b4-4f4c-9d43-1f3a2f6b1a11\n    name: b-v6\n    controller: true\nspec:\n  cidr: 10.72.0.0/16\n  kind: private\n",
    );
    let ran = test.args(["check"]).run();
    assert!(
        ran.stdout.contains("vpc-b-v6") && ran.stdout.contains("-v6"),
        "{}",
        ran.stdout
    );
    let ran = ran
        .then()
        .args(["vpc", "get", "b-v6", "-n", "t"])
        .stdout("0b0e7d1c-53b4-4f4c-9d43-1f3a2f6b1a11\n")
        .run();
    let ran = ran.then().args(["vpc", "delete", "b-v6", "-n", "t"]).run();
    assert!(!ran.exists("namespaces/t/ipampools/vpc-b-v6.yaml"));
}

/// `list` names a VPC's range and its router's uplink by the VPC (`VPC acme/dev/blue`) in its
/// table; another owner stays itself; JSON stays the manifests as stored (issue 33).
#[test]
fn list_names_a_vpcs_range_and_uplink_by_the_vpc() {
    let ran = with_provider().args(from_provider("blue", &[])).run();
    let uid = ran.stdout.trim().to_owned();
    let t = ran
        .then()
        .args([
            "allocate",
            "public-zone-a",
            "--owner",
            "VPC/router",
            "--uid",
            &uid,
        ])
        .run()
        .then()
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-9"])
        .run()
        .then();
    let table = t.args(["list", "-A"]).run();
    let rows: Vec<&str> = table.stdout.lines().collect();
    let uplink = rows
        .iter()
        .find(|r| r.contains("public-zone-a") && r.contains(&uid))
        .unwrap_or_else(|| panic!("no uplink row:\n{}", table.stdout));
    assert!(uplink.contains("VPC acme/dev/blue"), "{uplink}");
    let range = rows
        .iter()
        .find(|r| r.contains("2001:db8::/56"))
        .unwrap_or_else(|| panic!("no range row:\n{}", table.stdout));
    assert!(
        range.contains("VPC acme/dev/blue") && range.contains(&uid),
        "{range}"
    );
    assert!(
        rows.iter()
            .any(|r| r.contains("FloatingIP/fip-9") && !r.contains("VPC ")),
        "{}",
        table.stdout
    );
    // JSON and YAML stay the manifests as stored: the range's annotation names the VPC, and
    // both carry its uid.
    let t = table.then();
    let listed = t.command(["list", "-A", "-o", "json"]).output().unwrap();
    let list: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let items = list["items"].as_array().unwrap();
    let range = items
        .iter()
        .find(|i| i["kind"] == "IPPrefixClaim")
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(
        range["metadata"]["annotations"]["ipamctl.pivirt.hu/vpc"],
        "acme/dev/blue"
    );
    assert_eq!(range["spec"]["owner"]["uid"], uid.as_str());
    assert!(items.iter().all(|i| i.get("status").is_none()), "{list}");
}

/// Issue 44, item 5: `vpc create --mac-prefix` gives the VPC's pools their `macPrefix`, so
/// `allocate --mac auto` works on a fresh VPC without editing a pool; one per pool, IPv4's
/// first, a dual stack's two different; again with another prefix is a conflict naming it.
#[test]
fn vpc_create_mac_prefix_lets_mac_auto_work_in_the_vpc() {
    let create = ["vpc", "create", "a", "-n", "t"];
    let dual = ["--cidr", "10.70.0.0/16", "--cidr", "fd00:70::/48"];
    let ran = Test::new("empty")
        .args(create)
        .args(dual)
        .args(["--mac-prefix", "52:54:00", "--mac-prefix", "52:54:00"])
        .fails(code::INVALID)
        .unchanged()
        .run();
    assert!(ran.stderr.contains("different prefixes"), "{}", ran.stderr);
    let ran = ran
        .then()
        .args(create)
        .args(["--cidr", "10.70.0.0/16", "--mac-prefix", "52:54:00"])
        .args(["--mac-prefix", "02:42:ac"])
        .fails(code::INVALID)
        .unchanged()
        .run();
    assert!(
        ran.stderr.contains("at most one per pool"),
        "{}",
        ran.stderr
    );
    let ran = ran
        .then()
        .args(create)
        .args(dual)
        .args(["--mac-prefix", "53:54:00"])
        .fails(code::INVALID)
        .unchanged()
        .run();
    assert!(ran.stderr.contains("53:54:00"), "{}", ran.stderr);
    let ran = ran
        .then()
        .args(create)
        .args(dual)
        .args(["--mac-prefix", "52:54:00", "--mac-prefix", "02:42:ac"])
        .run();
    let ran = ran
        .then()
        .args(["allocate", "vpc-a", "vpc-a-v6", "-n", "t", "--mac", "auto"])
        .args(["--owner", "VirtualMachine/web/0", "-o", "json"])
        .run();
    let macs: Vec<String> = common::list_items(&ran.stdout)
        .iter()
        .map(|a| a["spec"]["mac"].as_str().unwrap_or("none").to_owned())
        .collect();
    assert_eq!(
        macs,
        ["52:54:00:46:00:01", "52:54:00:46:00:01"],
        "{}",
        ran.stdout
    );
    let ran = ran
        .then()
        .args(["allocate", "vpc-a-v6", "-n", "t", "--mac", "auto"])
        .args(["--owner", "VirtualMachine/db/0"])
        .run();
    let ran = ran
        .then()
        .args([
            "list",
            "-n",
            "t",
            "--owner",
            "VirtualMachine/db/0",
            "-o",
            "json",
        ])
        .run();
    let mac = common::list_items(&ran.stdout)[0]["spec"]["mac"].clone();
    assert!(
        mac.as_str().is_some_and(|m| m.starts_with("02:42:ac:")),
        "{mac}"
    );
    let ran = ran
        .then()
        .args(create)
        .args(dual)
        .args(["--mac-prefix", "52:54:00", "--mac-prefix", "02:42:ac"])
        .stderr("ipampool/vpc-a existing\nipampool/vpc-a-v6 existing\n")
        .unchanged()
        .run();
    let ran = ran
        .then()
        .args(create)
        .args(dual)
        .args(["--mac-prefix", "52:54:01"])
        .fails(code::CONFLICT)
        .unchanged()
        .run();
    assert!(
        ran.stderr
            .contains("pool `t/vpc-a` has macPrefix 52:54:00, not macPrefix 52:54:01"),
        "{}",
        ran.stderr
    );
}
