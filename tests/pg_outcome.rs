//! The outcome a command reports on PostgreSQL is the outcome the database holds: backends
//! terminated around `COMMIT` (the server logs the `COMMIT`, then `FATAL 57P01`) never make
//! a claim that committed exit 1 ("never committed"); such a claim exits 0 or 6 ("unknown").

mod pg;

use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pg::budget::Budget;
use pg::{Bouncer, Db, assert_code, stderr};

/// Rounds of 40 allocating processes each, while another connection terminates every
/// other backend of the database every few milliseconds: 8 in at most 90 s (40 in 20
/// minutes with `IPAMCTL_STRESS=long`), and at least 3.
fn rounds(label: &str) -> Budget {
    let (rounds, seconds) = match std::env::var("IPAMCTL_STRESS").as_deref() {
        Ok("long") => (40, 1200),
        _ => (8, 90),
    };
    Budget::new(label, rounds, std::time::Duration::from_secs(seconds)).at_least(3)
}

/// Terminates every other backend of `db` in a loop until the returned flag is set; the
/// counter says how many it terminated.
fn terminator(
    db: &Db,
) -> (
    Arc<AtomicBool>,
    Arc<AtomicUsize>,
    std::thread::JoinHandle<()>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicUsize::new(0));
    let mut admin = db.sql();
    let (stop_, killed_) = (stop.clone(), killed.clone());
    let thread = std::thread::spawn(move || {
        while !stop_.load(Ordering::SeqCst) {
            let n: i64 = admin
                .query_one(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
                     FROM pg_stat_activity
                     WHERE datname = current_database() AND pid <> pg_backend_pid()
                       AND application_name = 'ipamctl'",
                    &[],
                )
                .expect("terminate")
                .get(0);
            killed_.fetch_add(usize::try_from(n).unwrap(), Ordering::SeqCst);
            // 0-15 ms: some land between a claim's statement and its COMMIT, some on it.
            let pause = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) % 16;
            std::thread::sleep(std::time::Duration::from_millis(pause));
        }
    });
    (stop, killed, thread)
}

/// Runs the rounds with `spawn(owner)` starting one `allocate` for `owner`, and returns
/// (exit 1s, exit 6s, exit 1s whose claim committed).
fn storm(db: &Db, label: &str, spawn: &dyn Fn(&str) -> Child) -> (usize, usize, Vec<String>) {
    let (stop, killed, thread) = terminator(db);
    let (mut failed, mut unknown, mut lies) = (0, 0, Vec::new());
    let rounds = rounds(label);
    for round in rounds.rounds() {
        let owners: Vec<String> = (0..40)
            .map(|i| format!("FloatingIP/{label}-{round}-{i}"))
            .collect();
        let children: Vec<Child> = owners.iter().map(|o| spawn(o)).collect();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().expect("wait for ipamctl"))
            .collect();
        for (owner, out) in owners.iter().zip(&outs) {
            match out.status.code() {
                Some(0) => {}
                Some(1) => {
                    failed += 1;
                    let name = owner.split('/').nth(1).unwrap();
                    let held = db.count(&format!(
                        "SELECT count(*) FROM ipamctl.allocations WHERE owner_name = '{name}'"
                    ));
                    if held > 0 {
                        lies.push(format!("{owner}: {}", stderr(out).trim()));
                    }
                }
                Some(6) => unknown += 1,
                _ => panic!("{owner}: unexpected {:?}: {}", out.status, stderr(out)),
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    thread.join().unwrap();
    eprintln!(
        "{}; {} backends terminated; {failed} exit 1, {unknown} exit 6, {} exit 1 that committed",
        rounds.finish(),
        killed.load(Ordering::SeqCst),
        lies.len()
    );
    (failed, unknown, lies)
}

fn pool(db: &Db) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.yaml");
    std::fs::write(
        &file,
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\nspec:\n  cidr: 10.40.0.0/20\n  kind: public\n",
    )
    .unwrap();
    assert_code(&db.run(["apply", "-f", file.to_str().unwrap()]), 0);
}

/// Storms `db` through `cmd(args)` (direct or through a pooler) and asserts that no claim
/// that committed exited 1, and that the storm cut some claims at all.
fn storm_tells_the_truth(db: &Db, label: &str, cmd: &dyn Fn(&[&str]) -> std::process::Command) {
    let spawn = |owner: &str| {
        cmd(&["allocate", "p", "--owner", owner])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ipamctl")
    };
    let (failed, unknown, lies) = storm(db, label, &spawn);
    assert!(
        lies.is_empty(),
        "exit 1 for a claim that committed:\n{}",
        lies.join("\n")
    );
    assert!(
        failed + unknown > 0,
        "no claim was cut: the storm tested nothing"
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn backends_terminated_around_commit_never_make_a_committed_claim_exit_1() {
    let db = Db::new();
    pool(&db);
    storm_tells_the_truth(&db, "direct", &|args| db.cmd(args));
}

#[test]
#[cfg_attr(
    not(all(has_postgres, has_pgbouncer)),
    ignore = "needs PostgreSQL and PgBouncer: apt-get install postgresql pgbouncer (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn backends_terminated_around_commit_through_pgbouncer_never_make_a_committed_claim_exit_1() {
    let db = Db::new();
    pool(&db);
    let bouncer = Bouncer::start();
    storm_tells_the_truth(&db, "bouncer", &|args| bouncer.cmd(&db, args));
}
