//! `allocate -f` and `release -f`: batches through the real binary, on the file store and
//! (with `IPAMCTL_TEST_STORE=postgres` for the builder's tests, always for the `pg_` ones)
//! on PostgreSQL: one result per request in input order, the documented exit, re-runs,
//! concurrent batches, a SIGKILLed batch and the outside world alongside.

mod common;
mod torture;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::{Test, code};
use serde_json::Value;
use torture::outside::{self, Slots, World};
use torture::{State, pool_yaml};

/// The JSON lines of a batch's stdout.
fn results(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Lines for the `dual-stack` fixture: successes, an exhausted subnet, a taken `--address`,
/// a bad owner, a malformed line and an unknown field, in that order.
const MIXED: &str = r#"{"pool":"vpc-main","namespace":"acme/prod","owner":"VirtualMachine/web-01/0"}
{"pools":["vpc-main","vpc-main-v6"],"namespace":"acme/prod","owner":"VirtualMachine/web-02/0"}
{"pool":"tiny","owner":"VirtualMachine/a/0"}
{"pool":"tiny","owner":"VirtualMachine/b/0"}
{"pool":"tiny","owner":"VirtualMachine/c/0"}
{"pool":"vpc-main","namespace":"acme/prod","owner":"VirtualMachine/x/0","address":"10.42.0.2"}
{"pool":"vpc-main","namespace":"acme/prod","owner":"web-03"}
{"pool": "vpc-main", owner
{"pool":"vpc-main","namespace":"acme/prod","owner":"VirtualMachine/web-04/0","colour":"red"}
{"zone":"zone-a","owner":"FloatingIP/f1","namespace":null}
"#;

#[test]
fn a_mixed_batch_gives_one_result_per_line_in_order_and_the_documented_exit() {
    let t = Test::new("dual-stack");
    let file = t.input("mixed.jsonl", MIXED);
    // `-n` applies to the lines that set no namespace (the `tiny` ones).
    let ran = t
        .args(["allocate", "-f", &file, "-n", "acme/prod", "-o", "json"])
        .status(code::FAILURE)
        .run();
    let got = results(&ran.stdout);
    assert_eq!(got.len(), 10, "{}", ran.stdout);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r["index"], i, "{r}");
        assert_eq!(r["line"], i + 1, "{r}");
    }
    let exits: Vec<Option<i64>> = got.iter().map(|r| r["error"]["exit"].as_i64()).collect();
    assert_eq!(
        exits,
        [
            None,
            None,
            None,
            None,
            Some(5),
            Some(4),
            Some(2),
            Some(2),
            Some(2),
            None
        ]
    );
    assert_eq!(got[0]["address"], "10.42.0.1");
    assert_eq!(got[0]["action"], "created");
    assert_eq!(
        got[1]["addresses"],
        serde_json::json!(["10.42.0.2", "fd00:42::1"])
    );
    assert_eq!(got[4]["owner"], "VirtualMachine/c/0");
    assert!(
        got[7]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line 8")
    );
    // `"namespace": null` is the cluster scope, whatever `-n` says.
    assert_eq!(got[9]["action"], "created", "{}", got[9]);
    assert!(
        ran.stderr
            .contains("error: 5 of 10 requests failed (exit 1)"),
        "{}",
        ran.stderr
    );

    // The same file again: every line that succeeded is `existing`, with the same answer.
    let again = ran
        .then()
        .args(["allocate", "-f", &file, "-n", "acme/prod", "-o", "json"])
        .status(code::FAILURE)
        .run();
    let second = results(&again.stdout);
    for i in [0, 1, 2, 3, 9] {
        assert_eq!(second[i]["action"], "existing", "{}", second[i]);
        assert_eq!(
            (&second[i]["address"], &second[i]["addresses"]),
            (&got[i]["address"], &got[i]["addresses"])
        );
    }
}

#[test]
fn failures_that_share_an_exit_code_exit_with_it_and_the_table_shows_each_line() {
    let t = Test::new("dual-stack");
    let file = t.input(
        "tiny.yaml",
        "- pool: tiny\n  owner: VirtualMachine/a/0\n- pool: tiny\n  owner: VirtualMachine/b/0\n- pool: tiny\n  owner: VirtualMachine/c/0\n",
    );
    let ran = t
        .args(["allocate", "-f", &file, "-n", "acme/prod"])
        .status(code::EXHAUSTED)
        .run();
    let rows: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(rows.len(), 4, "{}", ran.stdout);
    assert!(rows[1].contains("VirtualMachine/a/0") && rows[1].contains("created"));
    assert!(rows[3].starts_with("   5") && rows[3].contains("error (exit 5)"));
    // Released again from a batch, and a batch of nothing but successes exits 0.
    let release = ran.input(
        "release.jsonl",
        "{\"pool\":\"tiny\",\"address\":\"10.9.0.1\",\"owner\":\"VirtualMachine/a/0\"}\n{\"pool\":\"tiny\",\"address\":\"10.9.0.2\",\"owner\":\"VirtualMachine/b/0\"}\n",
    );
    let released = ran
        .then()
        .args(["release", "-f", &release, "-n", "acme/prod", "-o", "json"])
        .status(code::OK)
        .run();
    let got = results(&released.stdout);
    assert_eq!(got[0]["address"], "10.9.0.1");
    assert_eq!(got[1]["action"], "released");
}

/// A request's `mac` is `--mac`: the same arbiter holds a MAC once per pool, dual stack puts
/// it on both allocations, and a re-run gets each NIC its address back.
#[test]
fn a_batch_carries_macs_through_the_same_arbiter() {
    let t = Test::new("dual-stack");
    let file = t.input(
        "macs.jsonl",
        concat!(
            r#"{"pools":["vpc-main","vpc-main-v6"],"owner":"VirtualMachine/web-01/0","mac":"52:54:00:AA:00:01"}"#,
            "\n",
            r#"{"pool":"vpc-main","owner":"VirtualMachine/web-02/0","mac":"52-54-00-aa-00-01"}"#,
            "\n",
            r#"{"pool":"vpc-main","owner":"FloatingIP/fip-a","mac":"52:54:00:aa:00:02"}"#,
            "\n",
        ),
    );
    let ran = t
        .args(["allocate", "-f", &file, "-n", "acme/prod", "-o", "json"])
        // Failures of different exits (4 and 2): exit 1.
        .status(code::FAILURE)
        .run();
    let got = results(&ran.stdout);
    assert_eq!(got.len(), 3, "{}", ran.stdout);
    assert_eq!(got[0]["action"], "created", "{}", got[0]);
    assert_eq!(
        got[1]["error"]["exit"], 4,
        "a second owner of one MAC: {}",
        got[1]
    );
    assert_eq!(
        got[2]["error"]["exit"], 2,
        "a floating IP has no NIC: {}",
        got[2]
    );
    let listed = ran
        .then()
        .args([
            "list",
            "-n",
            "acme/prod",
            "--mac",
            "52:54:00:aa:00:01",
            "-o",
            "json",
        ])
        .status(code::OK)
        .run();
    assert_eq!(
        listed.stdout.matches("\"52:54:00:aa:00:01\"").count(),
        2,
        "the MAC on both allocations of the dual-stack NIC: {}",
        listed.stdout
    );
}

/// `n` owners, each asking for one address in `v4` and one in `v6` (dual stack), as JSON
/// lines, in an order that starts at `start`.
fn dual_stack_lines(n: usize, start: usize) -> String {
    (0..n)
        .map(|i| {
            let i = (i + start) % n;
            format!("{{\"pools\":[\"v4\",\"v6\"],\"owner\":\"VirtualMachine/vm-{i}/0\"}}\n")
        })
        .collect()
}

/// A fresh database holding the pools of [`DUAL_POOLS`], and a scratch directory.
fn pg_with_dual_pools() -> (common::pg::Db, tempfile::TempDir) {
    let db = common::pg::Db::new();
    let tmp = tempfile::tempdir().unwrap();
    let pools = tmp.path().join("pools.yaml");
    std::fs::write(&pools, DUAL_POOLS).unwrap();
    assert!(
        db.run(["apply", "-f", pools.to_str().unwrap()])
            .status
            .success()
    );
    (db, tmp)
}

/// Pools v4 and v6 each hold `n` allocations of `n` owners.
fn assert_one_address_per_owner_and_pool(db: &common::pg::Db, n: i64) {
    for pool in ["v4", "v6"] {
        let q = format!("SELECT count(*) FROM ipamctl.allocations WHERE pool = '{pool}'");
        assert_eq!(db.count(&q), n, "{pool}");
        let owners = format!(
            "SELECT count(DISTINCT owner_name) FROM ipamctl.allocations WHERE pool = '{pool}'"
        );
        assert_eq!(db.count(&owners), n, "{pool}");
    }
}

const DUAL_POOLS: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: v4\nspec:\n  cidr: 10.70.0.0/24\n  kind: public\n---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: v6\nspec:\n  cidr: fd00:70::/120\n  kind: public\n";

/// Each batch's answer per owner, and every batch exited 0 with one line per request.
fn answers(outs: &[(Option<i32>, String, String)], n: usize) -> BTreeMap<String, Value> {
    let mut seen: BTreeMap<String, Value> = BTreeMap::new();
    for (code, stdout, stderr) in outs {
        assert_eq!(*code, Some(code::OK), "{stderr}");
        let got = results(stdout);
        assert_eq!(got.len(), n);
        for r in got {
            let owner = r["owner"].as_str().unwrap().to_owned();
            if let Some(before) = seen.insert(owner.clone(), r["addresses"].clone()) {
                assert_eq!(before, r["addresses"], "{owner} got two answers");
            }
        }
    }
    seen
}

#[test]
fn eight_concurrent_batches_over_the_same_owners_leave_each_one_address_per_pool() {
    let state = State::new();
    assert_eq!(state.apply(DUAL_POOLS).code, Some(code::OK));
    let n = 40;
    let dir = state.outside.clone();
    let argvs: Vec<Vec<String>> = (0..8)
        .map(|b| {
            let file = dir.join(format!("batch-{b}.jsonl"));
            std::fs::write(&file, dual_stack_lines(n, b * 5)).unwrap();
            vec![
                "allocate".into(),
                "-f".into(),
                file.to_str().unwrap().into(),
                "-o".into(),
                "json".into(),
            ]
        })
        .collect();
    let outs: Vec<_> = state
        .run_all(&argvs)
        .into_iter()
        .map(|o| (o.code, o.stdout, o.stderr))
        .collect();
    let seen = answers(&outs, n);
    assert_eq!(seen.len(), n);
    let scan = state.scan();
    assert_eq!(scan.violations(), Vec::<String>::new());
    let holdings = scan.holdings();
    assert_eq!(holdings.len(), 2 * n, "{holdings:?}");
    assert!(holdings.values().all(|a| a.len() == 1), "{holdings:?}");
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn pg_eight_concurrent_batches_over_the_same_owners_leave_each_one_address_per_pool() {
    let (db, tmp) = pg_with_dual_pools();
    let n = 40;
    let children: Vec<_> = (0..8)
        .map(|b| {
            let file = tmp.path().join(format!("batch-{b}.jsonl"));
            std::fs::write(&file, dual_stack_lines(n, b * 5)).unwrap();
            common::spawn_piped(db.cmd(["allocate", "-f", file.to_str().unwrap(), "-o", "json"]))
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .collect();
    assert_eq!(answers(&outs, n).len(), n);
    assert_one_address_per_owner_and_pool(&db, n as i64);
}

#[test]
fn a_sigkilled_batch_run_again_completes_with_no_owner_holding_two_and_no_orphan() {
    let state = State::new();
    assert_eq!(
        state.apply(&pool_yaml("k", None, "10.80.0.0/22", &[])).code,
        Some(code::OK)
    );
    let n = 300;
    let lines: String = (0..n)
        .map(|i| format!("{{\"pool\":\"k\",\"owner\":\"VirtualMachine/k-{i}/0\"}}\n"))
        .collect();
    let file = state.outside.join("k.jsonl");
    std::fs::write(&file, lines).unwrap();
    let argv = ["allocate", "-f", file.to_str().unwrap(), "-o", "json"];
    for kill_after in [1usize, 40, 120] {
        let mut child = state.spawn(&argv);
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        for _ in 0..kill_after {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
        }
        // Mid-claim or between two: wherever the next request is.
        std::thread::sleep(Duration::from_millis(3));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(state.scan().violations(), Vec::<String>::new());
    }
    let out = state.run(&argv);
    assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    let got = results(&out.stdout);
    assert_eq!(got.len(), n);
    let reported: BTreeSet<String> = got
        .iter()
        .map(|r| r["address"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reported.len(), n, "two owners share an address");
    let scan = state.scan();
    assert_eq!(scan.violations(), Vec::<String>::new());
    let held: BTreeSet<String> = scan
        .holdings()
        .values()
        .map(|a| {
            assert_eq!(a.len(), 1, "an owner holds {a:?}");
            a[0].to_string()
        })
        .collect();
    // No orphan: every allocation on disk is one the batch reported.
    assert_eq!(held, reported);
}

#[test]
#[cfg_attr(
    not(all(has_pv, has_rsync)),
    ignore = "needs pv and rsync, the outside world's slow writer and second clone (apt-get install pv rsync)"
)]
fn a_batch_with_git_clean_and_cp_alongside_finds_no_violation() {
    let state = State::new();
    let pools = format!(
        "{}---\n{}",
        pool_yaml("edge", None, "10.30.0.0/24", &[]),
        pool_yaml("vpc", Some("batch/tenant"), "10.31.0.0/24", &[])
    );
    assert_eq!(state.apply(&pools).code, Some(code::OK));
    let mut world = World::start(
        &state,
        outside::Config {
            slots: vec![
                Slots::range(None, "edge", "10.30.0.160", "10.30.0.200"),
                Slots::range(Some("batch/tenant"), "vpc", "10.31.0.160", "10.31.0.200"),
            ],
            stable: |m| m.spec.owner.name().starts_with("sticky-"),
        },
    );
    let lines: String = (0..60)
        .map(|i| {
            let (pool, ns) = if i % 2 == 0 {
                ("edge", "null")
            } else {
                ("vpc", "\"batch/tenant\"")
            };
            format!(
                "{{\"pool\":\"{pool}\",\"namespace\":{ns},\"owner\":\"VirtualMachine/b-{i}/0\"}}\n"
            )
        })
        .collect();
    let file = state.outside.join("world.jsonl");
    std::fs::write(&file, lines).unwrap();
    let argv: Vec<String> = ["allocate", "-f", file.to_str().unwrap(), "-o", "json"]
        .map(String::from)
        .to_vec();
    let mut ok = 0;
    for _ in 0..3 {
        let out = state.run(&argv);
        for r in results(&out.stdout) {
            match r["error"]["exit"].as_i64() {
                None => ok += 1,
                // A file `git clean` or `cp` took from under a read: the request may be
                // asked again, as a single claim's would.
                Some(1) => {}
                Some(c) => panic!("exit {c}: {r}"),
            }
        }
    }
    assert!(ok > 0, "no request succeeded");
    let (mut violations, summary) = world.finish(&state);
    eprintln!("{summary}");
    violations.extend(state.scan().violations());
    assert_eq!(violations, Vec::<String>::new());
}

/// Writes `line` to a running batch's stdin and returns the result line it prints.
fn ask(
    stdin: &mut std::process::ChildStdin,
    stdout: &mut BufReader<std::process::ChildStdout>,
    line: &str,
) -> Value {
    use std::io::Write as _;
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    let mut out = String::new();
    stdout.read_line(&mut out).unwrap();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"))
}

#[test]
fn a_file_rewritten_or_copied_in_during_a_batch_is_seen_by_the_next_request() {
    let state = State::new();
    assert_eq!(
        state.apply(&pool_yaml("w", None, "10.90.0.0/24", &[])).code,
        Some(code::OK)
    );
    for owner in ["VirtualMachine/ant/0", "VirtualMachine/bee/0"] {
        assert_eq!(
            state.run(&["allocate", "w", "--owner", owner]).code,
            Some(code::OK)
        );
    }
    // Old enough to be recorded in the owner index, which a listing then writes: the
    // batch's first scan trusts both files by their status.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(state.run(&["list"]).code, Some(code::OK));
    let mut child = state
        .command(&["allocate", "-f", "-", "-o", "json"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let first = ask(
        &mut stdin,
        &mut stdout,
        r#"{"pool":"w","owner":"VirtualMachine/cat/0"}"#,
    );
    assert_eq!(first["address"], "10.90.0.3", "{first}");
    // As `cp` over the file does: the same inode, rewritten for another owner.
    let path = state.root.join("cluster/ipallocations/w-10-90-0-2.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("name: bee/0", "name: wasp/0")).unwrap();
    let second = ask(
        &mut stdin,
        &mut stdout,
        r#"{"pool":"w","owner":"VirtualMachine/wasp/0"}"#,
    );
    assert_eq!(second["address"], "10.90.0.2", "{second}");
    assert_eq!(second["action"], "existing", "{second}");
    // As `cp` from another clone does: a new file, for an owner the batch has not seen.
    let copied = text
        .replace("name: bee/0", "name: moth/0")
        .replace("w-10-90-0-2", "w-10-90-0-50")
        .replace("10.90.0.2", "10.90.0.50");
    std::fs::write(path.with_file_name("w-10-90-0-50.yaml"), copied).unwrap();
    let third = ask(
        &mut stdin,
        &mut stdout,
        r#"{"pool":"w","owner":"VirtualMachine/moth/0"}"#,
    );
    assert_eq!(third["address"], "10.90.0.50", "{third}");
    assert_eq!(third["action"], "existing", "{third}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert_eq!(state.scan().violations(), Vec::<String>::new());
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn pg_a_batch_on_eight_connections_gives_each_owner_one_address_per_pool_in_input_order() {
    let (db, tmp) = pg_with_dual_pools();
    // Every owner four times, so that the eight workers race for the same owners.
    let n = 40;
    let lines: String = (0..4).map(|b| dual_stack_lines(n, b * 7)).collect();
    let file = tmp.path().join("batch.jsonl");
    std::fs::write(&file, &lines).unwrap();
    let argv = [
        "allocate",
        "-f",
        file.to_str().unwrap(),
        "--jobs",
        "8",
        "-o",
        "json",
    ];
    let out = db.run(argv);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let got = results(&stdout);
    assert_eq!(got.len(), 4 * n, "{stderr}");
    for (i, (r, line)) in got.iter().zip(lines.lines()).enumerate() {
        assert_eq!(r["index"], i, "{r}");
        let asked: Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["owner"], asked["owner"], "{r}");
    }
    assert_eq!(
        answers(&[(out.status.code(), stdout, stderr)], 4 * n).len(),
        n
    );
    assert_one_address_per_owner_and_pool(&db, n as i64);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn pg_a_sigkilled_batch_on_four_connections_run_again_completes_with_no_owner_holding_two() {
    let (db, tmp) = pg_with_dual_pools();
    let n = 200;
    let lines: String = (0..n)
        .map(|i| {
            format!(
                "{{\"pools\":[\"v4\",\"v6\"],\"owner\":\"VirtualMachine/k-{}/0\"}}\n",
                i % 120
            )
        })
        .collect();
    let file = tmp.path().join("k.jsonl");
    std::fs::write(&file, lines).unwrap();
    let argv = [
        "allocate",
        "-f",
        file.to_str().unwrap(),
        "--jobs",
        "4",
        "-o",
        "json",
    ];
    for kill_after in [1usize, 30, 90] {
        let mut child = common::spawn_piped(db.cmd(argv));
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        for _ in 0..kill_after {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Whatever was in flight is whole or absent: never one pool of a dual-stack pair
        // without the other, never an owner twice.
        let q = "SELECT count(*) FROM (SELECT owner_name FROM ipamctl.allocations \
                 GROUP BY owner_name HAVING count(*) <> 2) AS torn";
        assert_eq!(db.count(q), 0, "after a kill at {kill_after}");
    }
    let out = db.run(argv);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(results(&String::from_utf8_lossy(&out.stdout)).len(), n);
    assert_one_address_per_owner_and_pool(&db, 120);
}

#[test]
fn jobs_without_a_batch_file_is_exit_2_and_claims_nothing() {
    let t = Test::new("dual-stack");
    t.args([
        "allocate",
        "vpc-main",
        "-n",
        "acme/prod",
        "--owner",
        "VirtualMachine/web-09/0",
        "--jobs",
        "2",
    ])
    .fails(code::INVALID)
    .unchanged()
    .stderr("error: --jobs runs a batch on several connections: it needs `-f FILE`\nhint: ipamctl --store URL allocate -f requests.jsonl --jobs 2\n")
    .run();
}

/// A pool loaded with owners that carry uids (as a director's are) and then `ANALYZE`d: the
/// statistics have never seen the empty uid, so they estimate it at one row. Claims without
/// a uid made after that must still find their owner by the owner's unique index, not by
/// walking every uid-less allocation through the index on the uid alone: that walk took
/// 4.3 ms a look-up at 7,000 of them and slowed each batch more than the last
/// (`bench/batch-pg`, 2026-12-05).
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn pg_owner_look_ups_take_the_owners_index_whatever_the_statistics_say() {
    let db = common::pg::Db::new();
    let tmp = tempfile::tempdir().unwrap();
    let pools = tmp.path().join("pools.yaml");
    let pool = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: big\nspec:\n  cidr: 10.32.0.0/14\n  kind: public\n";
    std::fs::write(&pools, pool).unwrap();
    assert!(
        db.run(["apply", "-f", pools.to_str().unwrap()])
            .status
            .success()
    );
    // 50,000 allocations whose owners carry uids, written as a bulk load would.
    db.sql()
        .batch_execute(
            "BEGIN;
             SET LOCAL ipamctl.counting TO 'self';
             INSERT INTO ipamctl.allocations
                 (namespace, pool, address, owner_kind, owner_name, owner_uid, manifest)
             SELECT '', 'big', a, 'VirtualMachine', 'vm-' || i || '/0', u::text,
                    convert_to(format(E'apiVersion: pivirt.hu/v1\\nkind: IPAllocation\\nmetadata:\\n  name: big-%s\\nspec:\\n  pool: big\\n  address: \"%s\"\\n  owner:\\n    kind: VirtualMachine\\n    uid: %s\\n    name: vm-%s/0\\n',
                                      replace(host(a), '.', '-'), host(a), u, i), 'UTF8')
             FROM generate_series(1, 50000) AS i,
                  LATERAL (SELECT '10.32.0.0'::inet + 100000 + i AS a,
                                  md5(i::text)::uuid AS u) AS row;
             INSERT INTO ipamctl.pool_counts (namespace, pool, delta) VALUES ('', 'big', 50000);
             COMMIT;
             ANALYZE ipamctl.allocations;",
        )
        .unwrap();
    let scans = || {
        let mut sql = db.sql();
        sql.batch_execute("SELECT pg_stat_clear_snapshot()")
            .unwrap();
        sql.query_one(
            "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'allocations_owner_uid'",
            &[],
        )
        .unwrap()
        .get::<_, i64>(0)
    };
    let lines = |tag: &str| -> String {
        (0..300)
            .map(|i| format!("{{\"pool\":\"big\",\"owner\":\"VirtualMachine/{tag}-{i}/0\"}}\n"))
            .collect()
    };
    let file = tmp.path().join("first.jsonl");
    std::fs::write(&file, lines("first")).unwrap();
    assert!(
        db.run(["allocate", "-f", file.to_str().unwrap()])
            .status
            .success()
    );
    let before = scans();
    // New owners, then the same owners again: every look-up is by owner.
    let file = tmp.path().join("second.jsonl");
    std::fs::write(&file, lines("second").repeat(2)).unwrap();
    let out = db.run(["allocate", "-f", file.to_str().unwrap(), "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = results(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(got.len(), 600);
    assert!(
        got[300..].iter().all(|r| r["action"] == "existing"),
        "{got:?}"
    );
    assert_eq!(
        scans(),
        before,
        "600 owner look-ups walked the index on the uid alone"
    );
}
