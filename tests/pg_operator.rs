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
