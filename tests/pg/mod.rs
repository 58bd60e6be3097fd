//! A real PostgreSQL server for the tests, and a fresh database per test so that tests run
//! in parallel.
//!
//! The server is `IPAMCTL_TEST_PG` (a connection URL, as `.ci/run` exports it) or, when
//! that is unset, a throwaway cluster this test process starts with `.ci/pg-cluster` (as
//! an unprivileged user when run as root), which stops by itself once the process has
//! exited. No server and no way to start one is a loud failure with the reason, never a
//! silent skip.

#![allow(dead_code)]

use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use postgres::{Client, NoTls};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_ipamctl");

/// The server's URL, started on first use.
pub fn server() -> &'static str {
    static SERVER: OnceLock<Result<String, String>> = OnceLock::new();
    let url = SERVER.get_or_init(|| match std::env::var("IPAMCTL_TEST_PG") {
        Ok(url) if !url.is_empty() => Ok(url),
        _ => start_cluster(),
    });
    match url {
        Ok(url) => url,
        Err(why) => panic!(
            "no PostgreSQL server for the tests: {why}\n\
             set IPAMCTL_TEST_PG to a server's URL, or install PostgreSQL (apt-get install postgresql) so that the tests can start one"
        ),
    }
}

fn start_cluster() -> Result<String, String> {
    let dir = tempfile::Builder::new()
        .prefix("ipamctl-pg-")
        .tempdir()
        .map_err(|e| format!("temporary directory: {e}"))?
        .keep();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/pg-cluster");
    let out = Command::new("bash")
        .arg(script)
        .arg("start")
        .arg(&dir)
        .arg("--watch")
        .arg(std::process::id().to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("running {script}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{script} start failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `url` pointing at database `db` instead (a later `dbname` wins, as in libpq).
pub fn with_dbname(url: &str, db: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}dbname={db}")
    } else {
        format!("{url} dbname={db}")
    }
}

/// A client of the server's maintenance database (or of `db`).
fn client(db: Option<&str>) -> Client {
    let url = server();
    let url = match db {
        Some(db) => with_dbname(url, db),
        None => url.to_owned(),
    };
    // The tests' own client reads the same strings ipamctl does.
    let info = ipamctl::store::pg::conninfo::ConnInfo::parse(&url)
        .expect("the test server URL parses")
        .with_env(|v| std::env::var(v).ok())
        .with_defaults("postgres");
    let mut config = postgres::Config::new();
    for host in info.get("host").unwrap_or("/tmp").split(',') {
        config.host(host);
    }
    config.port(info.get("port").unwrap_or("5432").parse().expect("port"));
    config.user(info.get("user").unwrap_or("postgres"));
    config.dbname(info.get("dbname").unwrap_or("postgres"));
    if let Some(p) = info.password(
        std::env::var_os("HOME")
            .as_deref()
            .map(std::path::Path::new),
    ) {
        config.password(p);
    }
    config
        .connect(NoTls)
        .unwrap_or_else(|e| panic!("connecting to the test server: {e}"))
}

/// A fresh database on the server, dropped when the test ends.
pub struct Db {
    /// The `--store` URL of the database.
    pub url: String,
    name: String,
}

impl Db {
    /// A new, empty database (no ipamctl schema).
    pub fn empty() -> Db {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "ipamctl_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        client(None)
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        Db {
            url: with_dbname(server(), &name),
            name,
        }
    }

    /// A new database with the schema (`ipamctl init` run on it).
    pub fn new() -> Db {
        let db = Db::empty();
        let out = db.run(["init"]);
        assert!(out.status.success(), "init failed: {}", stderr(&out));
        db
    }

    /// The `ipamctl` command for this database (`--store` set, no state directory).
    pub fn cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(BIN);
        cmd.arg("--store")
            .arg(&self.url)
            .args(args)
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("IPAMCTL_STORE")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `ipamctl --store URL ARGS…` to completion.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd(args).output().expect("run ipamctl")
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A client of this database, for checking what ipamctl stored.
    pub fn sql(&self) -> Client {
        client(Some(&self.name))
    }

    /// One `bigint` the query returns.
    pub fn count(&self, query: &str) -> i64 {
        self.sql()
            .query_one(query, &[])
            .unwrap_or_else(|e| panic!("{query}: {e}"))
            .get(0)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Best effort: a throwaway cluster goes away anyway; a shared server keeps no clutter.
        let _ = client(None).batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// The server's loopback TCP port and the CA certificate that signed its TLS certificate
/// (made by `.ci/pg-cluster` beside the socket directory). Fails loudly when the server did not come from there.
pub fn tls_endpoint() -> (String, std::path::PathBuf) {
    let info = ipamctl::store::pg::conninfo::ConnInfo::parse(server()).expect("server URL");
    let port = info.get("port").unwrap_or("5432").to_owned();
    let sock = std::path::PathBuf::from(info.get("host").unwrap_or(""));
    let cert = sock
        .parent()
        .map(|d| d.join("ca.crt"))
        .filter(|c| c.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the TLS tests need the server's certificate beside its socket directory ({}): \
                 use a cluster from .ci/pg-cluster (with openssl installed)",
                sock.display()
            )
        });
    (port, cert)
}

/// The process's stdout, as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The process's stderr, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts the exit code, showing the output when it differs.
#[track_caller]
pub fn assert_code(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

/// Asserts that stderr is exactly one `error:` line (and optional `hint:` lines).
#[track_caller]
pub fn assert_one_error(out: &Output) {
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.first().is_some_and(|l| l.starts_with("error: "))
            && lines[1..].iter().all(|l| l.starts_with("hint: ")),
        "expected one error line:\n{err}"
    );
}
