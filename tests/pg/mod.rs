//! A real PostgreSQL server for the tests, and a fresh database per test so that tests run
//! in parallel.
//!
//! The server is `IPAMCTL_TEST_PG` (a connection URL, as `.ci/run` exports it) or, when
//! that is unset, a throwaway cluster this test process starts with `.ci/pg-cluster` (as
//! an unprivileged user when run as root), which stops by itself once the process has
//! exited. No server and no way to start one is a loud failure with the reason, never a
//! silent skip.

#![allow(dead_code)]

#[path = "../budget/mod.rs"]
pub mod budget;
#[path = "cluster.rs"]
pub mod cluster;

use std::process::{Child, Command, Output, Stdio};
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

/// A client of the server's maintenance database: for what cannot be done from inside a
/// test's own database (`ALTER DATABASE … ALLOW_CONNECTIONS`).
pub fn maintenance() -> Client {
    client(None)
}

/// A client of the server's maintenance database (or of `db`).
fn client(db: Option<&str>) -> Client {
    client_as(db, None)
}

/// A client of the server's maintenance database (or of `db`), as role `user` if given.
fn client_as(db: Option<&str>, user: Option<&str>) -> Client {
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
    config.user(user.unwrap_or(info.get("user").unwrap_or("postgres")));
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

    /// A client of this database as role `user` (made by the test: the server trusts its
    /// local connections).
    pub fn sql_as(&self, user: &str) -> Client {
        client_as(Some(&self.name), Some(user))
    }

    /// `apply -f` of `manifests`, written to `dir`; asserts that it succeeded.
    pub fn apply(&self, dir: &std::path::Path, manifests: &str) {
        let file = dir.join("manifests.yaml");
        std::fs::write(&file, manifests).unwrap();
        let out = self.run(["apply", "-f", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }

    /// Asserts that `check` finds nothing wrong.
    #[track_caller]
    pub fn assert_check_clean(&self) {
        let check = self.run(["check"]);
        assert!(
            check.status.success(),
            "{}{}",
            stdout(&check),
            stderr(&check)
        );
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

/// The test server's loopback TCP port.
pub fn tcp_port() -> u16 {
    let info = ipamctl::store::pg::conninfo::ConnInfo::parse(server()).expect("server URL");
    info.get("port")
        .unwrap_or("5432")
        .parse()
        .expect("a port number")
}

/// What a [`Proxy`] does when a client message matches its trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Passes the message on, lets the server answer, and then closes both sides without
    /// passing the answer back: the client never learns what the server did.
    AfterSending,
    /// Closes both sides instead of passing the message on: the server never sees it.
    BeforeSending,
    /// Passes the message on and then nothing more in either direction, the sockets kept
    /// open: a client that froze (or whose network did) in the middle of its transaction.
    Freeze,
}

/// A TCP proxy in front of the test server that cuts or freezes the connection at the
/// `nth` (from 1) client message whose bytes contain `pattern` (a `COMMIT`, a statement's
/// text), across every connection made through it; everything else passes as it is.
/// Connect through it with `sslmode=disable` (it reads the protocol in the clear).
pub struct Proxy {
    pub port: u16,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Round trips clients made through it: every `Query` (simple protocol) and every
    /// `Sync` (the end of an extended-protocol statement), each of which waits for the
    /// server's `ReadyForQuery`.
    round_trips: std::sync::Arc<AtomicUsize>,
}

impl Proxy {
    pub fn start(pattern: &str, nth: usize, cut: Cut) -> Proxy {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let upstream = tcp_port();
        let fired = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(AtomicUsize::new(0));
        let round_trips = Arc::new(AtomicUsize::new(0));
        let trips = round_trips.clone();
        let pattern = pattern.as_bytes().to_vec();
        let fired_ = fired.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let (fired, seen, pattern) = (fired_.clone(), seen.clone(), pattern.clone());
                let trips = trips.clone();
                std::thread::spawn(move || {
                    let counters = Counters {
                        fired: &fired,
                        seen: &seen,
                        round_trips: &trips,
                    };
                    pump_connection(client, server, &pattern, nth, cut, &counters)
                });
            }
        });
        Proxy {
            port,
            fired,
            round_trips,
        }
    }

    /// A proxy that cuts nothing, for counting round trips.
    pub fn counting() -> Proxy {
        Proxy::start("\u{0}never\u{0}", 1, Cut::BeforeSending)
    }

    /// Round trips made through it so far, and the counter reset.
    pub fn take_round_trips(&self) -> usize {
        self.round_trips.swap(0, Ordering::SeqCst)
    }

    /// Whether the trigger has fired.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// A connection string for database `db` through the proxy.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgresql://postgres@127.0.0.1:{}/{db}?sslmode=disable",
            self.port
        )
    }
}

/// What a proxy's connections count, shared by them.
struct Counters<'a> {
    fired: &'a std::sync::atomic::AtomicBool,
    seen: &'a AtomicUsize,
    round_trips: &'a AtomicUsize,
}

fn pump_connection(
    mut client: std::net::TcpStream,
    server: std::net::TcpStream,
    pattern: &[u8],
    nth: usize,
    cut: Cut,
    counters: &Counters<'_>,
) {
    let Counters {
        fired,
        seen,
        round_trips,
    } = *counters;
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    // Messages are passed on one by one: without TCP_NODELAY, Nagle's algorithm holds each
    // small write until the last is acknowledged, 40 ms a round trip behind a delayed ACK.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // Set before the matching message goes on, so that no answer to it slips back.
    let silent = Arc::new(AtomicBool::new(false));
    let mut to_server = server.try_clone().unwrap();
    {
        let (mut from_server, mut to_client) =
            (server.try_clone().unwrap(), client.try_clone().unwrap());
        let silent = silent.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            while let Ok(n) = from_server.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if silent.load(Ordering::SeqCst) {
                    continue;
                }
                if to_client.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = to_client.shutdown(std::net::Shutdown::Both);
        });
    }
    let read_exact = |s: &mut std::net::TcpStream, n: usize| -> Option<Vec<u8>> {
        let mut b = vec![0u8; n];
        s.read_exact(&mut b).ok().map(|_| b)
    };
    // The startup message has no type byte; every later one has.
    let mut startup = true;
    loop {
        let message = if startup {
            let Some(len) = read_exact(&mut client, 4) else {
                break;
            };
            let n = u32::from_be_bytes(len[..4].try_into().unwrap()) as usize;
            let Some(body) = read_exact(&mut client, n.saturating_sub(4)) else {
                break;
            };
            startup = false;
            [len, body].concat()
        } else {
            let Some(head) = read_exact(&mut client, 5) else {
                break;
            };
            let n = u32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
            let Some(body) = read_exact(&mut client, n.saturating_sub(4)) else {
                break;
            };
            [head, body].concat()
        };
        if !startup && matches!(message[0], b'Q' | b'S') {
            round_trips.fetch_add(1, Ordering::SeqCst);
        }
        let matches = !fired.load(Ordering::SeqCst)
            && message.windows(pattern.len()).any(|w| w == pattern)
            && seen.fetch_add(1, Ordering::SeqCst) + 1 == nth;
        if matches {
            fired.store(true, Ordering::SeqCst);
            // A statement of the extended protocol runs at its `Sync`: pass on the rest of
            // it (Bind, Execute, …) before cutting or freezing.
            let mut message = message;
            if cut != Cut::BeforeSending && message[0] != b'Q' {
                let mut last = message[0];
                while last != b'S' {
                    let Some(head) = read_exact(&mut client, 5) else {
                        break;
                    };
                    let n = u32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
                    let Some(body) = read_exact(&mut client, n.saturating_sub(4)) else {
                        break;
                    };
                    last = head[0];
                    message.extend_from_slice(&head);
                    message.extend_from_slice(&body);
                }
            }
            match cut {
                Cut::BeforeSending => {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    let _ = server.shutdown(std::net::Shutdown::Both);
                    return;
                }
                Cut::AfterSending => {
                    silent.store(true, Ordering::SeqCst);
                    let _ = to_server.write_all(&message);
                    // The server commits before it answers; give it the time to.
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    let _ = server.shutdown(std::net::Shutdown::Both);
                    return;
                }
                Cut::Freeze => {
                    silent.store(true, Ordering::SeqCst);
                    let _ = to_server.write_all(&message);
                    // Keep both sockets open, passing nothing, until the client goes.
                    let mut sink = [0u8; 4096];
                    while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
                    return;
                }
            }
        }
        if to_server.write_all(&message).is_err() {
            break;
        }
    }
    let _ = server.shutdown(std::net::Shutdown::Both);
}

/// PgBouncer in front of the test server, in transaction pooling: each transaction of a
/// client may run on another server connection, and each server connection serves many
/// clients in turn. (`bench/run` shows why one would: the server's start of a backend per
/// connection is most of a command's time.)
pub struct Bouncer {
    child: Child,
    /// The pooler's unix socket directory, and so its configuration's home.
    dir: tempfile::TempDir,
}

impl Bouncer {
    /// Starts PgBouncer for the test server; a loud failure when it is not installed.
    pub fn start() -> Bouncer {
        let server = server();
        let param = |key: &str| {
            server
                .split(['?', '&'])
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no `{key}` in the test server's URL {server}"))
                .to_owned()
        };
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        std::fs::write(dir.path().join("users.txt"), "\"postgres\" \"\"\n").unwrap();
        std::fs::write(
            dir.path().join("pgbouncer.ini"),
            format!(
                "[databases]\n* = host={} port={}\n\
                 [pgbouncer]\nlisten_addr =\nlisten_port = 6432\nunix_socket_dir = {d}\n\
                 auth_type = trust\nauth_file = {d}/users.txt\npool_mode = transaction\n\
                 max_client_conn = 200\ndefault_pool_size = 4\nlogfile = {d}/pgbouncer.log\n",
                param("host"),
                param("port"),
            ),
        )
        .unwrap();
        // Debian installs it in /usr/sbin, which a user's PATH may lack.
        let program = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or("pgbouncer");
        let mut cmd = Command::new(program);
        // It refuses to run as root: then as the user the test cluster runs as.
        let uid = Command::new("id").arg("-u").output().unwrap();
        if String::from_utf8_lossy(&uid.stdout).trim() == "0" {
            let user = std::env::var("IPAMCTL_PG_USER").unwrap_or_else(|_| "nobody".into());
            let status = Command::new("chown")
                .args(["-R", &user])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success(), "chown {user} {d}");
            cmd.args(["-u", &user]);
        }
        let child = cmd
            .arg(dir.path().join("pgbouncer.ini"))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("pgbouncer: {e}; install it (apt-get install pgbouncer): this test runs ipamctl through it")
            });
        let socket = dir.path().join(".s.PGSQL.6432");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !socket.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "pgbouncer did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Bouncer { child, dir }
    }

    /// The connection string of `db` through the pooler.
    pub fn url(&self, db: &Db) -> String {
        format!(
            "postgresql:///{}?host={}&port=6432&user=postgres",
            db.name(),
            self.dir.path().display()
        )
    }

    /// The pooler's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `ipamctl --store <db through the pooler> ARGS…`.
    pub fn cmd(&self, db: &Db, args: &[&str]) -> Command {
        let url = self.url(db);
        let mut cmd = Command::new(BIN);
        cmd.arg("--store")
            .arg(url)
            .args(args)
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("IPAMCTL_STORE")
            .stdin(std::process::Stdio::null());
        cmd
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for `child` at most `secs` seconds; past that it is killed and the test fails,
/// saying what it was waiting for.
#[track_caller]
pub fn wait_or_kill(mut child: Child, secs: u64, what: &str) -> Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if child.try_wait().expect("wait for ipamctl").is_some() {
            return child.wait_with_output().expect("collect ipamctl's output");
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect ipamctl's output");
            panic!(
                "{what}: still waiting after {secs} s, killed\nstderr:\n{}",
                stderr(&out)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Each owner's answer in a batch's `-o json` results that says `created` or `existing`:
/// its addresses.
pub fn answered(got: &[serde_json::Value]) -> std::collections::BTreeMap<String, Vec<String>> {
    got.iter()
        .filter(|r| r["error"].is_null())
        .map(|r| {
            let addresses = r["addresses"].as_array().unwrap();
            let addresses = addresses.iter().map(|a| a.as_str().unwrap().to_owned());
            (r["owner"].as_str().unwrap().to_owned(), addresses.collect())
        })
        .collect()
}

/// A batch's `-o json` output: one JSON value a line.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}
