//! The reuse cooldown (`IPAMPool.spec.reuseAfter`), across real processes: a released address
//! is skipped by other owners, returned to its owner, and handed out again after the window;
//! the records travel as state files, and a race between a release and other owners' claims
//! never hands the address over early.

mod common;

use std::time::Duration;

use common::budget::Budget;
use common::{Test, code, spawn_piped};

/// A public pool `edge` of four candidates with the given `reuseAfter` (none if empty).
fn pool(reuse_after: &str) -> String {
    let reuse = if reuse_after.is_empty() {
        String::new()
    } else {
        format!("  reuseAfter: {reuse_after}\n")
    };
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: edge\nspec:\n  cidr: 198.51.100.0/29\n  kind: public\n  gateway: 198.51.100.1\n{reuse}"
    )
}

/// The seed fixture with pool `edge`.
fn with_edge(reuse_after: &str) -> Test {
    let t = Test::new("seed");
    let input = t.input("edge.yaml", &pool(reuse_after));
    t.args(["apply", "-f", &input]).run().then()
}

/// Pool `edge` with the given `reuseAfter`, after `FloatingIP/a` claimed 198.51.100.2 and
/// released it: the record is written.
fn with_a_release(reuse_after: &str) -> Test {
    with_edge(reuse_after)
        .args(allocate("FloatingIP/a"))
        .stdout("198.51.100.2\n")
        .run()
        .then()
        .args(["release", "edge", "198.51.100.2", "--force"])
        .run()
        .then()
}

fn allocate(owner: &str) -> Vec<String> {
    ["allocate", "edge", "--owner", owner]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

const RECORD: &str = "cluster/cooldown/edge-198-51-100-2.yaml";

#[test]
fn a_released_address_waits_out_the_window_except_for_its_owner() {
    // A window long enough for the steps below on a loaded machine (and on PostgreSQL,
    // where the harness imports and exports the state around every command)...
    let t = with_edge("10m")
        .args(allocate("FloatingIP/a"))
        .stdout("198.51.100.2\n")
        .run()
        .then()
        .args(["release", "edge", "198.51.100.2", "--force"])
        .run()
        .then();
    // The record is a state file, committed with the rest: the window travels through git.
    let record = t.read(RECORD);
    assert!(record.contains("kind: CooldownRecord"), "{record}");
    assert!(record.contains("releasedAt:"), "{record}");
    // Another owner skips it (lowest first would have given .2).
    let t = t
        .args(allocate("FloatingIP/b"))
        .stdout("198.51.100.3\n")
        .run()
        .then()
        // `--address` of a cooling address is a conflict, not a silent reuse.
        .args([
            "allocate",
            "edge",
            "--owner",
            "FloatingIP/c",
            "--address",
            "198.51.100.2",
        ])
        .fails(code::CONFLICT)
        .run()
        .then()
        // Its owner gets it back within the window, and the record goes.
        .args(allocate("FloatingIP/a"))
        .stdout("198.51.100.2\n")
        .run()
        .then();
    assert!(!t.exists(RECORD));
    // Released again: skipped by the next owner.
    let t = t
        .args(["release", "edge", "198.51.100.2", "--force"])
        .run()
        .then()
        .args(allocate("FloatingIP/c"))
        .stdout("198.51.100.4\n")
        .run()
        .then();
    // ...then a short window: once it has passed, lowest first gives the address to anyone.
    let short = t.input("short.yaml", &pool("1s"));
    let t = t.args(["apply", "-f", &short]).run().then();
    std::thread::sleep(Duration::from_secs(2));
    let t = t
        .args(allocate("FloatingIP/d"))
        .stdout("198.51.100.2\n")
        .run()
        .then();
    assert!(
        !t.exists(RECORD),
        "a stale record is removed when its address is claimed"
    );
}

#[test]
fn without_reuse_after_a_released_address_is_handed_out_at_once() {
    let t = with_a_release("")
        .args(allocate("FloatingIP/b"))
        .stdout("198.51.100.2\n")
        .run()
        .then();
    assert!(!t.exists(RECORD));
}

#[test]
fn exhaustion_counts_the_addresses_cooling_down() {
    let mut t = with_edge("1h");
    for (i, addr) in ["2", "3", "4", "5", "6"].iter().enumerate() {
        t = t
            .args(allocate(&format!("FloatingIP/f{i}")))
            .stdout(&format!("198.51.100.{addr}\n"))
            .run()
            .then();
    }
    let ran = t
        .args(["release", "edge", "198.51.100.4", "--force"])
        .run()
        .then()
        .args(allocate("FloatingIP/late"))
        .fails(code::EXHAUSTED)
        .run();
    assert!(
        ran.stderr
            .contains("1 released address waits out reuseAfter 1h"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_record_dated_ahead_of_the_clock_keeps_its_address_and_check_warns() {
    // A clock stepped back after the release: the record is in the future.
    let t = with_edge("10m").file_store_only();
    t.write(
        RECORD,
        "apiVersion: pivirt.hu/v1\nkind: CooldownRecord\nmetadata:\n  name: edge-198-51-100-2\nspec:\n  pool: edge\n  address: \"198.51.100.2\"\n  owner:\n    kind: FloatingIP\n    name: a\n  releasedAt: \"2999-01-01T00:00:00.000Z\"\n",
    );
    let ran = t
        .args(allocate("FloatingIP/b"))
        .stdout("198.51.100.3\n")
        .run()
        .then()
        .args(["check"])
        .run();
    assert!(
        ran.stdout.contains("is ahead of this machine's clock"),
        "{}",
        ran.stdout
    );
}

#[test]
fn deleting_the_pool_takes_its_records() {
    let t = with_a_release("1h")
        .args(["pool", "delete", "edge"])
        .run()
        .then();
    assert!(!t.exists(RECORD));
}

#[test]
fn a_bad_reuse_after_is_refused() {
    let t = Test::new("seed");
    let input = t.input("edge.yaml", &pool("soon"));
    let ran = t.args(["apply", "-f", &input]).fails(code::INVALID).run();
    assert!(
        ran.stderr.contains("`soon` is not a duration"),
        "{}",
        ran.stderr
    );
}

/// Releases racing claims by other owners (real processes): whatever the interleaving, no
/// other owner gets the released address within the window.
#[test]
fn a_release_racing_other_owners_claims_never_hands_its_address_over() {
    let t = with_edge("1h").file_store_only();
    let wide = t.input(
        "wide.yaml",
        &pool("1h")
            .replace("name: edge", "name: wide")
            .replace("198.51.100.0/29", "198.51.101.0/24")
            .replace("gateway: 198.51.100.1", "gateway: 198.51.101.1"),
    );
    let mut t = t.args(["apply", "-f", &wide]).run().then();
    // Every round, in at most 60 s.
    let rounds = Budget::new("cooldown rounds", 6, Duration::from_secs(60)).at_least(6);
    for round in rounds.rounds() {
        let owner = format!("FloatingIP/held-{round}");
        let ran = t.args(["allocate", "wide", "--owner", &owner]).run();
        let address = ran.stdout.trim().to_owned();
        t = ran.then();
        let mut children: Vec<_> = (0..4)
            .map(|i| {
                let other = format!("FloatingIP/r{round}-{i}");
                spawn_piped(t.command(["allocate", "wide", "--owner", &other]))
            })
            .collect();
        children.insert(
            round % 4,
            spawn_piped(t.command(["release", "wide", &address, "--owner", &owner])),
        );
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{o:?}");
            let printed = String::from_utf8_lossy(&o.stdout);
            assert!(
                printed.contains("released") || printed.trim() != address,
                "round {round}: another owner got {address} within the window"
            );
        }
        // The owner that released it still gets it back.
        t = t
            .args(["allocate", "wide", "--owner", &owner])
            .stdout(&format!("{address}\n"))
            .run()
            .then()
            .args(["release", "wide", &address, "--owner", &owner])
            .run()
            .then();
    }
}

/// A record of pool `pool` for `address` (`a-b-c-d` in the name), released by `owner` at `at`.
fn record(pool: &str, address: &str, owner: &str, at: &str) -> String {
    let dashed = address.replace('.', "-");
    format!(
        "apiVersion: pivirt.hu/v1\nkind: CooldownRecord\nmetadata:\n  name: {pool}-{dashed}\nspec:\n  pool: {pool}\n  address: \"{address}\"\n  owner:\n    kind: FloatingIP\n    name: {owner}\n  releasedAt: \"{at}\"\n"
    )
}

const LONG_AGO: &str = "2001-01-01T00:00:00.000Z";

/// Records that hold nothing back (past the window, of a pool without `reuseAfter`, of no
/// pool) are warnings, and `check --fix` removes exactly those; cooling ones stay.
#[test]
fn check_fix_removes_the_records_that_hold_nothing_back_and_only_those() {
    let t = with_a_release("1h").file_store_only();
    let expired = "cluster/cooldown/edge-198-51-100-5.yaml";
    let orphan = "cluster/cooldown/gone-198-51-100-6.yaml";
    t.write(expired, &record("edge", "198.51.100.5", "old", LONG_AGO));
    t.write(orphan, &record("gone", "198.51.100.6", "old", LONG_AGO));
    let ran = t.args(["check"]).run();
    let warned: Vec<&str> = ran.stdout.lines().skip(1).collect();
    assert_eq!(warned.len(), 2, "{}", ran.stdout);
    assert!(
        warned[0].contains(expired)
            && warned[0].contains("longer ago than the pool's reuseAfter (1h)")
            && warned[0].ends_with("`ipamctl check --fix` removes it"),
        "{}",
        ran.stdout
    );
    assert!(
        warned[1].contains(orphan) && warned[1].contains("does not exist in its scope"),
        "{}",
        ran.stdout
    );
    let ran = ran.then().args(["check", "--fix"]).run();
    assert_eq!(
        ran.stderr.lines().take(2).collect::<Vec<_>>(),
        [format!("removed {expired}"), format!("removed {orphan}")],
        "{}",
        ran.stderr
    );
    assert_eq!(ran.stdout, "", "what --fix removed is no finding any more");
    let t = ran.then();
    assert!(!t.exists(expired) && !t.exists(orphan));
    assert!(t.exists(RECORD), "a cooling record is kept");
    // The pool drops its window: its records keep nothing from anyone any more.
    let plain = t.input("plain.yaml", &pool(""));
    let t = t.args(["apply", "-f", &plain]).run().then();
    let ran = t.args(["check"]).run();
    assert!(
        ran.stdout
            .contains("cooldown record of pool `edge`, which has no reuseAfter"),
        "{}",
        ran.stdout
    );
    let t = ran
        .then()
        .args(["check", "--fix"])
        .stderr(&format!(
            "removed {RECORD}\nok: no problems found in state (3 pools, 0 allocations checked)\n"
        ))
        .run()
        .then();
    assert!(!t.exists(RECORD));
}

/// `check --fix` judged a record expired, and a release writes a fresh record of the same
/// address before the fix removes the old one (held open by a fail point): the fresh record
/// must survive, or the address would go to another owner within its window. The pool's
/// lock, taken by the prune as by the release, is what keeps them apart.
#[cfg(feature = "failpoints")]
#[test]
fn check_fix_never_removes_a_record_a_release_writes_meanwhile() {
    let t = with_edge("1h").file_store_only();
    t.write(RECORD, &record("edge", "198.51.100.2", "old", LONG_AGO));
    let mut fix = t.command(["check", "--fix"]);
    fix.env("FAILPOINTS", "prune-before-remove=sleep(2000)");
    let fix = spawn_piped(fix);
    // Let the fix reach its fail point (if it has not, the order below is simply the other
    // one, which is as safe).
    std::thread::sleep(Duration::from_millis(700));
    let t = t
        .args(allocate("FloatingIP/x"))
        .stdout("198.51.100.2\n")
        .run()
        .then()
        .args(["release", "edge", "198.51.100.2", "--force"])
        .run()
        .then();
    let fixed = fix.wait_with_output().expect("check --fix");
    assert!(fixed.status.success(), "{fixed:?}");
    assert!(
        t.exists(RECORD) && t.read(RECORD).contains("name: x"),
        "the record of FloatingIP/x's release is gone: {}",
        String::from_utf8_lossy(&fixed.stderr)
    );
    t.args(allocate("FloatingIP/y"))
        .stdout("198.51.100.3\n")
        .run();
}

/// The expired record is replaced by a symlink to a file outside the state directory while
/// `check --fix` holds it (at its fail point): the fix removes at most the link, never what
/// it points to.
#[cfg(feature = "failpoints")]
#[test]
fn check_fix_never_touches_what_a_symlink_planted_at_a_record_points_to() {
    let t = with_edge("1h").file_store_only();
    t.write(RECORD, &record("edge", "198.51.100.2", "old", LONG_AGO));
    let outside = t.root().join("outside.yaml");
    let kept = record("edge", "198.51.100.2", "precious", LONG_AGO);
    std::fs::write(&outside, &kept).expect("write outside the state");
    let mut fix = t.command(["check", "--fix"]);
    fix.env("FAILPOINTS", "prune-before-remove=sleep(1500)");
    let fix = spawn_piped(fix);
    std::thread::sleep(Duration::from_millis(700));
    std::fs::remove_file(t.path(RECORD)).expect("remove the record");
    std::os::unix::fs::symlink(&outside, t.path(RECORD)).expect("plant a symlink");
    let fixed = fix.wait_with_output().expect("check --fix");
    assert!(fixed.status.code().is_some(), "{fixed:?}");
    assert_eq!(
        std::fs::read_to_string(&outside).expect("still there"),
        kept,
        "the file outside the state directory changed"
    );
}

/// `--explain` names the addresses a request skips because another owner released them
/// within the window, each on its own line.
#[test]
fn explain_names_the_addresses_cooling_down() {
    let ran = with_a_release("10m")
        .args(allocate("FloatingIP/b"))
        .stdout("198.51.100.3\n")
        .run()
        .then()
        .args([
            "allocate",
            "edge",
            "--owner",
            "FloatingIP/c",
            "--dry-run",
            "--explain",
        ])
        .stdout("198.51.100.4\n")
        .run();
    let lines: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(
        lines[3..6],
        [
            "  198.51.100.2  released by another owner less than 10m ago (the pool's reuseAfter)",
            "  198.51.100.3  taken by `FloatingIP/b`",
            "  -> 198.51.100.4: the lowest free candidate",
        ],
        "{}",
        ran.stderr
    );
}

/// Issue 31, finding 4: supernet `tenant`'s 10.1.2.0/24 and pool `tenant-10`'s 1.2.0.24 both
/// had their cooldown record at `cluster/cooldown/tenant-10-1-2-0-24.yaml`, so the second
/// release replaced the first record and its `reuseAfter` was lost. A prefix's record now
/// carries a kind marker no address record's name can hold: both are kept, and each keeps
/// what it names from another owner.
#[test]
fn a_prefix_record_and_an_address_record_never_share_a_name() {
    let t = Test::new("empty");
    let pools = t.input(
        "pools.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: tenant}\nspec: {cidr: 10.0.0.0/8, kind: supernet, reuseAfter: 1h}\n---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: tenant-10}\nspec: {cidr: 1.2.0.0/24, kind: public, reuseAfter: 1h}\n",
    );
    let ran = t
        .args(["apply", "-f", &pools])
        .run()
        .then()
        .args(["allocate", "tenant", "--prefix", "10.1.2.0/24"])
        .args(["--owner", "FloatingIP/a"])
        .run()
        .then()
        .args([
            "release",
            "tenant",
            "10.1.2.0/24",
            "--owner",
            "FloatingIP/a",
        ])
        .run()
        .then()
        .args(["allocate", "tenant-10", "--address", "1.2.0.24"])
        .args(["--owner", "FloatingIP/b"])
        .run()
        .then()
        .args([
            "release",
            "tenant-10",
            "1.2.0.24",
            "--owner",
            "FloatingIP/b",
        ])
        .run();
    let records: Vec<String> = ran
        .files()
        .into_iter()
        .filter(|f| f.contains("/cooldown/"))
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    // Each record still keeps its own from another owner.
    let ran = ran
        .then()
        .args(["allocate", "tenant", "--prefix", "10.1.2.0/24"])
        .args(["--owner", "FloatingIP/c"])
        .fails(code::CONFLICT)
        .run();
    let ran = ran
        .then()
        .args(["allocate", "tenant-10", "--address", "1.2.0.24"])
        .args(["--owner", "FloatingIP/c"])
        .fails(code::CONFLICT)
        .run();
    ran.then().args(["check"]).run();
}

/// A prefix's record written before the marker (named as its claim, which can also spell an
/// address record of another pool) is still read, and `check` warns that its name is
/// ambiguous.
#[test]
fn a_prefix_record_under_its_old_name_still_keeps_and_check_warns() {
    let t = Test::new("empty");
    let pools = t.input(
        "pools.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: tenant}\nspec: {cidr: 10.0.0.0/8, kind: supernet, reuseAfter: 1h}\n",
    );
    let t = t.args(["apply", "-f", &pools]).run().then();
    let at = humantime::format_rfc3339_millis(std::time::SystemTime::now());
    t.write(
        "cluster/cooldown/tenant-10-1-2-0-24.yaml",
        &format!(
            "apiVersion: pivirt.hu/v1\nkind: CooldownRecord\nmetadata:\n  name: tenant-10-1-2-0-24\nspec:\n  pool: tenant\n  address: 10.1.2.0\n  prefixLength: 24\n  owner:\n    kind: FloatingIP\n    name: a\n  releasedAt: \"{at}\"\n"
        ),
    );
    let ran = t
        .args(["allocate", "tenant", "--prefix", "10.1.2.0/24"])
        .args(["--owner", "FloatingIP/c"])
        .fails(code::CONFLICT)
        .run();
    let ran = ran.then().args(["check"]).run();
    assert!(
        ran.stdout.contains("tenant-10-1-2-0-24") && ran.stdout.contains("ambiguous name"),
        "{}\n{}",
        ran.stdout,
        ran.stderr
    );
}
