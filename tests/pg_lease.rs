//! Leases on PostgreSQL (issue 45), against a real server (see `tests/pg/mod.rs`): the
//! database server's clock decides, a renewal racing `reconcile --expired --apply` is never
//! undone (the release is one `DELETE` conditional on the lease still lapsing), and a
//! renewal between the reaper's judgement and its release keeps the lease.

mod pg;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use pg::{Db, assert_code};

const POOL: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: ci
spec:
  cidr: 192.0.2.0/26
  kind: public
";

fn db() -> Db {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    db.apply(dir.path(), POOL);
    db
}

fn secs(rfc3339: &str) -> u64 {
    humantime::parse_rfc3339(rfc3339)
        .unwrap()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Who holds what in `ci`: (owner name, address).
fn holders(db: &Db) -> Vec<(String, String)> {
    let out = db.run(["list", "--pool", "ci", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["spec"]["owner"]["name"].as_str().unwrap().to_owned(),
                m["spec"]["address"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn renewals_racing_the_reaper_on_postgresql_are_never_undone() {
    let db = db();
    let owners: Vec<String> = (0..16).map(|i| format!("Node/n{i}")).collect();
    for owner in &owners {
        assert_code(
            &db.run(["allocate", "ci", "--owner", owner, "--ttl", "2s"]),
            0,
        );
    }
    let stop = AtomicBool::new(false);
    let acked: Mutex<Vec<Option<(String, u64)>>> = Mutex::new(vec![None; 16]);
    let gone = Mutex::new(vec![false; 16]);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let out = db.run(["reconcile", "--expired", "--grace", "0s", "--apply"]);
                assert_code(&out, 0);
            }
        });
        for (i, owner) in owners.iter().enumerate() {
            let (stop, acked, gone, db) = (&stop, &acked, &gone, &db);
            s.spawn(move || {
                let quits = Instant::now() + Duration::from_millis(1500 + 200 * (i as u64 % 4));
                while !stop.load(Ordering::Relaxed) {
                    if i % 4 == 0 && Instant::now() > quits {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                    let out =
                        db.run(["renew", "ci", "--owner", owner, "--ttl", "2s", "-o", "json"]);
                    match out.status.code() {
                        Some(0) => {
                            let json: serde_json::Value =
                                serde_json::from_slice(&out.stdout).unwrap();
                            let at = secs(json["spec"]["expiresAt"].as_str().unwrap());
                            let address = json["spec"]["address"].as_str().unwrap().to_owned();
                            acked.lock().unwrap()[i] = Some((address, at));
                        }
                        Some(3) => {
                            gone.lock().unwrap()[i] = true;
                            return;
                        }
                        _ => panic!("renew {owner}: {out:?}"),
                    }
                    std::thread::sleep(Duration::from_millis(300));
                }
            });
        }
        std::thread::sleep(Duration::from_secs(8));
        stop.store(true, Ordering::Relaxed);
    });
    let checked_at = now();
    let held = holders(&db);
    let holder = |owner: &str| {
        let name = owner.trim_start_matches("Node/");
        held.iter().find(|(o, _)| o == name).map(|(_, a)| a.clone())
    };
    let (mut kept, mut released) = (0, 0);
    for (i, owner) in owners.iter().enumerate() {
        if let Some((address, at)) = &acked.lock().unwrap()[i]
            && *at > checked_at
        {
            assert_eq!(
                holder(owner).as_ref(),
                Some(address),
                "{owner}'s acknowledged renewal was undone"
            );
            kept += 1;
        }
        if gone.lock().unwrap()[i] {
            assert_eq!(holder(owner), None, "{owner} was told its lease is gone");
        }
        if holder(owner).is_none() {
            released += 1;
        }
    }
    eprintln!("{kept} renewals kept, {released} leases released");
    assert!(kept >= 8, "{kept}");
    assert!(released >= 1, "{released}");
    db.assert_check_clean();
}

/// Needs `cargo test --features failpoints --test pg_lease`.
#[cfg(feature = "failpoints")]
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_renewal_between_the_reapers_judgement_and_its_release_keeps_the_lease_on_postgresql() {
    let db = db();
    let claimed = db.run(["allocate", "ci", "--owner", "Node/late", "--ttl", "1s"]);
    assert_code(&claimed, 0);
    std::thread::sleep(Duration::from_millis(2100));
    let reaper = db
        .cmd(["reconcile", "--expired", "--grace", "0s", "--apply"])
        .env("FAILPOINTS", "reap-before-release=sleep(2000)")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let renewed = db.run(["renew", "ci", "--owner", "Node/late", "--ttl", "1h"]);
    assert_code(&renewed, 0);
    assert_eq!(pg::stdout(&renewed), pg::stdout(&claimed));
    let reaped = reaper.wait_with_output().unwrap();
    assert_code(&reaped, 0);
    assert!(pg::stdout(&reaped).contains("skipped"), "{reaped:?}");
    assert_eq!(
        holders(&db),
        [("late".to_owned(), pg::stdout(&claimed).trim().to_owned())]
    );
}
