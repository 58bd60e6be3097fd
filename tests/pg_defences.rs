//! PostgreSQL's prefix claims defended as allocations are, against other writers: a row
//! whose columns disagree with its manifest is refused (and `check --store` reports one
//! made before), an owner's second prefix in a supernet is refused by `import` and reported
//! by `check`, and the kept free blocks cannot be left stale by a role that merely has DML
//! rights. Also: `subnet delete` lowers the low-water hint, zero timeouts are refused, and
//! an older schema is named with the command that upgrades it.

mod pg;

use pg::{Db, assert_code, assert_one_error, stderr, stdout};

/// A supernet `sn` of 10.64.0.0/`len` handing out /24s.
fn supernet(db: &Db, len: u8) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sn.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\nspec:\n  cidr: 10.64.0.0/{len}\n  kind: supernet\n  prefixLengths:\n    min: 24\n    max: 24\n"
        ),
    )
    .unwrap();
    assert_code(&db.run(["apply", "-f", file.to_str().unwrap()]), 0);
}

fn claim(db: &Db, owner: &str) -> std::process::Output {
    db.run([
        "allocate",
        "sn",
        "--prefix-length",
        "24",
        "--owner",
        &format!("FloatingIP/{owner}"),
    ])
}

/// A claim's manifest as ipamctl writes it (without a creation time).
fn claim_manifest(name: &str, prefix: &str, owner: &str) -> String {
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPPrefixClaim\nmetadata:\n  name: {name}\nspec:\n  pool: sn\n  prefix: {prefix}\n  owner:\n    kind: FloatingIP\n    name: {owner}\n"
    )
}

/// Inserts a claim row by hand (as psql would), its columns `name` and `prefix`, its
/// manifest `manifest`.
fn insert(
    client: &mut postgres::Client,
    name: &str,
    prefix: &str,
    manifest: &str,
) -> Result<u64, postgres::Error> {
    client.execute(
        "INSERT INTO ipamctl.objects (kind, namespace, name, pool, manifest, prefix)
         VALUES ('IPPrefixClaim', '', $1, 'sn', $2, $3::text::inet)",
        &[&name, &manifest.as_bytes(), &prefix],
    )
}

fn check(db: &Db) -> std::process::Output {
    db.run(["check"])
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_prefix_claim_row_that_disagrees_with_its_manifest_is_refused_and_reported() {
    let db = Db::new();
    supernet(&db, 22);
    assert_eq!(stdout(&claim(&db, "a")), "10.64.0.0/24\n");
    // The row says 10.64.1.0/24, its manifest 10.64.2.0/24: refused.
    let manifest = claim_manifest("sn-10-64-2-0-24", "10.64.2.0/24", "b");
    let refused = insert(&mut db.sql(), "sn-10-64-2-0-24", "10.64.1.0/24", &manifest)
        .expect_err("a row that disagrees with its manifest is refused");
    assert_eq!(refused.code().map(|c| c.code()), Some("23514"), "{refused}");
    // So is an update that moves a row's prefix away from its manifest's.
    let moved = db.sql().execute(
        "UPDATE ipamctl.objects SET prefix = '10.64.3.0/24' WHERE kind = 'IPPrefixClaim'",
        &[],
    );
    assert!(moved.is_err(), "{moved:?}");
    // One made with the trigger off (as before migration 11) is what `check` reports.
    let mut owner = db.sql();
    owner
        .batch_execute("ALTER TABLE ipamctl.objects DISABLE TRIGGER objects_prefix_claims_agree")
        .unwrap();
    insert(&mut owner, "sn-10-64-2-0-24", "10.64.1.0/24", &manifest).unwrap();
    owner
        .batch_execute("ALTER TABLE ipamctl.objects ENABLE TRIGGER objects_prefix_claims_agree")
        .unwrap();
    let out = check(&db);
    assert_code(&out, 1);
    assert!(
        stdout(&out).contains("sn-10-64-2-0-24")
            && stdout(&out).contains("the prefix claim row's columns (pool sn, prefix 10.64.1.0/24) disagree with its manifest"),
        "{}",
        stdout(&out)
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn one_owner_two_prefixes_is_reported_by_check_and_refused_by_import() {
    let db = Db::new();
    supernet(&db, 22);
    assert_eq!(stdout(&claim(&db, "a")), "10.64.0.0/24\n");
    assert_code(&check(&db), 0);
    // A state directory where `a` holds 10.64.1.0/24 (and `b` the first /24, released).
    let dir = tempfile::tempdir().unwrap();
    let exported = dir.path().join("state");
    assert_code(&db.run(["export", exported.to_str().unwrap()]), 0);
    let from = exported.join("cluster/ipprefixclaims");
    let first = std::fs::read_to_string(from.join("sn-10-64-0-0-24.yaml")).unwrap();
    std::fs::remove_file(from.join("sn-10-64-0-0-24.yaml")).unwrap();
    std::fs::write(
        from.join("sn-10-64-1-0-24.yaml"),
        first
            .replace("sn-10-64-0-0-24", "sn-10-64-1-0-24")
            .replace("10.64.0.0/24", "10.64.1.0/24"),
    )
    .unwrap();
    let out = db.run(["import", exported.to_str().unwrap()]);
    assert_code(&out, 4);
    assert_one_error(&out);
    assert!(
        stderr(&out).contains("its owner already holds 10.64.0.0/24 in that pool"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.objects WHERE kind = 'IPPrefixClaim'"),
        1
    );
    // A copy under another name made by hand: `check` names both.
    let copy = claim_manifest("sn-10-64-2-0-24", "10.64.2.0/24", "a");
    insert(&mut db.sql(), "sn-10-64-2-0-24", "10.64.2.0/24", &copy).unwrap();
    let out = check(&db);
    assert_code(&out, 1);
    assert_eq!(
        stdout(&out)
            .matches("owner `FloatingIP/a` holds 2 prefixes of pool `sn`")
            .count(),
        2,
        "{}",
        stdout(&out)
    );
}

/// A role that may write ipamctl's tables but does not own them.
struct Intruder<'a> {
    db: &'a Db,
    role: String,
}

impl<'a> Intruder<'a> {
    fn new(db: &'a Db) -> Intruder<'a> {
        let role = format!("intruder_{}", db.name());
        db.sql()
            .batch_execute(&format!(
                "CREATE ROLE {role} LOGIN;
                 GRANT USAGE ON SCHEMA ipamctl TO {role};
                 GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ipamctl TO {role};"
            ))
            .unwrap();
        Intruder { db, role }
    }

    fn sql(&self) -> postgres::Client {
        self.db.sql_as(&self.role)
    }
}

impl Drop for Intruder<'_> {
    fn drop(&mut self) {
        let role = &self.role;
        let _ = self
            .db
            .sql()
            .batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}"));
    }
}

/// A role with DML rights alone cannot make its write skip the stale-blocks trigger: after
/// it deletes a claim with `ipamctl.counting = 'self'` (what ipamctl's own statements say),
/// best fit still finds the /24 it freed.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_non_owner_role_cannot_leave_the_free_blocks_stale() {
    let db = Db::new();
    supernet(&db, 23);
    assert_eq!(stdout(&claim(&db, "a")), "10.64.0.0/24\n");
    assert_eq!(stdout(&claim(&db, "b")), "10.64.1.0/24\n");
    assert_code(&claim(&db, "c"), 5);
    let intruder = Intruder::new(&db);
    let mut sql = intruder.sql();
    sql.batch_execute(
        "BEGIN;
         SET LOCAL ipamctl.counting = 'self';
         DELETE FROM ipamctl.objects WHERE kind = 'IPPrefixClaim' AND name = 'sn-10-64-0-0-24';
         COMMIT;",
    )
    .unwrap();
    let out = claim(&db, "c");
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "10.64.0.0/24\n");
}

/// A public pool `p` (10.30.0.0/24) with subnet `s` (10.30.0.0/29, gateway .1).
fn pool_with_subnet(db: &Db) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.yaml");
    std::fs::write(
        &file,
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\nspec:\n  cidr: 10.30.0.0/24\n  kind: public\n",
    )
    .unwrap();
    assert_code(&db.run(["apply", "-f", file.to_str().unwrap()]), 0);
    let out = db.run([
        "subnet",
        "create",
        "s",
        "--pool",
        "p",
        "--cidr",
        "10.30.0.0/29",
    ]);
    assert_code(&out, 0);
}

/// `subnet delete` frees the subnet's gateway (10.30.0.1), below the pool's low-water
/// hint: the next claim gets it, as on the file store.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn subnet_delete_lowers_the_low_water_hint() {
    let db = Db::new();
    pool_with_subnet(&db);
    let first = db.run(["allocate", "p", "--owner", "FloatingIP/a"]);
    assert_eq!(stdout(&first), "10.30.0.2\n");
    assert_code(&db.run(["release", "p", "--owner", "FloatingIP/a"]), 0);
    assert_code(&db.run(["subnet", "delete", "s"]), 0);
    let next = db.run(["allocate", "p", "--owner", "FloatingIP/b"]);
    assert_code(&next, 0);
    assert_eq!(stdout(&next), "10.30.0.1\n");
}

/// `ipamctl --store URL ARGS` for another connection string of the test database.
fn at(url: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(pg::BIN)
        .arg("--store")
        .arg(url)
        .args(args)
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .env_remove("PGOPTIONS")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run ipamctl")
}

/// A zero timeout is PostgreSQL's (and libpq's) "no timeout": refused, exit 2, naming it.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_zero_timeout_is_refused() {
    let db = Db::new();
    let sep = if db.url.contains('?') { '&' } else { '?' };
    for (param, named) in [
        ("options=-c%20statement_timeout%3D0", "statement_timeout"),
        ("options=-c%20lock_timeout%3D0s", "lock_timeout"),
        ("connect_timeout=0", "connect_timeout"),
    ] {
        let out = at(&format!("{}{sep}{param}", db.url), &["pool", "list"]);
        assert_code(&out, 2);
        assert_one_error(&out);
        assert!(
            stderr(&out).contains(named) && stderr(&out).contains("no timeout"),
            "{param}: {}",
            stderr(&out)
        );
    }
    // A short one is fine.
    let out = at(
        &format!("{}{sep}options=-c%20lock_timeout%3D10ms", db.url),
        &["pool", "list"],
    );
    assert_code(&out, 0);
}

/// A database at an older schema (8, before the kept free blocks) is named as such, with
/// the command that upgrades it, also where a claim's first round trip uses what only a
/// later version has.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn an_older_schema_is_named_with_the_command_that_upgrades_it() {
    let db = Db::new();
    supernet(&db, 22);
    db.sql()
        .batch_execute(
            "DROP FUNCTION IF EXISTS ipamctl.refuse_claim_row() CASCADE;
             DROP FUNCTION IF EXISTS ipamctl.claim_row_disagrees(text, text, text, inet, bytea);
             DROP FUNCTION IF EXISTS ipamctl.claim_columns(bytea);
             DROP FUNCTION IF EXISTS ipamctl.claim_line(bytea, text);
             DROP FUNCTION IF EXISTS ipamctl.own_write() CASCADE;
             DROP FUNCTION ipamctl.prefix_free_stale() CASCADE;
             DROP TABLE ipamctl.prefix_free, ipamctl.prefix_free_pools, ipamctl.prefix_free_epoch;
             DROP INDEX ipamctl.allocations_one_per_mac;
             DROP INDEX ipamctl.allocations_one_per_owner_name;
             DROP FUNCTION ipamctl.allocation_mac(bytea);
             DROP FUNCTION ipamctl.allocation_expires(bytea);
             DELETE FROM ipamctl.schema_version WHERE version > 8",
        )
        .unwrap();
    for out in [claim(&db, "a"), db.run(["pool", "list"])] {
        assert_code(&out, 3);
        assert!(
            stderr(&out).contains("is version 8; this ipamctl needs version")
                && stderr(&out).contains("init`"),
            "{}",
            stderr(&out)
        );
    }
    assert_code(&db.run(["init"]), 0);
    assert_eq!(stdout(&claim(&db, "a")), "10.64.0.0/24\n");
}
