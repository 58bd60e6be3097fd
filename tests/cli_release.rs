//! `ipamctl release`: one address, an owner's addresses, everything a uid holds; guards,
//! idempotency, and the errors (unknown pool, address outside the prefix, no selector).

mod common;

use common::{Test, code, uid};

const PROD: &str = "namespaces/acme/prod/ipallocations";

#[test]
fn release_address_deletes_only_that_allocation() {
    let test = Test::new("populated");
    let mut expected = test.files();
    expected.retain(|f| f != &format!("{PROD}/vpc-main-10-42-0-9.yaml"));
    let ran = test
        .args([
            "release",
            "vpc-main",
            "10.42.0.9",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-02/0",
        ])
        .stdout("ipallocation/vpc-main-10-42-0-9 released\n")
        .stderr("")
        .run();
    assert_eq!(ran.files(), expected);
}

#[test]
fn release_of_an_address_without_its_owner_names_the_holder_unless_forced() {
    let ran = Test::new("populated")
        .args(["release", "vpc-main", "10.42.0.9", "-n", "acme/prod"])
        .fails(code::INVALID)
        .unchanged()
        .stderr(
            "error: release of 10.42.0.9 in pool `acme/prod/vpc-main` names no owner; it is held by `VirtualMachine/web-02/0` (uid 6b3a1c9e-0d4f-4c1b-9f0e-2a7d5c8e1f30)\n\
             hint: guard it with its owner, which it then frees only if it still holds it: ipamctl release vpc-main 10.42.0.9 -n acme/prod --owner VirtualMachine/web-02/0 --uid 6b3a1c9e-0d4f-4c1b-9f0e-2a7d5c8e1f30; or pass `--force` to release it whoever holds it\n",
        )
        .run();
    ran.then()
        .args([
            "release",
            "vpc-main",
            "10.42.0.9",
            "-n",
            "acme/prod",
            "--force",
        ])
        .stdout("ipallocation/vpc-main-10-42-0-9 released\n")
        .run();
}

#[test]
fn a_mistyped_owner_releases_nothing_and_says_so() {
    Test::new("populated")
        .args(["release", "vpc-main", "-n", "acme/prod", "--owner", "VirtualMachine/web-20/0"])
        .fails(code::NOT_FOUND)
        .unchanged()
        .stderr(
            "error: no allocation matches the selectors; nothing released\n\
             hint: `ipamctl list` with the same selectors shows what they pick; `--ignore-not-found` makes this exit 0 for a release that may have happened already\n",
        )
        .run();
}

#[test]
fn release_is_idempotent() {
    Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "10.42.0.9",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-02/0",
        ])
        .stdout("ipallocation/vpc-main-10-42-0-9 released\n")
        .run()
        .then()
        .args([
            "release",
            "vpc-main",
            "10.42.0.9",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-02/0",
        ])
        .stdout("")
        .stderr(
            "note: 10.42.0.9 in pool `acme/prod/vpc-main` is not allocated; nothing to release\n",
        )
        .run();
}

#[test]
fn release_of_an_unheld_address_is_success_with_a_note() {
    Test::new("populated")
        .args(["release", "public-zone-a", "203.0.113.77"])
        .stdout("")
        .stderr("note: 203.0.113.77 in pool `public-zone-a` is not allocated; nothing to release\n")
        .unchanged()
        .run();
}

#[test]
fn release_with_a_matching_guard_deletes() {
    let ran = Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "10.42.0.2",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-01/0",
            "--uid",
            uid::WEB01,
        ])
        .stdout("ipallocation/vpc-main-10-42-0-2 released\n")
        .run();
    assert!(!ran.exists(&format!("{PROD}/vpc-main-10-42-0-2.yaml")));
}

#[test]
fn release_guarded_by_another_owner_is_conflict_and_deletes_nothing() {
    let ran = Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "10.42.0.2",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-02/0",
        ])
        .fails(code::CONFLICT)
        .run();
    insta::assert_snapshot!(ran.stderr, @"error: 10.42.0.2 in pool `acme/prod/vpc-main` is held by `VirtualMachine/web-01/0` (uid 0f8fad5b-d9cb-469f-a165-70867728950e), not by the given owner; nothing released");
}

#[test]
fn release_guarded_by_another_uid_is_conflict_and_deletes_nothing() {
    Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "10.42.0.2",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-01/0",
            "--uid",
            uid::WEB02,
        ])
        .fails(code::CONFLICT)
        .run();
    Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "10.42.0.2",
            "-n",
            "acme/prod",
            "--uid",
            uid::WEB02,
        ])
        .fails(code::CONFLICT)
        .run();
}

#[test]
fn release_guarded_by_a_uid_of_an_owner_without_uid_is_conflict() {
    // The Node allocation at 10.42.1.7 has no uid.
    Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "10.42.1.7",
            "-n",
            "acme/prod",
            "--uid",
            uid::WEB01,
        ])
        .fails(code::CONFLICT)
        .run();
}

#[test]
fn release_owner_in_a_pool_releases_that_owners_address() {
    let ran = Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-01/0",
            "--uid",
            uid::WEB01,
        ])
        .stdout("ipallocation/vpc-main-10-42-0-2 released\n")
        .run();
    // web-01's other NIC and its address in acme/dev stay.
    assert!(ran.exists(&format!("{PROD}/vpc-main-10-42-0-10.yaml")));
    assert!(ran.exists("namespaces/acme/dev/ipallocations/vpc-dev-10-50-0-2.yaml"));
}

/// `--owner` without `--uid` is a filter: the owner of that name whatever its uid, which in
/// a pool is one owner (a second identity of the name is refused its claim: issue 46).
#[test]
fn release_owner_without_uid_releases_that_owner_name_whatever_its_uid() {
    Test::new("populated")
        .args([
            "allocate",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-01/0",
        ])
        .fails(code::CONFLICT)
        .run()
        .then()
        .args([
            "release",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-01/0",
        ])
        .stdout("ipallocation/vpc-main-10-42-0-2 released\n")
        .run();
}

#[test]
fn release_owner_holding_nothing_in_the_pool_with_ignore_not_found_is_success_with_a_note() {
    Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/db-01/0",
            "--ignore-not-found",
        ])
        .stdout("")
        .stderr("note: no allocation matches; nothing to release\n")
        .run();
}

#[test]
fn release_uid_releases_everything_it_holds_across_namespaces() {
    let ran = Test::new("populated")
        .args(["release", "--uid", uid::WEB01])
        .stderr("")
        .run();
    insta::assert_snapshot!(ran.stdout, @r"
    ipallocation/vpc-dev-10-50-0-2 released
    ipallocation/vpc-main-10-42-0-2 released
    ipallocation/vpc-main-10-42-0-10 released
    ");
    insta::assert_snapshot!(ran.files().join("\n"), @r"
    cluster/ipallocations/public-zone-a-203-0-113-10.yaml
    cluster/ipallocations/public-zone-a-203-0-113-4.yaml
    cluster/ipampools/public-zone-a.yaml
    namespaces/acme/dev/ipampools/vpc-dev.yaml
    namespaces/acme/prod/ipallocations/vpc-main-10-42-0-9.yaml
    namespaces/acme/prod/ipallocations/vpc-main-10-42-1-7.yaml
    namespaces/acme/prod/ipampools/vpc-main.yaml
    ");
}

#[test]
fn release_uid_with_all_namespaces_flag_is_the_same_as_without() {
    let without = Test::new("populated")
        .args(["release", "--uid", uid::WEB01])
        .run();
    Test::new("populated")
        .args(["release", "--uid", uid::WEB01, "-A"])
        .stdout(&without.stdout)
        .run();
}

#[test]
fn release_uid_with_a_namespace_stays_in_it() {
    let ran = Test::new("populated")
        .args(["release", "--uid", uid::WEB01, "-n", "acme/prod"])
        .stdout(
            "ipallocation/vpc-main-10-42-0-2 released\nipallocation/vpc-main-10-42-0-10 released\n",
        )
        .run();
    assert!(ran.exists("namespaces/acme/dev/ipallocations/vpc-dev-10-50-0-2.yaml"));
}

#[test]
fn release_uid_covers_cluster_scoped_pools() {
    let ran = Test::new("populated")
        .args(["release", "--uid", uid::FIP1])
        .stdout("ipallocation/public-zone-a-203-0-113-4 released\n")
        .run();
    assert!(ran.exists("cluster/ipallocations/public-zone-a-203-0-113-10.yaml"));
}

#[test]
fn release_uid_holding_nothing_with_ignore_not_found_is_success_with_a_note() {
    Test::new("populated")
        .args([
            "release",
            "--uid",
            "00000000-0000-4000-8000-000000000000",
            "--ignore-not-found",
        ])
        .stdout("")
        .stderr("note: no allocation matches; nothing to release\n")
        .unchanged()
        .run();
}

#[test]
fn release_output_json_lists_the_released_manifests() {
    let ran = Test::new("populated")
        .args([
            "release",
            "--uid",
            uid::WEB01,
            "-n",
            "acme/dev",
            "-o",
            "json",
        ])
        .run();
    insta::assert_snapshot!(ran.stdout);
}

#[test]
fn release_from_an_unknown_pool_with_nothing_to_release_is_not_found() {
    Test::new("populated")
        .args(["release", "nope", "10.0.0.1"])
        .stderr("error: pool `nope` not found (cluster-scoped)\n")
        .fails(code::NOT_FOUND)
        .run();
    Test::new("populated")
        .args(["release", "nope", "--owner", "FloatingIP/fip-1"])
        .fails(code::NOT_FOUND)
        .run();
}

#[test]
fn release_from_a_pool_in_another_scope_says_where_it_is() {
    let ran = Test::new("populated")
        .args(["release", "vpc-main", "10.42.0.9"])
        .fails(code::NOT_FOUND)
        .run();
    assert!(ran.stderr.contains("pass `-n acme/prod`"), "{}", ran.stderr);
}

#[test]
fn release_of_an_address_outside_the_pool_prefix_is_invalid() {
    let ran = Test::new("populated")
        .args(["release", "vpc-main", "10.43.0.1", "-n", "acme/prod"])
        .fails(code::INVALID)
        .run();
    insta::assert_snapshot!(ran.stderr, @"error: ADDRESS: 10.43.0.1 is outside pool `acme/prod/vpc-main` (10.42.0.0/16)");
}

#[test]
fn release_without_a_selector_is_a_usage_error() {
    for args in [
        &["release"][..],
        &["release", "vpc-main", "-n", "acme/prod"],
    ] {
        Test::new("populated")
            .args(args)
            .stderr(
                "error: release needs `POOL ADDRESS` or a selector: `--owner KIND/NAME`, `--uid UID`, `--kind KIND`, `--tenant NS`, `--within CIDR` or `-l SELECTOR`\n\
                 hint: see `ipamctl release --help`; `--dry-run` shows what a selector picks\n",
            )
            .fails(code::INVALID)
            .run();
    }
}

#[test]
fn release_by_owner_needs_no_pool() {
    Test::new("populated")
        .args(["release", "--owner", "VPC/router"])
        .stdout("ipallocation/public-zone-a-203-0-113-10 released\n")
        .stderr("")
        .run()
        .then()
        .args([
            "release",
            "--owner",
            "VirtualMachine/web-01/",
            "-n",
            "acme/prod",
        ])
        .stdout(
            "ipallocation/vpc-main-10-42-0-2 released\nipallocation/vpc-main-10-42-0-10 released\n",
        )
        .run()
        .then()
        .args(["list", "-o", "name", "--kind", "VirtualMachine"])
        .stdout("ipallocation/vpc-dev-10-50-0-2\nipallocation/vpc-main-10-42-0-9\n")
        .run();
}

#[test]
fn release_by_kind_within_a_subnet() {
    Test::new("populated")
        .args([
            "release",
            "--kind",
            "VirtualMachine",
            "--within",
            "10.42.0.8/29",
        ])
        .stdout(
            "ipallocation/vpc-main-10-42-0-9 released\nipallocation/vpc-main-10-42-0-10 released\n",
        )
        .run();
}

/// A batch line's `within` is `--within`: the same selector, the same rules (not next to an
/// ADDRESS, a prefix or exit 2), and a teardown run again finds nothing to release.
#[test]
fn release_batch_lines_select_by_kind_within_a_subnet() {
    let t = Test::new("populated");
    let lines = t.input(
        "within.jsonl",
        concat!(
            r#"{"kind":"VirtualMachine","within":"10.42.0.8/29"}"#,
            "\n",
            r#"{"pool":"vpc-main","address":"10.42.0.2","within":"10.42.0.0/29"}"#,
            "\n",
            r#"{"kind":"VirtualMachine","within":"10.42.0.300/29"}"#,
            "\n",
            r#"{"kind":"VirtualMachine","within":"10.42.0.8/29"}"#,
            "\n",
        ),
    );
    let ran = t
        .args(["release", "-f", &lines, "-n", "acme/prod"])
        .status(code::FAILURE)
        .stdout(
            "LINE  OWNER  ADDRESS               RESULT\n\
             \x20  1  -      10.42.0.9,10.42.0.10  released\n\
             \x20  2  -      -                     error (exit 2): `--within` and `-l` select allocations; next to an ADDRESS only `--owner`, `--uid` and `--kind` guard it\n\
             \x20  3  -      -                     error (exit 2): --within: `10.42.0.300/29` is not a prefix like `10.0.0.0/16` or `fd00:42::/48`\n\
             \x20  4  -      -                     error (exit 3): no allocation matches the selectors; nothing released\n",
        )
        .stderr("error: 3 of 4 requests failed (exit 1)\n")
        .run();
    assert!(!ran.exists(&format!("{PROD}/vpc-main-10-42-0-9.yaml")));
    assert!(!ran.exists(&format!("{PROD}/vpc-main-10-42-0-10.yaml")));
    assert!(ran.exists(&format!("{PROD}/vpc-main-10-42-0-2.yaml")));
    assert!(ran.exists(&format!("{PROD}/vpc-main-10-42-1-7.yaml")));
}

#[test]
fn release_dry_run_prints_what_it_would_release_in_every_format_and_writes_nothing() {
    let dry = |format: &[&str]| {
        let mut args = vec!["release", "--uid", uid::WEB01, "--dry-run"];
        args.extend_from_slice(format);
        Test::new("populated").args(args).unchanged().run()
    };
    assert_eq!(
        dry(&[]).stdout,
        "ipallocation/vpc-dev-10-50-0-2 would-release\n\
         ipallocation/vpc-main-10-42-0-2 would-release\n\
         ipallocation/vpc-main-10-42-0-10 would-release\n"
    );
    let items = common::list_items(&dry(&["-o", "json"]).stdout);
    assert_eq!(items.len(), 3);
    assert!(
        items
            .iter()
            .all(|m| m["status"]["action"] == "would-release")
    );
    assert!(
        dry(&["-o", "yaml"])
            .stdout
            .contains("    action: would-release\n")
    );
    assert_eq!(dry(&["-o", "name"]).stdout.lines().count(), 3);
    // One address: as the release itself would, a guard that does not match is exit 4.
    Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "10.42.0.9",
            "-n",
            "acme/prod",
            "--dry-run",
            "--force",
        ])
        .stdout("ipallocation/vpc-main-10-42-0-9 would-release\n")
        .unchanged()
        .run();
    Test::new("populated")
        .args([
            "release",
            "vpc-main",
            "10.42.0.9",
            "-n",
            "acme/prod",
            "--dry-run",
            "--owner",
            "FloatingIP/x",
        ])
        .fails(code::CONFLICT)
        .run();
}

#[test]
fn release_in_a_pool_or_namespace_that_does_not_exist_is_not_found() {
    Test::new("populated")
        .args(["release", "typo", "--owner", "FloatingIP/fip-1"])
        .fails(code::NOT_FOUND)
        .run();
    Test::new("populated")
        .args(["release", "--uid", uid::WEB01, "-n", "acme/typo"])
        .fails(code::NOT_FOUND)
        .run();
}

#[test]
fn release_works_when_the_pool_manifest_is_gone() {
    // A state directory with allocations of a missing pool is one `import` refuses (issue
    // 21: what `check` rejects is not loaded); on PostgreSQL the case, a pool row deleted by
    // hand, is `tests/pg_operator.rs`'s.
    let test = Test::new("populated").file_store_only();
    test.remove("namespaces/acme/prod/ipampools/vpc-main.yaml");
    test.args([
        "release",
        "vpc-main",
        "10.42.0.9",
        "-n",
        "acme/prod",
        "--owner",
        "VirtualMachine/web-02/0",
    ])
    .stdout("ipallocation/vpc-main-10-42-0-9 released\n")
    .run()
    .then()
    .args([
        "release",
        "vpc-main",
        "-n",
        "acme/prod",
        "--owner",
        "Node/10.42.1.0/24",
    ])
    .stdout("ipallocation/vpc-main-10-42-1-7 released\n")
    .run()
    .then()
    // Nothing left and no manifest: the pool is simply unknown.
    .args(["release", "vpc-main", "10.42.1.7", "-n", "acme/prod"])
    .fails(code::NOT_FOUND)
    .run();
}

#[test]
fn released_address_can_be_allocated_again() {
    Test::new("small-pools")
        .args(["allocate", "p32", "--owner", "FloatingIP/a"])
        .stdout("198.51.100.8\n")
        .run()
        .then()
        .args(["release", "p32", "198.51.100.8", "--owner", "FloatingIP/a"])
        .stdout("ipallocation/p32-198-51-100-8 released\n")
        .run()
        .then()
        .args(["allocate", "p32", "--owner", "FloatingIP/b"])
        .stdout("198.51.100.8\n")
        .run();
}

/// A teardown retried: 300 NICs released by uid, then the same batch again with
/// `--ignore-not-found` (and two addresses nobody holds any more). Each request answers
/// `unchanged` in the table, and stderr gets one note with the count, not 302 of them.
#[test]
fn a_retried_teardown_batch_sums_its_notes_up_in_one_line() {
    let t = Test::new("populated");
    let uid = |i: usize| format!("00000000-0000-4000-8000-{i:012}");
    let claims: String = (0..300)
        .map(|i| {
            format!(
                "{{\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/vm-{i}/0\",\"uid\":\"{}\"}}\n",
                uid(i)
            )
        })
        .collect();
    let claims = t.input("claims.jsonl", &claims);
    let mut teardown: String = (0..300)
        .map(|i| format!("{{\"uid\":\"{}\"}}\n", uid(i)))
        .collect();
    let releases = t.input("teardown.jsonl", &teardown);
    let ran = t
        .args(["allocate", "-f", &claims, "-n", "acme/prod", "-o", "name"])
        .run()
        .then()
        .args(["release", "-f", &releases, "-n", "acme/prod", "-o", "name"])
        .stderr("")
        .run();
    assert_eq!(ran.stdout.lines().count(), 300, "{}", ran.stdout);
    teardown.push_str(
        "{\"pool\":\"vpc-main\",\"address\":\"10.42.0.200\",\"owner\":\"VirtualMachine/vm-0/0\"}\n",
    );
    teardown.push_str("{\"pool\":\"vpc-main\",\"address\":\"10.42.0.201\",\"uid\":\"00000000-0000-4000-8000-000000000001\"}\n");
    let t = ran.then();
    let retry = t.input("retry.jsonl", &teardown);
    let ran = t
        .args(["release", "-f", &retry, "-n", "acme/prod", "--ignore-not-found"])
        .stderr("note: 302 of 302 requests had nothing to release (no allocation matches, or the address or prefix is not held): each answers `unchanged`\n")
        .unchanged()
        .run();
    assert_eq!(
        ran.stdout.matches(" unchanged\n").count(),
        302,
        "{}",
        ran.stdout
    );
    // With `-o json` the results stream, and the note still comes once, at the end.
    let ran = ran
        .then()
        .args([
            "release",
            "-f",
            &retry,
            "-n",
            "acme/prod",
            "--ignore-not-found",
            "-o",
            "json",
        ])
        .unchanged()
        .run();
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    assert_eq!(
        ran.stdout.matches("\"unchanged\"").count(),
        302,
        "{}",
        ran.stdout
    );
    // One request alone says why, as before.
    ran.then()
        .args(["release", "--uid", &uid(7), "--ignore-not-found"])
        .stdout("")
        .stderr("note: no allocation matches; nothing to release\n")
        .unchanged()
        .run();
}
