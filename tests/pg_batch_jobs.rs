//! A PostgreSQL batch on four connections (`allocate -f FILE --jobs 4`) in the outside
//! world, through the real binary against a real server: single `allocate` and `release`
//! processes over the same pools while it runs, a SIGKILL mid-run, and backends the server
//! terminates under it. Whatever happens, every address it printed is held as printed, no
//! owner is torn between its two pools, no address is held twice, and the same file again
//! finishes the batch (`src/store/pg/siblings.rs`, `src/store/pg/group.rs`).

mod pg;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use pg::{Db, answered, json_lines, stderr, stdout, wait_or_kill};
use serde_json::Value;

const POOLS: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: v4\nspec:\n  cidr: 10.72.0.0/22\n  kind: public\n---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: v6\nspec:\n  cidr: fd00:72::/118\n  kind: public\n";

/// A database holding pools `v4` and `v6`, and a directory for the test's files.
fn setup() -> (Db, tempfile::TempDir) {
    let db = Db::new();
    let tmp = tempfile::tempdir().unwrap();
    db.apply(tmp.path(), POOLS);
    (db, tmp)
}

/// The owner `VirtualMachine/<name>/0`.
fn vm(name: &str) -> String {
    format!("VirtualMachine/{name}/0")
}

/// A dual-stack request's JSON line (with its newline).
fn request(owner: &str) -> String {
    format!("{{\"pools\":[\"v4\",\"v6\"],\"owner\":\"{owner}\"}}\n")
}

/// `lines` written to `name` in `dir`: the path.
fn write(dir: &Path, name: &str, lines: &[String]) -> String {
    let file = dir.join(name);
    std::fs::write(&file, lines.concat()).unwrap();
    file.to_str().unwrap().to_owned()
}

/// The addresses in a single command's `-o json` List, in its order.
fn listed(text: &str) -> Vec<String> {
    let list: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let items = list["items"].as_array().unwrap();
    let addresses = items.iter().map(|m| m["spec"]["address"].as_str().unwrap());
    addresses.map(str::to_owned).collect()
}

/// What the database holds, each owner's addresses (v4, then v6), after checking that the
/// pools are whole: each owner holds exactly one IPv4 address in `v4` and one IPv6 address
/// in `v6` (none is torn between the two), and no address is held twice.
fn held(db: &Db) -> BTreeMap<String, Vec<String>> {
    let rows = db
        .sql()
        .query(
            "SELECT owner_kind || '/' || owner_name, pool, host(address) FROM ipamctl.allocations
             ORDER BY 1, 2",
            &[],
        )
        .unwrap();
    let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for row in rows {
        let (owner, pool, address): (String, String, String) = (row.get(0), row.get(1), row.get(2));
        assert!(seen.insert(address.clone()), "{address} is held twice");
        let v6 = address.parse::<IpAddr>().unwrap().is_ipv6();
        assert_eq!(pool, if v6 { "v6" } else { "v4" }, "{owner}: {address}");
        held.entry(owner).or_default().push(address);
    }
    for (owner, addresses) in &held {
        let pools: Vec<bool> = addresses
            .iter()
            .map(|a| a.parse::<IpAddr>().unwrap().is_ipv6())
            .collect();
        assert_eq!(pools, [false, true], "{owner} is torn: {addresses:?}");
    }
    held
}

/// `ipamctl allocate -f - --jobs 4 -o json`, fed through a pipe: the child, and its result
/// lines as they come.
fn piped_batch(db: &Db) -> (Child, Receiver<String>) {
    let mut child = db
        .cmd(["allocate", "-f", "-", "--jobs", "4", "-o", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = out;
        loop {
            let mut line = String::new();
            // A line cut short by a kill was not printed: only whole lines count.
            match out.read_line(&mut line) {
                Ok(n) if n > 0 && line.ends_with('\n') => {
                    line.pop();
                    if tx.send(line).is_err() {
                        return;
                    }
                }
                _ => return,
            }
        }
    });
    (child, rx)
}

/// The single processes that run beside the batch of test 1, each started once the batch has
/// been fed the request at its index: (index, `allocate` or `release`, owner).
const SINGLES: [(usize, &str, &str); 8] = [
    (20, "allocate", "vm-30"),
    (35, "release", "vm-50"),
    (50, "allocate", "other-0"),
    (65, "release", "gone-0"),
    (80, "allocate", "vm-90"),
    (95, "release", "vm-110"),
    (110, "allocate", "other-1"),
    (125, "release", "gone-1"),
];

/// How many requests the batch of test 1 gets; the last [`AFTER_SINGLES`] only once every
/// single process has finished, so that the batch claims both before and after them.
const BATCH: usize = 160;
const AFTER_SINGLES: usize = 140;

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn single_claims_and_releases_beside_a_four_connection_batch_leave_every_answer_true() {
    let (db, tmp) = setup();
    // Held before the batch, and released by single processes while it runs: two owners the
    // batch also asks for (`vm-50`, `vm-110`), two it does not (`gone-*`).
    let before: Vec<String> = ["vm-50", "vm-110", "gone-0", "gone-1"]
        .iter()
        .map(|n| request(&vm(n)))
        .collect();
    let file = write(tmp.path(), "before.jsonl", &before);
    let out = db.run(["allocate", "-f", &file, "-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let pre = answered(&json_lines(&stdout(&out)));
    let lines: Vec<String> = (0..BATCH)
        .map(|i| request(&vm(&format!("vm-{i}"))))
        .collect();
    let file = write(tmp.path(), "batch.jsonl", &lines);

    let (mut batch, rx) = piped_batch(&db);
    let mut stdin = batch.stdin.take().unwrap();
    // The batch has connected and committed a claim before the first single starts; it is
    // fed a line a millisecond, so it is claiming while the singles run.
    stdin.write_all(lines[..10].concat().as_bytes()).unwrap();
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a first result");
    let mut singles = Vec::new();
    for (i, line) in lines.iter().enumerate().take(AFTER_SINGLES).skip(10) {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.flush().unwrap();
        if let Some((_, command, name)) = SINGLES.iter().find(|s| s.0 == i) {
            let owner = vm(name);
            let child = db
                .cmd([command, "--owner", &owner, "-o", "json"])
                .args(if *command == "allocate" {
                    &["v4", "v6"][..]
                } else {
                    &[]
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            singles.push((*command, owner, child));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let singles: BTreeMap<String, (&str, Vec<String>)> = singles
        .into_iter()
        .map(|(command, owner, child)| {
            let out = wait_or_kill(child, 60, &format!("{command} {owner}"));
            assert!(out.status.success(), "{command} {owner}: {}", stderr(&out));
            (owner, (command, listed(&stdout(&out))))
        })
        .collect();
    stdin
        .write_all(lines[AFTER_SINGLES..].concat().as_bytes())
        .unwrap();
    drop(stdin);
    let out = wait_or_kill(batch, 60, "the batch");
    assert!(out.status.success(), "{}", stderr(&out));
    let got = json_lines(
        &[first]
            .into_iter()
            .chain(rx.iter())
            .collect::<Vec<_>>()
            .join("\n"),
    );
    assert_eq!(got.len(), BATCH);
    let answers = answered(&got);
    assert_eq!(answers.len(), BATCH, "{got:?}");
    let action = |owner: &str| {
        let r = got.iter().find(|r| r["owner"] == owner).unwrap();
        r["action"].as_str().unwrap().to_owned()
    };

    // What is held is what was answered, owner by owner, whoever answered last.
    let stored = held(&db);
    let mut expected = BTreeMap::new();
    for (owner, addresses) in &answers {
        match singles.get(owner) {
            // Released beside the batch: the addresses held before, whether the batch saw
            // them (`existing`, then released) or came after (`created`, and held).
            Some(("release", released)) => {
                assert_eq!(Some(released), pre.get(owner), "{owner}");
                match action(owner).as_str() {
                    "existing" => assert_eq!(Some(addresses), pre.get(owner), "{owner}"),
                    "created" => {
                        expected.insert(owner.clone(), addresses.clone());
                    }
                    other => panic!("{owner}: {other}"),
                }
            }
            // Claimed by a single process too: one claim, both answers the same.
            Some((_, claimed)) => {
                assert_eq!(
                    claimed, addresses,
                    "{owner}: the single and the batch differ"
                );
                expected.insert(owner.clone(), addresses.clone());
            }
            None => {
                assert_eq!(action(owner), "created", "{owner}");
                expected.insert(owner.clone(), addresses.clone());
            }
        }
    }
    for (owner, (command, addresses)) in &singles {
        if answers.contains_key(owner) {
            continue;
        }
        if *command == "allocate" {
            expected.insert(owner.clone(), addresses.clone());
        } else {
            assert_eq!(Some(addresses), pre.get(owner), "{owner}");
        }
    }
    assert_eq!(stored, expected);
    // The same file again: `existing`, but `created` for an owner released after the batch
    // answered it.
    let second = check_then_again(&db, &file, &stored);
    let finished = held(&db);
    assert_eq!(answered(&second).len(), BATCH);
    for (owner, addresses) in answered(&second) {
        assert_eq!(finished.get(&owner), Some(&addresses), "{owner}");
        if let Some(before) = stored.get(&owner) {
            assert_eq!(&addresses, before, "{owner}");
        }
    }
}

/// The exit code the documented rule gives a batch with these results: 0 when none failed,
/// else the code its failures share, or 1 when theirs differ.
fn batch_exit(got: &[Value]) -> i32 {
    let mut codes = got.iter().filter_map(|r| r["error"]["exit"].as_i64());
    match codes.next() {
        None => 0,
        Some(first) if codes.all(|c| c == first) => first as i32,
        Some(_) => 1,
    }
}

/// Asserts that `got` is one result a request, in input order, for the first `got.len()`
/// requests.
#[track_caller]
fn in_input_order(got: &[Value]) {
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r["index"], i, "{r}");
        assert_eq!(r["line"], i + 1, "{r}");
        assert_eq!(
            r["owner"].as_str(),
            Some(vm(&format!("vm-{i}")).as_str()),
            "{r}"
        );
    }
}

/// `rx`'s lines until it has `n` of them in all (with `got`'s), as results.
fn read_until(rx: &Receiver<String>, got: &mut Vec<Value>, n: usize, what: &str) {
    while got.len() < n {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{what}: result {} of {n}: {e}", got.len() + 1));
        got.extend(json_lines(&line));
    }
}

/// `check` passes; then the batch of `file` again on four connections exits 0, answering
/// `existing` for each owner `stored` holds and `created` for the others: its results.
fn check_then_again(db: &Db, file: &str, stored: &BTreeMap<String, Vec<String>>) -> Vec<Value> {
    db.assert_check_clean();
    let again = db.run(["allocate", "-f", file, "--jobs", "4", "-o", "json"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let second = json_lines(&stdout(&again));
    for r in &second {
        let owner = r["owner"].as_str().unwrap();
        let want = if stored.contains_key(owner) {
            "existing"
        } else {
            "created"
        };
        assert_eq!(r["action"], want, "{r}");
    }
    second
}

/// After a batch of `file` (`total` requests for `vm-0`, `vm-1`, …) was cut short having
/// printed `printed`: every claim it printed is held as printed, no owner is torn, no
/// address is held twice, `check` passes; and the same file again on four connections
/// exits 0, each owner holding one address in each pool, every owner held before answering
/// `existing` with the same addresses and the others `created`.
fn cut_short_then_again(db: &Db, file: &str, total: usize, printed: &[Value]) {
    let stored = held(db);
    for (owner, addresses) in answered(printed) {
        assert_eq!(
            stored.get(&owner),
            Some(&addresses),
            "{owner}: printed, but not held so"
        );
    }
    let second = check_then_again(db, file, &stored);
    assert_eq!(second.len(), total);
    in_input_order(&second);
    let finished = held(db);
    assert_eq!(finished, answered(&second));
    for (owner, addresses) in &stored {
        assert_eq!(finished.get(owner), Some(addresses), "{owner}");
    }
}

/// How many requests each batch of test 2 is fed: more than it answers before its kill.
const KILLED: usize = 400;

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_four_connection_batch_killed_mid_run_printed_only_what_it_committed_and_the_same_file_finishes_it()
 {
    for after in [1, 50, 150] {
        let (db, tmp) = setup();
        let lines: Vec<String> = (0..KILLED)
            .map(|i| request(&vm(&format!("vm-{i}"))))
            .collect();
        let file = write(tmp.path(), "batch.jsonl", &lines);
        let (mut batch, rx) = piped_batch(&db);
        // All of it at once (it fits a pipe's buffer), the pipe left open: the batch is
        // still claiming, or waiting for more, when it is killed.
        let mut stdin = batch.stdin.take().unwrap();
        stdin.write_all(lines.concat().as_bytes()).unwrap();
        let mut printed = Vec::new();
        read_until(&rx, &mut printed, after, "the batch");
        batch.kill().unwrap();
        batch.wait().unwrap();
        printed.extend(rx.iter().flat_map(|l| json_lines(&l)));
        assert!(
            printed.len() < KILLED,
            "killed after {after}: the batch had finished"
        );
        in_input_order(&printed);
        for r in &printed {
            assert_eq!(r["action"], "created", "{r}");
        }
        cut_short_then_again(&db, &file, KILLED, &printed);
    }
}

/// Test 3's batch: how many requests, and the phases it is fed in: up to [`FED`]`[0]` first,
/// and the next phase once it printed [`TERMINATE_AT`] results, one of its four backends
/// terminated under it; up to `FED[1]` fed, then `FED[2]` once those were answered (only the
/// other three connections are left for them); the rest, the other three terminated.
const TERMINATED: usize = 600;
const FED: [usize; 3] = [150, 250, 450];
const TERMINATE_AT: usize = 40;

/// The server processes of the database's clients other than `sql`, and whether each is in
/// a transaction that wrote (a group that claimed, and has not committed).
fn backends(sql: &mut postgres::Client) -> Vec<(i32, bool)> {
    let rows = sql
        .query(
            "SELECT pid, backend_xid IS NOT NULL FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND backend_type = 'client backend'
             ORDER BY pid",
            &[],
        )
        .unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// Terminates, once one of them holds uncommitted claims, that one (`all`: every backend
/// of the database); returns how many backends there were.
fn terminate_mid_group(sql: &mut postgres::Client, all: bool) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pids = backends(sql);
        if let Some(&(pid, _)) = pids.iter().find(|(_, claimed)| *claimed) {
            let doomed = if all {
                pids.iter().map(|p| p.0).collect()
            } else {
                vec![pid]
            };
            for pid in doomed {
                sql.execute("SELECT pg_terminate_backend($1)", &[&pid])
                    .unwrap();
            }
            return pids.len();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no group under way: {pids:?}"
        );
    }
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_four_connection_batch_whose_backends_are_terminated_answers_every_request_once_and_truly() {
    let (db, tmp) = setup();
    let lines: Vec<String> = (0..TERMINATED)
        .map(|i| request(&vm(&format!("vm-{i}"))))
        .collect();
    let file = write(tmp.path(), "batch.jsonl", &lines);
    let mut sql = db.sql();
    let (mut batch, rx) = piped_batch(&db);
    let mut stdin = batch.stdin.take().unwrap();
    let mut feed = |from: usize, to: usize| {
        stdin
            .write_all(lines[from..to].concat().as_bytes())
            .unwrap();
        stdin.flush().unwrap();
    };
    let mut got = Vec::new();
    let failed = |got: &[Value]| got.iter().filter(|r| !r["error"].is_null()).count();

    // One backend of four, in the middle of a group.
    feed(0, FED[0]);
    read_until(&rx, &mut got, TERMINATE_AT, "the batch");
    feed(FED[0], FED[1]);
    assert_eq!(terminate_mid_group(&mut sql, false), 4, "--jobs 4");
    read_until(&rx, &mut got, FED[1], "the batch, one backend terminated");
    // Requests that the other three connections could claim.
    feed(FED[1], FED[2]);
    read_until(&rx, &mut got, FED[2], "the batch, one backend terminated");
    let mut messages: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &got[FED[1]..FED[2]] {
        if let Some(m) = r["error"]["message"].as_str() {
            *messages.entry(m).or_default() += 1;
        }
    }
    // What a lost connection costs the batch (`cargo test -- --nocapture` shows it).
    eprintln!(
        "one of four backends terminated mid-group: {} of the first {} requests failed; \
         then {} of the {} fed once those were answered: {messages:?}",
        failed(&got[..FED[1]]),
        FED[1],
        failed(&got[FED[1]..FED[2]]),
        FED[2] - FED[1],
    );
    // The group the lost connection had in hand was undone with it and goes to the other
    // three, which run everything fed after it too: nothing fails, unless the connection
    // was lost while it committed (exit 6, at most that group). Before, that group failed
    // (exit 1).
    let lost_committing = |r: &&Value| r["error"].is_null() || r["error"]["exit"] == 6;
    assert!(
        got[..FED[1]].iter().all(|r| lost_committing(&r)),
        "{:?}",
        &got[..FED[1]]
    );
    assert!(failed(&got[..FED[1]]) <= 32, "{:?}", &got[..FED[1]]);
    assert_eq!(failed(&got[FED[1]..FED[2]]), 0, "{messages:?}");

    // The other three, one of them (at least) in the middle of a group.
    feed(FED[2], TERMINATED);
    assert_eq!(terminate_mid_group(&mut sql, true), 3);
    drop(stdin);
    let out = wait_or_kill(batch, 60, "the batch");
    got.extend(rx.iter().flat_map(|l| json_lines(&l)));
    assert_eq!(got.len(), TERMINATED);
    in_input_order(&got);
    for r in &got {
        let exit = &r["error"]["exit"];
        assert!(
            exit.is_null() || exit == 1 || exit == 6,
            "a lost connection is exit 1, or 6 when it was lost committing: {r}"
        );
    }
    let code = batch_exit(&got);
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    if code != 0 {
        let summary = format!(
            "error: {} of {TERMINATED} requests failed (exit {code})",
            failed(&got)
        );
        assert_eq!(stderr(&out).lines().last(), Some(summary.as_str()));
    }
    drop(sql);
    cut_short_then_again(&db, &file, TERMINATED, &got);
}
