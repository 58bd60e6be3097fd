//! A one-connection batch on PostgreSQL runs its requests in groups, one transaction each
//! (`src/store/pg/group.rs`), through the real binary against a real server: the groups
//! happen, a result is printed only for what committed, and a group that the server breaks
//! (a serialization failure, a refused `COMMIT`, a lost answer) costs no request its claim.

mod pg;

use std::collections::BTreeMap;
use std::process::Output;

use pg::{Db, answered, json_lines, stderr, stdout};
use serde_json::Value;

const POOLS: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: v4\nspec:\n  cidr: 10.71.0.0/24\n  kind: public\n---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: v6\nspec:\n  cidr: fd00:71::/120\n  kind: public\n";

/// A database holding pools `v4` and `v6`, a file of `n` dual-stack requests, and the
/// directory holding it.
fn setup(n: usize) -> (Db, tempfile::TempDir, String) {
    let db = Db::new();
    let tmp = tempfile::tempdir().unwrap();
    let pools = tmp.path().join("pools.yaml");
    std::fs::write(&pools, POOLS).unwrap();
    let out = db.run(["apply", "-f", pools.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: String = (0..n)
        .map(|i| format!("{{\"pools\":[\"v4\",\"v6\"],\"owner\":\"VirtualMachine/vm-{i}/0\"}}\n"))
        .collect();
    let file = tmp.path().join("requests.jsonl");
    std::fs::write(&file, lines).unwrap();
    let file = file.to_str().unwrap().to_owned();
    (db, tmp, file)
}

/// The batch's JSON lines, one per request.
fn results(out: &Output) -> Vec<Value> {
    json_lines(&stdout(out))
}

/// What the database holds: each owner's addresses (v4 then v6), and that no owner holds
/// two in a pool.
fn held(db: &Db) -> BTreeMap<String, Vec<String>> {
    for pool in ["v4", "v6"] {
        let q = format!(
            "SELECT count(*) FROM (SELECT owner_name FROM ipamctl.allocations WHERE pool = '{pool}'
             GROUP BY owner_name HAVING count(*) > 1) AS twice"
        );
        assert_eq!(db.count(&q), 0, "an owner holds two addresses in {pool}");
    }
    let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let rows = db
        .sql()
        .query(
            "SELECT owner_kind || '/' || owner_name, host(address) FROM ipamctl.allocations
             ORDER BY pool, address",
            &[],
        )
        .unwrap();
    for row in rows {
        held.entry(row.get(0)).or_default().push(row.get(1));
    }
    held
}

/// Runs the 200 requests of `file` (with `args`), checks that each was `created` and that
/// the database holds what was answered; the results, and how many transactions made the
/// claims (an event's time is its transaction's start, `now()`: one per transaction).
fn created_in_transactions(db: &Db, file: &str, args: &[&str]) -> (Vec<Value>, i64) {
    let mut argv = vec!["allocate", "-f", file, "-o", "json"];
    argv.extend_from_slice(args);
    let out = db.run(argv);
    assert!(out.status.success(), "{}", stderr(&out));
    let got = results(&out);
    assert_eq!(got.len(), 200);
    assert!(got.iter().all(|r| r["action"] == "created"), "{got:?}");
    assert_eq!(answered(&got), held(db));
    let transactions = db.count(
        "SELECT count(DISTINCT at) FROM ipamctl.events WHERE action = 'claimed'
         AND kind = 'IPAllocation'",
    );
    (got, transactions)
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_batch_on_one_connection_commits_its_claims_in_groups() {
    let (db, _tmp, file) = setup(200);
    let (got, transactions) = created_in_transactions(&db, &file, &[]);
    assert!(
        (7..=40).contains(&transactions),
        "200 claims in {transactions} transactions, not in groups of up to 32"
    );
    // The same batch again: every request answers `existing`, with the same addresses.
    let again = db.run(["allocate", "-f", &file, "-o", "json"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let second = results(&again);
    assert!(
        second.iter().all(|r| r["action"] == "existing"),
        "{second:?}"
    );
    assert_eq!(answered(&second), answered(&got));
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_group_the_server_breaks_runs_its_requests_again_one_by_one() {
    let (db, _tmp, file) = setup(100);
    // vm-2's first claim fails with a serialization failure as it is made, and the first
    // `COMMIT` of vm-40's claims is refused (in a later group: one holds at most 32): each
    // once, as a sequence is not rolled back.
    db.sql()
        .batch_execute(
            "CREATE SEQUENCE public.made;
             CREATE SEQUENCE public.committed;
             CREATE FUNCTION public.fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.owner_name = 'vm-2/0' THEN
                     IF nextval('public.made') = 1 THEN
                         RAISE EXCEPTION 'made to fail' USING ERRCODE = 'serialization_failure';
                     END IF;
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE FUNCTION public.refuse_once() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.owner_name = 'vm-40/0' THEN
                     IF nextval('public.committed') = 1 THEN
                         RAISE EXCEPTION 'refused at commit';
                     END IF;
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER fail_once AFTER INSERT ON ipamctl.allocations
                 FOR EACH ROW EXECUTE FUNCTION public.fail_once();
             CREATE CONSTRAINT TRIGGER refuse_once AFTER INSERT ON ipamctl.allocations
                 DEFERRABLE INITIALLY DEFERRED
                 FOR EACH ROW EXECUTE FUNCTION public.refuse_once();",
        )
        .unwrap();
    let out = db.run(["allocate", "-f", &file, "-o", "json"]);
    assert!(out.status.success(), "{}\n{}", stderr(&out), stdout(&out));
    let got = results(&out);
    assert_eq!(got.len(), 100);
    assert!(got.iter().all(|r| r["action"] == "created"), "{got:?}");
    assert_eq!(answered(&got), held(&db));
    // Both fired, and the claims they failed were made again.
    assert!(db.count("SELECT last_value FROM public.made") >= 2);
    assert!(db.count("SELECT last_value FROM public.committed") >= 3);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_group_whose_commit_answer_is_lost_reports_each_claim_unknown_and_a_rerun_finishes() {
    let (db, _tmp, file) = setup(150);
    // The third `COMMIT` reaches the server; its answer never comes back.
    let proxy = pg::Proxy::start("COMMIT", 3, pg::Cut::AfterSending);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ipamctl"))
        .args(["--store", &proxy.url(db.name()), "allocate", "-f", &file])
        .args(["-o", "json"])
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .output()
        .unwrap();
    assert!(proxy.fired());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let got = results(&out);
    assert_eq!(got.len(), 150);
    let exits: Vec<Option<i64>> = got.iter().map(|r| r["error"]["exit"].as_i64()).collect();
    // Results come in input order: the groups that committed, the one whose answer was
    // lost (unknown, exit 6), then the requests the lost connection failed (exit 1).
    let created = exits.iter().take_while(|e| e.is_none()).count();
    let unknown = exits[created..]
        .iter()
        .take_while(|e| **e == Some(6))
        .count();
    assert!(created >= 2 && unknown >= 1, "{exits:?}");
    assert!(
        exits[created + unknown..].iter().all(|e| *e == Some(1)),
        "{exits:?}"
    );
    // Every `created` printed is held, and nothing is held but what committed: the
    // printed claims and the unknown group's.
    let printed = answered(&got);
    let stored = held(&db);
    for (owner, addresses) in &printed {
        assert_eq!(stored.get(owner), Some(addresses), "{owner}");
    }
    assert_eq!(stored.len(), created + unknown);
    // The same batch again finishes it: the unknown group had committed (`existing`).
    let again = db.run(["allocate", "-f", &file, "-o", "json"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let second = results(&again);
    let existing = second.iter().filter(|r| r["action"] == "existing").count();
    assert_eq!(existing, created + unknown);
    assert_eq!(answered(&second), held(&db));
}

#[test]
#[cfg_attr(
    not(all(has_postgres, has_pgbouncer)),
    ignore = "needs PostgreSQL and PgBouncer (apt-get install pgbouncer): apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn batches_through_pgbouncer_transaction_pooling_leave_no_statement_behind() {
    let (db, tmp, _) = setup(0);
    // Eight batches at once through four server connections: each group's transaction runs
    // on one of them, and the next on any; a statement a group prepared and left behind would
    // clash with the next group's of the same name (the client names them `s0`, `s1`, …).
    let bouncer = pg::Bouncer::start();
    let children: Vec<_> = (0..8)
        .map(|b| {
            let lines: String = (0..30)
                .map(|i| format!("{{\"pool\":\"v4\",\"owner\":\"VirtualMachine/b{b}-{i}/0\"}}\n"))
                .collect();
            let file = tmp.path().join(format!("batch-{b}.jsonl"));
            std::fs::write(&file, lines).unwrap();
            bouncer
                .cmd(
                    &db,
                    &["allocate", "-f", file.to_str().unwrap(), "-o", "json"],
                )
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = pg::wait_or_kill(child, 120, "a batch through PgBouncer");
        assert!(out.status.success(), "{}", stderr(&out));
        let got = results(&out);
        assert_eq!(got.len(), 30);
        assert!(got.iter().all(|r| r["action"] == "created"), "{got:?}");
    }
    assert_eq!(
        db.count("SELECT count(DISTINCT owner_name) FROM ipamctl.allocations WHERE pool = 'v4'"),
        240
    );
    held(&db);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_batch_killed_mid_group_printed_only_what_committed_and_a_rerun_finishes() {
    use std::io::{BufRead, BufReader};
    let (db, _tmp, file) = setup(200);
    let mut printed: Vec<Value> = Vec::new();
    // Killed after reading 1, 40 and 100 result lines, and once after a pause alone: each
    // time in the middle of some group, whose claims are neither held nor printed.
    for (kill_after, pause_ms) in [(1usize, 0u64), (40, 0), (100, 0), (0, 150)] {
        let mut child = db
            .cmd(["allocate", "-f", &file, "-o", "json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        for _ in 0..kill_after {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            printed.push(serde_json::from_str(&line).unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        // Every claim printed is held, as printed (committed before it was printed), and
        // nothing is torn: an owner holds both pools' addresses or neither.
        let stored = held(&db);
        for (owner, addresses) in answered(&printed) {
            assert_eq!(
                stored.get(&owner),
                Some(&addresses),
                "{owner}, after {kill_after}"
            );
        }
        assert!(stored.values().all(|a| a.len() == 2), "{stored:?}");
    }
    let again = db.run(["allocate", "-f", &file, "-o", "json"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let last = results(&again);
    assert_eq!(last.len(), 200);
    let finished = answered(&last);
    assert_eq!(finished, held(&db));
    for (owner, addresses) in answered(&printed) {
        assert_eq!(finished.get(&owner), Some(&addresses), "{owner}");
    }
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_batch_on_four_connections_groups_its_claims_and_fills_the_pools_without_a_false_exhaustion() {
    let (db, tmp, file) = setup(200);
    let (_, transactions) = created_in_transactions(&db, &file, &["--jobs", "4"]);
    assert!(
        transactions < 100,
        "200 claims on 4 connections in {transactions} transactions, not in groups"
    );
    // No claim of the workers moved a pool's hint; the batch's end did, past all 200
    // (`siblings.rs`), so that the next batch's workers do not walk them again.
    let hints = db
        .sql()
        .query(
            "SELECT pool, host(low_water) FROM ipamctl.pool_hints ORDER BY pool",
            &[],
        )
        .unwrap();
    let hints: Vec<(String, Option<String>)> = hints.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        hints,
        [
            ("v4".to_owned(), Some("10.71.0.201".to_owned())),
            ("v6".to_owned(), Some("fd00:71::c9".to_owned())),
        ],
        "the hints after 200 claims into empty pools"
    );
    // More requests than the pools have room for: every address is handed out, the rest
    // are exit 5, and nothing is left that a single claim could still get.
    let lines: String = (0..80)
        .map(|i| format!("{{\"pools\":[\"v4\",\"v6\"],\"owner\":\"VirtualMachine/late-{i}/0\"}}\n"))
        .collect();
    let late = tmp.path().join("late.jsonl");
    std::fs::write(&late, lines).unwrap();
    let out = db.run([
        "allocate",
        "-f",
        late.to_str().unwrap(),
        "--jobs",
        "4",
        "-o",
        "json",
    ]);
    let failed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"exit\":") && !l.contains("\"exit\":5"))
        .map(str::to_owned)
        .collect();
    assert_eq!(out.status.code(), Some(5), "{}{failed:#?}", stderr(&out));
    let got = results(&out);
    assert_eq!(got.len(), 80);
    for r in got.iter().filter(|r| !r["error"].is_null()) {
        assert_eq!(r["error"]["exit"], 5, "{r}");
    }
    let holders = held(&db);
    let mut seen = std::collections::BTreeSet::new();
    for address in holders.values().flatten() {
        assert!(seen.insert(address.clone()), "{address} handed out twice");
    }
    let v4 = db.count("SELECT count(*) FROM ipamctl.allocations WHERE pool = 'v4'");
    let v6 = db.count("SELECT count(*) FROM ipamctl.allocations WHERE pool = 'v6'");
    assert_eq!(v4, v6, "a dual-stack claim is whole or nothing");
    let single = db.run(["allocate", "v4", "v6", "--owner", "VirtualMachine/after/0"]);
    assert_eq!(
        single.status.code(),
        Some(5),
        "{v4} pairs held, and room left for one more: {}",
        stdout(&single)
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_batch_that_loses_one_of_four_connections_runs_the_rest_on_the_other_three() {
    use std::io::{BufRead, BufReader, Write};
    let (db, tmp, _) = setup(0);
    // 240 of the pools' 254 addresses: the lost connection's requests do not fill them.
    let lines: Vec<String> = (0..240)
        .map(|i| format!("{{\"pools\":[\"v4\",\"v6\"],\"owner\":\"VirtualMachine/vm-{i}/0\"}}\n"))
        .collect();
    let mut child = db
        .cmd(["allocate", "-f", "-", "--jobs", "4", "-o", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Four requests, one for each connection, and their results: all four are open.
    stdin.write_all(lines[..4].concat().as_bytes()).unwrap();
    let mut first = Vec::new();
    for _ in 0..4 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        first.push(line);
    }
    let mine = "pid <> pg_backend_pid() AND datname = current_database() AND backend_type = 'client backend'";
    let ended = db.count(&format!(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE {mine} ORDER BY pid LIMIT 1) AS t"
    ));
    assert_eq!(ended, 1);
    stdin.write_all(lines[4..].concat().as_bytes()).unwrap();
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let status = child.wait().unwrap();
    let got: Vec<Value> = first
        .iter()
        .map(String::as_str)
        .chain(rest.lines())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(got.len(), 240, "one result per request");
    let failed: Vec<&Value> = got.iter().filter(|r| !r["error"].is_null()).collect();
    // Nothing fails: the group the lost connection had in hand was undone with it and goes
    // back to the other three, as the requests after it do. Before, that group failed
    // (exit 1, up to 32 requests); before that, a lost worker failed each request it took
    // at once, and so took far more than its share (1,390 of 3,000 in one run).
    assert!(
        failed.is_empty(),
        "{} of 240 requests failed after one connection of four was lost: {:?}",
        failed.len(),
        failed.iter().take(3).collect::<Vec<_>>()
    );
    assert!(status.success(), "{err}");
    assert_eq!(
        answered(&got),
        held(&db),
        "what is held is what was printed"
    );
    // The same requests again claim what failed, and answer `existing` for the rest.
    let file = tmp.path().join("again.jsonl");
    std::fs::write(&file, lines.concat()).unwrap();
    let again = db.run([
        "allocate",
        "-f",
        file.to_str().unwrap(),
        "--jobs",
        "4",
        "-o",
        "json",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let again = results(&again);
    assert_eq!(
        again.iter().filter(|r| r["action"] == "created").count(),
        failed.len()
    );
    assert_eq!(answered(&again), held(&db));
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_group_run_again_one_by_one_prints_each_requests_warning_once() {
    let (db, tmp, _file) = setup(0);
    let claims = tmp.path().join("claims.jsonl");
    let lines: String = (0..3)
        .map(|i| format!("{{\"pools\":[\"v4\",\"v6\"],\"owner\":\"FloatingIP/f{i}\"}}\n"))
        .collect();
    std::fs::write(&claims, lines).unwrap();
    let out = db.run(["allocate", "-f", claims.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // f0's IPv6 row does not decode: releasing f0 warns about it. f1's first release fails
    // with a serialization failure: the group breaks and its three requests run again, one
    // by one.
    db.sql()
        .batch_execute(
            "ALTER TABLE ipamctl.allocations DISABLE TRIGGER USER;
             UPDATE ipamctl.allocations SET manifest = 'not: [an allocation'
                 WHERE owner_name = 'f0' AND pool = 'v6';
             ALTER TABLE ipamctl.allocations ENABLE TRIGGER USER;
             CREATE SEQUENCE public.freed;
             CREATE FUNCTION public.fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF OLD.owner_name = 'f1' AND nextval('public.freed') = 1 THEN
                     RAISE EXCEPTION 'made to fail' USING ERRCODE = 'serialization_failure';
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER fail_once AFTER DELETE ON ipamctl.allocations
                 FOR EACH ROW EXECUTE FUNCTION public.fail_once();",
        )
        .unwrap();
    let file = tmp.path().join("release.jsonl");
    let lines: String = (0..3)
        .map(|i| format!("{{\"owner\":\"FloatingIP/f{i}\"}}\n"))
        .collect();
    std::fs::write(&file, lines).unwrap();
    let out = db.run(["release", "-f", file.to_str().unwrap(), "-o", "json"]);
    assert!(out.status.success(), "{}\n{}", stderr(&out), stdout(&out));
    assert_eq!(results(&out).len(), 3, "{}", stdout(&out));
    assert!(db.count("SELECT last_value FROM public.freed") >= 2);
    // One warning, as the single command releasing f0 prints: not one more because its
    // group ran again.
    let err = stderr(&out);
    let warned = err.lines().filter(|l| l.starts_with("warning:")).count();
    assert_eq!(warned, 1, "{err}");
}

/// A group whose every request is an owner asking again wrote nothing: it ends without a
/// `COMMIT` (which would wait for the WAL flush its row locks ask for, all of a server's
/// re-ask on a durable cluster; `bench/serve`). A group with one request that writes, a
/// new owner's claim or a lease renewed by a re-ask with a TTL, still commits it.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_group_of_owners_asking_again_sends_no_commit_and_one_that_writes_commits() {
    let (db, tmp, file) = setup(100);
    let (first, _) = {
        let out = db.run(["allocate", "-f", &file, "-o", "json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        (results(&out), ())
    };
    // Any `COMMIT` through this proxy is cut before the server sees it.
    let proxy = pg::Proxy::start("COMMIT", 1, pg::Cut::BeforeSending);
    let through = |file: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ipamctl"))
            .args(["--store", &proxy.url(db.name()), "allocate", "-f", file])
            .args(["-o", "json"])
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("IPAMCTL_STORE")
            .output()
            .unwrap()
    };
    let again = through(&file);
    assert!(again.status.success(), "{}", stderr(&again));
    let second = results(&again);
    assert!(
        second.iter().all(|r| r["action"] == "existing"),
        "{second:?}"
    );
    assert_eq!(answered(&second), answered(&first));
    assert!(!proxy.fired(), "a group of re-asks sent a COMMIT");

    // Re-asks with one new owner among them, and re-asks renewing a lease: each group
    // that holds one commits (the proxy cuts that `COMMIT`, so the batch fails), and
    // without the proxy both are stored.
    let mixed = |name: &str, extra: &str| {
        let lines: String = (0..100)
            .map(|i| {
                let tail = if i == 50 { extra } else { "" };
                format!(
                    "{{\"pools\":[\"v4\",\"v6\"],\"owner\":\"VirtualMachine/vm-{i}/0\"{tail}}}\n"
                )
            })
            .chain(std::iter::once(
                "{\"pools\":[\"v4\",\"v6\"],\"owner\":\"VirtualMachine/late/0\"}\n".to_owned(),
            ))
            .collect();
        let path = tmp.path().join(name);
        std::fs::write(&path, lines).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let renewing = mixed("renewing.jsonl", ",\"ttl\":\"1h\"");
    let cut = through(&renewing);
    assert!(proxy.fired(), "a group that writes sent no COMMIT");
    assert!(!cut.status.success(), "the cut COMMIT must fail the batch");
    let out = db.run(["allocate", "-f", &renewing, "-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        db.count(
            "SELECT count(*) FROM ipamctl.allocations
             WHERE owner_name = 'vm-50/0' AND ipamctl.allocation_expires(manifest) IS NOT NULL"
        ),
        2,
        "the renewal of both of vm-50's addresses is stored"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.allocations WHERE owner_name = 'late/0'"),
        2
    );
    assert_eq!(answered(&results(&out)), held(&db));
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_dry_run_beside_a_claim_on_several_connections_never_names_a_held_address() {
    // A worker with siblings tries the lowest address none of them handed out without
    // asking the database (the claim's insert checks it): a dry run inserts nothing, and
    // on the code before this test it answered "would claim 10.71.0.2", held by `a`.
    for jobs in ["2", "4"] {
        let (db, tmp, _) = setup(0);
        let out = db.run([
            "allocate",
            "v4",
            "--owner",
            "VirtualMachine/a/0",
            "--address",
            "10.71.0.2",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let file = tmp.path().join("dry.jsonl");
        std::fs::write(
            &file,
            "{\"pool\":\"v4\",\"owner\":\"VirtualMachine/b/0\"}\n\
             {\"pool\":\"v4\",\"owner\":\"VirtualMachine/c/0\",\"dryRun\":true}\n",
        )
        .unwrap();
        let out = db.run([
            "allocate",
            "-f",
            file.to_str().unwrap(),
            "--jobs",
            jobs,
            "-o",
            "json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let got = results(&out);
        assert_eq!(got[1]["action"], "would-create", "{got:?}");
        let dry = got[1]["address"].as_str().unwrap().to_owned();
        let held = held(&db);
        assert!(
            held.values().flatten().all(|a| *a != dry) || got[0]["address"] == dry.as_str(),
            "--jobs {jobs}: the dry run would claim {dry}, held: {held:?}"
        );
        assert_ne!(dry, "10.71.0.2", "--jobs {jobs}: {got:?}");
    }
}
