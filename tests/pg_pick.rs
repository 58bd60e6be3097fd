//! `spec.pick: hashed` on both stores at once, through the real binary: the same owner gets
//! the same address from a state directory and from PostgreSQL, by a single command and by
//! a batch, dual stack included; the pool's `pick` travels through `export` and `import`;
//! and a batch on four connections (`--jobs 4`, whose workers hand addresses out apart,
//! `src/store/pg/siblings.rs`) fills a hashed pool to its last address, each owner once.

mod common;

#[path = "pick/oracle.rs"]
mod oracle;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use common::pg::{Db, json_lines, stderr, stdout};
use common::{BIN, code};
use oracle::{Oracle, key, pool_yaml};

/// A hashed IPv4 /24 and a hashed IPv6 /120 beside it.
fn pools() -> String {
    pool_yaml(
        "edge",
        None,
        "192.0.2.0/24",
        Some("192.0.2.1"),
        &[],
        "hashed",
    ) + &pool_yaml(
        "edge6",
        None,
        "2001:db8:5::/120",
        Some("2001:db8:5::1"),
        &[],
        "hashed",
    )
}

/// A dual-stack request's JSON line for `owner`.
fn request(owner: &str) -> String {
    format!("{{\"pools\":[\"edge\",\"edge6\"],\"owner\":\"{owner}\"}}\n")
}

/// 30 % of each pool's candidates, claimed by a batch through the pools' own pick.
fn base() -> String {
    (0..76)
        .map(|i| request(&format!("VirtualMachine/base-{i}/0")))
        .collect()
}

/// `ipamctl -d DIR ARGS…`, run to completion.
fn on_dir(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("-d")
        .arg(dir)
        .args(args)
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .output()
        .expect("run ipamctl")
}

#[track_caller]
fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

/// A state directory in `tmp` with the pools and the base claimed.
fn state_dir(tmp: &Path, name: &str) -> std::path::PathBuf {
    let dir = tmp.join(name);
    ok(Command::new(BIN).arg("init").arg(&dir).output().unwrap());
    std::fs::write(tmp.join("pools.yaml"), pools()).unwrap();
    std::fs::write(tmp.join("base.jsonl"), base()).unwrap();
    ok(on_dir(
        &dir,
        &["apply", "-f", tmp.join("pools.yaml").to_str().unwrap()],
    ));
    ok(on_dir(
        &dir,
        &[
            "allocate",
            "-f",
            tmp.join("base.jsonl").to_str().unwrap(),
            "-o",
            "name",
        ],
    ));
    dir
}

/// A database with the pools and the base claimed.
fn database(tmp: &Path) -> Db {
    let db = Db::new();
    db.apply(tmp, &pools());
    std::fs::write(tmp.join("base.jsonl"), base()).unwrap();
    ok(db.run([
        "allocate",
        "-f",
        tmp.join("base.jsonl").to_str().unwrap(),
        "-o",
        "name",
    ]));
    db
}

/// The addresses a batch's `-o json` lines printed, in input order.
fn batch_addresses(text: &str) -> Vec<Vec<String>> {
    json_lines(text)
        .iter()
        .map(|r| {
            let addresses = r["addresses"].as_array().unwrap_or_else(|| panic!("{r}"));
            addresses
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn both_stores_and_both_front_ends_give_each_owner_the_same_dual_stack_pair() {
    let tmp = tempfile::tempdir().unwrap();
    let owners: Vec<String> = (0..20)
        .map(|i| format!("VirtualMachine/new-{i}/0"))
        .collect();
    let lines: String = owners.iter().map(|o| request(o)).collect();
    let file = tmp.path().join("new.jsonl");
    std::fs::write(&file, &lines).unwrap();
    let file = file.to_str().unwrap();
    let single = |run: &dyn Fn(&[&str]) -> Output| -> Vec<Vec<String>> {
        owners
            .iter()
            .map(|o| {
                ok(run(&["allocate", "edge", "edge6", "--owner", o]))
                    .lines()
                    .map(str::to_owned)
                    .collect()
            })
            .collect()
    };
    let dir = state_dir(tmp.path(), "single");
    let fs_single = single(&|args| on_dir(&dir, args));
    let dir = state_dir(tmp.path(), "batch");
    let fs_batch = batch_addresses(&ok(on_dir(&dir, &["allocate", "-f", file, "-o", "json"])));
    let db = database(tmp.path());
    let pg_single = single(&|args| db.run(args));
    let db2 = database(tmp.path());
    let pg_batch = batch_addresses(&ok(db2.run(["allocate", "-f", file, "-o", "json"])));
    // The oracle, from the README's words: every claim in order, the base's too.
    let (v4, v6) = (
        Oracle::v4("192.0.2.0/24", Some("192.0.2.1"), &[]),
        Oracle::v6("2001:db8:5::/120", Some("2001:db8:5::1")),
    );
    let (mut taken4, mut taken6) = (BTreeSet::new(), BTreeSet::new());
    let mut expected = Vec::new();
    let base_owners = (0..76).map(|i| format!("VirtualMachine/base-{i}/0"));
    for (n, owner) in base_owners.chain(owners.iter().cloned()).enumerate() {
        let a4 = v4.walk(v4.start(key("", "edge", &owner)), &taken4).unwrap();
        let a6 = v6
            .walk(v6.start(key("", "edge6", &owner)), &taken6)
            .unwrap();
        taken4.insert(a4);
        taken6.insert(a6);
        if n >= 76 {
            expected.push(vec![v4.address(a4), v6.address(a6)]);
        }
    }
    assert_eq!(fs_single, expected, "the file store's single commands");
    assert_eq!(fs_batch, expected, "the file store's batch");
    assert_eq!(pg_single, expected, "PostgreSQL's single commands");
    assert_eq!(pg_batch, expected, "PostgreSQL's batch");
    // The pool's `pick` travels: exported, the pool files are the state directory's bytes;
    // imported again, the pool is hashed.
    let exported = tmp.path().join("exported");
    ok(db.run(["export", exported.to_str().unwrap()]));
    for pool in ["edge", "edge6"] {
        let rel = format!("cluster/ipampools/{pool}.yaml");
        let from_pg = std::fs::read_to_string(exported.join(&rel)).unwrap();
        assert_eq!(from_pg, std::fs::read_to_string(dir.join(&rel)).unwrap());
        assert!(from_pg.contains("\n  pick: hashed\n"), "{from_pg}");
    }
    let db3 = Db::new();
    ok(db3.run(["import", exported.to_str().unwrap()]));
    let shown: serde_json::Value =
        serde_json::from_str(&ok(db3.run(["pool", "show", "edge", "-o", "json"]))).unwrap();
    assert_eq!(shown["spec"]["pick"], "hashed");
    // The next owner gets the same pair from the imported copy as from the state directory.
    let next = ["allocate", "edge", "edge6", "--owner", "FloatingIP/next"];
    assert_eq!(ok(db3.run(next)), ok(on_dir(&dir, &next)));
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_batch_on_four_connections_fills_a_hashed_pool_to_its_last_address_each_owner_once() {
    let tmp = tempfile::tempdir().unwrap();
    let db = database(tmp.path());
    // 177 candidates of each pool are free: 180 owners, so the last 3 find none.
    let owners: Vec<String> = (0..180).map(|i| format!("FloatingIP/fill-{i}")).collect();
    let lines: String = owners.iter().map(|o| request(o)).collect();
    let file = tmp.path().join("fill.jsonl");
    std::fs::write(&file, &lines).unwrap();
    let args = [
        "allocate",
        "-f",
        file.to_str().unwrap(),
        "--jobs",
        "4",
        "-o",
        "json",
    ];
    let out = db.run(args);
    assert_eq!(out.status.code(), Some(code::EXHAUSTED), "{}", stderr(&out));
    let results = json_lines(&stdout(&out));
    assert_eq!(results.len(), 180);
    let failed: Vec<&serde_json::Value> =
        results.iter().filter(|r| !r["error"].is_null()).collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert!(
        failed.iter().all(|r| r["error"]["exit"] == code::EXHAUSTED),
        "{failed:?}"
    );
    // Every candidate of `edge` is held, by one owner each, and as many of `edge6` (which
    // has one candidate more: the pair of a request is all or nothing).
    for (pool, candidates) in [("edge", 253), ("edge6", 253)] {
        let held = db.count(&format!(
            "SELECT count(DISTINCT address) FROM ipamctl.allocations WHERE pool = '{pool}'"
        ));
        let owners = db.count(&format!(
            "SELECT count(DISTINCT owner_name) FROM ipamctl.allocations WHERE pool = '{pool}'"
        ));
        assert_eq!((held, owners), (candidates, candidates), "{pool}");
    }
    db.assert_check_clean();
    // Run again: every owner that got a pair gets it back, no other.
    let again = db.run(args);
    assert_eq!(again.status.code(), Some(code::EXHAUSTED));
    let before: Vec<&serde_json::Value> = results.iter().filter(|r| r["error"].is_null()).collect();
    let after = json_lines(&stdout(&again));
    for r in before {
        let same = after.iter().find(|a| a["owner"] == r["owner"]).unwrap();
        assert_eq!(
            (&same["addresses"], &same["action"]),
            (&r["addresses"], &"existing".into())
        );
    }
}
