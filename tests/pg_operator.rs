//! The PostgreSQL store as an operator meets it (issue 21), through the real binary against
//! a real server (see `tests/pg/mod.rs`): secrets in connection strings, waits that end,
//! outcomes a lost connection leaves unknown, one transaction per command, and what hand
//! edits through psql can and cannot do.

mod pg;

use std::process::{Command, Output, Stdio};

use pg::{Db, assert_code, assert_one_error, stderr, stdout};

/// Exit codes, as the README documents them.
#[allow(dead_code)]
mod code {
    pub const OK: i32 = 0;
    pub const FAILURE: i32 = 1;
    pub const INVALID: i32 = 2;
    pub const NOT_FOUND: i32 = 3;
    pub const CONFLICT: i32 = 4;
    pub const UNKNOWN: i32 = 6;
}

/// The password of every connection string below: unusual enough that any five of its
/// characters in a row, anywhere in an output, are a leak.
const SECRET: &str = "q7Zr4Kx9Wm";

/// Does `text` hold the secret or a fragment of it (five characters in a row)?
fn leaks(text: &str) -> bool {
    SECRET
        .as_bytes()
        .windows(5)
        .any(|w| text.contains(std::str::from_utf8(w).expect("ASCII")))
}

/// `ipamctl --store STORE list` (or with the store in `IPAMCTL_STORE`), connection attempts
/// bounded to 2 s.
fn run_with_store(store: &str, from_env: bool) -> Output {
    let mut cmd = Command::new(pg::BIN);
    if from_env {
        cmd.env("IPAMCTL_STORE", store);
    } else {
        cmd.args(["--store", store]).env_remove("IPAMCTL_STORE");
    }
    cmd.arg("list")
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("PGPASSWORD")
        .env("PGCONNECT_TIMEOUT", "2")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .expect("run ipamctl")
}

/// The forms issue 21 found printed with their password, and the valid ones beside them.
fn secret_forms() -> Vec<String> {
    [
        "ipam:PW@127.0.0.1/t2",
        "postgresql:/ipam:PW@127.0.0.1/db",
        "postgres:ipam:PW@127.0.0.1/db",
        "PASSWORD=PW host=127.0.0.1 port=1",
        "pasword=PW host=127.0.0.1 port=1",
        "pwd=PW host=x",
        "host=127.0.0.1 port=1 pwd=PW",
        "host=127.0.0.1 port=1 PASSWORD=PW",
        "host=127.0.0.1 port=1 passwd=PW dbname=x",
        "postgresql://ipam@127.0.0.1:1/db?pass%77ord=PW",
        "postgresql://ipam@127.0.0.1:1/db?PASSWORD=PW",
        "postgresql://ipam:PW/zz@127.0.0.1:1/db",
        "postgresql://ipam:P/W@127.0.0.1:1/db",
        "postgresql://alice:PW@127.0.0.1:1/db",
        "postgres://alice:PW@127.0.0.1:1/db?sslmode=bogus",
        "postgresql://alice:PW@127.0.0.1:1/db?sslcert=x",
        "host=127.0.0.1 port=1 password=PW dbname=x",
        "host=127.0.0.1 port=1 password='PW x' dbname=x",
        "host=127.0.0.1 port=1 password='PW",
        "mysql://alice:PW@127.0.0.1/db",
    ]
    .iter()
    .map(|f| f.replace("P/W", &format!("{}/{}", &SECRET[..5], &SECRET[5..])))
    .map(|f| f.replace("PW", SECRET))
    .collect()
}

/// Strings a hand could make of `base` with one slip: a delimiter inserted anywhere, a
/// character deleted, two swapped. Leaves out deleting the `:` between a URL's user name and
/// password, which makes the password the user name (what is written then has none).
fn mangled(base: &str) -> Vec<String> {
    let chars: Vec<char> = base.chars().collect();
    let user_colon = base
        .find("://")
        .and_then(|s| base[s + 3..].find(':').map(|c| s + 3 + c));
    let mut out = Vec::new();
    for i in 0..=chars.len() {
        for c in ['@', '/', ':', '?', '&', '=', ' ', '\'', '%', '#', ',', '\\'] {
            let mut m = chars.clone();
            m.insert(i, c);
            out.push(m.into_iter().collect());
        }
        if i < chars.len() && Some(i) != user_colon {
            let mut m = chars.clone();
            m.remove(i);
            out.push(m.into_iter().collect());
        }
        if i + 1 < chars.len() {
            let mut m = chars.clone();
            m.swap(i, i + 1);
            out.push(m.into_iter().collect());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Runs every store string, four at a time, and returns those whose output leaked.
fn leaking(stores: &[String]) -> Vec<(String, String)> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(store) = stores.get(i) else { break };
                    let out = run_with_store(store, i.is_multiple_of(3));
                    let all = format!("{}{}", stdout(&out), stderr(&out));
                    if leaks(&all) || out.status.code() == Some(0) {
                        found.lock().unwrap().push((store.clone(), all));
                    }
                }
            });
        }
    });
    found.into_inner().unwrap()
}

/// Finding 1: no output of any command, for any malformed or valid `--store` or
/// `IPAMCTL_STORE`, shows a password or a piece of one.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn no_output_shows_a_password_for_any_store_string_however_mangled() {
    let forms = secret_forms();
    for form in &forms {
        for from_env in [false, true] {
            let out = run_with_store(form, from_env);
            assert_ne!(out.status.code(), Some(0), "{form}");
            assert_one_error(&out);
            let all = format!("{}{}", stdout(&out), stderr(&out));
            assert!(
                !leaks(&all),
                "{form} (from env: {from_env}) printed:\n{all}"
            );
        }
    }
    let bases = [
        format!("postgresql://alice:{SECRET}@127.0.0.1:1/db?sslmode=disable"),
        format!("host=127.0.0.1 port=1 password={SECRET} dbname=x"),
    ];
    let stores: Vec<String> = bases.iter().flat_map(|b| mangled(b)).collect();
    let leaked = leaking(&stores);
    assert!(
        leaked.is_empty(),
        "{} of {} mangled strings leaked, e.g. {:?}",
        leaked.len(),
        stores.len(),
        &leaked[..leaked.len().min(5)]
    );

    // A server that asks for no password (trust) answers: the no-schema hint (exit 3)
    // repeats the connection, masked, whatever key spelled the password.
    let db = Db::empty();
    for extra in [
        format!("&pass%77ord={SECRET}"),
        format!("&password={SECRET}"),
    ] {
        let out = run_with_store(&format!("{}{extra}", db.url), false);
        assert_code(&out, code::NOT_FOUND);
        let err = stderr(&out);
        assert!(!leaks(&err) && err.contains("password=****"), "{err}");
    }
}

/// Finding 1: a string that is no connection string is not echoed at all; the message says
/// which part is wrong.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_malformed_store_string_is_not_echoed_and_says_what_is_wrong() {
    let out = run_with_store(&format!("ipam:{SECRET}@127.0.0.1/t2"), false);
    assert_code(&out, code::INVALID);
    assert_one_error(&out);
    assert!(
        stderr(&out).contains("is not a PostgreSQL connection string"),
        "{}",
        stderr(&out)
    );
    let out = run_with_store(&format!("postgresql:/ipam:{SECRET}@h/db"), false);
    assert!(stderr(&out).contains("postgresql://"), "{}", stderr(&out));
    let out = run_with_store(&format!("postgresql://ipam:{SECRET}/x@127.0.0.1/db"), false);
    assert_code(&out, code::INVALID);
    assert!(stderr(&out).contains("percent-encode"), "{}", stderr(&out));
}

/// A public pool manifest.
fn pool_yaml(name: &str, cidr: &str) -> String {
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\nspec:\n  cidr: {cidr}\n  kind: public\n"
    )
}

/// `ipamctl --store STORE ARGS…`, its output piped, not yet started.
fn cmd(store: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(pg::BIN);
    cmd.arg("--store")
        .arg(store)
        .args(args)
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Applies `yaml` to `store` through a file.
fn apply_cmd(store: &str, yaml: &str, dir: &tempfile::TempDir) -> Command {
    let file = dir.path().join(format!("{}.yaml", uuid::Uuid::new_v4()));
    std::fs::write(&file, yaml).unwrap();
    cmd(store, &["apply", "-f", file.to_str().unwrap()])
}

/// `url` with `key=value` added to its query.
fn with_param(url: &str, kv: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{kv}")
}

/// Finding 2a: a transaction holding the pool's row (psql's `SELECT … FOR UPDATE`) ends
/// `allocate` and `apply` with a lock timeout, not a wait forever: the default one on a
/// direct connection, and one set in the connection string through a transaction-pooling
/// PgBouncer (which ignores startup `options`).
#[test]
#[cfg_attr(
    not(all(has_postgres, has_pgbouncer)),
    ignore = "needs PostgreSQL and PgBouncer (apt-get install pgbouncer): apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_held_pool_row_ends_allocate_and_apply_with_a_lock_timeout() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let out = apply_cmd(&db.url, &pool_yaml("small", "10.20.0.0/28"), &dir)
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    let mut locker = db.sql();
    let mut tx = locker.transaction().unwrap();
    tx.query(
        "SELECT 1 FROM ipamctl.pools WHERE name = 'small' FOR UPDATE",
        &[],
    )
    .unwrap();
    let bouncer = pg::Bouncer::start();
    let pooled = with_param(
        &bouncer.url(&db),
        "options=-c%20lock_timeout%3D2s%20-c%20statement_timeout%3D5s",
    );
    let children = [
        (
            cmd(&db.url, &["allocate", "small", "--owner", "FloatingIP/a"]),
            "20s",
        ),
        (
            apply_cmd(&db.url, &pool_yaml("small", "10.20.0.0/27"), &dir),
            "20s",
        ),
        (
            cmd(&pooled, &["allocate", "small", "--owner", "FloatingIP/b"]),
            "2s",
        ),
        (
            apply_cmd(&pooled, &pool_yaml("small", "10.20.0.0/26"), &dir),
            "2s",
        ),
    ]
    .map(|(mut c, after)| (c.spawn().unwrap(), after));
    for (child, after) in children {
        let out = pg::wait_or_kill(child, 90, "a command behind a locked pool row");
        assert_code(&out, code::FAILURE);
        assert_one_error(&out);
        let err = stderr(&out);
        // A command queued behind another waiter may pass its lock wait on to the next
        // lock (each wait is bounded by `lock_timeout`) and then meet `statement_timeout`.
        assert!(
            err.contains(&format!("gave up after {after} waiting for a lock"))
                && err.contains("(lock_timeout;")
                || err.contains("waiting for a statement to finish (statement_timeout;"),
            "{err}"
        );
    }
    tx.rollback().unwrap();
    // Nothing was claimed or changed, and the pool works again.
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 0);
    let out = cmd(&pooled, &["allocate", "small", "--owner", "FloatingIP/b"])
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    assert_eq!(stdout(&out), "10.20.0.1\n");
}

/// A plain read outside a unit of work has the timeouts too: `pool list` behind a table
/// that psql holds `LOCK TABLE … ACCESS EXCLUSIVE` gives up (exit 1, one `error:` line
/// naming the timeout), on a direct connection and through a transaction-pooling PgBouncer.
/// Before the reads ran in a transaction that sets them, it waited as long as the lock was
/// held.
#[test]
#[cfg_attr(
    not(all(has_postgres, has_pgbouncer)),
    ignore = "needs PostgreSQL and PgBouncer (apt-get install pgbouncer): apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_read_behind_a_locked_table_gives_up_with_a_timeout() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let out = apply_cmd(&db.url, &pool_yaml("read", "10.22.0.0/28"), &dir)
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    let mut locker = db.sql();
    let mut tx = locker.transaction().unwrap();
    tx.batch_execute("LOCK TABLE ipamctl.pools IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let bouncer = pg::Bouncer::start();
    let options = "options=-c%20lock_timeout%3D1s%20-c%20statement_timeout%3D3s";
    let children = [
        cmd(&with_param(&db.url, options), &["pool", "list"]),
        cmd(&with_param(&bouncer.url(&db), options), &["pool", "list"]),
    ]
    .map(|mut c| c.spawn().unwrap());
    for child in children {
        let out = pg::wait_or_kill(child, 20, "`pool list` behind a locked table");
        assert_code(&out, code::FAILURE);
        assert_one_error(&out);
        let err = stderr(&out);
        assert!(
            err.contains("gave up after 1s waiting for a lock another transaction holds")
                && err.contains("(lock_timeout;")
                || err.contains("gave up after 3s waiting for a statement to finish"),
            "{err}"
        );
    }
    tx.rollback().unwrap();
    let out = cmd(&db.url, &["pool", "list"]).output().unwrap();
    assert_code(&out, code::OK);
    assert!(stdout(&out).contains("read"), "{}", stdout(&out));
}

/// Finding 2a: a client that froze in the middle of its claim (its network gone, its COMMIT
/// never sent), idle in transaction with the pool's row `FOR SHARE`, holds it no longer than
/// `idle_in_transaction_session_timeout`: an `apply` that changes the pool gets through.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_client_frozen_mid_claim_holds_the_pool_row_no_longer_than_its_idle_timeout() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let out = apply_cmd(&db.url, &pool_yaml("frozen", "10.21.0.0/28"), &dir)
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    let proxy = pg::Proxy::start("FOR SHARE", 1, pg::Cut::Freeze);
    let frozen = cmd(
        &proxy.url(db.name()),
        &["allocate", "frozen", "--owner", "FloatingIP/f"],
    )
    .spawn()
    .unwrap();
    let start = std::time::Instant::now();
    while !proxy.fired() {
        assert!(
            start.elapsed().as_secs() < 30,
            "the claim never locked the pool"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Waits for the row as long as it takes the server to end the frozen session.
    let widen = apply_cmd(
        &with_param(&db.url, "options=-c%20lock_timeout%3D120s"),
        &pool_yaml("frozen", "10.21.0.0/27"),
        &dir,
    )
    .spawn()
    .unwrap();
    let out = pg::wait_or_kill(widen, 180, "apply behind a frozen client");
    assert_code(&out, code::OK);
    let out = pg::wait_or_kill(frozen, 60, "the frozen allocate");
    assert_code(&out, code::FAILURE);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 0);
}

/// Finding 2b: `connect_timeout` bounds the whole handshake, not only the TCP connect: a
/// server or pooler that accepts and then says nothing (PgBouncer stopped with SIGSTOP, a
/// listener that never answers) ends the command with exit 1 and one line saying so, with
/// `connect_timeout` and with the default.
#[test]
#[cfg_attr(
    not(all(has_postgres, has_pgbouncer)),
    ignore = "needs PostgreSQL and PgBouncer (apt-get install pgbouncer): apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_server_that_accepts_and_never_answers_ends_the_command_at_the_connect_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts every connection and keeps it, saying nothing.
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        for c in listener.incoming() {
            kept.push(c);
        }
    });
    let bouncer = pg::Bouncer::start();
    let db = Db::new();
    let stop = Command::new("kill")
        .args(["-STOP", &bouncer.pid().to_string()])
        .status()
        .unwrap();
    assert!(stop.success());
    let silent = format!("postgresql://u@127.0.0.1:{port}/db");
    let children = [
        (
            cmd(&with_param(&silent, "connect_timeout=2"), &["pool", "list"]),
            "2 s",
        ),
        (cmd(&silent, &["pool", "list"]), "10 s"),
        (
            cmd(
                &with_param(&silent, "sslmode=disable&connect_timeout=3"),
                &["pool", "list"],
            ),
            "3 s",
        ),
        (
            cmd(
                &with_param(&bouncer.url(&db), "connect_timeout=3"),
                &["pool", "list"],
            ),
            "3 s",
        ),
    ]
    .map(|(mut c, after)| (c.spawn().unwrap(), after));
    let outs: Vec<_> = children
        .into_iter()
        .map(|(child, after)| {
            (
                pg::wait_or_kill(child, 60, "connecting to a silent server"),
                after,
            )
        })
        .collect();
    let _ = Command::new("kill")
        .args(["-CONT", &bouncer.pid().to_string()])
        .status();
    for (out, after) in outs {
        assert_code(&out, code::FAILURE);
        assert_one_error(&out);
        let err = stderr(&out);
        assert!(
            err.contains(&format!("gave up after {after} waiting for the server")),
            "{err}"
        );
    }
}

/// Asserts a lost-`COMMIT` outcome: exit 6, one error line that says the change may or may
/// not have been made, and the hint that running the command again is safe.
#[track_caller]
fn assert_unknown(out: &Output) {
    assert_code(out, code::UNKNOWN);
    assert_one_error(out);
    let err = stderr(out);
    assert!(
        err.contains("may or may not have been made")
            && err.contains("running the same command again is safe"),
        "{err}"
    );
}

/// Finding 3: a connection lost after `COMMIT` reached the server (a proxy passes it on and
/// cuts the connection before the answer comes back) is an unknown outcome, exit 6, for
/// `allocate`, `release` and `apply`; in each case the change was made, and running the
/// same command again is safe and reports what is there.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_commit_whose_answer_is_lost_is_an_unknown_outcome_and_running_again_is_safe() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let through = |proxy: &pg::Proxy, args: &[&str]| cmd(&proxy.url(db.name()), args);

    // apply: the pool is created, and applying again finds it unchanged.
    let proxy = pg::Proxy::start("COMMIT", 1, pg::Cut::AfterSending);
    let yaml = pool_yaml("lost", "10.22.0.0/28");
    let out = apply_cmd(&proxy.url(db.name()), &yaml, &dir)
        .output()
        .unwrap();
    assert!(proxy.fired());
    assert_unknown(&out);
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.pools WHERE name = 'lost'"),
        1
    );
    let out = apply_cmd(&db.url, &yaml, &dir).output().unwrap();
    assert_code(&out, code::OK);
    assert!(stdout(&out).contains("unchanged"), "{}", stdout(&out));

    // allocate: the address is held, and the same request again answers with it.
    let proxy = pg::Proxy::start("COMMIT", 1, pg::Cut::AfterSending);
    let out = through(&proxy, &["allocate", "lost", "--owner", "FloatingIP/x"])
        .output()
        .unwrap();
    assert_unknown(&out);
    assert_eq!(stdout(&out), "");
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 1);
    let out = cmd(&db.url, &["allocate", "lost", "--owner", "FloatingIP/x"])
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    assert_eq!(stdout(&out), "10.22.0.1\n");
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 1);

    // release: the address is released, and releasing it again does nothing.
    let proxy = pg::Proxy::start("COMMIT", 1, pg::Cut::AfterSending);
    let out = through(&proxy, &["release", "lost", "10.22.0.1", "--force"])
        .output()
        .unwrap();
    assert_unknown(&out);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 0);
    let out = cmd(&db.url, &["release", "lost", "10.22.0.1", "--force"])
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    assert!(
        stderr(&out).contains("nothing to release"),
        "{}",
        stderr(&out)
    );
}

/// Finding 3's other half: a connection lost before the `COMMIT` (here, at the claim's
/// statement) is still exit 1, nothing made. (Lost at the `COMMIT` itself, even before the
/// server read it, the client cannot tell: that is exit 6.)
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_connection_lost_before_commit_is_exit_1_and_nothing_made() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let out = apply_cmd(&db.url, &pool_yaml("early", "10.23.0.0/28"), &dir)
        .output()
        .unwrap();
    assert_code(&out, code::OK);
    let proxy = pg::Proxy::start("WITH claimed AS", 1, pg::Cut::BeforeSending);
    let out = cmd(
        &proxy.url(db.name()),
        &["allocate", "early", "--owner", "FloatingIP/x"],
    )
    .output()
    .unwrap();
    assert_code(&out, code::FAILURE);
    assert_one_error(&out);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 0);
}

/// A command to run against a connection string.
type StoreCommand<'a> = dyn Fn(&str) -> Command + 'a;

/// What a database holds, to compare before and after a command cut halfway: every pool,
/// allocation and subnet or cooldown record, by name.
fn contents(db: &Db) -> Vec<String> {
    db.sql()
        .query(
            "SELECT 'pool ' || namespace || '/' || name FROM ipamctl.pools
             UNION ALL SELECT 'allocation ' || namespace || '/' || pool || ' ' || host(address)
                       FROM ipamctl.allocations
             UNION ALL SELECT kind || ' ' || namespace || '/' || name FROM ipamctl.objects
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Finding 4: a command that changes several things is one transaction on PostgreSQL: a
/// connection cut between its steps (the proxy drops the second deleting or inserting
/// statement and closes) leaves the database as it was, for `release --uid` over several
/// pools, `release` with an owner selector, `vpc delete`, `pool delete` and `apply -f` of
/// several documents; running the command again then does it all.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_connection_cut_between_the_steps_of_one_command_changes_nothing() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let uid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    let pools: String = (1..=3)
        .map(|i| pool_yaml(&format!("p{i}"), &format!("10.3{i}.0.0/28")))
        .collect::<Vec<_>>()
        .join("---\n");
    assert_code(
        &apply_cmd(&db.url, &pools, &dir).output().unwrap(),
        code::OK,
    );
    for i in 1..=3 {
        let pool = format!("p{i}");
        for (owner, uid) in [
            ("VirtualMachine/vm/0", Some(uid)),
            ("FloatingIP/fip-1", None),
        ] {
            let mut args = vec!["allocate", pool.as_str(), "--owner", owner];
            args.extend(uid.iter().flat_map(|u| ["--uid", u]));
            assert_code(&cmd(&db.url, &args).output().unwrap(), code::OK);
        }
    }
    let vpc = cmd(
        &db.url,
        &[
            "vpc",
            "create",
            "blue",
            "-n",
            "acme/dev",
            "--cidr",
            "10.60.0.0/16",
        ],
    )
    .output()
    .unwrap();
    assert_code(&vpc, code::OK);
    let out = cmd(
        &db.url,
        &[
            "allocate",
            "vpc-blue",
            "-n",
            "acme/dev",
            "--owner",
            "FloatingIP/in-vpc",
        ],
    )
    .output()
    .unwrap();
    assert_code(&out, code::OK);
    let subnet = cmd(
        &db.url,
        &[
            "subnet",
            "create",
            "s1",
            "--pool",
            "p3",
            "--cidr",
            "10.33.0.8/29",
        ],
    )
    .output()
    .unwrap();
    assert_code(&subnet, code::OK);

    let two_more = format!(
        "{}---\n{}",
        pool_yaml("q1", "10.41.0.0/28"),
        pool_yaml("q2", "10.42.0.0/28")
    );
    let cases: Vec<(&str, Box<StoreCommand>)> = vec![
        (
            "DELETE FROM ipamctl.allocations",
            Box::new(|s: &str| cmd(s, &["release", "--uid", uid, "-A"])),
        ),
        (
            "DELETE FROM ipamctl.allocations",
            Box::new(|s: &str| cmd(s, &["release", "--owner", "FloatingIP/fip-1", "-A"])),
        ),
        (
            "DELETE FROM ipamctl",
            Box::new(|s: &str| cmd(s, &["vpc", "delete", "blue", "-n", "acme/dev"])),
        ),
        (
            "DELETE FROM ipamctl",
            Box::new(|s: &str| cmd(s, &["pool", "delete", "p3"])),
        ),
        (
            "INSERT INTO ipamctl.pools",
            Box::new(|s: &str| apply_cmd(s, &two_more, &dir)),
        ),
    ];
    for (i, (second, command)) in cases.iter().enumerate() {
        if i == 3 {
            // `pool delete` needs the pool empty: release what `p3` holds first.
            for args in [
                ["release", "p3", "10.33.0.1", "--force"],
                ["release", "p3", "10.33.0.2", "--force"],
            ] {
                let out = cmd(&db.url, &args).output().unwrap();
                assert_code(&out, code::OK);
            }
        }
        let before = contents(&db);
        let proxy = pg::Proxy::start(second, 2, pg::Cut::BeforeSending);
        let out = command(&proxy.url(db.name())).output().unwrap();
        assert!(proxy.fired(), "case {i}: no second step to cut");
        assert_code(&out, code::FAILURE);
        assert_one_error(&out);
        assert_eq!(
            contents(&db),
            before,
            "case {i}: a cut command changed something"
        );
        let out = command(&db.url).output().unwrap();
        assert_code(&out, code::OK);
        assert_ne!(
            contents(&db),
            before,
            "case {i}: running it again did nothing"
        );
    }
}

/// An allocation manifest, as the file store writes one by hand.
fn allocation_yaml(pool: &str, address: &str, owner: &str) -> String {
    let name = format!("{pool}-{}", address.replace('.', "-"));
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAllocation\nmetadata:\n  name: {name}\nspec:\n  pool: {pool}\n  address: \"{address}\"\n  owner:\n    kind: FloatingIP\n    name: {owner}\n"
    )
}

/// `ipamctl -d STATE ARGS…`.
fn on_files(state: &std::path::Path, args: &[&str]) -> Output {
    Command::new(pg::BIN)
        .arg("-d")
        .arg(state)
        .args(args)
        .env_remove("IPAMCTL_STORE")
        .env_remove("IPAMCTL_STATE_DIR")
        .output()
        .unwrap()
}

/// A state directory under `dir` holding pool `p` (10.9.0.0/24, gateway 10.9.0.1) and one
/// owner's allocation.
fn state_dir(dir: &std::path::Path) -> std::path::PathBuf {
    let state = dir.join("state");
    let init = Command::new(pg::BIN)
        .arg("init")
        .arg(&state)
        .env_remove("IPAMCTL_STORE")
        .output()
        .unwrap();
    assert_code(&init, code::OK);
    let pool = dir.join("pool.yaml");
    std::fs::write(
        &pool,
        format!("{}  gateway: 10.9.0.1\n", pool_yaml("p", "10.9.0.0/24")),
    )
    .unwrap();
    let fs = |args: &[&str]| on_files(&state, args);
    assert_code(&fs(&["apply", "-f", pool.to_str().unwrap()]), code::OK);
    assert_code(
        &fs(&["allocate", "p", "--owner", "FloatingIP/fine"]),
        code::OK,
    );
    state
}

/// Finding 5: `import` refuses whole (exit 2, nothing written) a state directory that
/// `check` rejects: an allocation outside its pool's prefix, one on the gateway, one in a
/// pool that does not exist; the message names the files.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn import_refuses_whole_a_state_directory_that_check_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_dir(dir.path());
    let fs = |args: &[&str]| on_files(&state, args);
    let allocations = state.join("cluster/ipallocations");
    for (pool, address, owner) in [
        ("p", "10.10.0.5", "outside"),
        ("p", "10.9.0.1", "gateway"),
        ("nopool", "10.11.0.5", "orphan"),
    ] {
        let name = format!("{pool}-{}.yaml", address.replace('.', "-"));
        std::fs::write(
            allocations.join(name),
            allocation_yaml(pool, address, owner),
        )
        .unwrap();
    }
    let check = fs(&["check"]);
    assert_code(&check, code::FAILURE);

    let db = Db::new();
    let out = db.run(["import", state.to_str().unwrap()]);
    assert_code(&out, code::INVALID);
    assert_one_error(&out);
    let err = stderr(&out);
    for file in ["p-10-10-0-5", "p-10-9-0-1", "nopool-10-11-0-5"] {
        assert!(err.contains(file), "{file} not named: {err}");
    }
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.pools"), 0);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 0);
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.events"), 0);
}

/// Finding 7: `init` on a damaged version history fails at once, naming the missing
/// versions, and changes nothing: versions 4 and 5 deleted (their tables still there), and
/// version 4 missing under a present 5.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn init_refuses_a_damaged_version_history_naming_the_missing_versions() {
    for (deleted, named) in [
        ("4, 5", "versions 4, 5 are missing"),
        ("4", "version 4 is missing"),
        ("2", "version 2 is missing"),
    ] {
        let db = Db::new();
        db.sql()
            .batch_execute(&format!(
                "DELETE FROM ipamctl.schema_version WHERE version IN ({deleted})"
            ))
            .unwrap();
        let versions = db.count("SELECT count(*) FROM ipamctl.schema_version");
        let out = db.run(["init"]);
        assert_code(&out, code::FAILURE);
        assert_one_error(&out);
        assert!(stderr(&out).contains(named), "{deleted}: {}", stderr(&out));
        assert_eq!(
            db.count("SELECT count(*) FROM ipamctl.schema_version"),
            versions
        );
    }
}

/// Runs statements as a hand in psql would, bypassing ipamctl's triggers
/// (`session_replication_role = replica`) when `bypass`: a database written before
/// migration 6, or with its triggers disabled.
fn psql(db: &Db, bypass: bool, sql: &str) -> Result<(), postgres::Error> {
    let mut c = db.sql();
    if bypass {
        c.batch_execute("SET session_replication_role = replica")?;
    }
    c.batch_execute(sql)
}

/// The SQLSTATE of a failed statement.
fn sqlstate(result: Result<(), postgres::Error>) -> Option<String> {
    result
        .err()
        .and_then(|e| e.code().map(|c| c.code().to_owned()))
}

/// `check -o json` as (severity, path, message) triples.
fn findings(out: &Output) -> Vec<(String, String, String)> {
    let json: serde_json::Value = serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("check -o json: {e}: {}", stdout(out)));
    let items = json
        .get("items")
        .and_then(|i| i.as_array())
        .or_else(|| json.as_array())
        .unwrap_or_else(|| panic!("no list in {json}"));
    items
        .iter()
        .map(|f| {
            let field = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (field("severity"), field("path"), field("message"))
        })
        .collect()
}

/// A database holding pool `p` (10.9.0.0/24, gateway 10.9.0.1) with three owners.
fn three_owners() -> Db {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!("{}  gateway: 10.9.0.1\n", pool_yaml("p", "10.9.0.0/24"));
    assert_code(&apply_cmd(&db.url, &yaml, &dir).output().unwrap(), code::OK);
    for owner in ["a", "b", "c"] {
        let out = cmd(
            &db.url,
            &["allocate", "p", "--owner", &format!("FloatingIP/{owner}")],
        )
        .output()
        .unwrap();
        assert_code(&out, code::OK);
    }
    db
}

/// Finding 6: the database refuses the hand edits that broke it: an address with a prefix
/// length (what a `COPY` of `10.9.0.2/26` writes), owner columns that disagree with the
/// manifest; and it counts an `UPDATE` that moves a row to another pool.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn the_database_refuses_hand_edits_that_break_its_invariants() {
    let db = three_owners();
    let masked = psql(
        &db,
        false,
        "UPDATE ipamctl.allocations SET address = set_masklen(address, 26)
         WHERE host(address) = '10.9.0.3'",
    );
    assert_eq!(sqlstate(masked).as_deref(), Some("23514"));
    let copied = psql(
        &db,
        false,
        "INSERT INTO ipamctl.allocations (namespace, pool, address, owner_kind, owner_name, owner_uid, manifest)
         SELECT namespace, pool, '10.9.0.2/26', owner_kind, owner_name || '-2', owner_uid, manifest
         FROM ipamctl.allocations WHERE host(address) = '10.9.0.2'",
    );
    assert_eq!(sqlstate(copied).as_deref(), Some("23514"));
    let renamed = psql(
        &db,
        false,
        "UPDATE ipamctl.allocations SET owner_name = 'someone-else' WHERE host(address) = '10.9.0.2'",
    );
    assert_eq!(sqlstate(renamed).as_deref(), Some("23514"));
    // The next claim is the next address, not a second 10.9.0.2.
    let out = cmd(&db.url, &["allocate", "p", "--owner", "FloatingIP/d"])
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "10.9.0.5\n");

    // A row moved to another pool, manifest and all, is counted out of one and into the other.
    let dir = tempfile::tempdir().unwrap();
    let out = apply_cmd(
        &db.url,
        &pool_yaml("q", "10.9.0.0/24")
            .replace("public", "private")
            .replace("  name: q\n", "  name: q\n  namespace: t\n"),
        &dir,
    )
    .output()
    .unwrap();
    assert_code(&out, code::OK);
    psql(
        &db,
        false,
        "UPDATE ipamctl.allocations
         SET namespace = 't', pool = 'q',
             manifest = convert_to(replace(replace(replace(convert_from(manifest, 'UTF8'),
                 'spec:\n  pool: p\n', 'spec:\n  pool: q\n'),
                 '  name: p-10-9-0-4\n', E'  name: q-10-9-0-4\n  namespace: t\n'),
                 'x', 'x'), 'UTF8')
         WHERE host(address) = '10.9.0.4'",
    )
    .unwrap();
    let check = cmd(&db.url, &["check", "-o", "json"]).output().unwrap();
    let drift: Vec<_> = findings(&check)
        .into_iter()
        .filter(|f| f.2.contains("count ledger"))
        .collect();
    assert!(drift.is_empty(), "{drift:?}");
}

/// A hand's `INSERT` of an allocation row for `manifest` (bypassing the triggers).
fn insert_row(
    db: &Db,
    ns: &str,
    pool: &str,
    address: &str,
    owner: &str,
    uid: &str,
    manifest: &str,
) {
    psql(
        db,
        true,
        &format!(
            "INSERT INTO ipamctl.allocations (namespace, pool, address, owner_kind, owner_name, owner_uid, manifest)
             VALUES ('{ns}', '{pool}', '{address}', 'FloatingIP', '{owner}', '{uid}', convert_to($m${manifest}$m$, 'UTF8'))"
        ),
    )
    .unwrap();
}

/// `check --store` compares each allocation row with its manifest a few thousand rows a
/// statement (`src/store/pg/inspect.rs`: 136,000 in one statement ran past the 30 s
/// `statement_timeout`): a row that disagrees is found once wherever it lies, first, last,
/// or on either side of the boundary between two statements.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn check_finds_a_disagreeing_row_wherever_the_comparison_splits() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    assert_code(
        &apply_cmd(&db.url, &pool_yaml("p", "10.20.0.0/16"), &dir)
            .output()
            .unwrap(),
        code::OK,
    );
    let lines: String = (0..10_001)
        .map(|i| format!("{{\"pool\":\"p\",\"owner\":\"FloatingIP/o-{i}\"}}\n"))
        .collect();
    let file = dir.path().join("claims.jsonl");
    std::fs::write(&file, lines).unwrap();
    let out = cmd(
        &db.url,
        &["allocate", "-f", file.to_str().unwrap(), "--jobs", "2"],
    )
    .output()
    .unwrap();
    assert_code(&out, code::OK);
    // The first row, the 5,000th and 5,001st (the first statement's last and the second's
    // first) and the last, in the primary key's order.
    let picked: Vec<String> = db
        .sql()
        .query(
            "SELECT host(address) FROM (SELECT address, row_number() OVER (ORDER BY address) AS n
                                        FROM ipamctl.allocations) r
             WHERE n IN (1, 5000, 5001, 10001) ORDER BY n",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(picked.len(), 4, "{picked:?}");
    for address in &picked {
        psql(
            &db,
            true,
            &format!(
                "UPDATE ipamctl.allocations SET owner_name = 'moved-' || owner_name
                 WHERE host(address) = '{address}'"
            ),
        )
        .unwrap();
    }
    let out = cmd(&db.url, &["check", "-o", "json"]).output().unwrap();
    assert_code(&out, code::FAILURE);
    let found: Vec<_> = findings(&out)
        .into_iter()
        .filter(|(_, _, m)| m.contains("disagree with its manifest"))
        .map(|(_, path, _)| path)
        .collect();
    let at = |a: &str| format!("cluster/ipallocations/p-{}.yaml", a.replace('.', "-"));
    let mut want: Vec<String> = picked.iter().map(|a| at(a)).collect();
    want.sort();
    let mut found = found;
    found.sort();
    assert_eq!(found, want);
}

/// Finding 6: `ipamctl check` works on a database, with the same rules, output and exit
/// codes as on a state directory (the same broken state gives the same findings, path for
/// path), and the database's own: a row that is no host address, owner columns that
/// disagree with the manifest, a row that does not parse, a count ledger that disagrees
/// with the rows, a low-water hint above a free address.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn check_on_a_database_finds_what_it_finds_in_a_state_directory_and_more() {
    // The state directory of finding 5, checked as files.
    let dir = tempfile::tempdir().unwrap();
    let state = state_dir(dir.path());
    let fs = |args: &[&str]| on_files(&state, args);
    // The same state in a database, before the files are broken.
    let db = Db::new();
    assert_code(&db.run(["import", state.to_str().unwrap()]), code::OK);
    let broken = [
        ("p", "10.10.0.5", "outside"),
        ("p", "10.9.0.1", "gateway"),
        ("nopool", "10.11.0.5", "orphan"),
    ];
    for (pool, address, owner) in broken {
        let name = format!("{pool}-{}.yaml", address.replace('.', "-"));
        let yaml = allocation_yaml(pool, address, owner);
        std::fs::write(state.join("cluster/ipallocations").join(name), &yaml).unwrap();
        insert_row(&db, "", pool, address, owner, "", &yaml);
    }
    let on_files = fs(&["check", "-o", "json"]);
    assert_code(&on_files, code::FAILURE);
    let on_db = cmd(&db.url, &["check", "-o", "json"]).output().unwrap();
    assert_code(&on_db, code::FAILURE);
    let expected = findings(&on_files);
    assert_eq!(expected.len(), 3, "{expected:?}");
    // The ledger counted none of the hand's rows (the triggers were bypassed).
    let mut on_db = findings(&on_db);
    on_db.retain(|f| !f.2.contains("count ledger"));
    assert_eq!(on_db, expected);
    let table = cmd(&db.url, &["check"]).output().unwrap();
    assert_code(&table, code::FAILURE);
    assert!(stdout(&table).starts_with("SEVERITY"), "{}", stdout(&table));
    assert!(
        stderr(&table).starts_with("error: 5 errors"),
        "{}",
        stderr(&table)
    );

    // The database's own rules.
    let db = three_owners();
    psql(
        &db,
        true,
        "ALTER TABLE ipamctl.allocations DROP CONSTRAINT allocations_host_address;
         UPDATE ipamctl.allocations SET address = set_masklen(address, 26) WHERE host(address) = '10.9.0.3';
         UPDATE ipamctl.allocations SET owner_name = 'someone-else' WHERE host(address) = '10.9.0.2';
         INSERT INTO ipamctl.pool_counts (namespace, pool, delta) VALUES ('', 'p', 5);
         UPDATE ipamctl.pool_hints SET low_water = '10.9.0.200' WHERE pool = 'p';",
    )
    .unwrap();
    insert_row(&db, "", "p", "10.9.0.9", "garbled", "", "not: [a manifest");
    let out = cmd(&db.url, &["check", "-o", "json"]).output().unwrap();
    assert_code(&out, code::FAILURE);
    let found = findings(&out);
    let has = |path: &str, text: &str| found.iter().any(|(_, p, m)| p == path && m.contains(text));
    let alloc = |a: &str| format!("cluster/ipallocations/p-{}.yaml", a.replace('.', "-"));
    assert!(has(&alloc("10.9.0.3"), "not a host address"), "{found:?}");
    assert!(
        has(&alloc("10.9.0.2"), "disagree with its manifest"),
        "{found:?}"
    );
    assert!(has(&alloc("10.9.0.9"), ""), "{found:?}");
    assert!(has("cluster/ipampools/p.yaml", "count ledger"), "{found:?}");
    assert!(
        found.iter().any(|(s, p, m)| s == "warning"
            && p == "cluster/ipampools/p.yaml"
            && m.contains("low-water hint")),
        "{found:?}"
    );
}

/// `check --store` reads prefix claims too, with the file store's rules: a claim that a hand
/// edit of its supernet's manifest left on an exclude, and one whose pool row was deleted,
/// are errors naming the claim's path (`apply` refuses the same exclude, exit 4).
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn check_on_a_database_reads_prefix_claims() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let pool = |extra: &str| {
        format!(
            "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {{}}\nspec:\n  cidr: 2001:db8::/48\n{extra}  kind: supernet\n"
        )
    };
    for name in ["sn", "gone"] {
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, pool("").replace("{}", name)).unwrap();
        assert_code(&db.run(["apply", "-f", file.to_str().unwrap()]), code::OK);
        let out = db.run([
            "allocate",
            name,
            "--prefix-length",
            "56",
            "--owner",
            "FloatingIP/a",
        ]);
        assert_code(&out, code::OK);
        assert_eq!(stdout(&out), "2001:db8::/56\n");
    }
    assert_code(&cmd(&db.url, &["check"]).output().unwrap(), code::OK);
    let excluded = pool("  exclude: [\"2001:db8::/60\"]\n").replace("{}", "sn");
    let file = dir.path().join("excluded.yaml");
    std::fs::write(&file, &excluded).unwrap();
    let refused = db.run(["apply", "-f", file.to_str().unwrap()]);
    assert_code(&refused, code::CONFLICT);
    assert_one_error(&refused);
    psql(
        &db,
        true,
        &format!(
            "UPDATE ipamctl.pools SET manifest = convert_to('{}', 'UTF8') WHERE name = 'sn';
             DELETE FROM ipamctl.pools WHERE name = 'gone';",
            excluded.replace('\'', "''")
        ),
    )
    .unwrap();
    let out = cmd(&db.url, &["check", "-o", "json"]).output().unwrap();
    assert_code(&out, code::FAILURE);
    let found = findings(&out);
    let claim = |pool: &str| {
        format!("cluster/ipprefixclaims/{pool}-2001-0db8-0000-0000-0000-0000-0000-0000-56.yaml")
    };
    let has = |path: &str, text: &str| {
        found
            .iter()
            .any(|(s, p, m)| s == "error" && *p == path && m.contains(text))
    };
    assert!(has(&claim("sn"), "excluded from pool `sn`"), "{found:?}");
    assert!(has(&claim("gone"), "which does not exist"), "{found:?}");
}

/// Finding 6: `release` and `export` go on past a row that does not parse, warning about
/// it, as the file store's commands go on past a broken file.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn release_and_export_go_on_past_an_unparsable_row_with_a_warning() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    assert_code(
        &apply_cmd(&db.url, &pool_yaml("p", "10.9.0.0/24"), &dir)
            .output()
            .unwrap(),
        code::OK,
    );
    let uid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    for owner in ["VirtualMachine/vm/0", "VirtualMachine/vm/1"] {
        let out = cmd(&db.url, &["allocate", "p", "--owner", owner, "--uid", uid])
            .output()
            .unwrap();
        assert_code(&out, code::OK);
    }
    insert_row(&db, "", "p", "10.9.0.9", "garbled", uid, "not: [a manifest");
    let export = dir.path().join("exported");
    let out = db.run(["export", export.to_str().unwrap()]);
    assert_code(&out, code::OK);
    assert!(stderr(&out).contains("warning: "), "{}", stderr(&out));
    let files = std::fs::read_dir(export.join("cluster/ipallocations"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".yaml")
        })
        .count();
    assert_eq!(files, 2);
    let out = db.run(["release", "--uid", uid, "-A"]);
    assert_code(&out, code::OK);
    assert!(stderr(&out).contains("warning: "), "{}", stderr(&out));
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 1);
}

/// Finding 6: a pool whose row was deleted by hand, applied again with another prefix, is
/// not "created" over the allocations it left: `apply` refuses (exit 4), naming them.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn apply_refuses_to_create_a_pool_over_allocations_outside_it() {
    let db = three_owners();
    psql(&db, false, "DELETE FROM ipamctl.pools WHERE name = 'p'").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = apply_cmd(&db.url, &pool_yaml("p", "10.99.0.0/24"), &dir)
        .output()
        .unwrap();
    assert_code(&out, 4);
    assert_one_error(&out);
    assert!(stderr(&out).contains("p-10-9-0-2"), "{}", stderr(&out));
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.pools"), 0);
    // Over them with a prefix that holds them, it is created.
    let out = apply_cmd(&db.url, &pool_yaml("p", "10.9.0.0/24"), &dir)
        .output()
        .unwrap();
    assert_code(&out, code::OK);
}

/// Latency: a claim for a new owner is three round trips after the connection (the locking
/// batch with the schema version, the look-ups and the pool's stored subnets, the claim,
/// `COMMIT`), one for an owner that already holds an address one (the batch, which writes
/// nothing, so no `COMMIT` is waited for); counted at the protocol by a proxy (every
/// `Query` and every `Sync` waits for the server). Before the subnets joined the batch and
/// a unit it answered stopped waiting for its `COMMIT`: 4, 4 and 3.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_claim_is_three_round_trips_for_a_new_owner_and_one_for_one_that_holds_an_address() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    assert_code(
        &apply_cmd(&db.url, &pool_yaml("rt", "10.24.0.0/16"), &dir)
            .output()
            .unwrap(),
        code::OK,
    );
    // The pool's first claim sets its low-water hint (before it, the lowest candidate is
    // asked for on its own: one more round trip, once per pool).
    let first = cmd(&db.url, &["allocate", "rt", "--owner", "FloatingIP/first"])
        .output()
        .unwrap();
    assert_code(&first, code::OK);
    let trips = round_trips(&db, &["allocate", "rt"]);
    assert_eq!(
        trips,
        [3, 3, 1],
        "round trips of: a new owner, another, the first again"
    );
}

/// A child prefix for a new owner is three round trips of the store after the connection,
/// as an address is: the batch that begins, locks the supernet's row `FOR UPDATE` and reads
/// the owner's claim and the best-fit and largest free blocks (migration 9); the claim,
/// which splits the free block in the same statement; `COMMIT`. An owner that holds a
/// prefix takes one. Before the free space was kept: 7, 7 and 6 (the pool read before the
/// transaction, its lock, every claimed prefix of the pool read, each its own round trip).
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_prefix_claim_is_three_round_trips_for_a_new_owner_and_one_for_one_that_holds_one() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let supernet = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\nspec:\n  cidr: \"2001:db8::/32\"\n  kind: supernet\n  prefixLengths: {min: 48, max: 64}\n";
    assert_code(
        &apply_cmd(&db.url, supernet, &dir).output().unwrap(),
        code::OK,
    );
    // The pool's first claim computes its free blocks from the claims (once per pool).
    let first = cmd(
        &db.url,
        &[
            "allocate",
            "sn",
            "--prefix-length",
            "64",
            "--owner",
            "FloatingIP/first",
        ],
    )
    .output()
    .unwrap();
    assert_code(&first, code::OK);
    let trips = round_trips(&db, &["allocate", "sn", "--prefix-length", "64"]);
    assert_eq!(
        trips,
        [3, 3, 1],
        "round trips of: a new owner's /64, another's, the first's again"
    );
}

/// The same in a namespace's pool, whose claims are charged to the namespace's quotas
/// (`engine::quota`): with no quota there, asking for them costs no round trip of its own.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_claim_in_a_namespaces_pool_is_three_round_trips_and_one_for_a_holder() {
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let pool = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: rt\n  namespace: acme\nspec:\n  cidr: 10.24.0.0/16\n  kind: private\n";
    assert_code(&apply_cmd(&db.url, pool, &dir).output().unwrap(), code::OK);
    let first = cmd(
        &db.url,
        &["allocate", "rt", "-n", "acme", "--owner", "Node/first"],
    )
    .output()
    .unwrap();
    assert_code(&first, code::OK);
    let trips = round_trips(&db, &["allocate", "rt", "-n", "acme"]);
    assert_eq!(
        trips,
        [3, 3, 1],
        "round trips of: a new owner, another, the first again"
    );
}

/// The round trips, counted at the protocol by a proxy, of `args` with `--owner` a new
/// owner, another new one, and the first again; each must succeed.
fn round_trips(db: &Db, args: &[&str]) -> Vec<usize> {
    let proxy = pg::Proxy::counting();
    let url = proxy.url(db.name());
    let mut trips = Vec::new();
    for owner in ["FloatingIP/new-1", "FloatingIP/new-2", "FloatingIP/new-1"] {
        proxy.take_round_trips();
        let mut with_owner = args.to_vec();
        with_owner.extend(["--owner", owner]);
        let out = cmd(&url, &with_owner).output().unwrap();
        assert_code(&out, code::OK);
        trips.push(proxy.take_round_trips());
    }
    trips
}
