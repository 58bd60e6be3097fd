//! MACs on NICs on PostgreSQL (issue 30), against a real server (see `tests/pg/mod.rs`):
//! the unique index deciding concurrent claims, `check --store` seeing a MAC written by hand
//! past it, the `mac changed` event in `history`, and `export`/`import` carrying MACs.

mod pg;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;

use pg::{Db, assert_code, stderr, stdout};

const POOL: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: lan
spec:
  cidr: 10.0.0.0/24
  kind: public
  macPrefix: '52:54:00'
";

fn apply(db: &Db, yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pools.yaml");
    std::fs::write(&file, yaml).unwrap();
    assert_code(&db.run(["apply", "-f", file.to_str().unwrap()]), 0);
}

fn allocate(db: &Db, owner: &str, mac: &str) -> std::process::Output {
    db.run(["allocate", "lan", "--owner", owner, "--mac", mac])
}

/// (address, MAC) of every allocation of `lan`, from the table.
fn macs(db: &Db) -> Vec<(String, String)> {
    db.sql()
        .query(
            "SELECT host(address), ipamctl.allocation_mac(manifest) FROM ipamctl.allocations
             WHERE pool = 'lan' ORDER BY address",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get::<_, Option<String>>(1).unwrap_or_default()))
        .collect()
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn thirty_two_claims_sharing_eight_macs_leave_each_on_one_allocation() {
    let db = Db::new();
    apply(&db, POOL);
    let children: Vec<_> = (0..32)
        .map(|i| {
            let owner = format!("VirtualMachine/vm-{i:02}/0");
            let mac = format!("02:00:00:00:01:{:02x}", i % 8);
            let child = db
                .cmd(["allocate", "lan", "--owner", &owner, "--mac", &mac])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn ipamctl");
            (owner, mac, child)
        })
        .collect();
    let mut won: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (owner, mac, child) in children {
        let out = child.wait_with_output().unwrap();
        match out.status.code() {
            Some(0) => won.entry(mac).or_default().push(owner),
            Some(4) => assert!(
                stderr(&out).starts_with(&format!(
                    "error: MAC {mac} is held in pool `lan` by `VirtualMachine/vm-"
                )),
                "{owner}: {}",
                stderr(&out)
            ),
            other => panic!("{owner}: {other:?} {}", stderr(&out)),
        }
    }
    assert_eq!(won.len(), 8, "{won:?}");
    assert!(won.values().all(|w| w.len() == 1), "{won:?}");
    let stored = macs(&db);
    assert_eq!(stored.len(), 8, "{stored:?}");
    let distinct: BTreeSet<_> = stored.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(distinct.len(), 8, "{stored:?}");
    assert_code(&db.run(["check"]), 0);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn check_store_sees_a_mac_written_by_hand_past_the_unique_index() {
    let db = Db::new();
    apply(&db, POOL);
    assert_code(&allocate(&db, "VirtualMachine/a/0", "02:00:00:00:00:0a"), 0);
    assert_code(&allocate(&db, "VirtualMachine/b/0", "02:00:00:00:00:0b"), 0);
    // The index refuses the same spelling by hand.
    let same = db.sql().batch_execute(
        "UPDATE ipamctl.allocations SET manifest = convert_to(replace(convert_from(manifest, 'UTF8'),
             '02:00:00:00:00:0b', '02:00:00:00:00:0a'), 'UTF8') WHERE host(address) = '10.0.0.2'",
    );
    assert!(same.is_err(), "the unique index let a duplicate MAC in");
    // Another spelling (upper case) is not the index's, and passes it.
    db.sql()
        .batch_execute(
            "UPDATE ipamctl.allocations SET manifest = convert_to(replace(convert_from(manifest, 'UTF8'),
                 '02:00:00:00:00:0b', '02:00:00:00:00:0A'), 'UTF8') WHERE host(address) = '10.0.0.2'",
        )
        .unwrap();
    let out = db.run(["check"]);
    assert_code(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("MAC 02:00:00:00:00:0a is held by 2 allocations of pool `lan`: 10.0.0.1 (`VirtualMachine/a/0`), 10.0.0.2 (`VirtualMachine/b/0`)"),
        "{text}"
    );
    // The fix it names.
    assert_code(
        &db.run([
            "mac",
            "set",
            "lan",
            "10.0.0.2",
            "--owner",
            "VirtualMachine/b/0",
            "--mac",
            "auto",
        ]),
        0,
    );
    assert_code(&db.run(["check"]), 0);
    // With the index dropped, ipamctl's own spelling by hand.
    db.sql()
        .batch_execute(
            "DROP INDEX ipamctl.allocations_one_per_mac;
             UPDATE ipamctl.allocations SET manifest = convert_to(replace(convert_from(manifest, 'UTF8'),
                 '\"52:54:00:00:00:02\"', '02:00:00:00:00:0a'), 'UTF8') WHERE host(address) = '10.0.0.2'",
        )
        .unwrap();
    let out = db.run(["check"]);
    assert_code(&out, 1);
    assert!(
        stdout(&out).contains("MAC 02:00:00:00:00:0a is held by 2"),
        "{}",
        stdout(&out)
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn history_shows_a_mac_change_and_export_import_carry_macs() {
    let db = Db::new();
    apply(&db, POOL);
    assert_code(&allocate(&db, "VirtualMachine/a/0", "02:00:00:00:00:0a"), 0);
    assert_code(
        &db.run([
            "mac",
            "set",
            "lan",
            "10.0.0.1",
            "--owner",
            "VirtualMachine/a/0",
            "--mac",
            "auto",
        ]),
        0,
    );
    let out = db.run(["history", "--owner", "VirtualMachine/a/0", "-o", "json"]);
    assert_code(&out, 0);
    let entries: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let seen: Vec<(String, String)> = entries["items"]
        .as_array()
        .unwrap_or_else(|| entries.as_array().expect("a list"))
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["mac"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("mac changed".to_owned(), "52:54:00:00:00:01".to_owned()),
            ("claimed".to_owned(), "02:00:00:00:00:0a".to_owned())
        ]
    );
    // Export writes the MAC and its record; the directory checks clean and loads back.
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("state");
    assert_code(&db.run(["export", out_dir.to_str().unwrap()]), 0);
    let file =
        std::fs::read_to_string(out_dir.join("cluster/ipallocations/lan-10-0-0-1.yaml")).unwrap();
    assert!(file.ends_with("  mac: \"52:54:00:00:00:01\"\n"), "{file}");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("cluster/macs/lan-525400000001")).unwrap(),
        "10.0.0.1\nVirtualMachine a/0 -\n"
    );
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_ipamctl"))
        .args(["-d", out_dir.to_str().unwrap(), "check"])
        .output()
        .unwrap();
    assert_code(&check, 0);
    let fresh = Db::new();
    assert_code(&fresh.run(["import", out_dir.to_str().unwrap()]), 0);
    assert_eq!(
        macs(&fresh),
        [("10.0.0.1".to_owned(), "52:54:00:00:00:01".to_owned())]
    );
    // The owner asking again with its MAC gets its address back from the import.
    let out = allocate(&fresh, "VirtualMachine/a/0", "auto");
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "10.0.0.1\n");
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn import_refuses_an_invalid_mac_prefix() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let init = std::process::Command::new(env!("CARGO_BIN_EXE_ipamctl"))
        .args(["-d", root.to_str().unwrap(), "init"])
        .output()
        .unwrap();
    assert_code(&init, 0);
    std::fs::create_dir_all(root.join("cluster/ipampools")).unwrap();
    std::fs::write(
        root.join("cluster/ipampools/lan.yaml"),
        POOL.replace("'52:54:00'", "'00:16:3e'"),
    )
    .unwrap();
    let out = db.run(["import", root.to_str().unwrap()]);
    assert_code(&out, 2);
    assert!(
        stderr(&out).contains("invalid MAC prefix `00:16:3e`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.pools"), 0);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn check_store_reports_a_malformed_mac_and_an_edited_auto_mac() {
    let db = Db::new();
    apply(&db, POOL);
    assert_code(&allocate(&db, "VirtualMachine/a/0", "auto"), 0);
    assert_code(&allocate(&db, "VirtualMachine/b/0", "02:00:00:00:00:0b"), 0);
    assert_code(&db.run(["check"]), 0);
    let edit = |from: &str, to: &str, at: &str| {
        db.sql()
            .batch_execute(&format!(
                "UPDATE ipamctl.allocations SET manifest = convert_to(replace(convert_from(manifest, 'UTF8'),
                     '{from}', '{to}'), 'UTF8') WHERE host(address) = '{at}'"
            ))
            .unwrap();
    };
    // An auto MAC edited by hand: it carries the prefix, but is not 10.0.0.1's.
    edit("52:54:00:00:00:01", "52:54:00:00:00:07", "10.0.0.1");
    // A MAC that does not parse.
    edit("02:00:00:00:00:0b", "03:00:00:00:00:0b", "10.0.0.2");
    let out = db.run(["check"]);
    assert_code(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("MAC 52:54:00:00:00:07 has pool `lan`'s macPrefix 52:54:00 but is not the one `--mac auto` derives for 10.0.0.1 (52:54:00:00:00:01)")
            && text.contains("fix it with `ipamctl mac set lan 10.0.0.1 --owner VirtualMachine/a/0 --mac auto`"),
        "{text}"
    );
    assert!(
        text.contains("invalid MAC `03:00:00:00:00:0b`")
            && text.contains("fix spec.mac to six hex octets"),
        "{text}"
    );
}
