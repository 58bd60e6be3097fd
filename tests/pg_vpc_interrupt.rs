//! What `docs/src/postgresql.md` says a PostgreSQL `vpc delete` does when interrupted: it is one
//! transaction, yet SIGINT stops it between two steps on purpose and commits what it did up
//! to there, as on a state directory (exit 130, the pool marked, some allocations released),
//! and running it again finishes the job.

mod common;

use std::process::Stdio;

use common::pg::{Db, assert_code, stderr, stdout};
use common::{Test, code};

const N: usize = 3000;

/// A state directory holding VPC `s` in acme/s with `N` allocations, loaded into `db`.
fn vpc_with_allocations(db: &Db) {
    let t = Test::without_state()
        .file_store_only()
        .no_state_flag()
        .args(["init", "state"])
        .run()
        .then()
        .args([
            "vpc",
            "create",
            "s",
            "-n",
            "acme/s",
            "--cidr",
            "10.9.0.0/16",
        ])
        .run()
        .then();
    for i in 0..N {
        let (h, l) = (i / 250, 1 + i % 250);
        let name = format!("vpc-s-10-9-{h}-{l}");
        t.write(
            &format!("namespaces/acme/s/ipallocations/{name}.yaml"),
            &format!(
                "apiVersion: pivirt.hu/v1\nkind: IPAllocation\nmetadata:\n  name: {name}\n  namespace: acme/s\nspec:\n  pool: vpc-s\n  address: \"10.9.{h}.{l}\"\n  owner:\n    kind: VirtualMachine\n    name: vm-{i}/0\n"
            ),
        );
    }
    assert_code(
        &db.run([std::ffi::OsStr::new("import"), t.state().as_os_str()]),
        code::OK,
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn an_interrupted_vpc_delete_commits_what_it_did_and_a_second_run_finishes() {
    let db = Db::new();
    vpc_with_allocations(&db);
    let held = || db.count("SELECT count(*) FROM ipamctl.allocations WHERE pool = 'vpc-s'");
    assert_eq!(held(), N as i64);
    let child = db
        .cmd(["vpc", "delete", "s", "-n", "acme/s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vpc delete");
    // SIGINT once its transaction is releasing (its backend's statement is the release).
    let mut watch = db.sql();
    let started = std::time::Instant::now();
    loop {
        let releasing: i64 = watch
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()
                   AND query LIKE '%DELETE FROM ipamctl.allocations%'",
                &[],
            )
            .unwrap()
            .get(0);
        if releasing > 0 {
            break;
        }
        assert!(started.elapsed().as_secs() < 60, "no release began");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let out = child.wait_with_output().expect("vpc delete");
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let released = stdout(&out)
        .lines()
        .filter(|l| l.ends_with(" released"))
        .count();
    // Committed: what it printed as released is gone, the rest is held, the pool marked.
    assert!(released > 0 && released < N, "{released} released");
    assert_eq!(held(), (N - released) as i64);
    let marked = db.count(
        "SELECT count(*) FROM ipamctl.pools
         WHERE name = 'vpc-s' AND convert_from(manifest, 'UTF8') LIKE '%deletionTimestamp%'",
    );
    assert_eq!(marked, 1, "the pool stands, marked as being deleted");
    // Running it again finishes the job.
    let again = db.run(["vpc", "delete", "s", "-n", "acme/s"]);
    assert_code(&again, code::OK);
    assert_eq!(held(), 0);
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.pools WHERE name = 'vpc-s'"),
        0
    );
}
