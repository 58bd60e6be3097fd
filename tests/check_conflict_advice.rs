//! `check`'s advice for a git merge conflict in a pool that is now full (both branches took
//! its last free address, the usual case): the command it prints for the other owner is one
//! that works (the pool's zone, or another pool of the same scope and family), or it says
//! plainly that there is none; and `allocate` warns about the conflicted file once. Real
//! git, real clones, the real binary; the suggested command is run as printed.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const UID_A: &str = "0b6f3c3e-2222-4c1e-8d2a-00000000000a";
const UID_B: &str = "0b6f3c3e-2222-4c1e-8d2a-00000000000b";

/// A one-address pool: whoever claims from it takes its last free address.
const LAST: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: last}
spec: {cidr: 192.0.2.7/32, kind: public, zone: zone-a}
";

/// The file both clones claim.
const CONTESTED: &str = "cluster/ipallocations/last-192-0-2-7.yaml";

fn git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=R", "-c", "user.email=r@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("LC_ALL", "C")
        .output()
        .expect("run git")
}

fn ipamctl(dir: &Path, args: &[&str]) -> Output {
    Command::new(common::BIN)
        .current_dir(dir)
        .env_remove("IPAMCTL_STATE_DIR")
        .args(args)
        .output()
        .expect("run ipamctl")
}

#[track_caller]
fn ok(out: Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A state repository holding `pools`, cloned twice; each clone claims the one address of
/// `last` for its own owner and commits; the second is merged into the first, leaving the
/// add/add conflict. Returns the temporary directory and the first clone.
fn conflict_in_full_pool(pools: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let origin = root.join("origin");
    std::fs::create_dir(&origin).unwrap();
    ok(git(&origin, &["init", "-q"]));
    ok(ipamctl(&origin, &["init"]));
    std::fs::write(root.join("pools.yaml"), pools).unwrap();
    ok(ipamctl(&origin, &["apply", "-f", "../pools.yaml"]));
    ok(git(&origin, &["add", "-A"]));
    ok(git(&origin, &["commit", "-q", "-m", "pools"]));
    for (clone, owner, uid) in [("first", "fip-a", UID_A), ("second", "fip-b", UID_B)] {
        ok(git(root, &["clone", "-q", "origin", clone]));
        let dir = root.join(clone);
        let owner = format!("FloatingIP/{owner}");
        let got = ok(ipamctl(
            &dir,
            &["allocate", "last", "--owner", &owner, "--uid", uid],
        ));
        assert_eq!(got, "192.0.2.7\n");
        ok(git(&dir, &["add", "-A"]));
        ok(git(&dir, &["commit", "-q", "-m", &owner]));
    }
    let first = root.join("first");
    ok(git(&first, &["fetch", "-q", "../second", "main"]));
    let merge = git(&first, &["merge", "--no-edit", "FETCH_HEAD"]);
    assert_eq!(
        merge.status.code(),
        Some(1),
        "the merge must conflict: {merge:?}"
    );
    (tmp, first)
}

/// `check`'s message about the conflicted file, and the command that keeps ours.
#[track_caller]
fn advice(dir: &Path) -> (String, String) {
    let check = ipamctl(dir, &["check"]);
    assert_eq!(check.status.code(), Some(1), "{check:?}");
    let found = String::from_utf8(check.stdout).unwrap();
    let keep_ours = found
        .split("Keep ours: `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no `Keep ours` command in:\n{found}"))
        .to_owned();
    (found, keep_ours)
}

/// Runs `command` as printed (ipamctl from PATH) in `dir`.
#[track_caller]
fn run_as_printed(dir: &Path, command: &str) -> Output {
    Command::new("sh")
        .current_dir(dir)
        .env("PATH", common::path_with_bin())
        .env_remove("IPAMCTL_STATE_DIR")
        .args(["-c", command])
        .output()
        .expect("run sh")
}

#[test]
fn a_conflict_in_a_full_zone_pool_suggests_the_zone_and_that_command_exits_0() {
    let spare = "---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: spare}
spec: {cidr: 198.51.100.0/29, kind: public, zone: zone-a}
";
    let (_tmp, first) = conflict_in_full_pool(&format!("{LAST}{spare}"));
    let (found, keep_ours) = advice(&first);
    assert_eq!(
        keep_ours,
        format!(
            "git checkout --ours -- {CONTESTED} && git add {CONTESTED} && ipamctl allocate --zone zone-a --owner FloatingIP/fip-b --uid {UID_B}"
        )
    );
    assert!(
        found.contains("pool `last` has no free address left"),
        "{found}"
    );
    let resolved = run_as_printed(&first, &keep_ours);
    assert_eq!(resolved.status.code(), Some(0), "{resolved:?}");
    assert_eq!(
        String::from_utf8(resolved.stdout).unwrap(),
        "198.51.100.1\n"
    );
    ok(git(&first, &["commit", "-q", "--no-edit"]));
    assert_eq!(ok(ipamctl(&first, &["check"])), "", "check finds nothing");
}

#[test]
fn a_conflict_in_a_full_pool_without_zone_suggests_another_pool_of_its_family() {
    // `a-v6` sorts first but is IPv6: not for an IPv4 owner's address.
    let others = "---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: a-v6}
spec: {cidr: \"2001:db8::/120\", kind: public}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: other}
spec: {cidr: 198.51.100.0/29, kind: public}
";
    let (_tmp, first) =
        conflict_in_full_pool(&format!("{}{others}", LAST.replace(", zone: zone-a", "")));
    let (_, keep_ours) = advice(&first);
    assert!(
        keep_ours.ends_with(&format!(
            "&& ipamctl allocate other --owner FloatingIP/fip-b --uid {UID_B}"
        )),
        "{keep_ours}"
    );
    let resolved = run_as_printed(&first, &keep_ours);
    assert_eq!(resolved.status.code(), Some(0), "{resolved:?}");
    assert_eq!(
        String::from_utf8(resolved.stdout).unwrap(),
        "198.51.100.1\n"
    );
}

#[test]
fn a_conflict_in_a_full_pool_with_nowhere_else_says_so_and_suggests_no_claim() {
    let (_tmp, first) = conflict_in_full_pool(LAST);
    let (found, keep_ours) = advice(&first);
    assert_eq!(
        keep_ours,
        format!("git checkout --ours -- {CONTESTED} && git add {CONTESTED}")
    );
    assert!(!found.contains("ipamctl allocate"), "{found}");
    assert!(
        found.contains(
            "pool `last` has no free address left and no other pool the other owner may use has one"
        ),
        "{found}"
    );
    // What it does suggest works.
    assert_eq!(run_as_printed(&first, &keep_ours).status.code(), Some(0));
}

#[test]
fn allocate_warns_about_a_conflicted_file_once() {
    let spare = "---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: spare}
spec: {cidr: 198.51.100.0/29, kind: public, zone: zone-a}
";
    let (_tmp, first) = conflict_in_full_pool(&format!("{LAST}{spare}"));
    let out = ipamctl(&first, &["allocate", "last", "--owner", "FloatingIP/fip-c"]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("unresolved merge conflict"),
        "{stderr}"
    );
    assert_eq!(warnings[0].matches("ipamctl check").count(), 1, "{stderr}");
    assert_eq!(warnings[0].matches("stays taken").count(), 1, "{stderr}");
}
