//! `reconcile`'s guards against a wrong live list: lines that are no owner, the cap on one
//! run, report mode as a CI gate, and claims made after the list was taken.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::budget::Budget;
use common::{Test, code, uid};

/// Taken long after every allocation of the fixtures (which have no creation time and so
/// count as old): only the owner decides.
const LATER: [&str; 4] = ["--live-as-of", "2099-01-01T00:00:00Z", "--min-age", "0"];

/// Every owner of the `populated` fixture but `FloatingIP/fip-1`, the router uplink, web-02's
/// NIC and the Node: 4 of its 7 allocations leak.
fn only_web01() -> String {
    format!("{}\n", uid::WEB01)
}

#[test]
fn reconcile_fed_hostnames_is_exit_2_naming_the_line_and_releases_nothing() {
    let test = Test::new("populated");
    // `virsh list --name` instead of `--uuid`: hostnames, none of them an owner.
    let live = test.input("live.txt", "web-01\nweb-02\n");
    let ran = test
        .args([
            "reconcile",
            "--live",
            &live,
            "--apply",
            "--max-release",
            "100%",
        ])
        .args(LATER)
        .fails(code::INVALID)
        .run();
    assert!(
        ran.stderr.starts_with(
            "error: --live live.txt: line 1 `web-01`: is neither `KIND/NAME` nor a UUID"
        ),
        "{}",
        ran.stderr
    );
}

/// The cap's review hint for a list read from stdin feeds the list again with the same
/// `--live-as-of` (`--live -` without it is exit 2, so the hint as it was printed failed).
#[test]
fn the_cap_hint_for_a_list_on_stdin_names_the_same_live_as_of() {
    let test = Test::new("populated");
    let ran = test
        .args(["reconcile", "--live", "-", "--apply", "--all-kinds"])
        .args(LATER)
        .stdin(&only_web01())
        .fails(code::CONFLICT)
        .run();
    assert!(
        ran.stderr.contains(
            "review them with `LIST | ipamctl reconcile --live - --live-as-of 2099-01-01T00:00:00Z --all-kinds` (the same list again, no `--apply`)"
        ),
        "{}",
        ran.stderr
    );
    // The review runs as hinted, with the list fed again.
    let ran = ran
        .then()
        .args([
            "reconcile",
            "--live",
            "-",
            "--live-as-of",
            "2099-01-01T00:00:00Z",
            "--all-kinds",
        ])
        .args(["--min-age", "0"])
        .stdin(&only_web01())
        .status(code::FAILURE)
        .run();
    assert!(ran.stdout.contains("fip-1"), "{}", ran.stdout);
}

#[test]
fn reconcile_apply_refuses_more_than_the_cap_and_says_how_to_raise_it() {
    let test = Test::new("populated");
    let live = test.input("live.txt", &only_web01());
    // 4 of 7 leak; the default cap is 25% of 7, rounded up: 2.
    // Every kind judged, as a list of every owner would be: the cap is the guard under test.
    let ran = test
        .args(["reconcile", "--live", &live, "--apply", "--all-kinds"])
        .args(LATER)
        .fails(code::CONFLICT)
        .run();
    assert!(
        ran.stderr.starts_with(
            "error: 4 of 7 allocations checked look leaked, more than `--max-release 25%` allows (2); nothing released"
        ),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("pass `--max-release 4`"),
        "{}",
        ran.stderr
    );
    // The review it hints at judges what this run judged.
    assert!(
        ran.stderr
            .contains("review them with `ipamctl reconcile --live live.txt --all-kinds`"),
        "{}",
        ran.stderr
    );
    // A dry run checks what the real run would: refused too; so is a cap one too low.
    let mut ran = ran;
    for refused in [&["--dry-run"][..], &["--max-release", "3"]] {
        ran = ran
            .then()
            .args(["reconcile", "--live", &live, "--apply", "--all-kinds"])
            .args(refused)
            .args(LATER)
            .fails(code::CONFLICT)
            .run();
    }
    let apply = [
        "reconcile",
        "--live",
        &live,
        "--apply",
        "--all-kinds",
        "--max-release",
        "4",
    ];
    let ran = ran.then().args(apply).args(LATER).run();
    assert_eq!(
        ran.stdout.matches(" released\n").count(),
        4,
        "{}",
        ran.stdout
    );
    let left = ran.then().args(["list", "-o", "name"]).run();
    assert_eq!(left.stdout.lines().count(), 3, "{}", left.stdout);
}

#[test]
fn reconcile_max_release_must_be_a_count_or_a_percentage() {
    let test = Test::new("populated");
    let live = test.input("live.txt", &only_web01());
    let ran = test
        .args([
            "reconcile",
            "--live",
            &live,
            "--apply",
            "--max-release",
            "all",
        ])
        .fails(code::INVALID)
        .run();
    assert!(ran.stderr.contains("invalid cap `all`"), "{}", ran.stderr);
}

#[test]
fn reconcile_report_exits_1_on_leaks_and_0_without_counting_unmatched_lines() {
    let test = Test::new("populated");
    let live = test.input("live.txt", &only_web01());
    let ran = test
        .args(["reconcile", "--live", &live, "--all-kinds"])
        .args(LATER)
        .status(code::FAILURE)
        .unchanged()
        .run();
    assert_eq!(ran.stdout.matches(" leaked\n").count(), 4, "{}", ran.stdout);
    let everyone = format!(
        "{}\n{}\n{}\n{}\nNode/10.42.1.0/24\n# a VM that holds nothing\n3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5c\n",
        uid::WEB01,
        uid::WEB02,
        uid::FIP1,
        uid::VPC
    );
    let next = ran.then();
    let live = next.input("everyone.txt", &everyone);
    next.args(["reconcile", "--live", &live])
        .args(LATER)
        .stdout("")
        .stderr(
            "checked 7 allocations: 0 leaked, 0 released; 5 of 6 live lines matched an allocation\n",
        )
        .run();
}

#[test]
fn reconcile_from_stdin_needs_live_as_of() {
    let ran = Test::new("populated")
        .args(["reconcile", "--live", "-", "--apply"])
        .stdin(&only_web01())
        .fails(code::INVALID)
        .run();
    assert!(
        ran.stderr
            .starts_with("error: `--live -` needs `--live-as-of TIME`"),
        "{}",
        ran.stderr
    );
    // A pipe given by path (`<(virsh list …)`, /dev/stdin) has no time of taking either.
    let ran = ran
        .then()
        .args(["reconcile", "--live", "/dev/stdin", "--apply"])
        .stdin(&only_web01())
        .fails(code::INVALID)
        .run();
    assert!(
        ran.stderr
            .starts_with("error: `--live /dev/stdin` needs `--live-as-of TIME`"),
        "{}",
        ran.stderr
    );
    let ran = ran
        .then()
        .args(["reconcile", "--live", "-", "--live-as-of", "yesterday"])
        .stdin(&only_web01())
        .fails(code::INVALID)
        .run();
    assert!(
        ran.stderr.contains("invalid time `yesterday`"),
        "{}",
        ran.stderr
    );
}

#[test]
fn reconcile_leaves_allocations_younger_than_min_age_alone() {
    let test = Test::new("populated");
    let live = test.input(
        "live.txt",
        &format!(
            "{}\n{}\n{}\n{}\nNode/10.42.1.0/24\n",
            uid::WEB01,
            uid::WEB02,
            uid::FIP1,
            uid::VPC
        ),
    );
    let ran = test
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fresh"])
        .run();
    let fresh = ran.stdout.trim().to_owned();
    // The list is dated after the claim: only `--min-age` (5m by default) keeps it.
    let late = ["--live-as-of", "2099-01-01T00:00:00Z"];
    let ran = ran
        .then()
        .args(["reconcile", "--live", &live, "--apply"])
        .args(late)
        .unchanged()
        .run();
    assert!(
        ran.stderr.starts_with(
            "checked 8 allocations: 0 leaked, 0 released; 1 allocations of unlisted owners kept"
        ),
        "{}",
        ran.stderr
    );
    let ran = ran
        .then()
        .args([
            "reconcile",
            "--live",
            &live,
            "--apply",
            "--min-age",
            "0",
            "-o",
            "name",
        ])
        .args(late)
        .run();
    assert_eq!(
        ran.stdout,
        format!("ipallocation/public-zone-a-{}\n", fresh.replace('.', "-"))
    );
}

/// The race of Whereabouts issues 162, 176 and 207: the live list is taken, then a new owner
/// claims, then reconcile runs with the list that could not name it. With real processes:
/// the claim runs beside reconcile, landing before or after reconcile lists the allocations;
/// either way it survives. (Before `--live-as-of`, a claim that landed first was released.)
#[test]
fn a_live_list_taken_before_a_concurrent_claim_never_releases_that_claim() {
    // Every round, in at most 90 s.
    let rounds = Budget::new("reconcile rounds", 6, Duration::from_secs(90)).at_least(6);
    for round in rounds.rounds() {
        let test = Test::new("populated").file_store_only();
        let everyone = format!(
            "{}\n{}\n{}\n{}\nNode/10.42.1.0/24\n",
            uid::WEB01,
            uid::WEB02,
            uid::FIP1,
            uid::VPC
        );
        // The live list is taken (its modification time is when) ...
        let live = test.input("live.txt", &everyone);
        if round % 2 == 1 {
            // ... a second or more before the claim, or within the same second.
            std::thread::sleep(std::time::Duration::from_millis(1100));
        }
        // ... then a new owner claims, while reconcile --apply runs with that list.
        let owner = format!("FloatingIP/new-{round}");
        let claim = test
            .command(["allocate", "public-zone-a", "--owner", &owner])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start allocate");
        if round >= 2 {
            // Give the claim a head start, so that reconcile lists it in some rounds.
            std::thread::sleep(std::time::Duration::from_millis(40 * round as u64));
        }
        let reconcile = test
            .command([
                "reconcile",
                "--live",
                &live,
                "--apply",
                "--min-age",
                "0",
                "--max-release",
                "100%",
            ])
            .output()
            .expect("run reconcile");
        let claimed = claim.wait_with_output().expect("wait for allocate");
        assert!(claimed.status.success(), "round {round}");
        assert!(reconcile.status.success(), "round {round}: {reconcile:?}");
        let address = String::from_utf8(claimed.stdout).expect("UTF-8");
        let held = test
            .command(["list", "--owner", &owner, "-o", "name"])
            .output()
            .expect("run list");
        assert_eq!(
            String::from_utf8(held.stdout).expect("UTF-8"),
            format!(
                "ipallocation/public-zone-a-{}\n",
                address.trim().replace('.', "-")
            ),
            "round {round}: the claim made after the live list was taken was released: {}",
            String::from_utf8_lossy(&reconcile.stderr)
        );
    }
}

#[test]
fn the_summary_counts_the_live_lines_that_matched_without_a_double_negative() {
    let test = Test::new("populated");
    let live = test.input(
        "live.txt",
        &format!("{}\nVirtualMachine/gone/0\n", uid::WEB01),
    );
    let ran = test
        .args(["reconcile", "--live", &live])
        .args(LATER)
        .status(code::FAILURE)
        .unchanged()
        .run();
    assert!(
        ran.stderr
            .ends_with("; 1 of 2 live lines matched an allocation\n"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("no allocation"), "{}", ran.stderr);
}

#[test]
fn a_malformed_line_is_quoted_as_a_short_escaped_excerpt_with_its_line_number() {
    let test = Test::new("populated");
    // 4 KB of a kind that does not exist, with a terminal escape in it.
    let junk = format!("Pod/\u{1b}[31m{}", "x".repeat(4096));
    let live = test.input("live.txt", &format!("{}\n{junk}\n", uid::WEB01));
    let ran = test
        .args(["reconcile", "--live", &live, "--apply"])
        .args(LATER)
        .fails(code::INVALID)
        .run();
    let chars = junk.chars().count();
    assert!(
        ran.stderr.contains(&format!(
            "line 2 `Pod/\\u{{1b}}[31m{}…` ({chars} characters): unknown owner kind `Pod`",
            "x".repeat(51)
        )),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.len() < 400,
        "{} bytes:\n{}",
        ran.stderr.len(),
        ran.stderr
    );
    assert!(
        !ran.stderr.contains('\u{1b}'),
        "the escape is quoted, not sent"
    );
    // A name that a reason quotes in full is cut too.
    let test = ran.then();
    let long = format!("VirtualMachine/{}/0", "a".repeat(4096));
    let live = test.input("long.txt", &format!("{long}\n"));
    let ran = test
        .args(["reconcile", "--live", &live, "--apply"])
        .args(LATER)
        .fails(code::INVALID)
        .run();
    assert!(ran.stderr.starts_with("error: --live "), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("line 1 `VirtualMachine/aaaa"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.len() < 400,
        "{} bytes:\n{}",
        ran.stderr.len(),
        ran.stderr
    );
}

/// A list of VMs (`virsh list --all --uuid`) speaks for VMs only: without `--kind`, the
/// floating IP, the VPC router's uplink and the node it does not name are never reported
/// leaked, nor released whatever the cap; the summary says what was left alone and how to
/// judge it. `--kind` judges one kind, `--all-kinds` every kind, as the run before did.
#[test]
fn a_vm_list_never_flags_floating_ips_unless_asked_to() {
    let test = Test::new("populated");
    let vms = test.input("vms.txt", &only_web01());
    let ran = test
        .args(["reconcile", "--live", &vms])
        .args(LATER)
        .status(code::FAILURE)
        .unchanged()
        .run();
    // web-02's NIC is the one VM allocation whose owner the list does not name.
    assert_eq!(
        ran.stdout,
        "NAMESPACE  POOL      ADDRESS    OWNER                    UID                                   ACTION\n\
         acme/prod  vpc-main  10.42.0.9  VirtualMachine/web-02/0  6b3a1c9e-0d4f-4c1b-9f0e-2a7d5c8e1f30  leaked\n"
    );
    assert_eq!(
        ran.stderr,
        "checked 4 allocations: 1 leaked, 0 released; 3 allocations of kinds the live list does not name left alone (FloatingIP 1, VPC 1, Node 1): pass `--kind KIND` or `--all-kinds` to judge them; 1 of 1 live lines matched an allocation\n"
    );
    // Even with no cap at all, --apply releases web-02's NIC alone.
    let ran = ran
        .then()
        .args([
            "reconcile",
            "--live",
            &vms,
            "--apply",
            "--max-release",
            "100%",
        ])
        .args(LATER)
        .run();
    assert_eq!(
        ran.stdout.matches(" released\n").count(),
        1,
        "{}",
        ran.stdout
    );
    let left = ran
        .then()
        .args(["list", "--kind", "FloatingIP", "-o", "name"])
        .run();
    assert_eq!(left.stdout, "ipallocation/public-zone-a-203-0-113-4\n");
    // Asked for: one kind, or every kind.
    let fips = left
        .then()
        .args(["reconcile", "--live", &vms, "--kind", "FloatingIP"])
        .args(LATER)
        .status(code::FAILURE)
        .run();
    assert!(fips.stdout.contains("FloatingIP/fip-1"), "{}", fips.stdout);
    assert!(
        fips.stderr.starts_with("checked 1 allocations: 1 leaked"),
        "{}",
        fips.stderr
    );
    let all = fips
        .then()
        .args(["reconcile", "--live", &vms, "--all-kinds"])
        .args(LATER)
        .status(code::FAILURE)
        .run();
    assert!(
        all.stderr.starts_with("checked 6 allocations: 3 leaked"),
        "{}",
        all.stderr
    );
    let both = all
        .then()
        .args(["reconcile", "--live", &vms, "--all-kinds", "--kind", "Node"])
        .status(code::INVALID)
        .unchanged()
        .run();
    assert!(
        both.stderr
            .contains("'--all-kinds' cannot be used with '--kind <KIND>'"),
        "{}",
        both.stderr
    );
}

/// A list that names no kind (its uids hold nothing in scope, or it is empty) speaks for
/// none: exit 2 naming the flags that say which, and nothing released.
#[test]
fn a_live_list_that_names_no_kind_is_refused_without_kind_or_all_kinds() {
    let test = Test::new("populated");
    let strangers = test.input("strangers.txt", "3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5c\n");
    let ran = test
        .args([
            "reconcile",
            "--live",
            &strangers,
            "--apply",
            "--max-release",
            "100%",
        ])
        .args(LATER)
        .fails(code::INVALID)
        .run();
    assert_eq!(
        ran.stderr.lines().next().unwrap_or_default(),
        "error: --live strangers.txt names no kind of owner: no `KIND/NAME` line, and none of its uids holds an allocation in scope; nothing checked",
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("`--kind KIND`") && ran.stderr.contains("`--all-kinds`"),
        "{}",
        ran.stderr
    );
    let ran = ran
        .then()
        .args([
            "reconcile",
            "--live",
            &strangers,
            "--kind",
            "VirtualMachine",
        ])
        .args(LATER)
        .status(code::FAILURE)
        .unchanged()
        .run();
    assert!(
        ran.stderr.starts_with("checked 4 allocations: 4 leaked"),
        "{}",
        ran.stderr
    );
}
