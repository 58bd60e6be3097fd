//! Failover without losing an acknowledged claim (issue 21): a primary and a streaming
//! standby of their own (`.ci/pg-cluster start` and `standby`, durable settings), a
//! multi-host connection string (`host=A,B target_session_attrs=read-write`), 16 processes
//! claiming and releasing while the primary is SIGKILLed and the standby promoted. With the
//! standby synchronous (`synchronous_standby_names`, `synchronous_commit = on`) every
//! address printed with exit 0 is held by its owner on the new primary; without it, the
//! ignored test counts what asynchronous replication loses (the README's figure).

mod pg;

use pg::cluster::Cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What one claim or release printed and how it exited.
#[derive(Clone, Debug)]
enum Outcome {
    /// `allocate` exited 0 printing this address.
    Claimed(String),
    /// `release` of the claimed address exited 0.
    Released,
    /// Exit 1 or 6 (connection lost, the standby not yet promoted): either outcome.
    Unknown,
}

/// How long one command may take. The store's own bounds (a 10 s connect, `lock_timeout`,
/// `statement_timeout`) end every command well within it, so a command still running
/// then has hung: the test fails naming it rather than waiting for ever.
const COMMAND_LIMIT: Duration = Duration::from_secs(120);

/// `ipamctl --store STORE ARGS…` to completion: exit code and stdout. A command that has
/// not exited within [`COMMAND_LIMIT`] is killed and the test fails naming it. (std has no
/// wait with a timeout, hence the poll; the output is small and read once it has exited.)
fn run(store: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(pg::BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run ipamctl");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait for ipamctl").is_none() {
        if start.elapsed() > COMMAND_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`ipamctl {}` hung: still running after {COMMAND_LIMIT:?}",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("ipamctl's output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    )
}

/// Sets the workers' stop flag when dropped: when the run ends, and also when a step of
/// it panics (a failed kill or promote), so that the scope's workers stop and the test
/// fails with the reason instead of waiting for them for ever.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// What the run found: acknowledged claims missing on the new primary, and how many claims
/// were acknowledged in all.
struct Found {
    lost: Vec<String>,
    acknowledged: usize,
}

/// The failover run: claims and releases by 16 processes while the primary is killed and
/// the standby promoted; then the invariants on the new primary. `sync`: the standby is
/// synchronous.
fn failover(sync: bool) -> Found {
    let primary = Cluster::primary();
    primary
        .client("postgres")
        .batch_execute("CREATE DATABASE ipam")
        .unwrap();
    let direct = format!(
        "host={} port={} user=postgres dbname=ipam",
        primary.sock, primary.port
    );
    assert_eq!(run(&direct, &["init"]).0, Some(0));
    let pool = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        pool.path(),
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\nspec:\n  cidr: 10.77.0.0/16\n  kind: public\n",
    )
    .unwrap();
    assert_eq!(
        run(&direct, &["apply", "-f", pool.path().to_str().unwrap()]).0,
        Some(0)
    );
    let standby = primary.standby();
    let mut admin = primary.client("postgres");
    if sync {
        // One at a time: ALTER SYSTEM runs outside a transaction block.
        for sql in [
            "ALTER SYSTEM SET synchronous_standby_names = '*'",
            "ALTER SYSTEM SET synchronous_commit = 'on'",
            "SELECT pg_reload_conf()",
        ] {
            admin.batch_execute(sql).unwrap();
        }
    }
    let want = if sync { "sync" } else { "async" };
    let start = std::time::Instant::now();
    while admin
        .query_opt(
            "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1",
            &[&want],
        )
        .unwrap()
        .is_none()
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the standby never streamed ({want})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(admin);

    // Both servers, the writable one chosen at connect time.
    let store = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname=ipam target_session_attrs=read-write sslmode=disable connect_timeout=2",
        primary.port, standby.port
    );
    let outcomes: Mutex<BTreeMap<String, Outcome>> = Mutex::new(BTreeMap::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..16 {
            let (store, outcomes, stop) = (&store, &outcomes, &stop);
            s.spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let owner = format!("FloatingIP/w{w}-{n}");
                    let (code, printed) = run(store, &["allocate", "p", "--owner", &owner]);
                    let claimed = match code {
                        Some(0) => Outcome::Claimed(printed),
                        _ => Outcome::Unknown,
                    };
                    outcomes
                        .lock()
                        .unwrap()
                        .insert(owner.clone(), claimed.clone());
                    if let (Outcome::Claimed(address), true) = (claimed, n % 2 == 0) {
                        let (code, _) = run(store, &["release", "p", &address, "--owner", &owner]);
                        let released = match code {
                            Some(0) => Outcome::Released,
                            _ => Outcome::Unknown,
                        };
                        outcomes.lock().unwrap().insert(owner, released);
                    }
                }
            });
        }
        let _stop = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_secs(4));
        primary.act("kill");
        std::thread::sleep(Duration::from_millis(500));
        standby.act("promote");
        std::thread::sleep(Duration::from_secs(4));
    });

    let outcomes = outcomes.into_inner().unwrap();
    let mut db = standby.client("ipam");
    let held: BTreeMap<String, String> = db
        .query(
            "SELECT owner_kind || '/' || owner_name, host(address) FROM ipamctl.allocations WHERE pool = 'p'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let rows: i64 = db
        .query_one("SELECT count(*) FROM ipamctl.allocations", &[])
        .unwrap()
        .get(0);
    let addresses: BTreeSet<&String> = held.values().collect();
    assert_eq!(addresses.len() as i64, rows, "an address held twice");
    assert_eq!(held.len() as i64, rows, "an owner holding two");
    let mut lost = Vec::new();
    let mut acknowledged = 0;
    let mut after = 0;
    for (owner, outcome) in &outcomes {
        match outcome {
            Outcome::Claimed(address) => {
                acknowledged += 1;
                if held.get(owner) != Some(address) {
                    lost.push(format!("{owner} {address}"));
                }
            }
            Outcome::Released => {
                acknowledged += 1;
                assert!(!held.contains_key(owner), "{owner}: released, still held");
            }
            Outcome::Unknown => {}
        }
        after += 1;
    }
    assert!(after > 0 && acknowledged > 0, "no command ran");
    // The ledger equals the rows, and every rule of `check` holds, on the new primary
    // through the same connection string; and it takes new claims.
    let (code, _) = run(&store, &["check"]);
    assert_eq!(code, Some(0), "check on the new primary");
    let (code, printed) = run(&store, &["allocate", "p", "--owner", "FloatingIP/after"]);
    assert_eq!(code, Some(0), "a claim on the new primary");
    assert!(!addresses.contains(&printed), "{printed} handed out twice");
    eprintln!(
        "failover ({want}): {} commands' outcomes, {acknowledged} acknowledged, {} acknowledged claims lost",
        outcomes.len(),
        lost.len()
    );
    Found { lost, acknowledged }
}

/// With a synchronous standby, no acknowledged claim or release is lost by a failover.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_failover_to_a_synchronous_standby_loses_no_acknowledged_claim() {
    let found = failover(true);
    assert!(found.acknowledged > 0);
    assert!(
        found.lost.is_empty(),
        "acknowledged claims missing on the new primary: {:?}",
        found.lost
    );
}

/// The README's figure: the same run with an asynchronous standby, counting acknowledged
/// claims the new primary does not hold (`cargo test --test pg_failover -- --ignored`).
#[test]
#[ignore = "a measurement for the README, not a check: asynchronous replication may lose claims"]
fn a_failover_to_an_asynchronous_standby_measured() {
    let found = failover(false);
    eprintln!(
        "asynchronous standby: {} of {} acknowledged outcomes lost: {:?}",
        found.lost.len(),
        found.acknowledged,
        found.lost
    );
}
