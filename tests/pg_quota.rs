//! Quotas on PostgreSQL (issue 45), against a real server (see `tests/pg/mod.rs`): 64
//! processes racing for a ceiling of 10 leave exactly 10 (the namespace's quota row lock
//! serialises the count and the claim), and `import` keeps the target's quotas.

mod pg;

use std::process::Stdio;
use std::time::{Duration, Instant};

use pg::{Db, assert_code};

const QUOTA_EXIT: i32 = 7;

fn manifests(limit: u64) -> String {
    format!(
        "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: web
  namespace: acme
spec:
  kind: private
  cidr: 10.0.0.0/24
---
apiVersion: pivirt.hu/v1
kind: Quota
metadata:
  name: compute
  namespace: acme
spec:
  hard:
    addresses: {limit}
"
    )
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn sixty_four_processes_racing_for_a_ceiling_of_ten_on_postgresql_leave_exactly_ten() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    db.apply(dir.path(), &manifests(10));
    let deadline = Instant::now() + Duration::from_secs(120);
    let children: Vec<_> = (0..64)
        .map(|i| {
            let owner = format!("VirtualMachine/vm-{i}/0");
            let mut cmd = db.cmd(["allocate", "web", "-n", "acme", "--owner", owner.as_str()]);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut codes = Vec::new();
    for child in children {
        assert!(Instant::now() < deadline, "the storm took over two minutes");
        codes.push(child.wait_with_output().unwrap().status.code());
    }
    let ok = codes.iter().filter(|c| **c == Some(0)).count();
    let over = codes.iter().filter(|c| **c == Some(QUOTA_EXIT)).count();
    assert_eq!((ok, over), (10, 54), "exit codes: {codes:?}");
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.allocations WHERE namespace = 'acme'"),
        10
    );
    // A holder asking again at the ceiling is answered, not refused.
    let again = db.run([
        "allocate",
        "web",
        "-n",
        "acme",
        "--owner",
        "VirtualMachine/vm-0/0",
    ]);
    assert!(
        [Some(0), Some(QUOTA_EXIT)].contains(&again.status.code()),
        "{again:?}"
    );
    let holder = db.run(["list", "-n", "acme", "--pool", "web", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&holder.stdout).unwrap();
    let first = list["items"][0]["spec"]["owner"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let reask = db.run([
        "allocate",
        "web",
        "-n",
        "acme",
        "--owner",
        &format!("VirtualMachine/{first}"),
    ]);
    assert_code(&reask, 0);
    db.assert_check_clean();
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn import_is_refused_when_it_would_take_a_namespace_over_the_targets_quota() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    db.apply(dir.path(), &manifests(2));
    // A state directory whose namespace holds three addresses of the same pool.
    let source = tempfile::tempdir().unwrap();
    let state = source.path().join("state");
    let bin = pg::BIN;
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .arg("-d")
            .arg(&state)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    run(&["init"]);
    let pool = source.path().join("pool.yaml");
    std::fs::write(
        &pool,
        manifests(2)
            .split("---")
            .next()
            .unwrap()
            .replace("VirtualMachine", ""),
    )
    .unwrap();
    run(&["apply", "-f", pool.to_str().unwrap()]);
    for i in 0..3 {
        run(&[
            "allocate",
            "web",
            "-n",
            "acme",
            "--owner",
            &format!("VirtualMachine/vm-{i}/0"),
        ]);
    }
    let before = db.count("SELECT count(*) FROM ipamctl.allocations");
    let out = db.run(["import", state.to_str().unwrap()]);
    assert_code(&out, QUOTA_EXIT);
    assert!(
        pg::stderr(&out).contains("quota `compute` of namespace `acme` allows 2 addresses"),
        "{}",
        pg::stderr(&out)
    );
    // One transaction: nothing of it stayed.
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), before);
}

/// One owner asked for by 32 processes at once, one place left under the ceiling: one
/// claims and every other is answered that address. On PostgreSQL nothing serialises one
/// owner's requests (the unique constraint arbitrates), so a request that found the owner
/// new, and then counted the namespace at its ceiling because its twin had just claimed,
/// must answer the twin's address, not exit 7.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn one_owner_asked_for_at_once_at_the_last_place_is_answered_one_address() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    db.apply(dir.path(), &manifests(3));
    for i in 0..2 {
        let owner = format!("VirtualMachine/held-{i}/0");
        assert_code(
            &db.run(["allocate", "web", "-n", "acme", "--owner", owner.as_str()]),
            0,
        );
    }
    // Every round, in at most 90 s.
    let rounds =
        pg::budget::Budget::new("same-owner rounds", 5, Duration::from_secs(90)).at_least(5);
    for round in rounds.rounds() {
        let owner = format!("VirtualMachine/twin-{round}/0");
        let children: Vec<_> = (0..32)
            .map(|_| {
                let mut cmd = db.cmd(["allocate", "web", "-n", "acme", "--owner", owner.as_str()]);
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                cmd.spawn().unwrap()
            })
            .collect();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let answers: std::collections::BTreeSet<String> = outs
            .iter()
            .map(|o| {
                assert_eq!(o.status.code(), Some(0), "round {round}: {o:?}");
                String::from_utf8_lossy(&o.stdout).trim().to_owned()
            })
            .collect();
        assert_eq!(answers.len(), 1, "round {round}: {answers:?}");
        // Back to one place left for the next round.
        let address = answers.into_iter().next().unwrap();
        assert_code(
            &db.run([
                "release",
                "web",
                address.as_str(),
                "-n",
                "acme",
                "--owner",
                owner.as_str(),
            ]),
            0,
        );
    }
}
