//! A file-store batch makes its claims' names durable behind it (`src/store/fs/flush.rs`):
//! the directory `fsync` of one claim runs while the next request is looked up. A fail point
//! holds that `fsync` off, and these tests look at what the world sees meanwhile: the batch
//! has printed nothing of the claim, and the claim's owner lock is still held, so another
//! process asking for that owner waits until the name is durable, as it waited when the
//! claim synced its own directory. Killed then, the batch leaves each claim whole, and the
//! same file again answers with what is on disk. Needs `cargo test --features failpoints
//! --test batch_flush` (CI runs it).
#![cfg(feature = "failpoints")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ipamctl");

const POOL: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\nspec:\n  cidr: 10.77.0.0/24\n  kind: public\n";

/// How long the fail point holds the first `fsync` of the batch's claims off.
const HELD_MS: u64 = 3000;

struct Test {
    _dir: tempfile::TempDir,
    state: PathBuf,
}

impl Test {
    fn new() -> Test {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let test = Test { _dir: dir, state };
        test.ok(&["init", test.state.to_str().unwrap()], None);
        let pool = test.state.parent().unwrap().join("pool.yaml");
        std::fs::write(&pool, POOL).unwrap();
        test.ok(&["apply", "-f", pool.to_str().unwrap()], None);
        test
    }

    /// Applies `pools` (YAML documents).
    fn apply(&self, pools: &str) {
        let file = self.state.parent().unwrap().join("more.yaml");
        std::fs::write(&file, pools).unwrap();
        self.ok(&["apply", "-f", file.to_str().unwrap()], None);
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        if args.first() != Some(&"init") {
            cmd.arg("-d").arg(&self.state);
        }
        cmd.args(args);
        cmd
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let child = fed(&mut self.cmd(args), stdin.unwrap_or_default());
        child.wait_with_output().unwrap()
    }

    /// The batch of `requests`, its first claim's `fsync` held off by the fail point, with
    /// its stdout read line by line on a thread.
    fn held_batch(&self, requests: &str) -> (Child, Receiver<String>) {
        let mut cmd = self.cmd(&["allocate", "-f", "-", "-o", "json"]);
        let failpoint = format!("flush-before-sync=1*sleep({HELD_MS})");
        let mut child = fed(cmd.env("FAILPOINTS", failpoint), requests);
        let (tx, rx) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        (child, rx)
    }

    /// Waits (at most 10 s) until some allocation file exists: the batch's first claim has
    /// its name, and its directory's `fsync` is held off.
    fn first_claim_made(&self) {
        let dir = self.state.join("cluster/ipallocations");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if !allocation_files(&dir).is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "no claim made within 10 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Each owner's addresses, from the allocation files.
    fn holders(&self) -> Vec<(String, String)> {
        let out = self.ok(&["list", "-o", "json"], None);
        let list: serde_json::Value = serde_json::from_str(&out).unwrap();
        let mut held: Vec<(String, String)> = list["items"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|a| {
                let spec = &a["spec"];
                let owner = &spec["owner"];
                (
                    format!(
                        "{}/{}",
                        owner["kind"].as_str().unwrap(),
                        owner["name"].as_str().unwrap()
                    ),
                    spec["address"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        held.sort();
        held
    }
}

/// `cmd` started with `stdin` written to it and closed, its stdout and stderr piped.
fn fed(cmd: &mut Command, stdin: &str) -> Child {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.as_bytes()).unwrap();
    drop(pipe);
    child
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn allocation_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect()
}

fn requests(owners: &[&str]) -> String {
    owners
        .iter()
        .map(|o| format!("{{\"pool\": \"p\", \"owner\": \"{o}\"}}\n"))
        .collect()
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

#[test]
fn a_batch_prints_nothing_of_a_claim_and_keeps_its_owners_lock_until_its_name_is_durable() {
    let test = Test::new();
    let owners = [
        "VirtualMachine/a/0",
        "VirtualMachine/b/0",
        "VirtualMachine/c/0",
    ];
    let (mut batch, lines) = test.held_batch(&requests(&owners));
    test.first_claim_made();
    // Another process asks for the first request's owner while that claim's directory
    // waits for its `fsync`.
    let mut single = test
        .cmd(&["allocate", "p", "--owner", owners[0]])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(HELD_MS / 3));
    assert!(
        lines.try_recv().is_err(),
        "the batch printed a result before its claim's name was durable"
    );
    assert!(
        single.try_wait().unwrap().is_none(),
        "another process got the owner's lock before the claim's name was durable"
    );
    let batch_out = batch.wait().unwrap();
    assert!(batch_out.success());
    let printed: Vec<serde_json::Value> = lines.iter().map(|l| json(&l)).collect();
    assert_eq!(printed.len(), 3, "{printed:?}");
    for (i, (result, owner)) in printed.iter().zip(owners).enumerate() {
        assert_eq!(result["index"], i);
        assert_eq!(result["owner"], owner);
        assert_eq!(result["action"], "created", "{result}");
    }
    let single = single.wait_with_output().unwrap();
    assert!(single.status.success(), "{}", text(&single.stderr));
    // The other process waited, then found the claim: the same address, not a second one.
    assert_eq!(text(&single.stdout).trim(), printed[0]["address"]);
    let held = test.holders();
    assert_eq!(held.len(), 3, "{held:?}");
    for (result, owner) in printed.iter().zip(owners) {
        let address = result["address"].as_str().unwrap();
        assert!(
            held.contains(&(owner.to_owned(), address.to_owned())),
            "{held:?}"
        );
    }
    test.ok(&["check"], None);
}

#[test]
fn a_batch_killed_while_a_claims_name_waits_for_its_fsync_is_whole_and_runs_again() {
    let test = Test::new();
    let owners = [
        "VirtualMachine/k1/0",
        "VirtualMachine/k2/0",
        "VirtualMachine/k3/0",
    ];
    let file = requests(&owners);
    let (mut batch, lines) = test.held_batch(&file);
    test.first_claim_made();
    batch.kill().unwrap();
    batch.wait().unwrap();
    assert!(
        lines.recv_timeout(Duration::from_secs(1)).is_err(),
        "the killed batch printed a result of a claim whose name was not durable"
    );
    // Every claim made is whole: the same file again answers `existing` for it, and
    // claims the rest; no owner holds two addresses, no address has two owners.
    let made = test.holders();
    assert!(!made.is_empty());
    runs_again_whole(&test, &file, &owners, &made, "killed");
}

/// A batch that dies at any step of a claim (the third claim's pass of each fail point,
/// the directory's `fsync` behind it among them) leaves each claim whole: what it printed is
/// held as printed, and the same file again answers every request, `existing` for each
/// claim that was made, with no owner holding two addresses.
#[test]
fn a_batch_that_dies_at_any_step_of_a_claim_is_whole_and_runs_again() {
    const POINTS: [&str; 6] = [
        "write-after-temp-written",
        "write-after-temp-synced",
        "write-after-name-claimed",
        "flush-before-sync",
        "allocate-before-index",
        "index-before-hint",
    ];
    let owners: Vec<String> = (0..5).map(|i| format!("VirtualMachine/d{i}/0")).collect();
    let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
    let file = requests(&owners);
    for point in POINTS {
        let test = Test::new();
        let mut cmd = test.cmd(&["allocate", "-f", "-", "-o", "json"]);
        cmd.env("FAILPOINTS", format!("{point}=2*off->return"));
        let died = fed(&mut cmd, &file).wait_with_output().unwrap();
        assert!(
            !died.status.success(),
            "{point}: the fail point was not reached"
        );
        let made = test.holders();
        for line in text(&died.stdout).lines() {
            let result = json(line);
            let held = (
                result["owner"].as_str().unwrap().to_owned(),
                result["address"].as_str().unwrap().to_owned(),
            );
            assert!(
                made.contains(&held),
                "{point}: printed {line}, held {made:?}"
            );
        }
        runs_again_whole(&test, &file, &owners, &made, point);
    }
}

/// A pool document: `name`, `cidr`, and more spec lines.
fn pool(name: &str, cidr: &str, more: &str) -> String {
    format!(
        "---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\nspec:\n  cidr: {cidr}\n  kind: public\n{more}"
    )
}

/// A dual-stack request whose second pool is full undoes its first pool's claim, which on a
/// pool with `reuseAfter` locks that pool exclusively, while the batch still holds it
/// shared for the claim whose directory waits for its `fsync`. Found by review: the undo
/// was refused ("shares its byte with a lock this process holds shared"), exit 1, and the
/// owner kept the first pool's address. Now the undo waits for that `fsync`, then locks.
#[test]
fn a_dual_stack_claim_undone_in_a_cooling_pool_waits_for_the_batchs_fsync_and_leaves_nothing() {
    let test = Test::new();
    test.apply(&format!(
        "{}{}",
        pool("a", "10.78.0.0/24", "  reuseAfter: 1h\n"),
        pool("b", "10.79.0.0/32", "")
    ));
    test.ok(&["allocate", "b", "--owner", "VirtualMachine/full/0"], None);
    let requests = concat!(
        "{\"pool\": \"a\", \"owner\": \"VirtualMachine/first/0\"}\n",
        "{\"pools\": [\"a\", \"b\"], \"owner\": \"VirtualMachine/z/0\"}\n",
    );
    let (mut batch, lines) = test.held_batch(requests);
    assert_eq!(batch.wait().unwrap().code(), Some(5));
    let printed: Vec<serde_json::Value> = lines.iter().map(|l| json(&l)).collect();
    assert_eq!(printed.len(), 2, "{printed:?}");
    assert_eq!(printed[0]["action"], "created", "{printed:?}");
    assert_eq!(printed[1]["error"]["exit"], 5, "{printed:?}");
    let held = test.holders();
    assert!(
        !held.iter().any(|(owner, _)| owner == "VirtualMachine/z/0"),
        "the failed dual-stack claim left an address behind: {held:?}"
    );
    test.ok(&["check"], None);
}

/// The batch's next request waits for no lock while an earlier request's locks are held
/// for its `fsync`: `apply` of two pools takes them exclusively in name order, and a batch
/// that claimed in `q` (its lock held for the `fsync`) and then waited for `p` (held by
/// `apply`, which waits for `q`) stalled both until the lock timeout. Found by review: `apply`
/// failed after 8 s ("timed out ... pool `q`, held by" the batch). Now both finish.
#[test]
fn a_batch_waits_for_no_lock_while_it_holds_an_earlier_requests_locks() {
    let test = Test::new();
    let pools = format!(
        "{}{}",
        pool("p", "10.80.0.0/24", ""),
        pool("q", "10.81.0.0/24", "")
    );
    test.apply(&pools);
    let requests = concat!(
        "{\"pool\": \"q\", \"owner\": \"VirtualMachine/q1/0\"}\n",
        "{\"pool\": \"p\", \"owner\": \"VirtualMachine/p1/0\"}\n",
    );
    let mut cmd = test.cmd(&["allocate", "-f", "-", "-o", "json"]);
    cmd.env("IPAMCTL_LOCK_TIMEOUT", "8").env(
        "FAILPOINTS",
        format!("flush-before-sync=1*sleep({HELD_MS});allocate-before-index=1*sleep(1000)"),
    );
    let batch = fed(&mut cmd, requests);
    test.first_claim_made();
    // While the first claim is still inside its unit (the fail point after its create).
    std::thread::sleep(Duration::from_millis(400));
    let file = test.state.parent().unwrap().join("again.yaml");
    std::fs::write(
        &file,
        pools.replace("kind: public", "kind: public\n  reuseAfter: 1m"),
    )
    .unwrap();
    let apply = test
        .cmd(&["apply", "-f", file.to_str().unwrap()])
        .env("IPAMCTL_LOCK_TIMEOUT", "8")
        .output()
        .unwrap();
    assert!(apply.status.success(), "apply: {}", text(&apply.stderr));
    let batch = batch.wait_with_output().unwrap();
    assert!(batch.status.success(), "batch: {}", text(&batch.stderr));
    assert_eq!(text(&batch.stdout).lines().count(), 2);
    test.ok(&["check"], None);
}

/// The same batch `file` of `owners`, run again after one that died (`why`) having made
/// `made`: it answers every request, `existing` for each claim that was made and
/// `created` for the rest; every owner then holds one address, no address two owners, and
/// `check` is clean.
fn runs_again_whole(
    test: &Test,
    file: &str,
    owners: &[&str],
    made: &[(String, String)],
    why: &str,
) {
    let out = test.ok(&["allocate", "-f", "-", "-o", "json"], Some(file));
    let printed: Vec<serde_json::Value> = out.lines().map(json).collect();
    assert_eq!(printed.len(), owners.len(), "{why}: {out}");
    for (result, owner) in printed.iter().zip(owners) {
        let address = result["address"].as_str().expect("an address").to_owned();
        let was_made = made.contains(&((*owner).to_owned(), address));
        let action = if was_made { "existing" } else { "created" };
        assert_eq!(
            result["action"], action,
            "{why}: {out}\nmade before: {made:?}"
        );
    }
    let held = test.holders();
    assert_eq!(held.len(), owners.len(), "{why}: {held:?}");
    let mut addresses: Vec<&String> = held.iter().map(|(_, a)| a).collect();
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), owners.len(), "{why}: {held:?}");
    test.ok(&["check"], None);
}

/// A directory `fsync` behind the batch that fails (the fail point stands for a disk's
/// error) makes each claim of its group exit 6, outcome unknown, as a single claim's failed
/// `fsync` is: the claims exist, whether they would survive a crash is not known. The same
/// file again answers `existing` for each.
#[test]
fn a_failed_fsync_behind_the_batch_makes_its_groups_claims_exit_6() {
    let test = Test::new();
    let owners = [
        "VirtualMachine/f1/0",
        "VirtualMachine/f2/0",
        "VirtualMachine/f3/0",
    ];
    let file = requests(&owners);
    let mut cmd = test.cmd(&["allocate", "-f", "-", "-o", "json"]);
    cmd.env("FAILPOINTS", "flush-sync-fails=return");
    let out = fed(&mut cmd, &file).wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let printed: Vec<serde_json::Value> = stdout.lines().map(json).collect();
    assert_eq!(printed.len(), 3, "{stdout}");
    for result in &printed {
        assert_eq!(result["error"]["exit"], 6, "{stdout}");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(message.contains("could not be synced"), "{message}");
    }
    let made = test.holders();
    assert_eq!(made.len(), 3, "the claims exist: {made:?}");
    runs_again_whole(&test, &file, &owners, &made, "after the failed fsync");
}
