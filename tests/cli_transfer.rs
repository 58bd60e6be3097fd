//! `import` and `export` on PostgreSQL say plainly what they did: which state directory went
//! into which database (never `schema/ipamctl configured`), which directory was created
//! (never `statedirectory/` glued to its path), and a summary that counts every kind of
//! object, so that it adds up with "already there".

mod pg;

use pg::{Db, assert_code, stderr, stdout};

mod code {
    pub const OK: i32 = 0;
}

/// A copy of `testdata/<case>` in a temporary directory.
fn fixture_copy(case: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(case);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(dir.path())
        .status()
        .expect("run cp");
    assert!(status.success());
    dir
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn import_says_what_went_where_and_counts_subnets_in_its_summary() {
    let db = Db::new();
    // Two pools and one subnet, no allocations.
    let source = fixture_copy("subnets");
    let dir = source.path().to_str().expect("UTF-8 path");
    let first = db.run(["import", dir]);
    assert_code(&first, code::OK);
    assert_eq!(
        stdout(&first),
        "imported the state directory into the database\n",
        "stderr: {}",
        stderr(&first)
    );
    assert_eq!(
        stderr(&first),
        format!(
            "imported 2 pools, 1 subnet, 0 allocations and 0 cooldown records from {dir} into {} (0 already there)\n",
            describe(&db)
        )
    );
    let again = db.run(["import", dir]);
    assert_code(&again, code::OK);
    assert!(
        stdout(&again).starts_with("nothing to import: the database already holds"),
        "{}",
        stdout(&again)
    );
    // Everything of every kind is already there: the three objects the first run counted.
    assert_eq!(
        stderr(&again),
        format!(
            "imported 0 pools, 0 subnets, 0 allocations and 0 cooldown records from {dir} into {} (3 already there)\n",
            describe(&db)
        )
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn export_names_the_new_state_directory_by_its_path() {
    let db = Db::new();
    let source = fixture_copy("subnets");
    assert_code(
        &db.run(["import", source.path().to_str().expect("UTF-8 path")]),
        code::OK,
    );
    let out = tempfile::tempdir().expect("a temporary directory");
    let target = out.path().join("exported");
    let target = target.to_str().expect("UTF-8 path");
    let export = db.run(["export", target]);
    assert_code(&export, code::OK);
    let printed = stdout(&export);
    assert!(!printed.contains("statedirectory/"), "{printed}");
    assert_eq!(
        printed,
        format!("exported the database to the new state directory {target}\n")
    );
    assert_eq!(
        stderr(&export),
        format!(
            "exported 2 pools, 1 subnet, 0 allocations and 0 cooldown records from {}\n",
            describe(&db)
        )
    );
    // The data formats keep the object they always printed.
    let json = db.run(["export", &format!("{target}-json"), "-o", "json"]);
    let value: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON");
    assert_eq!(value["kind"], "StateDirectory");
    assert_eq!(value["copied"]["subnets"], 1);
}

/// How ipamctl names the database in messages (`dbname=… host=… port=… user=…`), as the
/// stderr of `init` says it.
fn describe(db: &Db) -> String {
    let out = db.run(["init"]);
    let text = stderr(&out);
    text.trim_end()
        .rsplit_once(" in ")
        .map(|(_, d)| d.to_owned())
        .unwrap_or_else(|| panic!("init names its database: {text}"))
}
