//! The state directory under review in git, as `docs/src/gitops.md` ("Reviewing the state in git")
//! describes it, with the real `git` binary: a claim is one new file; two clones claiming the
//! same address meet as an add/add conflict on exactly that file; keeping one side and
//! re-running `allocate` for the other owner leaves a state `ipamctl check` finds clean.

mod common;

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_ipamctl");

const POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: edge
spec:
  cidr: 192.0.2.0/29
  kind: public
  gateway: 192.0.2.1
";

/// The file both clones claim: the lowest candidate of `edge`.
const CONTESTED: &str = "cluster/ipallocations/edge-192-0-2-2.yaml";

fn run(cmd: &mut Command) -> Output {
    let output = cmd.output().expect("spawn");
    let shown = format!(
        "{cmd:?}\n--- status: {}\n--- stdout:\n{}--- stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.code().is_some(),
        "killed by a signal\n{shown}"
    );
    output
}

/// `git` in `dir`, isolated from the machine's and the user's configuration.
fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args([
            "-c",
            "user.name=Reviewer",
            "-c",
            "user.email=reviewer@example.com",
        ])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C");
    cmd
}

/// `git`, which must succeed; returns its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = run(&mut git_cmd(dir, args));
    assert!(
        output.status.success(),
        "git {args:?} failed in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `ipamctl` in `dir` (found as the state directory by its `.ipamctl`), which must succeed;
/// returns its stdout.
fn ipamctl(dir: &Path, args: &[&str]) -> String {
    let output = run(Command::new(BIN)
        .current_dir(dir)
        .env_remove("IPAMCTL_STATE_DIR")
        .args(args));
    assert!(
        output.status.success(),
        "ipamctl {args:?} failed in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The uids of the two owners (every owner here has one: the resolution keeps them).
const UID_A: &str = "0b6f3c3e-1111-4c1e-8d2a-00000000000a";
const UID_B: &str = "0b6f3c3e-1111-4c1e-8d2a-00000000000b";

fn allocate(dir: &Path, owner: &str) -> String {
    let uid = if owner.ends_with("-a") { UID_A } else { UID_B };
    ipamctl(dir, &["allocate", "edge", "--owner", owner, "--uid", uid])
        .trim()
        .to_owned()
}

#[test]
fn two_clones_claiming_one_address_conflict_on_its_file_and_the_documented_fix_is_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();

    // The state repository: init, one pool, committed.
    let origin = root.join("origin");
    std::fs::create_dir(&origin).unwrap();
    git(&origin, &["init", "-q"]);
    ipamctl(&origin, &["init"]);
    std::fs::write(root.join("pools.yaml"), POOLS).unwrap();
    ipamctl(&origin, &["apply", "-f", "../pools.yaml"]);
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-q", "-m", "Add pool edge"]);

    // Two clones, each claiming for its own owner: both get the lowest candidate.
    let (first, second) = (root.join("first"), root.join("second"));
    git(root, &["clone", "-q", "origin", "first"]);
    git(root, &["clone", "-q", "origin", "second"]);
    assert_eq!(allocate(&first, "FloatingIP/fip-a"), "192.0.2.2");
    assert_eq!(allocate(&second, "FloatingIP/fip-b"), "192.0.2.2");
    for (clone, owner) in [(&first, "fip-a"), (&second, "fip-b")] {
        git(clone, &["add", "-A"]);
        git(
            clone,
            &["commit", "-q", "-m", &format!("Allocate for {owner}")],
        );
        // What a reviewer sees: one new file per claim, nothing else (locks and the index
        // are git-ignored).
        assert_eq!(
            git(clone, &["show", "--name-status", "--format=", "HEAD"]),
            format!("A\t{CONTESTED}\n")
        );
    }

    // Merging the second into the first: an add/add conflict on exactly that path.
    git(&first, &["fetch", "-q", "../second", "main"]);
    let merge = run(&mut git_cmd(&first, &["merge", "--no-edit", "FETCH_HEAD"]));
    assert_eq!(merge.status.code(), Some(1), "the merge must conflict");
    let said = String::from_utf8_lossy(&merge.stdout);
    assert!(said.contains("CONFLICT (add/add)"), "{said}");
    assert_eq!(
        git(&first, &["diff", "--name-only", "--diff-filter=U"]),
        format!("{CONTESTED}\n")
    );

    // Every reader recognises the markers; `check` names both owners and the commands that
    // resolve it, each keeping the other owner's uid.
    let check = run(Command::new(BIN).current_dir(&first).args(["check"]));
    assert_eq!(check.status.code(), Some(1));
    let found = String::from_utf8(check.stdout).unwrap();
    assert!(
        found.contains(&format!(
            "unresolved merge conflict: ours holds the address for `FloatingIP/fip-a (uid {UID_A})`, theirs for `FloatingIP/fip-b (uid {UID_B})`"
        )),
        "{found}"
    );
    let keep_ours = format!(
        "git checkout --ours -- {CONTESTED} && git add {CONTESTED} && ipamctl allocate edge --owner FloatingIP/fip-b --uid {UID_B}"
    );
    assert!(
        found.contains(&format!("Keep ours: `{keep_ours}`")),
        "{found}"
    );
    assert!(
        found.contains(&format!(
            "ipamctl allocate edge --owner FloatingIP/fip-a --uid {UID_A}`"
        )),
        "{found}"
    );
    // The address stays taken while the file is conflicted.
    let dry = ipamctl(
        &first,
        &[
            "allocate",
            "edge",
            "--owner",
            "FloatingIP/fip-c",
            "--dry-run",
        ],
    );
    assert_eq!(dry, "192.0.2.3\n");

    // The resolution `check` printed, run as printed (ipamctl from PATH).
    let resolved = run(Command::new("sh")
        .current_dir(&first)
        .env("PATH", common::path_with_bin())
        .env_remove("IPAMCTL_STATE_DIR")
        .args(["-c", &keep_ours]));
    assert!(resolved.status.success(), "{resolved:?}");
    assert_eq!(String::from_utf8(resolved.stdout).unwrap(), "192.0.2.3\n");
    git(&first, &["commit", "-q", "--no-edit"]);
    git(&first, &["add", "-A"]);
    git(&first, &["commit", "-q", "-m", "Allocate for fip-b again"]);

    assert_eq!(git(&first, &["status", "--porcelain"]), "");
    assert_eq!(ipamctl(&first, &["check"]), "", "check finds nothing");
    let listed = ipamctl(&first, &["list", "-o", "json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let held: Vec<(String, String)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["spec"]["owner"]["name"].as_str().unwrap().to_owned(),
                m["spec"]["address"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        held,
        [
            ("fip-a".to_owned(), "192.0.2.2".to_owned()),
            ("fip-b".to_owned(), "192.0.2.3".to_owned()),
        ]
    );
    // Each owner asking again gets its own address back.
    assert_eq!(allocate(&first, "FloatingIP/fip-a"), "192.0.2.2");
    assert_eq!(allocate(&first, "FloatingIP/fip-b"), "192.0.2.3");
}
