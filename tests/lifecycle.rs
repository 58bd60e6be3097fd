//! Lifecycle commands: `vpc create|delete`, `allocate --zone`, `reconcile`, including their
//! refusals and the concurrent cases (vpc delete racing allocate, reconcile racing a
//! re-allocation).

#[path = "budget/mod.rs"]
mod budget;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use budget::Budget;

const ZONE_POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: za-1
spec:
  cidr: 198.51.100.0/30
  kind: public
  zone: zone-a
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: za-2
spec:
  cidr: 198.51.100.8/30
  kind: public
  zone: zone-a
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: zb-1
spec:
  cidr: 203.0.113.0/29
  kind: public
  zone: zone-b
";

struct State {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8(o.stdout).unwrap(),
            stderr: String::from_utf8(o.stderr).unwrap(),
        }
    }
}

impl State {
    fn new(pools: &str) -> State {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let state = State { _tmp: tmp, root };
        assert_eq!(state.run(&["init"]).code, Some(0));
        if !pools.is_empty() {
            assert_eq!(state.run_stdin(&["apply", "-f", "-"], pools).code, Some(0));
        }
        state
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ipamctl"));
        cmd.arg("-d").arg(&self.root).args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Run {
        self.cmd(args).output().unwrap().into()
    }

    fn run_stdin(&self, args: &[&str], stdin: &str) -> Run {
        let mut child = self
            .cmd(args)
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
        child.wait_with_output().unwrap().into()
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Allocation file names under a scope directory, sorted.
    fn allocations(&self, scope: &str) -> Vec<String> {
        let dir = self.root.join(scope).join("ipallocations");
        let mut names: Vec<String> = fs::read_dir(&dir)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".yaml") && !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    fn exists(&self, rel: &str) -> bool {
        Path::new(&self.root).join(rel).exists()
    }
}

#[test]
fn vpc_create_writes_an_owned_private_pool_and_prints_the_uid() {
    let state = State::new("");
    let run = state.run(&[
        "vpc",
        "create",
        "main",
        "-n",
        "acme/prod",
        "--cidr",
        "10.42.0.0/16",
        "--uid",
        "7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10",
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, "7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10\n");
    let pool = fs::read_to_string(
        state
            .root
            .join("namespaces/acme/prod/ipampools/vpc-main.yaml"),
    )
    .unwrap();
    assert_eq!(
        pool,
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: vpc-main\n  namespace: acme/prod\n  ownerRefs:\n  - kind: VPC\n    uid: 7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10\n    name: main\n    controller: true\nspec:\n  cidr: 10.42.0.0/16\n  kind: private\n"
    );
}

#[test]
fn vpc_create_without_uid_generates_a_uuid() {
    let state = State::new("");
    let run = state.run(&[
        "vpc",
        "create",
        "main",
        "-n",
        "acme",
        "--cidr",
        "10.1.0.0/24",
    ]);
    assert_eq!(run.code, Some(0));
    let uid = run.stdout.trim();
    assert!(uuid::Uuid::parse_str(uid).is_ok(), "{uid}");
    let pool =
        fs::read_to_string(state.root.join("namespaces/acme/ipampools/vpc-main.yaml")).unwrap();
    assert!(pool.contains(&format!("uid: {uid}")));
}

#[test]
fn vpc_create_refuses_a_second_vpc_and_bad_input() {
    let state = State::new("");
    assert_eq!(
        state
            .run(&[
                "vpc",
                "create",
                "main",
                "-n",
                "acme",
                "--cidr",
                "10.1.0.0/24"
            ])
            .code,
        Some(0)
    );
    let again = state.run(&[
        "vpc",
        "create",
        "main",
        "-n",
        "acme",
        "--cidr",
        "10.2.0.0/24",
    ]);
    assert_eq!(again.code, Some(4));
    assert!(
        again
            .stderr
            .starts_with("error: VPC `main` already exists in namespace `acme`"),
        "{}",
        again.stderr
    );
    assert!(
        fs::read_to_string(state.root.join("namespaces/acme/ipampools/vpc-main.yaml"))
            .unwrap()
            .contains("10.1.0.0/24")
    );
    let no_ns = state.run(&["vpc", "create", "other", "--cidr", "10.3.0.0/24"]);
    assert_eq!(no_ns.code, Some(2));
    assert!(no_ns.stderr.contains("-n NS"));
    let host_bits = state.run(&[
        "vpc",
        "create",
        "other",
        "-n",
        "acme",
        "--cidr",
        "10.3.0.1/24",
    ]);
    assert_eq!(host_bits.code, Some(2));
    assert!(host_bits.stderr.contains("did you mean `10.3.0.0/24`"));
    assert!(!state.exists("namespaces/acme/ipampools/vpc-other.yaml"));
}

#[test]
fn vpc_delete_releases_every_allocation_then_removes_the_pool() {
    let state = State::new("");
    state.run(&[
        "vpc",
        "create",
        "main",
        "-n",
        "acme",
        "--cidr",
        "10.1.0.0/24",
    ]);
    for vm in ["VirtualMachine/a/0", "VirtualMachine/b/0", "Node/web"] {
        assert_eq!(
            state
                .run(&["allocate", "vpc-main", "-n", "acme", "--owner", vm])
                .code,
            Some(0)
        );
    }
    let dry = state.run(&["vpc", "delete", "main", "-n", "acme", "--dry-run"]);
    assert_eq!(dry.code, Some(0));
    assert_eq!(
        dry.stdout,
        "ipallocation/vpc-main-10-1-0-1 would-release\nipallocation/vpc-main-10-1-0-2 would-release\nipallocation/vpc-main-10-1-0-3 would-release\nipampool/vpc-main would-delete\n"
    );
    assert_eq!(
        state.allocations("namespaces/acme").len(),
        3,
        "dry run changed nothing"
    );

    let run = state.run(&["vpc", "delete", "main", "-n", "acme"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.ends_with("ipampool/vpc-main deleted\n"));
    assert!(state.allocations("namespaces/acme").is_empty());
    assert!(!state.exists("namespaces/acme/ipampools/vpc-main.yaml"));

    let again = state.run(&["vpc", "delete", "main", "-n", "acme"]);
    assert_eq!(again.code, Some(3));
}

#[test]
fn vpc_delete_finishes_what_a_crashed_delete_left() {
    // A delete that died after releasing some allocations leaves the pool and the rest.
    let state = State::new("");
    state.run(&[
        "vpc",
        "create",
        "main",
        "-n",
        "acme",
        "--cidr",
        "10.1.0.0/24",
    ]);
    state.run(&[
        "allocate",
        "vpc-main",
        "-n",
        "acme",
        "--owner",
        "VirtualMachine/a/0",
    ]);
    state.run(&[
        "allocate",
        "vpc-main",
        "-n",
        "acme",
        "--owner",
        "VirtualMachine/b/0",
    ]);
    fs::remove_file(
        state
            .root
            .join("namespaces/acme/ipallocations/vpc-main-10-1-0-1.yaml"),
    )
    .unwrap();
    let run = state.run(&["vpc", "delete", "main", "-n", "acme"]);
    assert_eq!(run.code, Some(0));
    assert_eq!(
        run.stdout,
        "ipallocation/vpc-main-10-1-0-2 released\nipampool/vpc-main deleted\n"
    );
    assert!(state.allocations("namespaces/acme").is_empty());
}

#[test]
fn vpc_delete_refuses_a_pool_not_owned_by_a_vpc() {
    let pool = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: vpc-fake\n  namespace: acme\nspec:\n  cidr: 10.5.0.0/24\n  kind: private\n";
    let state = State::new(pool);
    let run = state.run(&["vpc", "delete", "fake", "-n", "acme"]);
    assert_eq!(run.code, Some(4));
    assert!(state.exists("namespaces/acme/ipampools/vpc-fake.yaml"));
}

#[test]
fn vpc_delete_racing_allocate_leaves_no_allocation_behind() {
    // Every round, in at most 60 s.
    let rounds = Budget::new("vpc delete rounds", 5, Duration::from_secs(60)).at_least(5);
    for round in rounds.rounds() {
        let state = State::new("");
        state.run(&[
            "vpc",
            "create",
            "main",
            "-n",
            "acme",
            "--cidr",
            "10.1.0.0/24",
        ]);
        let mut children: Vec<Child> = (0..12)
            .map(|i| {
                state.spawn(&[
                    "allocate",
                    "vpc-main",
                    "-n",
                    "acme",
                    "--owner",
                    &format!("VirtualMachine/vm-{i}/0"),
                ])
            })
            .collect();
        children.insert(6, state.spawn(&["vpc", "delete", "main", "-n", "acme"]));
        for child in children {
            let out = child.wait_with_output().unwrap();
            // Allocations before the delete succeed (then get released), after it see no pool.
            assert!(
                matches!(out.status.code(), Some(0 | 3)),
                "round {round}: {out:?}"
            );
        }
        let pool_gone = !state.exists("namespaces/acme/ipampools/vpc-main.yaml");
        assert!(pool_gone, "round {round}: the delete must win eventually");
        assert_eq!(
            state.allocations("namespaces/acme"),
            Vec::<String>::new(),
            "round {round}: an allocation outlived its pool"
        );
    }
}

#[test]
fn zone_allocate_moves_to_the_next_pool_in_name_order() {
    let state = State::new(ZONE_POOLS);
    let got: Vec<String> = (0..4)
        .map(|i| {
            let run = state.run(&[
                "allocate",
                "--zone",
                "zone-a",
                "--owner",
                &format!("FloatingIP/fip-{i}"),
            ]);
            assert_eq!(run.code, Some(0), "{}", run.stderr);
            run.stdout.trim().to_owned()
        })
        .collect();
    assert_eq!(
        got,
        [
            "198.51.100.1",
            "198.51.100.2",
            "198.51.100.9",
            "198.51.100.10"
        ]
    );

    // Idempotent across the zone's pools.
    let again = state.run(&[
        "allocate",
        "--zone",
        "zone-a",
        "--owner",
        "FloatingIP/fip-2",
    ]);
    assert_eq!(again.stdout, "198.51.100.9\n");

    let exhausted = state.run(&[
        "allocate",
        "--zone",
        "zone-a",
        "--owner",
        "FloatingIP/fip-9",
    ]);
    assert_eq!(exhausted.code, Some(5));
    assert_eq!(
        exhausted.stderr,
        "error: zone `zone-a` is exhausted: no free address in any of its pools (`za-1`, `za-2`)\n"
    );
}

#[test]
fn zone_allocate_refusals() {
    let state = State::new(ZONE_POOLS);
    let none = state.run(&["allocate", "--zone", "zone-x", "--owner", "FloatingIP/f"]);
    assert_eq!(none.code, Some(3));
    assert!(
        none.stderr
            .starts_with("error: no public pool in zone `zone-x`")
    );
    assert_eq!(
        state
            .run(&[
                "allocate",
                "za-1",
                "--zone",
                "zone-a",
                "--owner",
                "FloatingIP/f"
            ])
            .code,
        Some(2)
    );
    assert_eq!(
        state
            .run(&[
                "allocate",
                "--zone",
                "zone-a",
                "-n",
                "acme",
                "--owner",
                "FloatingIP/f"
            ])
            .code,
        Some(2)
    );
    assert_eq!(
        state.run(&["allocate", "--owner", "FloatingIP/f"]).code,
        Some(2)
    );
    assert!(state.allocations("cluster").is_empty());
}

#[test]
fn zone_allocate_storm_of_one_owner_gets_one_address() {
    let state = State::new(ZONE_POOLS);
    // Fill za-1 so the storm has to cross pools.
    state.run(&["allocate", "za-1", "--owner", "FloatingIP/a"]);
    state.run(&["allocate", "za-1", "--owner", "FloatingIP/b"]);
    let children: Vec<Child> = (0..12)
        .map(|_| {
            state.spawn(&[
                "allocate",
                "--zone",
                "zone-a",
                "--owner",
                "FloatingIP/storm",
            ])
        })
        .collect();
    let outputs: Vec<String> = children
        .into_iter()
        .map(|c| String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap())
        .collect();
    assert!(outputs.iter().all(|o| o == "198.51.100.9\n"), "{outputs:?}");
    assert_eq!(state.allocations("cluster").len(), 3);
}

/// A live owner's uid (a UUID, as every uid is).
const ALIVE: &str = "3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5c";

#[test]
fn reconcile_reports_then_releases_dead_owners() {
    let state = State::new(ZONE_POOLS);
    state.run(&[
        "allocate",
        "za-1",
        "--owner",
        "FloatingIP/alive",
        "--uid",
        ALIVE,
    ]);
    state.run(&["allocate", "za-1", "--owner", "FloatingIP/dead"]);
    state.run(&[
        "allocate",
        "zb-1",
        "--owner",
        "VirtualMachine/web-01/0",
        "--uid",
        "6b3a1c9e-0d4f-4c1b-9f0e-2a7d5c8e1f31",
    ]);
    // Upper case, as some inventories print uuids: the same owner.
    let live = format!(
        "# inventory\n{}\nVirtualMachine/web-01/0\n",
        ALIVE.to_uppercase()
    );
    let live = live.as_str();
    // Taken after the claims above, which are then judged however young they are.
    let after = ["--live-as-of", "2099-01-01T00:00:00Z", "--min-age", "0"];
    let with = |args: &[&'static str]| [args, &after[..]].concat();

    let report = state.run_stdin(&with(&["reconcile", "--live", "-"]), live);
    assert_eq!(report.code, Some(1), "report mode exits 1 on leaks");
    assert_eq!(
        report.stdout,
        "NAMESPACE  POOL  ADDRESS       OWNER            UID  ACTION\n-          za-1  198.51.100.2  FloatingIP/dead  -    leaked\n"
    );
    assert_eq!(
        report.stderr,
        "checked 3 allocations: 1 leaked, 0 released; 2 of 2 live lines matched an allocation\n"
    );
    assert_eq!(
        state.allocations("cluster").len(),
        3,
        "a report releases nothing"
    );

    let json = state.run_stdin(
        &with(&[
            "reconcile",
            "--live",
            "-",
            "-o",
            "json",
            "--kind",
            "VirtualMachine",
        ]),
        live,
    );
    assert_eq!(json.code, Some(0), "no leaks: exit 0");
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["kind"], "List");
    assert_eq!(value["items"].as_array().unwrap().len(), 0);
    assert_eq!(
        json.stderr,
        "checked 1 allocations: 0 leaked, 0 released; 2 of 2 live lines matched an allocation\n"
    );

    // 1 of 3: within the default cap (25% of those checked, rounded up: 1).
    let dry = state.run_stdin(
        &with(&["reconcile", "--live", "-", "--apply", "--dry-run"]),
        live,
    );
    assert_eq!(dry.code, Some(0));
    assert_eq!(
        dry.stdout,
        "NAMESPACE  POOL  ADDRESS       OWNER            UID  ACTION\n-          za-1  198.51.100.2  FloatingIP/dead  -    would-release\n"
    );
    assert_eq!(
        dry.stderr,
        "checked 3 allocations: 1 leaked, 1 would be released; 2 of 2 live lines matched an allocation\n"
    );
    assert_eq!(
        state.allocations("cluster").len(),
        3,
        "a dry run releases nothing"
    );

    let apply = state.run_stdin(&with(&["reconcile", "--live", "-", "--apply"]), live);
    assert_eq!(apply.code, Some(0));
    assert!(
        apply.stderr
            == "checked 3 allocations: 1 leaked, 1 released; 2 of 2 live lines matched an allocation\n",
        "{}",
        apply.stderr
    );
    assert_eq!(
        state.allocations("cluster"),
        ["za-1-198-51-100-1.yaml", "zb-1-203-0-113-1.yaml"]
    );
}

#[test]
fn reconcile_refuses_an_empty_live_list_with_apply() {
    let state = State::new(ZONE_POOLS);
    state.run(&["allocate", "za-1", "--owner", "FloatingIP/f"]);
    let at = ["--live-as-of", "2099-01-01T00:00:00Z", "--min-age", "0"];
    let run = state.run_stdin(
        &[&["reconcile", "--live", "-", "--apply"][..], &at].concat(),
        "\n# nothing\n",
    );
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.starts_with("error: the live list is empty"));
    assert_eq!(state.allocations("cluster").len(), 1);
    // An empty list names no kind either: which to release is said too.
    let unsaid = state.run_stdin(
        &[
            &["reconcile", "--live", "-", "--apply", "--allow-empty"][..],
            &at,
            &["--max-release", "100%"],
        ]
        .concat(),
        "",
    );
    assert_eq!(unsaid.code, Some(2), "{}", unsaid.stderr);
    assert!(unsaid.stderr.contains("`--all-kinds`"), "{}", unsaid.stderr);
    assert_eq!(state.allocations("cluster").len(), 1);
    let allowed = state.run_stdin(
        &[
            &[
                "reconcile",
                "--live",
                "-",
                "--apply",
                "--allow-empty",
                "--all-kinds",
            ][..],
            &at,
            &["--max-release", "100%"],
        ]
        .concat(),
        "",
    );
    assert_eq!(allowed.code, Some(0));
    assert!(state.allocations("cluster").is_empty());
    let bad = state.run_stdin(
        &[&["reconcile", "--live", "-"][..], &at].concat(),
        "Pod/x\n",
    );
    assert_eq!(bad.code, Some(2));
    assert!(bad.stderr.contains("line 1"), "{}", bad.stderr);
}

#[test]
fn reconcile_racing_a_reallocation_never_releases_a_live_owner() {
    // The dead owner's address is released and handed to a live owner while reconcile runs;
    // the guard on the reported owner must keep the live owner's allocation.
    // Every round, in at most 90 s.
    let rounds = Budget::new("reconcile rounds", 10, Duration::from_secs(90)).at_least(10);
    for round in rounds.rounds() {
        let state = State::new(ZONE_POOLS);
        let dead = state
            .run(&["allocate", "zb-1", "--owner", "FloatingIP/dead"])
            .stdout
            .trim()
            .to_owned();
        let reconcile = state.spawn(&[
            "reconcile",
            "--live",
            "/dev/null",
            "--apply",
            "--allow-empty",
            "--kind",
            "FloatingIP",
            // Judge the fresh claims as old: the guard under test is the owner's.
            "--live-as-of",
            "2099-01-01T00:00:00Z",
            "--min-age",
            "0",
            "--max-release",
            "100%",
        ]);
        let release = state.run(&["release", "zb-1", &dead, "--owner", "FloatingIP/dead"]);
        assert_eq!(release.code, Some(0));
        let live = state.run(&[
            "allocate",
            "zb-1",
            "--owner",
            "VirtualMachine/live/0",
            "--address",
            &dead,
        ]);
        let out = reconcile.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "round {round}");
        if live.code == Some(0) {
            let listed = state.run(&["list", "--address", &dead, "-o", "json"]);
            let value: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
            assert_eq!(
                value["items"][0]["spec"]["owner"]["name"], "live/0",
                "round {round}: the live owner lost its address"
            );
        }
    }
}
