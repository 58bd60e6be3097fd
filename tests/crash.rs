//! Crash injection: every fail point of every write path aborts a real `ipamctl` process in
//! turn; afterwards the state must satisfy invariants 1–4 and a retry of the same request
//! must converge. Needs `cargo test --features failpoints --test crash` (CI runs it).
#![cfg(feature = "failpoints")]

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ipamctl::model::AllocationManifest;

const POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: edge
spec:
  cidr: 198.51.100.0/28
  kind: public
  gateway: 198.51.100.1
";

/// Every fail point an `allocate` of a new owner passes, in order.
const ALLOCATE_POINTS: [&str; 6] = [
    "write-after-temp-written",
    "write-after-temp-synced",
    "write-after-name-claimed",
    "write-after-dir-synced",
    "allocate-before-index",
    "index-before-hint",
];

struct State {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl State {
    fn new() -> State {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("state");
        let state = State { _dir: dir, root };
        assert!(
            state
                .run(&["init", state.root.to_str().unwrap()], None)
                .status
                .success()
        );
        let apply = state.run_stdin(&["apply", "-f", "-"], POOLS);
        assert!(
            apply.status.success(),
            "{}",
            String::from_utf8_lossy(&apply.stderr)
        );
        state
    }

    fn command(&self, args: &[&str], failpoint: Option<&str>) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ipamctl"));
        cmd.arg("-d").arg(&self.root).args(args);
        cmd.env_remove("FAILPOINTS");
        if let Some(point) = failpoint {
            cmd.env("FAILPOINTS", format!("{point}=return"));
        }
        cmd
    }

    fn run(&self, args: &[&str], failpoint: Option<&str>) -> Output {
        self.command(args, failpoint).output().unwrap()
    }

    fn run_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        use std::process::Stdio;
        let mut child = self
            .command(args, None)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    fn allocate(&self, owner: &str, failpoint: Option<&str>) -> Output {
        self.run(
            &[
                "allocate",
                "edge",
                "--owner",
                owner,
                "--uid",
                "00000000-0000-4000-8000-000000000001",
            ],
            failpoint,
        )
    }

    /// Invariants 1–3 from the files: every manifest parses (so none is half-written), no
    /// address twice, no owner twice. Returns owner → address.
    fn check_invariants(&self) -> HashMap<String, String> {
        let dir = self.root.join("cluster/ipallocations");
        let mut by_owner = HashMap::new();
        let mut addresses = Vec::new();
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            if name.starts_with('.') {
                continue;
            }
            let text = fs::read_to_string(&path).unwrap();
            let m: AllocationManifest = ipamctl::yaml::decode_allocation(&text)
                .unwrap_or_else(|e| panic!("{name} does not parse after a crash: {e}"));
            addresses.push(m.spec.address);
            let owner = m.spec.owner.to_string();
            let address = m.spec.address.to_string();
            assert!(
                by_owner.insert(owner.clone(), address).is_none(),
                "{owner} holds two addresses"
            );
        }
        let before = addresses.len();
        addresses.sort();
        addresses.dedup();
        assert_eq!(before, addresses.len(), "an address is held twice");
        by_owner
    }

    fn leftover_temps(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        walk(&self.root, &mut found);
        found
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".tmp-")
            })
            .collect()
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn aborted(output: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    output.status.signal() == Some(6)
}

#[test]
fn allocate_converges_after_a_crash_at_every_point() {
    for point in ALLOCATE_POINTS {
        let state = State::new();
        assert!(state.allocate("FloatingIP/before", None).status.success());

        let crashed = state.allocate("FloatingIP/victim", Some(point));
        assert!(
            aborted(&crashed),
            "{point}: the fail point was not reached: {crashed:?}"
        );
        assert!(
            crashed.stdout.is_empty(),
            "{point}: printed an address before crashing"
        );
        let after_crash = state.check_invariants();
        let claimed = after_crash.get("FloatingIP/victim").cloned();
        let claim_expected = !point.starts_with("write-after-temp");
        assert_eq!(
            claimed.is_some(),
            claim_expected,
            "{point}: claim presence after the crash"
        );

        // Invariant 4: the retry gets the claimed address back, or a fresh one, never a second.
        let retry = state.allocate("FloatingIP/victim", None);
        assert!(
            retry.status.success(),
            "{point}: {}",
            String::from_utf8_lossy(&retry.stderr)
        );
        let address = String::from_utf8(retry.stdout).unwrap().trim().to_owned();
        if let Some(claimed) = &claimed {
            assert_eq!(&address, claimed, "{point}: the retry got a second address");
        }
        let again = state.allocate("FloatingIP/victim", None);
        assert_eq!(
            String::from_utf8(again.stdout).unwrap().trim(),
            address,
            "{point}"
        );

        let other = state.allocate("FloatingIP/other", None);
        let other_address = String::from_utf8(other.stdout).unwrap().trim().to_owned();
        assert_ne!(
            other_address, address,
            "{point}: an address was handed out twice"
        );
        let final_state = state.check_invariants();
        assert_eq!(final_state.len(), 3, "{point}: {final_state:?}");

        // Only the crash before the name was claimed can leave a temporary file; nothing
        // else is ever left behind.
        let temps = state.leftover_temps();
        assert!(
            temps.len() <= usize::from(!claim_expected),
            "{point}: {temps:?}"
        );
    }
}

#[test]
fn release_converges_after_a_crash_between_unlink_and_directory_sync() {
    let state = State::new();
    let held = state.allocate("FloatingIP/victim", None);
    let address = String::from_utf8(held.stdout).unwrap().trim().to_owned();

    let crashed = state.run(
        &["release", "edge", &address, "--owner", "FloatingIP/victim"],
        Some("delete-after-unlink"),
    );
    assert!(aborted(&crashed), "{crashed:?}");
    state.check_invariants();

    let retry = state.run(
        &["release", "edge", &address, "--owner", "FloatingIP/victim"],
        None,
    );
    assert!(retry.status.success());
    assert!(String::from_utf8_lossy(&retry.stderr).contains("not allocated"));
    assert!(state.check_invariants().is_empty());

    // The stale index entries the crash left do not confuse the next claim.
    let again = state.allocate("FloatingIP/victim", None);
    assert_eq!(String::from_utf8(again.stdout).unwrap().trim(), address);
    assert_eq!(state.check_invariants().len(), 1);
}

#[test]
fn apply_converges_after_a_crash_at_every_point() {
    let second = "---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: tenant\n  namespace: acme\nspec:\n  cidr: 10.9.0.0/24\n  kind: private\n";
    let points = [
        "write-after-temp-written",
        "write-after-temp-synced",
        "write-after-name-claimed",
        "write-after-dir-synced",
        "apply-between-pools",
    ];
    for point in points {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("state");
        let input = dir.path().join("pools.yaml");
        fs::write(&input, format!("{POOLS}{second}")).unwrap();
        let ipamctl = |failpoint: Option<&str>, args: &[&str]| {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_ipamctl"));
            cmd.arg("-d").arg(&root).args(args).env_remove("FAILPOINTS");
            if let Some(p) = failpoint {
                cmd.env("FAILPOINTS", format!("{p}=return"));
            }
            cmd.output().unwrap()
        };
        assert!(
            ipamctl(None, &["init", root.to_str().unwrap()])
                .status
                .success()
        );
        let crashed = ipamctl(Some(point), &["apply", "-f", input.to_str().unwrap()]);
        assert!(aborted(&crashed), "{point}: {crashed:?}");
        // Whatever pool file exists is whole.
        for pool in [
            root.join("cluster/ipampools/edge.yaml"),
            root.join("namespaces/acme/ipampools/tenant.yaml"),
        ] {
            if let Ok(text) = fs::read_to_string(&pool) {
                ipamctl::yaml::decode_pool(&text)
                    .unwrap_or_else(|e| panic!("{point}: {} is torn: {e}", pool.display()));
            }
        }
        let retry = ipamctl(None, &["apply", "-f", input.to_str().unwrap()]);
        assert!(
            retry.status.success(),
            "{point}: {}",
            String::from_utf8_lossy(&retry.stderr)
        );
        let listed = ipamctl(None, &["pool", "list", "-o", "json"]);
        let pools: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
        assert_eq!(pools["items"].as_array().unwrap().len(), 2, "{point}");
    }
}

#[test]
fn vpc_delete_crashed_half_way_is_finished_by_a_second_delete() {
    // vpc delete writes no file: its fail points are in its deletes (after the rename to a
    // private name, and between the unlink and its sync).
    for point in ["delete-after-private-rename", "delete-after-unlink"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("state");
        let ipamctl = |failpoint: Option<&str>, args: &[&str]| {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_ipamctl"));
            cmd.arg("-d").arg(&root).args(args).env_remove("FAILPOINTS");
            if let Some(p) = failpoint {
                cmd.env("FAILPOINTS", format!("{p}=return"));
            }
            cmd.output().unwrap()
        };
        ipamctl(None, &["init", root.to_str().unwrap()]);
        ipamctl(
            None,
            &[
                "vpc",
                "create",
                "main",
                "-n",
                "acme",
                "--cidr",
                "10.1.0.0/24",
            ],
        );
        for vm in ["VirtualMachine/a/0", "VirtualMachine/b/0"] {
            assert!(
                ipamctl(None, &["allocate", "vpc-main", "-n", "acme", "--owner", vm])
                    .status
                    .success()
            );
        }
        let crashed = ipamctl(Some(point), &["vpc", "delete", "main", "-n", "acme"]);
        assert!(aborted(&crashed), "{crashed:?}");
        let retry = ipamctl(None, &["vpc", "delete", "main", "-n", "acme"]);
        assert!(
            retry.status.success(),
            "{point}: {}",
            String::from_utf8_lossy(&retry.stderr)
        );
        let left = fs::read_dir(root.join("namespaces/acme/ipallocations"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".yaml")
            })
            .count();
        assert_eq!(left, 0, "{point}");
        assert!(
            !root
                .join("namespaces/acme/ipampools/vpc-main.yaml")
                .exists(),
            "{point}"
        );
    }
}

#[test]
fn dual_stack_allocate_crashed_between_its_claims_is_completed_by_the_same_request() {
    let state = State::new();
    let v6 = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: edge6\nspec:\n  cidr: 2001:db8:7::/64\n  kind: public\n";
    assert!(state.run_stdin(&["apply", "-f", "-"], v6).status.success());
    let request = [
        "allocate",
        "edge",
        "edge6",
        "--owner",
        "VPC/router",
        "--uid",
        "0f8fad5b-d9cb-469f-a165-70867728950e",
    ];
    let allocations = || -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(state.root.join("cluster/ipallocations"))
            .map(|dir| {
                dir.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };

    let crashed = state.run(&request, Some("allocate-between-pools"));
    assert!(
        aborted(&crashed),
        "the fail point was not reached: {crashed:?}"
    );
    assert!(
        crashed.stdout.is_empty(),
        "printed an address before crashing"
    );
    // The first pool's claim is made and durable, the second not begun.
    assert_eq!(allocations(), ["edge-198-51-100-2.yaml"]);

    // Asked again: the first claim is the owner's and comes back; the second is made.
    let retry = state.run(&request, None);
    assert!(
        retry.status.success(),
        "{}",
        String::from_utf8_lossy(&retry.stderr)
    );
    assert_eq!(
        String::from_utf8(retry.stdout).unwrap(),
        "198.51.100.2\n2001:db8:7::1\n"
    );
    let both = [
        "edge-198-51-100-2.yaml",
        "edge6-2001-0db8-0007-0000-0000-0000-0000-0001.yaml",
    ];
    assert_eq!(allocations(), both);
    let again = state.run(&request, None);
    assert_eq!(
        String::from_utf8(again.stdout).unwrap(),
        "198.51.100.2\n2001:db8:7::1\n"
    );
    assert_eq!(allocations(), both);
}

/// A pool with a reuse cooldown: a release writes the address's record before deleting the
/// allocation, and a crash at any write step of either leaves the address held or cooling,
/// never free for another owner.
#[test]
fn release_with_a_cooldown_never_frees_an_address_without_its_record() {
    const POINTS: [&str; 5] = [
        "write-after-temp-synced",
        "write-after-dir-synced",
        "release-after-cooldown-record",
        "delete-after-private-rename",
        "delete-after-unlink",
    ];
    for point in POINTS {
        let state = State::new();
        let cooled = POOLS.replace("  gateway:", "  reuseAfter: 1h\n  gateway:");
        let apply = state.run_stdin(&["apply", "-f", "-"], &cooled);
        assert!(apply.status.success(), "{apply:?}");
        let held = state.allocate("FloatingIP/victim", None);
        let address = String::from_utf8(held.stdout).unwrap().trim().to_owned();

        let crashed = state.run(&["release", "edge", &address, "--force"], Some(point));
        assert!(aborted(&crashed), "{point}: not reached: {crashed:?}");
        state.check_invariants();

        // Whatever the crash left, another owner never gets the address...
        let other = state.allocate("FloatingIP/other", None);
        assert!(other.status.success(), "{point}: {other:?}");
        assert_ne!(
            String::from_utf8(other.stdout).unwrap().trim(),
            address,
            "{point}: the released address went to another owner"
        );
        // ...and its owner gets it back, released or not.
        let back = state.allocate("FloatingIP/victim", None);
        assert_eq!(
            String::from_utf8(back.stdout).unwrap().trim(),
            address,
            "{point}"
        );
        let check = state.run(&["check"], None);
        assert!(check.status.success(), "{point}: {check:?}");
    }
}
