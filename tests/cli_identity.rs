//! An owner is one identity (issue 46, finding 4): an owner's name that a uid holds in a pool
//! is that owner, and a request for the name without its uid, or with another uid, is exit 4
//! naming the holder and its uid, with a hint that works; never a second address. In every
//! form that claims (the command, dual stack, a zone, the batch) and in `check`. Under
//! `IPAMCTL_TEST_STORE=postgres` every command but the file-store-only ones runs on
//! PostgreSQL with the same assertions (`.ci/run`). The race of two processes for one name
//! is `tests/identity_race.rs`.

mod common;

use common::{Test, code, list_items, pg};

/// `front` (10.0.0.0/24) and `front6` (fd00:1::/120) public, both in zone `z`; `vpcs`
/// (192.0.2.0/28) public.
const POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: front
spec:
  cidr: 10.0.0.0/24
  kind: public
  zone: z
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: front6
spec:
  cidr: fd00:1::/120
  kind: public
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: vpcs
spec:
  cidr: 192.0.2.0/28
  kind: public
";

const VM: &str = "VirtualMachine/vm-02/0";
const UID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
const OTHER: &str = "6b3a1c9e-0d4f-4c1b-9f0e-2a7d5c8e1f30";

/// The pools, with `vm-02/0` under `UID` holding 10.0.0.1 in `front`.
fn held_with_uid() -> Test {
    Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(POOLS)
        .run()
        .then()
        .args(["allocate", "front", "--owner", VM, "--uid", UID])
        .stdout("10.0.0.1\n")
        .run()
        .then()
}

/// The command of the `hint:` line of `stderr` (after its last `: `), as arguments.
fn hinted(stderr: &str) -> Vec<String> {
    let hint = stderr
        .lines()
        .find_map(|l| l.strip_prefix("hint: "))
        .unwrap_or_else(|| panic!("no hint:\n{stderr}"));
    let command = &hint[hint.find("ipamctl ").expect("a command in the hint")..];
    command
        .split_whitespace()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

#[test]
fn an_owner_asked_for_without_its_uid_is_refused_naming_the_holder_and_the_hint_works() {
    let ran = held_with_uid()
        .args(["allocate", "front", "--owner", VM])
        .fails(code::CONFLICT)
        .stderr(&format!(
            "error: owner `{VM}` holds 10.0.0.1 in pool `front` under uid {UID}; asked for without `--uid` it is another owner, and an owner's name is one identity per pool\n\
             hint: if it is the same NIC, ask with its uid: ipamctl allocate front --owner {VM} --uid {UID}\n"
        ))
        .run();
    // The hint, run as it is, answers the holder's address.
    let hint = hinted(&ran.stderr);
    ran.then()
        .args(&hint)
        .stdout("10.0.0.1\n")
        .unchanged()
        .run()
        .then()
        .args(["allocate", "front", "--owner", VM, "--dry-run"])
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(["check"])
        .run();
}

#[test]
fn an_owner_asked_for_with_another_uid_is_refused_naming_the_holders_uid() {
    let ran = held_with_uid()
        .args(["allocate", "front", "--owner", VM, "--uid", OTHER])
        .fails(code::CONFLICT)
        .stderr(&format!(
            "error: owner `{VM}` holds 10.0.0.1 in pool `front` under uid {UID}, not uid {OTHER}; an owner's name is one identity per pool\n\
             hint: if the owner with uid {UID} is gone, release its address first: ipamctl release front 10.0.0.1 --owner {VM} --uid {UID}\n"
        ))
        .run();
    let hint = hinted(&ran.stderr);
    ran.then()
        .args(&hint)
        .stdout("ipallocation/front-10-0-0-1 released\n")
        .run()
        .then()
        .args(["allocate", "front", "--owner", VM, "--uid", OTHER])
        .stdout("10.0.0.1\n")
        .run();
}

#[test]
fn an_owner_held_without_a_uid_is_refused_to_a_request_with_one() {
    let ran = Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(POOLS)
        .run()
        .then()
        .args(["allocate", "front", "--owner", VM])
        .stdout("10.0.0.1\n")
        .run()
        .then()
        .args(["allocate", "front", "--owner", VM, "--uid", UID])
        .fails(code::CONFLICT)
        .stderr(&format!(
            "error: owner `{VM}` holds 10.0.0.1 in pool `front` without a uid, not under uid {UID}; an owner's name is one identity per pool\n\
             hint: to hold it under uid {UID}, release it and ask again: ipamctl release front 10.0.0.1 --owner {VM}\n"
        ))
        .run();
    let hint = hinted(&ran.stderr);
    ran.then()
        .args(&hint)
        .stdout("ipallocation/front-10-0-0-1 released\n")
        .run();
}

/// Dual stack, a zone and a batch are refused alike, and a dual-stack claim whose second
/// pool is refused leaves nothing in its first.
#[test]
fn every_form_of_allocate_refuses_the_name_under_another_identity() {
    let test = held_with_uid()
        .args(["allocate", "front6", "front", "--owner", VM])
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(["allocate", "--zone", "z", "--owner", VM, "--uid", OTHER])
        .fails(code::CONFLICT)
        .run()
        .then();
    let file = test.input(
        "batch.jsonl",
        &format!(
            "{{\"pool\":\"front\",\"owner\":\"{VM}\"}}\n\
             {{\"pool\":\"front\",\"owner\":\"{VM}\",\"uid\":\"{UID}\"}}\n\
             {{\"pools\":[\"front\",\"front6\"],\"owner\":\"{VM}\",\"uid\":\"{OTHER}\"}}\n"
        ),
    );
    let ran = test
        .args(["allocate", "-f", &file, "-o", "json"])
        .status(code::CONFLICT)
        .run();
    let lines: Vec<serde_json::Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let exits: Vec<Option<i64>> = lines.iter().map(|r| r["error"]["exit"].as_i64()).collect();
    assert_eq!(exits, [Some(4), None, Some(4)], "{}", ran.stdout);
    assert!(
        lines[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("under uid {UID}"))),
        "{}",
        ran.stdout
    );
    let ran = ran.then().args(["list", "-o", "json"]).run();
    let held: Vec<String> = list_items(&ran.stdout)
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(held, ["front-10-0-0-1"], "{}", ran.stdout);
}

/// A VPC's name is always `router`: its uid is its identity, so VPCs share a public pool.
#[test]
fn vpc_routers_of_different_vpcs_share_a_pool() {
    held_with_uid()
        .args(["allocate", "vpcs", "--owner", "VPC/router", "--uid", UID])
        .stdout("192.0.2.1\n")
        .run()
        .then()
        .args(["allocate", "vpcs", "--owner", "VPC/router", "--uid", OTHER])
        .stdout("192.0.2.2\n")
        .run()
        .then()
        .args(["check"])
        .run();
}

/// `release` and `list` take `--owner` as a filter: without `--uid` it selects the owner
/// of that name whatever its uid (one per pool), as `kubectl delete` selects by name.
#[test]
fn release_by_owner_without_uid_releases_the_name_held_under_a_uid() {
    held_with_uid()
        .args([
            "release", "front", "10.0.0.1", "--owner", VM, "--uid", OTHER,
        ])
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(["release", "front", "10.0.0.1", "--owner", VM])
        .stdout("ipallocation/front-10-0-0-1 released\n")
        .run();
}

/// A hand edit (or a merge of two branches) can still hold one name under two identities
/// in a pool: `check` reports it on both files.
#[test]
fn check_reports_an_owner_name_held_under_two_identities_naming_both_files() {
    let test = held_with_uid()
        .args(["allocate", "front", "--owner", "VirtualMachine/vm-03/0"])
        .stdout("10.0.0.2\n")
        .run()
        .then()
        .file_store_only();
    let rel = "cluster/ipallocations/front-10-0-0-2.yaml";
    let text = test.read(rel);
    test.write(rel, &text.replace("vm-03/0", "vm-02/0"));
    let ran = test.args(["check"]).status(code::FAILURE).run();
    let message = format!(
        "owner `{VM}` is held under 2 identities in pool `front`: 10.0.0.1 (uid {UID}) in cluster/ipallocations/front-10-0-0-1.yaml, 10.0.0.2 (no uid) in cluster/ipallocations/front-10-0-0-2.yaml; an owner's name is one identity per pool: release the one whose NIC is gone (`ipamctl release front ADDRESS --owner {VM} --uid UID`, without `--uid` for the one that has none)"
    );
    for file in [
        "cluster/ipallocations/front-10-0-0-1.yaml",
        "cluster/ipallocations/front-10-0-0-2.yaml",
    ] {
        assert!(
            ran.stdout
                .lines()
                .any(|l| l.starts_with(&format!("error     {file} ")) && l.ends_with(&message)),
            "{}",
            ran.stdout
        );
    }
    // Released, the other is the name's one identity again.
    ran.then()
        .args(["release", "front", "10.0.0.2", "--owner", VM])
        .run()
        .then()
        .args(["check"])
        .run();
}

/// A database that holds one name under two identities in a pool (made before migration
/// 12, whose unique index forbids it) is refused the migration, naming the name and its
/// addresses; with one of them gone, `init` upgrades it.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn init_refuses_to_upgrade_a_database_holding_a_name_twice_naming_it() {
    let db = pg::Db::new();
    let dir = tempfile::tempdir().unwrap();
    db.apply(dir.path(), POOLS);
    for owner in [VM, "VirtualMachine/vm-03/0"] {
        let out = db.run(["allocate", "front", "--owner", owner, "--uid", UID]);
        assert!(out.status.success(), "{}", pg::stderr(&out));
    }
    // As version 11 left it (migrations 12 and 13 undone), and a name held twice, as it
    // could then be.
    db.sql()
        .batch_execute(&format!(
            "DROP FUNCTION ipamctl.allocation_expires(bytea);
             ALTER TABLE ipamctl.events DROP CONSTRAINT events_action_check;
             ALTER TABLE ipamctl.events ADD CONSTRAINT events_action_check CHECK (action IN
                 ('claimed', 'released', 'mac changed', 'pool created', 'pool updated',
                  'pool deleted'));
             DELETE FROM ipamctl.schema_version WHERE version = 13;
             DROP INDEX ipamctl.allocations_one_per_owner_name;
             DELETE FROM ipamctl.schema_version WHERE version = 12;
             UPDATE ipamctl.allocations
             SET owner_name = 'vm-02/0', owner_uid = '',
                 manifest = convert_to(replace(replace(convert_from(manifest, 'UTF8'),
                                'vm-03/0', 'vm-02/0'), '    uid: {UID}\n', ''), 'UTF8')
             WHERE owner_name = 'vm-03/0'"
        ))
        .unwrap();
    let out = db.run(["init"]);
    assert_eq!(out.status.code(), Some(1), "{}", pg::stderr(&out));
    let stderr = pg::stderr(&out);
    assert!(
        stderr.contains(&format!(
            "owner VirtualMachine/vm-02/0 is held under two identities in pool front (namespace ''): 10.0.0.1 (uid {UID}), 10.0.0.2 (no uid)"
        )),
        "{stderr}"
    );
    pg::assert_one_error(&out);
    db.sql()
        .batch_execute("DELETE FROM ipamctl.allocations WHERE address = '10.0.0.2'")
        .unwrap();
    let out = db.run(["init"]);
    assert!(out.status.success(), "{}", pg::stderr(&out));
    db.assert_check_clean();
}

/// `import` meets the rule on both sides: a state directory holding a name twice is refused
/// whole by its `check`, and one whose name the database holds under another uid is exit 4
/// naming the holder (the unique index of migration 12), nothing imported.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn import_refuses_a_name_under_a_second_identity() {
    let test = held_with_uid().file_store_only();
    let db = pg::Db::new();
    let dir = tempfile::tempdir().unwrap();
    db.apply(dir.path(), POOLS);
    let out = db.run(["allocate", "front", "--owner", VM, "--address", "10.0.0.9"]);
    assert!(out.status.success(), "{}", pg::stderr(&out));
    let out = db.run(["import", test.state().to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(code::CONFLICT),
        "{}",
        pg::stderr(&out)
    );
    assert!(
        pg::stderr(&out).contains(&format!(
            "its owner's name is held in that pool by {VM} at 10.0.0.9"
        )),
        "{}",
        pg::stderr(&out)
    );
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.allocations"),
        1,
        "nothing imported"
    );
    // The state directory itself holding the name twice: refused by its `check`.
    let rel = "cluster/ipallocations/front-10-0-0-2.yaml";
    let text = test.read("cluster/ipallocations/front-10-0-0-1.yaml");
    test.write(
        rel,
        &text
            .replace("10-0-0-1", "10-0-0-2")
            .replace("10.0.0.1", "10.0.0.2")
            .replace(&format!("    uid: {UID}\n"), ""),
    );
    let fresh = pg::Db::new();
    let out = fresh.run(["import", test.state().to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(code::INVALID),
        "{}",
        pg::stderr(&out)
    );
    assert!(
        pg::stderr(&out).contains("is held under 2 identities in pool `front`"),
        "{}",
        pg::stderr(&out)
    );
}
