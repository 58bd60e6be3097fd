//! The PostgreSQL store, driven through the real binary against a real server (see
//! `tests/pg/mod.rs`): selection and connection errors, the schema's life cycle, the claim
//! protocol under concurrency, and the audit log.

mod pg;

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::process::{Child, Command};

use ipamctl::store::pg::schema::LATEST;
use pg::budget::Budget;
use pg::{Bouncer, Db, assert_code, assert_one_error, stderr, stdout};
use std::time::Duration;

/// Exit codes, as the README documents them.
mod code {
    pub const OK: i32 = 0;
    pub const FAILURE: i32 = 1;
    pub const INVALID: i32 = 2;
    pub const NOT_FOUND: i32 = 3;
    pub const CONFLICT: i32 = 4;
    pub const EXHAUSTED: i32 = 5;
    /// The connection was lost at COMMIT: the change may or may not be made.
    pub const UNKNOWN: i32 = 6;
}

/// A public pool manifest.
fn pool_yaml(name: &str, cidr: &str, gateway: Option<&str>) -> String {
    let gateway = gateway
        .map(|g| format!("  gateway: {g}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\nspec:\n  cidr: {cidr}\n  kind: public\n{gateway}"
    )
}

/// Applies `yaml` through a file (stdin is closed for the store's commands).
fn apply(db: &Db, yaml: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pools.yaml");
    std::fs::write(&file, yaml).unwrap();
    db.run(["apply", "-f", file.to_str().unwrap()])
}

fn allocate(db: &Db, pool: &str, owner: &str) -> std::process::Output {
    db.run(["allocate", pool, "--owner", owner])
}

/// The addresses held in `pool`, from the table itself.
fn held(db: &Db, pool: &str) -> Vec<Ipv4Addr> {
    db.sql()
        .query(
            "SELECT host(address) FROM ipamctl.allocations WHERE pool = $1 ORDER BY address",
            &[&pool],
        )
        .unwrap()
        .iter()
        .map(|r| r.get::<_, &str>(0).parse().unwrap())
        .collect()
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn init_creates_the_schema_once_and_is_idempotent() {
    let db = Db::empty();
    let first = db.run(["init"]);
    assert_code(&first, code::OK);
    assert_eq!(stdout(&first), "schema/ipamctl created\n");
    assert!(stderr(&first).starts_with(&format!("created the ipamctl schema, version {LATEST}")));
    let again = db.run(["init"]);
    assert_code(&again, code::OK);
    assert_eq!(stdout(&again), "schema/ipamctl unchanged\n");
    assert!(stderr(&again).starts_with(&format!("ipamctl schema already at version {LATEST}")));
    // One row per migration applied.
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.schema_version"),
        i64::from(LATEST)
    );
    // The arbiters are constraints of the table.
    assert_eq!(
        db.count(
            "SELECT count(*) FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
             WHERE t.relname = 'allocations' AND c.contype IN ('p', 'u')"
        ),
        2
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn commands_on_a_database_without_the_schema_exit_3_with_an_init_hint() {
    let db = Db::empty();
    for args in [
        vec!["list"],
        vec!["pool", "list"],
        vec!["allocate", "p", "--owner", "FloatingIP/f"],
    ] {
        let out = db.run(&args);
        assert_code(&out, code::NOT_FOUND);
        assert_one_error(&out);
        let err = stderr(&out);
        assert!(err.contains("has no ipamctl schema"), "{err}");
        assert!(err.contains("hint: run `ipamctl --store '") && err.contains("' init`"));
    }
    // Nothing was created by asking.
    assert_eq!(
        db.count("SELECT count(*) FROM pg_namespace WHERE nspname = 'ipamctl'"),
        0
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_newer_schema_is_refused_before_anything_is_written() {
    let db = Db::new();
    db.sql()
        .batch_execute("INSERT INTO ipamctl.schema_version (version, client) VALUES (99, 'future')")
        .unwrap();
    let out = apply(&db, &pool_yaml("p", "192.0.2.0/29", None));
    assert_code(&out, code::FAILURE);
    assert_one_error(&out);
    assert!(stderr(&out).contains(&format!(
        "is version 99, newer than this ipamctl knows ({LATEST})"
    )));
    let init = db.run(["init"]);
    assert_code(&init, code::FAILURE);
    assert_one_error(&init);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.pools"), 0);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.events"), 0);
    // This ipamctl's migrations, and the future one.
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.schema_version"),
        i64::from(LATEST) + 1
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn store_together_with_state_dir_is_a_usage_error() {
    let db = Db::new();
    let out = db.run(["-d", "somewhere", "list"]);
    assert_code(&out, code::INVALID);
    assert_one_error(&out);
    // Not when one of them comes from the environment: the command line wins, as in git,
    // kubectl and psql (`--store` here, an exported IPAMCTL_STATE_DIR).
    let out = db
        .cmd(["list"])
        .env("IPAMCTL_STATE_DIR", "somewhere")
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    // And a store that is no PostgreSQL string.
    let out = std::process::Command::new(pg::BIN)
        .args(["--store", "./state", "list"])
        .env_remove("IPAMCTL_STATE_DIR")
        .output()
        .unwrap();
    assert_code(&out, code::INVALID);
    assert_one_error(&out);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn store_from_the_environment_selects_the_database() {
    let db = Db::new();
    let out = std::process::Command::new(pg::BIN)
        .args(["pool", "list"])
        .env("IPAMCTL_STORE", &db.url)
        .env_remove("IPAMCTL_STATE_DIR")
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    assert!(stderr(&out).contains("No pools found."));
}

/// Environment variables set for one run.
type Env = Vec<(&'static str, String)>;

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_password_never_appears_in_any_output() {
    const SECRET: &str = "hunter2-Secret";
    let runs: Vec<(Vec<String>, Env)> = vec![
        // Nobody listens on port 1: a connection error.
        (
            vec![
                format!("postgresql://alice:{SECRET}@127.0.0.1:1/db"),
                "list".into(),
            ],
            vec![],
        ),
        (
            vec![
                format!("host=127.0.0.1 port=1 password={SECRET} dbname=x"),
                "list".into(),
            ],
            vec![],
        ),
        (
            vec![
                format!("host=127.0.0.1 port=1 password='{SECRET} x' dbname=x"),
                "list".into(),
            ],
            vec![],
        ),
        // A bad option and a bad sslmode next to the password.
        (
            vec![
                format!("postgresql://alice:{SECRET}@h/db?sslcert=x"),
                "list".into(),
            ],
            vec![],
        ),
        (
            vec![
                format!("postgresql://alice:{SECRET}@h/db?sslmode=bogus"),
                "list".into(),
            ],
            vec![],
        ),
        // Not PostgreSQL at all.
        (
            vec![format!("mysql://alice:{SECRET}@h/db"), "list".into()],
            vec![],
        ),
        // From the environment.
        (
            vec!["host=127.0.0.1 port=1 dbname=x".into(), "list".into()],
            vec![("PGPASSWORD", SECRET.to_owned())],
        ),
    ];
    for (args, env) in runs {
        let out = std::process::Command::new(pg::BIN)
            .arg("--store")
            .args(&args)
            .envs(env)
            .env_remove("IPAMCTL_STATE_DIR")
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert_one_error(&out);
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!all.contains("hunter2"), "{args:?}: {all}");
    }
    // A server that does not ask for the password (trust): the no-schema hint repeats the
    // store string, masked.
    let db = Db::empty();
    let url = db.url.replacen(
        "postgresql://",
        &format!("postgresql://postgres:{SECRET}@"),
        1,
    );
    let out = std::process::Command::new(pg::BIN)
        .args(["--store", &url, "list"])
        .env_remove("IPAMCTL_STATE_DIR")
        .output()
        .unwrap();
    assert_code(&out, code::NOT_FOUND);
    let err = stderr(&out);
    assert!(
        !err.contains("hunter2") && err.contains("password=****"),
        "{err}"
    );
    // `--help` never shows the environment's store.
    let out = std::process::Command::new(pg::BIN)
        .args(["--help"])
        .env("IPAMCTL_STORE", format!("postgresql://a:{SECRET}@h/db"))
        .output()
        .unwrap();
    assert!(!stdout(&out).contains("hunter2"));
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_connection_failure_is_one_error_line_and_exit_1() {
    let out = std::process::Command::new(pg::BIN)
        .args(["--store", "postgresql://nobody@127.0.0.1:1/db", "list"])
        .env_remove("IPAMCTL_STATE_DIR")
        .output()
        .unwrap();
    assert_code(&out, code::FAILURE);
    assert_one_error(&out);
    assert!(stderr(&out).contains("cannot connect to PostgreSQL"));
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn apply_allocate_release_and_exhaustion() {
    let db = Db::new();
    // 192.0.2.0/29 with gateway .1: candidates .2-.6.
    let out = apply(&db, &pool_yaml("tiny", "192.0.2.0/29", Some("192.0.2.1")));
    assert_code(&out, code::OK);
    assert_eq!(stdout(&out), "ipampool/tiny created\n");
    let again = apply(&db, &pool_yaml("tiny", "192.0.2.0/29", Some("192.0.2.1")));
    assert_eq!(stdout(&again), "ipampool/tiny unchanged\n");
    let a = allocate(&db, "tiny", "FloatingIP/a");
    assert_code(&a, code::OK);
    assert_eq!(stdout(&a), "192.0.2.2\n");
    // The same owner again: the same address.
    assert_eq!(
        stdout(&allocate(&db, "tiny", "FloatingIP/a")),
        "192.0.2.2\n"
    );
    for (owner, addr) in [("b", "3"), ("c", "4"), ("d", "5"), ("e", "6")] {
        let out = allocate(&db, "tiny", &format!("FloatingIP/{owner}"));
        assert_eq!(stdout(&out), format!("192.0.2.{addr}\n"));
    }
    let full = allocate(&db, "tiny", "FloatingIP/f");
    assert_code(&full, code::EXHAUSTED);
    assert_one_error(&full);
    // Release, then the freed address is the lowest free one again.
    let rel = db.run(["release", "tiny", "192.0.2.3", "--force"]);
    assert_code(&rel, code::OK);
    assert_eq!(stdout(&rel), "ipallocation/tiny-192-0-2-3 released\n");
    assert_eq!(
        stdout(&allocate(&db, "tiny", "FloatingIP/f")),
        "192.0.2.3\n"
    );
    // A guarded release of someone else's address is refused; nothing released.
    let guarded = db.run(["release", "tiny", "192.0.2.4", "--owner", "FloatingIP/zzz"]);
    assert_code(&guarded, code::CONFLICT);
    assert_eq!(held(&db, "tiny").len(), 5);
    // The manifest stored is what the file store would have written.
    let json = db.run([
        "list",
        "-o",
        "yaml",
        "--pool",
        "tiny",
        "--address",
        "192.0.2.2",
    ]);
    let bytes: Vec<u8> = db
        .sql()
        .query_one(
            "SELECT manifest FROM ipamctl.allocations WHERE address = '192.0.2.2'",
            &[],
        )
        .unwrap()
        .get(0);
    // The one item of the List, indented under `items:`.
    let mut item = String::new();
    for (i, line) in String::from_utf8(bytes).unwrap().lines().enumerate() {
        item.push_str(if i == 0 { "- " } else { "  " });
        item.push_str(line);
        item.push('\n');
    }
    assert_eq!(
        stdout(&json),
        format!("apiVersion: v1\nkind: List\nitems:\n{item}")
    );
    // A pool with allocations is not deleted; an empty one is.
    assert_code(&db.run(["pool", "delete", "tiny"]), code::CONFLICT);
    let rel = db.run(["release", "tiny", "--owner", "FloatingIP/a"]);
    assert_code(&rel, code::OK);
    assert_eq!(held(&db, "tiny").len(), 4);
    // Missing pool: exit 3.
    assert_code(&allocate(&db, "nope", "FloatingIP/a"), code::NOT_FOUND);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn uid_queries_and_release_by_uid() {
    let db = Db::new();
    assert_code(&apply(&db, &pool_yaml("p", "10.1.0.0/24", None)), code::OK);
    for (owner, uid) in [
        (
            "VirtualMachine/web-01/0",
            "00000000-0000-4000-8000-0000000000a1",
        ),
        (
            "VirtualMachine/web-01/1",
            "00000000-0000-4000-8000-0000000000a1",
        ),
        (
            "VirtualMachine/web-02/0",
            "00000000-0000-4000-8000-0000000000a2",
        ),
    ] {
        assert_code(
            &db.run(["allocate", "p", "--owner", owner, "--uid", uid]),
            code::OK,
        );
    }
    let listed = db.run([
        "list",
        "--uid",
        "00000000-0000-4000-8000-0000000000a1",
        "-o",
        "json",
    ]);
    assert_eq!(
        stdout(&listed)
            .matches("\"uid\": \"00000000-0000-4000-8000-0000000000a1\"")
            .count(),
        2
    );
    let by_prefix = db.run(["list", "--owner", "VirtualMachine/web-01/"]);
    assert_eq!(stdout(&by_prefix).lines().count(), 3); // header + 2
    let rel = db.run(["release", "--uid", "00000000-0000-4000-8000-0000000000a1"]);
    assert_code(&rel, code::OK);
    assert_eq!(stdout(&rel).lines().count(), 2);
    assert_eq!(
        held(&db, "p"),
        vec!["10.1.0.3".parse::<Ipv4Addr>().unwrap()]
    );
}

/// Starts `n` `allocate` processes at once.
fn spawn_allocates(db: &Db, pool: &str, owners: &[String]) -> Vec<Child> {
    owners
        .iter()
        .map(|owner| {
            db.cmd(["allocate", pool, "--owner", owner])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn ipamctl")
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn sixty_four_processes_fill_a_pool_without_a_duplicate() {
    let db = Db::new();
    // 10.7.0.0/27 without gateway: 30 candidates for 64 owners.
    assert_code(
        &apply(&db, &pool_yaml("race", "10.7.0.0/27", None)),
        code::OK,
    );
    let owners: Vec<String> = (0..64).map(|i| format!("FloatingIP/fip-{i}")).collect();
    let mut got: HashMap<Ipv4Addr, String> = HashMap::new();
    let mut exhausted = 0;
    for (child, owner) in spawn_allocates(&db, "race", &owners)
        .into_iter()
        .zip(&owners)
    {
        let out = child.wait_with_output().unwrap();
        match out.status.code() {
            Some(code::OK) => {
                let addr: Ipv4Addr = stdout(&out).trim().parse().unwrap();
                if let Some(other) = got.insert(addr, owner.clone()) {
                    panic!("{addr} given to both {other} and {owner}");
                }
            }
            Some(code::EXHAUSTED) => {
                assert_one_error(&out);
                exhausted += 1;
            }
            _ => panic!("{owner}: unexpected {:?}: {}", out.status, stderr(&out)),
        }
    }
    assert_eq!(got.len(), 30);
    assert_eq!(exhausted, 34);
    let stored = held(&db, "race");
    assert_eq!(stored.len(), 30);
    assert_eq!(
        stored.iter().copied().collect::<BTreeSet<_>>(),
        got.keys().copied().collect()
    );
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.events WHERE action = 'claimed'"),
        30
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn concurrent_overlapping_subnet_creates_let_exactly_one_in() {
    let db = Db::new();
    assert_code(&apply(&db, &pool_yaml("p", "10.9.0.0/16", None)), code::OK);
    let children: Vec<Child> = (0..8)
        .map(|i| {
            let name = format!("s{i}");
            let cidr = format!("10.9.1.0/{}", 24 + i);
            db.cmd(["subnet", "create", &name, "--pool", "p", "--cidr", &cidr])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn ipamctl")
        })
        .collect();
    let mut won = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        match out.status.code() {
            Some(code::OK) => won += 1,
            Some(code::CONFLICT) => assert_one_error(&out),
            _ => panic!("unexpected {:?}: {}", out.status, stderr(&out)),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.objects WHERE kind = 'Subnet'"),
        1
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_release_racing_other_owners_claims_keeps_its_address_cooling() {
    let db = Db::new();
    let pool = pool_yaml("cool", "10.10.0.0/24", Some("10.10.0.1")) + "  reuseAfter: 1h\n";
    assert_code(&apply(&db, &pool), code::OK);
    // Every round, in at most 60 s.
    let rounds = Budget::new("cooling rounds", 6, Duration::from_secs(60)).at_least(6);
    for round in rounds.rounds() {
        let owner = format!("FloatingIP/held-{round}");
        let address = stdout(&allocate(&db, "cool", &owner)).trim().to_owned();
        let others: Vec<String> = (0..6).map(|i| format!("FloatingIP/r{round}-{i}")).collect();
        let mut children = spawn_allocates(&db, "cool", &others[..3]);
        children.push(
            db.cmd(["release", "cool", &address, "--force"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn ipamctl"),
        );
        children.extend(spawn_allocates(&db, "cool", &others[3..]));
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert_code(&out, code::OK);
            let printed = stdout(&out);
            assert!(
                printed.contains("released") || printed.trim() != address,
                "round {round}: another owner got {address} within the window"
            );
        }
        // Its owner gets it back.
        assert_eq!(stdout(&allocate(&db, "cool", &owner)).trim(), address);
        assert_code(&db.run(["release", "cool", &address, "--force"]), code::OK);
    }
}

/// Runs every command at once (all started before any is waited for); their outputs.
fn run_at_once(commands: impl IntoIterator<Item = Command>) -> Vec<std::process::Output> {
    let children: Vec<Child> = commands
        .into_iter()
        .map(|mut cmd| {
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn ipamctl")
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait for ipamctl"))
        .collect()
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_same_owner_storm_gets_one_address() {
    let db = Db::new();
    assert_code(
        &apply(&db, &pool_yaml("storm", "10.8.0.0/24", None)),
        code::OK,
    );
    let owners: Vec<String> = vec!["VirtualMachine/web-01/0".to_owned(); 32];
    let mut addresses = BTreeSet::new();
    for child in spawn_allocates(&db, "storm", &owners) {
        let out = child.wait_with_output().unwrap();
        assert_code(&out, code::OK);
        addresses.insert(stdout(&out));
    }
    assert_eq!(addresses.len(), 1, "{addresses:?}");
    assert_eq!(held(&db, "storm").len(), 1);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn shrinking_a_pool_while_claims_run_leaves_no_allocation_outside_it() {
    let db = Db::new();
    let wide = pool_yaml("shrink", "10.9.0.0/24", None);
    let narrow = pool_yaml("shrink", "10.9.0.0/26", None);
    assert_code(&apply(&db, &wide), code::OK);
    let owners: Vec<String> = (0..48).map(|i| format!("FloatingIP/s-{i}")).collect();
    let children = spawn_allocates(&db, "shrink", &owners);
    // Shrink, and put the wide pool back, while the claims run: each apply either wins
    // (no allocation outside the new prefix at that moment) or is refused (exit 4).
    let mut outcomes = Vec::new();
    for yaml in [&narrow, &wide, &narrow, &wide, &narrow] {
        outcomes.push(apply(&db, yaml).status.code());
    }
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            matches!(out.status.code(), Some(code::OK | code::EXHAUSTED)),
            "{}",
            stderr(&out)
        );
    }
    for o in &outcomes {
        assert!(
            matches!(*o, Some(code::OK | code::CONFLICT)),
            "{outcomes:?}"
        );
    }
    // Whatever won, every allocation is a candidate of the pool as it stands now.
    let manifest: Vec<u8> = db
        .sql()
        .query_one(
            "SELECT manifest FROM ipamctl.pools WHERE name = 'shrink'",
            &[],
        )
        .unwrap()
        .get(0);
    let cidr: ipnet::Ipv4Net = if String::from_utf8(manifest).unwrap().contains("/26") {
        "10.9.0.0/26".parse().unwrap()
    } else {
        "10.9.0.0/24".parse().unwrap()
    };
    for addr in held(&db, "shrink") {
        assert!(cidr.contains(&addr), "{addr} outside {cidr}");
    }
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn every_change_is_in_the_events_table_with_its_manifest() {
    let db = Db::new();
    assert_code(
        &apply(&db, &pool_yaml("ev", "192.0.2.0/29", None)),
        code::OK,
    );
    assert_code(&allocate(&db, "ev", "FloatingIP/a"), code::OK);
    assert_code(&db.run(["release", "ev", "192.0.2.1", "--force"]), code::OK);
    assert_code(
        &apply(&db, &pool_yaml("ev", "192.0.2.0/28", None)),
        code::OK,
    );
    assert_code(&db.run(["pool", "delete", "ev"]), code::OK);
    let rows = db
        .sql()
        .query(
            "SELECT action, kind, name, client, length(manifest) FROM ipamctl.events ORDER BY id",
            &[],
        )
        .unwrap();
    let actions: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let expect = [
        ("pool created", "IPAMPool", "ev"),
        ("claimed", "IPAllocation", "ev-192-0-2-1"),
        ("released", "IPAllocation", "ev-192-0-2-1"),
        ("pool updated", "IPAMPool", "ev"),
        // `pool delete` first marks the pool as being deleted (metadata.deletionTimestamp).
        ("pool updated", "IPAMPool", "ev"),
        ("pool deleted", "IPAMPool", "ev"),
    ];
    assert_eq!(
        actions,
        expect
            .iter()
            .map(|(a, k, n)| (a.to_string(), k.to_string(), n.to_string()))
            .collect::<Vec<_>>()
    );
    for r in &rows {
        let client: &str = r.get(3);
        assert!(client.contains('@'), "{client}");
        assert!(r.get::<_, i32>(4) > 0);
    }
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn check_on_a_sound_database_finds_nothing() {
    let db = Db::new();
    assert_code(&apply(&db, &pool_yaml("p", "10.19.0.0/24", None)), code::OK);
    assert_code(&allocate(&db, "p", "FloatingIP/a"), code::OK);
    let out = db.run(["check"]);
    assert_code(&out, code::OK);
    assert!(
        stderr(&out).starts_with("ok: no problems found in "),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("(1 pool, 1 allocation checked)"),
        "{}",
        stderr(&out)
    );
}

/// `ipamctl --store URL init` over TCP with `sslmode`, as `(exit code, stderr)`.
fn init_over_tcp(db: &Db, host: &str, query: &str) -> std::process::Output {
    let (port, _) = pg::tls_endpoint();
    let url = format!("postgresql://postgres@{host}:{port}/{}?{query}", db.name());
    std::process::Command::new(pg::BIN)
        .args(["--store", &url, "init"])
        .env_remove("IPAMCTL_STATE_DIR")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap()
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn tls_sslmodes_require_verify_ca_and_verify_full() {
    let db = Db::empty();
    let (_, cert) = pg::tls_endpoint();
    let root = format!("sslrootcert={}", cert.display());
    // Encrypted, certificate not checked.
    assert_code(
        &init_over_tcp(&db, "127.0.0.1", "sslmode=require"),
        code::OK,
    );
    // Chain checked; the certificate is for `localhost`, so the name matters only for
    // verify-full.
    assert_code(
        &init_over_tcp(&db, "127.0.0.1", &format!("sslmode=verify-ca&{root}")),
        code::OK,
    );
    assert_code(
        &init_over_tcp(&db, "localhost", &format!("sslmode=verify-full&{root}")),
        code::OK,
    );
    let wrong_name = init_over_tcp(&db, "127.0.0.1", &format!("sslmode=verify-full&{root}"));
    assert_code(&wrong_name, code::FAILURE);
    assert_one_error(&wrong_name);
    // A root that did not sign it: the system's store.
    let untrusted = init_over_tcp(&db, "localhost", "sslmode=verify-full&sslrootcert=system");
    assert_code(&untrusted, code::FAILURE);
    assert_one_error(&untrusted);
    assert!(stderr(&untrusted).contains("cannot connect to PostgreSQL"));
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn the_server_going_away_mid_command_is_one_error_and_nothing_half_done() {
    let db = Db::new();
    assert_code(
        &apply(&db, &pool_yaml("gone", "10.11.0.0/24", None)),
        code::OK,
    );
    // Hold the pool's row so that the allocate waits inside its transaction.
    let mut locker = db.sql();
    let mut tx = locker.transaction().unwrap();
    tx.query(
        "SELECT 1 FROM ipamctl.pools WHERE name = 'gone' FOR UPDATE",
        &[],
    )
    .unwrap();
    let child = db
        .cmd(["allocate", "gone", "--owner", "FloatingIP/victim"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut admin = db.sql();
    let waiting = "SELECT pid FROM pg_stat_activity
                   WHERE datname = current_database() AND application_name = 'ipamctl'
                     AND wait_event_type = 'Lock'";
    let start = std::time::Instant::now();
    let pid: i32 = loop {
        if let Some(row) = admin.query_opt(waiting, &[]).unwrap() {
            break row.get(0);
        }
        assert!(
            start.elapsed().as_secs() < 20,
            "allocate never waited on the pool row"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_code(&out, code::FAILURE);
    assert_one_error(&out);
    tx.rollback().unwrap();
    assert!(held(&db, "gone").is_empty());
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.events WHERE action = 'claimed'"),
        0
    );
    // The owner that asks again gets its address.
    assert_eq!(
        stdout(&allocate(&db, "gone", "FloatingIP/victim")),
        "10.11.0.1\n"
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn serialization_failures_are_retried_under_serializable() {
    // As on CockroachDB, where SERIALIZABLE is the default: concurrent claims then fail with
    // SQLSTATE 40001 and must be run again.
    let db = Db::new();
    db.sql()
        .batch_execute(&format!(
            "ALTER DATABASE {} SET default_transaction_isolation = 'serializable'",
            db.name()
        ))
        .unwrap();
    assert_code(
        &apply(&db, &pool_yaml("ser", "10.12.0.0/27", None)),
        code::OK,
    );
    let owners: Vec<String> = (0..16).map(|i| format!("FloatingIP/ser-{i}")).collect();
    let mut got = BTreeSet::new();
    for child in spawn_allocates(&db, "ser", &owners) {
        let out = child.wait_with_output().unwrap();
        assert_code(&out, code::OK);
        assert!(got.insert(stdout(&out)), "duplicate {}", stdout(&out));
    }
    assert_eq!(held(&db, "ser").len(), 16);
}

/// A copy of `testdata/<case>` in a temporary directory (fixtures are never touched).
fn fixture_copy(case: &str) -> tempfile::TempDir {
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata")
            .join(case),
        dir.path(),
    );
    dir
}

/// Every file of a state directory but the git-ignored `.index/`, with its bytes.
fn tree(root: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if rel == ".index" {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn import_then_export_gives_the_same_bytes() {
    for case in ["populated", "small-pools", "seed"] {
        let db = Db::new();
        let source = fixture_copy(case);
        let import = db.run(["import", source.path().to_str().unwrap()]);
        assert_code(&import, code::OK);
        // Again: everything is already there.
        let again = db.run(["import", source.path().to_str().unwrap()]);
        assert_code(&again, code::OK);
        assert!(stderr(&again).starts_with(
            "imported 0 pools, 0 subnets, 0 allocations and 0 cooldown records from "
        ));
        let out = tempfile::tempdir().unwrap();
        let target = out.path().join("exported");
        let export = db.run(["export", target.to_str().unwrap()]);
        assert_code(&export, code::OK);
        assert_eq!(tree(source.path()), tree(&target), "{case}");
        // The export is a state directory the file store reads as it is.
        let check = std::process::Command::new(pg::BIN)
            .args(["-d", target.to_str().unwrap(), "check"])
            .env_remove("IPAMCTL_STORE")
            .output()
            .unwrap();
        assert_code(&check, code::OK);
    }
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn import_is_all_or_nothing_and_refuses_conflicts() {
    let db = Db::new();
    assert_code(
        &db.run(["import", fixture_copy("seed").path().to_str().unwrap()]),
        code::OK,
    );
    // Someone else holds the lowest address of the public pool in the database.
    assert_eq!(
        stdout(&allocate(&db, "public-zone-a", "FloatingIP/other")),
        "203.0.113.4\n"
    );
    let events = db.count("SELECT count(*) FROM ipamctl.events");
    // `populated` gives 203.0.113.4 to fip-1: a conflict, and nothing of it is imported.
    let out = db.run(["import", fixture_copy("populated").path().to_str().unwrap()]);
    assert_code(&out, code::CONFLICT);
    assert_one_error(&out);
    assert!(
        stderr(&out).contains("public-zone-a-203-0-113-4"),
        "{}",
        stderr(&out)
    );
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.pools"), 2);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 1);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.events"), events);
    // A broken manifest: exit 2, nothing imported.
    let out = db.run([
        "import",
        fixture_copy("broken-allocation").path().to_str().unwrap(),
    ]);
    assert_code(&out, code::INVALID);
    assert_one_error(&out);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.pools"), 2);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn export_and_import_need_a_database_and_export_a_new_directory() {
    let out = std::process::Command::new(pg::BIN)
        .args(["-d", "x", "export", "y"])
        .env_remove("IPAMCTL_STORE")
        .output()
        .unwrap();
    assert_code(&out, code::INVALID);
    let db = Db::new();
    let busy = tempfile::tempdir().unwrap();
    std::fs::write(busy.path().join("file"), "x").unwrap();
    let out = db.run(["export", busy.path().to_str().unwrap()]);
    assert_code(&out, code::INVALID);
    assert_one_error(&out);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn concurrent_inits_create_one_schema() {
    let db = Db::empty();
    let children: Vec<Child> = (0..4)
        .map(|_| {
            db.cmd(["init"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        assert_code(&child.wait_with_output().unwrap(), code::OK);
    }
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.schema_version"),
        i64::from(LATEST)
    );
}

/// Rounds of the kill test: 1 by default (40 processes), 15 in at most 15 minutes with
/// `IPAMCTL_STRESS=long`:
///
/// ```text
/// IPAMCTL_STRESS=long cargo test --test pg_store clients_killed -- --nocapture
/// ```
fn kill_rounds() -> Budget {
    let (rounds, seconds) = match std::env::var("IPAMCTL_STRESS").as_deref() {
        Ok("long") => (15, 900),
        _ => (1, 120),
    };
    Budget::new("kill rounds", rounds, Duration::from_secs(seconds)).at_least(1)
}

/// Clients SIGKILLed at random instants, rounds of 40 processes at once: the round's
/// `allocate`s for new owners and `release --owner`s of the previous round's owners, each
/// killed at its own instant in the batch's first 255 ms (before connecting, mid-transaction,
/// or after the commit). After
/// every round: the rows match the events, every owner of the round asking again converges
/// on the address it was told, and every owner of the previous round is gone once its
/// release is asked again. Prints how many processes the signal found still running.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn clients_killed_at_random_instants_leave_nothing_half_done() {
    use std::os::unix::process::ExitStatusExt;

    let db = Db::new();
    assert_code(
        &apply(&db, &pool_yaml("kill", "10.13.0.0/24", None)),
        code::OK,
    );
    let (mut sent, mut killed, mut previous) = (0, 0, Vec::<String>::new());
    let rounds = kill_rounds();
    for round in rounds.rounds() {
        let owners: Vec<String> = (0..40 - previous.len().min(20))
            .map(|i| format!("FloatingIP/k-{round}-{i}"))
            .collect();
        let mut children = spawn_allocates(&db, "kill", &owners);
        for owner in previous.iter().take(20) {
            children.push(
                db.cmd(["release", "kill", "--ignore-not-found", "--owner", owner])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn ipamctl"),
            );
        }
        // Each process's own instant, 0-255 ms after the batch started (40 processes on a
        // few cores take about that long), killed in order of those instants.
        let started = std::time::Instant::now();
        let mut instants: Vec<(u64, usize)> = (0..children.len())
            .map(|i| (u64::from(uuid::Uuid::new_v4().as_bytes()[0]), i))
            .collect();
        instants.sort_unstable();
        for (at, i) in instants {
            let at = std::time::Duration::from_millis(at);
            std::thread::sleep(at.saturating_sub(started.elapsed()));
            let _ = children[i].kill();
            sent += 1;
        }
        let mut printed = HashMap::new();
        for (i, child) in children.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            if out.status.signal() == Some(9) {
                killed += 1;
            } else if out.status.success() && i < owners.len() {
                printed.insert(owners[i].clone(), stdout(&out));
            }
        }
        // Every stored claim committed with its event, every release with its own.
        assert_eq!(
            db.count("SELECT count(*) FROM ipamctl.allocations"),
            db.count("SELECT count(*) FROM ipamctl.events WHERE action = 'claimed'")
                - db.count("SELECT count(*) FROM ipamctl.events WHERE action = 'released'"),
            "round {round}"
        );
        // The count ledger moved in the same transactions (migration 2).
        assert_eq!(
            db.count("SELECT count(*) FROM ipamctl.allocations"),
            db.count("SELECT coalesce(sum(delta), 0)::bigint FROM ipamctl.pool_counts"),
            "round {round}"
        );
        // A claim moves the hint in its own statement: a kill at any instant leaves it true.
        assert_hint_sound(&db, "kill", Ipv4Addr::new(10, 13, 0, 0), round);
        for owner in previous.iter().take(20) {
            let out = db.run(["release", "kill", "--ignore-not-found", "--owner", owner]);
            assert!(out.status.code().is_some(), "{owner}: {out:?}");
        }
        let rest: Vec<String> = previous.split_off(previous.len().min(20));
        // Every owner asking again gets one address, the one it was told if it was told one.
        let mut seen = BTreeSet::new();
        for owner in &owners {
            let out = allocate(&db, "kill", owner);
            assert_code(&out, code::OK);
            if let Some(before) = printed.get(owner) {
                assert_eq!(&stdout(&out), before, "{owner}");
            }
            assert!(seen.insert(stdout(&out)), "duplicate {}", stdout(&out));
        }
        previous = rest.into_iter().chain(owners).collect();
        assert_eq!(
            db.count("SELECT count(*) FROM ipamctl.allocations"),
            i64::try_from(previous.len()).unwrap(),
            "round {round}"
        );
    }
    assert_eq!(
        db.count(
            "SELECT count(*) FROM (SELECT owner_name FROM ipamctl.allocations
             GROUP BY owner_name HAVING count(*) > 1) d"
        ),
        0
    );
    eprintln!(
        "{}; SIGKILL sent to {sent} clients; {killed} were still running and died of it",
        rounds.finish()
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_stale_low_water_hint_never_makes_a_pool_look_exhausted() {
    let db = Db::new();
    assert_code(
        &apply(&db, &pool_yaml("hint", "192.0.2.0/29", None)),
        code::OK,
    );
    for i in 0..6 {
        assert_code(
            &allocate(&db, "hint", &format!("FloatingIP/h-{i}")),
            code::OK,
        );
    }
    assert_code(&allocate(&db, "hint", "FloatingIP/late"), code::EXHAUSTED);
    // A row deleted behind ipamctl's back leaves the hint above a free address.
    db.sql()
        .batch_execute("DELETE FROM ipamctl.allocations WHERE address = '192.0.2.3'")
        .unwrap();
    assert_eq!(
        stdout(&allocate(&db, "hint", "FloatingIP/late")),
        "192.0.2.3\n"
    );
    // Released through ipamctl, the lowest address is found at once and handed out first.
    assert_code(
        &db.run(["release", "hint", "192.0.2.5", "--force"]),
        code::OK,
    );
    assert_code(
        &db.run(["release", "hint", "192.0.2.1", "--force"]),
        code::OK,
    );
    assert_eq!(
        stdout(&allocate(&db, "hint", "FloatingIP/n1")),
        "192.0.2.1\n"
    );
    assert_eq!(
        stdout(&allocate(&db, "hint", "FloatingIP/n2")),
        "192.0.2.5\n"
    );
}

/// Runs `.ci/pg-cluster ARGS…`, returning its stdout.
fn pg_cluster(args: &[&std::ffi::OsStr]) -> String {
    let out = std::process::Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/pg-cluster"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pg-cluster {args:?}: {}",
        stderr(&out)
    );
    stdout(&out).trim().to_owned()
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_server_restart_during_churn_loses_nothing_and_clients_converge() {
    // A cluster of its own: restarting the shared one would cut the other tests.
    let dir = tempfile::Builder::new()
        .prefix("ipamctl-pg-restart-")
        .tempdir()
        .unwrap()
        .keep();
    let pid = std::process::id().to_string();
    let url = pg_cluster(&[
        "start".as_ref(),
        dir.as_os_str(),
        "--watch".as_ref(),
        pid.as_ref(),
    ]);
    let run = |args: &[&str]| {
        std::process::Command::new(pg::BIN)
            .arg("--store")
            .arg(&url)
            .args(args)
            .env_remove("IPAMCTL_STATE_DIR")
            .output()
            .unwrap()
    };
    assert_code(&run(&["init"]), code::OK);
    let pools = tempfile::tempdir().unwrap();
    let file = pools.path().join("p.yaml");
    std::fs::write(&file, pool_yaml("churn", "10.14.0.0/24", None)).unwrap();
    assert_code(&run(&["apply", "-f", file.to_str().unwrap()]), code::OK);
    // Four clients claim and release in a loop while the server restarts under them.
    let stopped_at = std::time::Instant::now() + std::time::Duration::from_secs(4);
    let failures = std::sync::atomic::AtomicUsize::new(0);
    let unreleased = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..4 {
            let (run, failures, unreleased) = (&run, &failures, &unreleased);
            s.spawn(move || {
                let mut k = 0;
                while std::time::Instant::now() < stopped_at {
                    let owner = format!("FloatingIP/t{t}-{k}");
                    k += 1;
                    let out = run(&["allocate", "churn", "--owner", &owner]);
                    let addr = match out.status.code() {
                        Some(code::OK) => stdout(&out).trim().to_owned(),
                        // Exit 6 (the connection died at COMMIT) says as much as 1 here.
                        Some(code::FAILURE | code::UNKNOWN) => {
                            assert_one_error(&out);
                            failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            // Told nothing: the claim may or may not have committed.
                            unreleased.lock().unwrap().push((owner, None));
                            continue;
                        }
                        other => panic!("{owner}: {other:?}: {}", stderr(&out)),
                    };
                    let out = run(&["release", "churn", &addr, "--owner", &owner]);
                    match out.status.code() {
                        Some(code::OK) => {}
                        Some(code::FAILURE | code::UNKNOWN) => {
                            assert_one_error(&out);
                            failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            unreleased.lock().unwrap().push((owner, Some(addr)));
                        }
                        other => panic!("release {owner}: {other:?}: {}", stderr(&out)),
                    }
                }
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(1500));
        pg_cluster(&["restart".as_ref(), dir.as_os_str()]);
    });
    // Every owner left over holds at most one address, the one it was told if it was told
    // one: a command cut off by the restart (exit 1) may or may not have committed, as with
    // any database client whose connection dies at COMMIT, so a failed release may have
    // freed it. Asked again, the owner gets what it holds; then it releases it, nothing is
    // held, and the log balances.
    for (owner, told) in unreleased.into_inner().unwrap() {
        let out = run(&["list", "--pool", "churn", "--owner", &owner, "-o", "json"]);
        assert_code(&out, code::OK);
        let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        let holds: Vec<String> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["spec"]["address"].as_str().unwrap().to_owned())
            .collect();
        assert!(holds.len() <= 1, "{owner} holds {holds:?}");
        if let (Some(told), Some(held)) = (&told, holds.first()) {
            assert_eq!(held, told, "{owner}");
        }
        let out = run(&["allocate", "churn", "--owner", &owner]);
        assert_code(&out, code::OK);
        let addr = stdout(&out).trim().to_owned();
        if let Some(held) = holds.first() {
            assert_eq!(&addr, held, "{owner}");
        }
        assert_code(
            &run(&["release", "churn", &addr, "--owner", &owner]),
            code::OK,
        );
    }
    let out = run(&["list", "-o", "json"]);
    let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(listed["items"], serde_json::json!([]), "{listed}");
    let mut client = postgres::Client::connect(
        &format!(
            "host={} port={} user=postgres dbname=postgres",
            dir.join("sock").display(),
            url.rsplit("port=")
                .next()
                .unwrap()
                .split('&')
                .next()
                .unwrap()
        ),
        postgres::NoTls,
    )
    .unwrap();
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE action = 'claimed'),
                    count(*) FILTER (WHERE action = 'released')
             FROM ipamctl.events",
            &[],
        )
        .unwrap();
    let (claimed, released): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(claimed, released);
    eprintln!(
        "restart during churn: {claimed} claims, {} commands failed during the restart",
        failures.into_inner()
    );
    pg_cluster(&["stop".as_ref(), dir.as_os_str()]);
}

/// `pool list -o json`: every pool with its usage.
fn pool_usage(db: &Db) -> String {
    let out = db.run(["pool", "list", "-o", "json"]);
    assert_code(&out, code::OK);
    stdout(&out)
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn init_upgrades_a_schema_1_database_and_counts_what_it_holds() {
    let db = Db::new();
    assert_code(&apply(&db, &pool_yaml("p", "10.21.0.0/24", None)), code::OK);
    for i in 0..3 {
        assert_code(&allocate(&db, "p", &format!("FloatingIP/f-{i}")), code::OK);
    }
    let counted = pool_usage(&db);
    // Back to schema 1, as a database made by the previous ipamctl is.
    db.sql()
        .batch_execute(
            "DROP FUNCTION ipamctl.refuse_claim_row() CASCADE;
             DROP FUNCTION ipamctl.claim_row_disagrees(text, text, text, inet, bytea);
             DROP FUNCTION ipamctl.claim_columns(bytea);
             DROP FUNCTION ipamctl.claim_line(bytea, text);
             DROP FUNCTION ipamctl.own_write() CASCADE;
             ALTER TABLE ipamctl.allocations DROP CONSTRAINT allocations_host_address;
             DROP FUNCTION ipamctl.check_allocation_row() CASCADE;
             DROP FUNCTION ipamctl.count_moved_allocations() CASCADE;
             DROP FUNCTION ipamctl.manifest_columns(bytea);
             DROP FUNCTION ipamctl.manifest_line(bytea, text);
             DROP TABLE ipamctl.pool_counts;
             DROP FUNCTION ipamctl.count_allocations() CASCADE;
             DROP FUNCTION ipamctl.prefix_free_stale() CASCADE;
             DROP TABLE ipamctl.prefix_free, ipamctl.prefix_free_pools, ipamctl.prefix_free_epoch;
             DROP TABLE ipamctl.objects;
             DROP FUNCTION ipamctl.claim_owner_name(bytea);
             DROP INDEX ipamctl.allocations_one_per_mac;
             DROP INDEX ipamctl.allocations_one_per_owner_name;
             DROP FUNCTION ipamctl.allocation_mac(bytea);
             DROP FUNCTION ipamctl.allocation_expires(bytea);
             ALTER TABLE ipamctl.allocations DROP COLUMN creation_timestamp;
             DELETE FROM ipamctl.schema_version WHERE version >= 2",
        )
        .unwrap();
    let refused = db.run(["pool", "list"]);
    assert_code(&refused, code::NOT_FOUND);
    assert!(stderr(&refused).contains(&format!(
        "is version 1; this ipamctl needs version {LATEST}"
    )));
    let init = db.run(["init"]);
    assert_code(&init, code::OK);
    assert!(stderr(&init).starts_with(&format!(
        "upgraded the ipamctl schema from version 1 to {LATEST}"
    )));
    assert_eq!(pool_usage(&db), counted);
    // Rows claimed before migration 3 have no creation time; a claim after it records its own.
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.allocations WHERE creation_timestamp IS NULL"),
        3
    );
    assert_code(&allocate(&db, "p", "FloatingIP/f-new"), code::OK);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM ipamctl.allocations
             WHERE creation_timestamp > now() - interval '1 minute'"
        ),
        1
    );
    assert_eq!(
        db.count(
            "SELECT coalesce(sum(delta), 0)::bigint FROM ipamctl.pool_counts WHERE pool = 'p'"
        ),
        4
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn pool_counts_follow_every_change_even_by_hand() {
    let db = Db::new();
    assert_code(&apply(&db, &pool_yaml("p", "10.22.0.0/24", None)), code::OK);
    let count = || {
        db.count("SELECT coalesce(sum(delta), 0)::bigint FROM ipamctl.pool_counts WHERE pool = 'p'")
    };
    for i in 0..5 {
        assert_code(&allocate(&db, "p", &format!("FloatingIP/f-{i}")), code::OK);
    }
    // An owner asking again, and a lost race, insert nothing and count nothing.
    assert_code(&allocate(&db, "p", "FloatingIP/f-0"), code::OK);
    assert_eq!(count(), 5);
    assert_code(
        &db.run(["release", "p", "--owner", "FloatingIP/f-1"]),
        code::OK,
    );
    assert_eq!(count(), 4);
    // Rows deleted and copied by hand, outside ipamctl, are counted too.
    let mut sql = db.sql();
    sql.batch_execute(
        "DELETE FROM ipamctl.allocations WHERE owner_name IN ('f-2', 'f-3');
         INSERT INTO ipamctl.allocations
             (namespace, pool, address, owner_kind, owner_name, owner_uid, manifest)
         SELECT namespace, pool, address, owner_kind, owner_name, owner_uid, manifest
         FROM ipamctl.allocations WHERE false",
    )
    .unwrap();
    assert_eq!(count(), 2);
    assert_eq!(
        count(),
        db.count("SELECT count(*) FROM ipamctl.allocations WHERE pool = 'p'")
    );
    assert!(
        pool_usage(&db).contains("\"allocated\": 2,"),
        "{}",
        pool_usage(&db)
    );
    sql.batch_execute("TRUNCATE ipamctl.allocations").unwrap();
    assert_eq!(count(), 0);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn the_count_ledger_folds_while_claims_and_releases_run_and_stays_exact() {
    let db = Db::new();
    assert_code(&apply(&db, &pool_yaml("p", "10.23.0.0/24", None)), code::OK);
    let ledger_rows = || db.count("SELECT count(*) FROM ipamctl.pool_counts WHERE pool = 'p'");
    let counted = || {
        db.count("SELECT coalesce(sum(delta), 0)::bigint FROM ipamctl.pool_counts WHERE pool = 'p'")
    };
    // Claims and releases by many processes, while `pool list`s fold the ledger under them.
    let mut children: Vec<Child> = Vec::new();
    for i in 0..120 {
        let owner = format!("FloatingIP/f-{}", i % 90);
        let args: Vec<String> = if i % 3 == 2 {
            ["release", "p", "--ignore-not-found", "--owner", &owner]
                .map(String::from)
                .to_vec()
        } else {
            ["allocate", "p", "--owner", &owner]
                .map(String::from)
                .to_vec()
        };
        children.push(quiet(db.cmd(&args)).spawn().unwrap());
        if i % 10 == 0 {
            children.push(quiet(db.cmd(["pool", "list"])).spawn().unwrap());
        }
    }
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let held = db.count("SELECT count(*) FROM ipamctl.allocations WHERE pool = 'p'");
    assert_eq!(counted(), held);
    // A reader that finds a long ledger folds it into one row; the sum does not change.
    for i in 0..70 {
        assert_code(&allocate(&db, "p", &format!("FloatingIP/g-{i}")), code::OK);
    }
    let held = held + 70;
    assert!(ledger_rows() > 64, "{} rows", ledger_rows());
    assert!(pool_usage(&db).contains(&format!("\"allocated\": {held},")));
    assert_eq!(ledger_rows(), 1);
    assert_eq!(counted(), held);
}

/// A command whose output the test does not read.
fn quiet(mut cmd: std::process::Command) -> std::process::Command {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Guarded releases racing the claim that reuses the address: `release POOL ADDRESS --owner
/// A`, repeated by processes that all saw A hold it, while B claims the address the first of
/// them freed. Whatever the order, B's allocation is never deleted by A's stale releases,
/// and each guarded release either frees A's address (0), finds it held by another (4) or
/// finds it free (3).
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn guarded_release_races_never_delete_the_next_owners_allocation() {
    let db = Db::new();
    assert_code(&apply(&db, &pool_yaml("g", "10.24.0.0/29", None)), code::OK);
    let (mut reused, mut refused) = (0, 0);
    let rounds = Budget::new("release races", 20, Duration::from_secs(60)).at_least(5);
    for round in rounds.rounds() {
        let a = format!("FloatingIP/a-{round}");
        let b = format!("FloatingIP/b-{round}");
        let claimed = allocate(&db, "g", &a);
        assert_code(&claimed, code::OK);
        let address = stdout(&claimed).trim().to_owned();
        let mut children: Vec<Child> = (0..4)
            .map(|_| {
                quiet(db.cmd(["release", "g", &address, "--owner", &a]))
                    .spawn()
                    .unwrap()
            })
            .collect();
        children.insert(
            1,
            db.cmd(["allocate", "g", "--owner", &b])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut b_got = None;
        for (i, child) in children.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            if i == 1 {
                assert_code(&out, code::OK);
                b_got = Some(stdout(&out).trim().to_owned());
            } else {
                let c = out.status.code();
                assert!(matches!(c, Some(0 | 3 | 4)), "round {round}: {out:?}");
                refused += usize::from(c == Some(4));
            }
        }
        let b_got = b_got.unwrap();
        reused += usize::from(b_got == address);
        // B holds what it was told, whatever A's releases did.
        let again = allocate(&db, "g", &b);
        assert_eq!(stdout(&again).trim(), b_got, "round {round}");
        assert!(
            held(&db, "g").contains(&b_got.parse().unwrap()),
            "round {round}: B's {b_got} was deleted"
        );
        assert_code(&db.run(["release", "g", "--owner", &b]), code::OK);
        assert_eq!(held(&db, "g"), Vec::<Ipv4Addr>::new(), "round {round}");
    }
    eprintln!(
        "{}; in {reused} B reused A's address; {refused} stale releases refused",
        rounds.finish()
    );
}

/// Claims through a transaction-pooling PgBouncer stay exact: ipamctl sends no named
/// prepared statement and sets nothing beyond its transaction (`SET LOCAL`), so nothing of
/// one client's session leaks into another's on a shared server connection.
#[test]
#[cfg_attr(
    not(all(has_postgres, has_pgbouncer)),
    ignore = "needs PostgreSQL and PgBouncer (apt-get install pgbouncer): apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn claims_through_pgbouncer_in_transaction_pooling_stay_exact() {
    let db = Db::new();
    let bouncer = Bouncer::start();
    assert_code(
        &apply(&db, &pool_yaml("p", "198.51.100.0/27", None)),
        code::OK,
    );
    // 40 processes for distinct owners, 4 server connections: 30 addresses (.1–.30), once
    // each, and 10 clear exhaustions.
    let outs = run_at_once((0..40).map(|i| {
        bouncer.cmd(
            &db,
            &["allocate", "p", "--owner", &format!("FloatingIP/f-{i}")],
        )
    }));
    let printed: BTreeSet<String> = outs
        .iter()
        .filter(|o| o.status.code() == Some(code::OK))
        .map(|o| stdout(o).trim().to_owned())
        .collect();
    assert_eq!(printed.len(), 30, "{printed:?}");
    assert_eq!(
        outs.iter()
            .filter(|o| o.status.code() == Some(code::EXHAUSTED))
            .count(),
        10
    );
    assert_eq!(held(&db, "p").len(), 30);
    // The count ledger agrees (each claim counted itself once, in its own transaction).
    assert_eq!(
        db.count(
            "SELECT coalesce(sum(delta), 0)::bigint FROM ipamctl.pool_counts WHERE pool = 'p'"
        ),
        30
    );
    // One owner asking 16 times at once gets one address.
    let out = bouncer
        .cmd(&db, &["release", "p", "--owner", "FloatingIP/f-0"])
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    let same: BTreeSet<String> = run_at_once(
        (0..16).map(|_| bouncer.cmd(&db, &["allocate", "p", "--owner", "FloatingIP/same"])),
    )
    .iter()
    .map(|o| {
        assert_code(o, code::OK);
        stdout(o).trim().to_owned()
    })
    .collect();
    assert_eq!(same.len(), 1, "{same:?}");
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.allocations WHERE owner_name = 'same'"),
        1
    );
}

/// Requests for one owner racing for a pool's last free address: one claims it, and every
/// other one answers with that address (exit 0), never "exhausted". Nothing serialises one
/// owner's requests on a database, so a request that looked up the owner before its twin's
/// claim committed and searched for a free address after it found none: it now looks the
/// owner up again before reporting exhaustion.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn same_owner_racing_for_the_last_free_address_never_reads_exhausted() {
    let db = Db::new();
    // Every round, in at most 60 s.
    let rounds = Budget::new("last address rounds", 4, Duration::from_secs(60)).at_least(4);
    for round in rounds.rounds() {
        let pool = format!("last-{round}");
        // 192.0.2.0/30 with gateway .1: one candidate, .2.
        let cidr = format!("192.0.{}.0/30", 2 + round);
        let gateway = format!("192.0.{}.1", 2 + round);
        assert_code(
            &apply(&db, &pool_yaml(&pool, &cidr, Some(&gateway))),
            code::OK,
        );
        for out in run_at_once(
            (0..16).map(|_| db.cmd(["allocate", pool.as_str(), "--owner", "FloatingIP/twin"])),
        ) {
            assert_code(&out, code::OK);
            assert_eq!(stdout(&out), format!("192.0.{}.2\n", 2 + round));
        }
    }
}

/// The pool's low-water hint: `None` when it is not set.
fn low_water(db: &Db, pool: &str) -> Option<Ipv4Addr> {
    db.sql()
        .query_opt(
            "SELECT host(low_water) FROM ipamctl.pool_hints WHERE pool = $1",
            &[&pool],
        )
        .unwrap()
        .and_then(|r| r.get::<_, Option<&str>>(0).map(|a| a.parse().unwrap()))
}

/// Asserts that no candidate of `pool` (public, network address `network`, no gateway: every
/// host address is a candidate) lies free below its hint.
fn assert_hint_sound(db: &Db, pool: &str, network: Ipv4Addr, round: usize) {
    let Some(hint) = low_water(db, pool) else {
        return;
    };
    let taken: BTreeSet<Ipv4Addr> = held(db, pool).into_iter().collect();
    let free_below: Vec<Ipv4Addr> = (u32::from(network) + 1..u32::from(hint))
        .map(Ipv4Addr::from)
        .filter(|a| !taken.contains(a))
        .collect();
    assert!(
        free_below.is_empty(),
        "round {round}: the hint {hint} of pool `{pool}` stands above free {free_below:?}"
    );
}

/// The hint says "every candidate below me is taken" (src/store/pg/free.rs). Claims move it
/// up in their own statement and releases lower it in theirs; with claims and releases of
/// one pool racing (real processes, 8 claims and 4 releases at once, the releases below
/// the hint), it must never stand above a free address, or lowest-first would hand out a
/// higher one while a lower is free.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn the_hint_never_passes_a_free_address_while_claims_and_releases_race() {
    let db = Db::new();
    // 10.9.0.0/25 without gateway: candidates .1 to .126.
    assert_code(
        &apply(&db, &pool_yaml("tide", "10.9.0.0/25", None)),
        code::OK,
    );
    for i in 0..24 {
        assert_code(
            &allocate(&db, "tide", &format!("FloatingIP/base-{i}")),
            code::OK,
        );
    }
    let mut next_owner = 0;
    let rounds = Budget::new("hint rounds", 20, Duration::from_secs(60)).at_least(5);
    for round in rounds.rounds() {
        let taken = held(&db, "tide");
        // Four held addresses: two spread over the lower part, far below the hint, and the
        // two highest, at the hint, where claims that could not move it leave it behind.
        let freed: Vec<String> = [
            taken[(round * 5) % (taken.len() / 2)],
            taken[(round * 5 + 7) % (taken.len() / 2)],
            taken[taken.len() - 1],
            taken[taken.len() - 2],
        ]
        .iter()
        .map(Ipv4Addr::to_string)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
        let mut commands: Vec<Command> = Vec::new();
        for _ in 0..8 {
            let owner = format!("FloatingIP/new-{next_owner}");
            next_owner += 1;
            commands.push(db.cmd(["allocate", "tide", "--owner", &owner]));
        }
        for (k, address) in freed.iter().enumerate() {
            commands.insert(k * 2 + 1, db.cmd(["release", "tide", address, "--force"]));
        }
        for out in run_at_once(commands) {
            assert_code(&out, code::OK);
        }
        assert_hint_sound(&db, "tide", Ipv4Addr::new(10, 9, 0, 0), round);
    }
    // Lowest first, from the hint: the next claim gets the lowest free address.
    let taken: BTreeSet<Ipv4Addr> = held(&db, "tide").into_iter().collect();
    let lowest = (1..127u32)
        .map(|host| Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 9, 0, 0)) + host))
        .find(|a| !taken.contains(a))
        .expect("a free address");
    assert_eq!(
        stdout(&allocate(&db, "tide", "FloatingIP/last")),
        format!("{lowest}\n")
    );
}
