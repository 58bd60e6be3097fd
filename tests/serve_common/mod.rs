//! The harness of the server's tests (`tests/serve*.rs`): [`Server::start`] runs the real
//! binary as `ipamctl serve --listen 127.0.0.1:0` on a copy of a fixture (a state directory,
//! or with `IPAMCTL_TEST_STORE=postgres` the fixture loaded into a fresh database), waits
//! (bounded) for its `listening on URL` line, and collects its stderr; [`Server::post`]
//! sends a GraphQL request with curl, a client nobody here wrote. Dropping it kills the
//! server it started.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common;

/// The tokens file every server of this test process is started with (`--tokens`), and
/// its one token's secret ([`common::server::tokens`]).
fn tokens() -> &'static (PathBuf, String) {
    common::server::tokens()
}

/// The bearer the servers of the tests know: [`tokens`]'s secret.
pub fn token() -> &'static str {
    &tokens().1
}

/// The tokens file the servers of the tests are started with.
pub fn tokens_file() -> &'static Path {
    &tokens().0
}

/// Where a server's store is.
pub enum Store {
    Dir(common::Test),
    Db(common::Test, common::pg::Db),
}

impl Store {
    /// A copy of `testdata/<case>`: a state directory, or in a fresh database when the
    /// suite runs on PostgreSQL (`IPAMCTL_TEST_STORE=postgres`).
    pub fn fixture(case: &str) -> Store {
        let test = common::Test::new(case);
        if common::on_postgres() {
            let db = common::pg::Db::new();
            let out = db.run([std::ffi::OsStr::new("import"), test.state().as_os_str()]);
            assert!(out.status.success(), "import: {}", common::pg::stderr(&out));
            Store::Db(test, db)
        } else {
            Store::Dir(test)
        }
    }

    /// A copy of `testdata/<case>` in a fresh database, whatever the suite runs on.
    pub fn database(case: &str) -> Store {
        let test = common::Test::new(case);
        let db = common::pg::Db::new();
        let out = db.run([std::ffi::OsStr::new("import"), test.state().as_os_str()]);
        assert!(out.status.success(), "import: {}", common::pg::stderr(&out));
        Store::Db(test, db)
    }

    /// The global flags that name this store.
    pub fn flags(&self) -> Vec<String> {
        match self {
            Store::Dir(t) => vec!["-d".into(), t.state().display().to_string()],
            Store::Db(_, db) => vec!["--store".into(), db.url.clone()],
        }
    }

    /// The temporary directory the test may write in.
    pub fn root(&self) -> PathBuf {
        match self {
            Store::Dir(t) | Store::Db(t, _) => t.root().to_path_buf(),
        }
    }

    /// `ipamctl` on this store, with `args`.
    pub fn ipamctl<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(
        &self,
        args: I,
    ) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ipamctl"));
        cmd.env_remove("IPAMCTL_STATE_DIR")
            .env_remove("IPAMCTL_STORE")
            .args(self.flags())
            .args(args);
        cmd
    }

    /// Asserts `ipamctl check` finds nothing wrong.
    #[track_caller]
    pub fn assert_check_clean(&self) {
        let out = self.ipamctl(["check"]).output().expect("run ipamctl check");
        assert!(
            out.status.success(),
            "check: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A running `ipamctl serve`.
pub struct Server {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT` (or `https://…`).
    pub url: String,
    /// Every line it wrote on stderr so far.
    pub stderr: Arc<Mutex<Vec<String>>>,
}

/// How long a server may take to say it listens.
const START: Duration = Duration::from_secs(30);

impl Server {
    /// Starts `ipamctl serve` on `store` with `args` after `--listen 127.0.0.1:0`.
    pub fn start(store: &Store, args: &[&str]) -> Server {
        let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0"]);
        cmd.args(args);
        Server::spawn(cmd)
    }

    /// Starts `cmd` (an `ipamctl serve` command line) and waits for its first `listening on`.
    pub fn spawn(mut cmd: Command) -> Server {
        cmd.arg("--tokens").arg(tokens_file());
        Server::spawn_as_is(cmd)
    }

    /// [`Server::spawn`] of `cmd` as it is (its own `--tokens`).
    pub fn spawn_as_is(mut cmd: Command) -> Server {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start ipamctl serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(url) = line.strip_prefix("listening on ") {
                        let _ = tx.send(url.to_owned());
                    }
                    lines.lock().unwrap().push(line);
                }
            });
        }
        let mut server = Server {
            child: Some(child),
            url: String::new(),
            stderr: lines,
        };
        match rx.recv_timeout(START) {
            Ok(url) => server.url = url,
            Err(_) => panic!(
                "no `listening on` line within {START:?}; stderr:\n{}",
                server.log()
            ),
        }
        server
    }

    /// What it wrote on stderr so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `signal` (`TERM`, `INT`, `KILL`) to the server.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(ok.success());
    }

    /// Waits (at most `within`) for the server to exit; its exit code.
    pub fn wait(&mut self, within: Duration) -> Option<i32> {
        let child = self.child.as_mut().expect("running");
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Some(status) = child.try_wait().expect("wait for the server") {
                self.child = None;
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "the server did not exit within {within:?}; stderr:\n{}",
            self.log()
        );
    }

    /// POSTs `{query, variables}` to `/graphql` with the test's bearer: the status and the
    /// body as JSON.
    pub fn post(&self, query: &str, variables: serde_json::Value) -> (u16, serde_json::Value) {
        let body = serde_json::json!({"query": query, "variables": variables}).to_string();
        let (status, text) = curl(
            &self.url,
            "/graphql",
            &[
                "-H",
                &format!("Authorization: Bearer {token}", token = token()),
                "-H",
                "Content-Type: application/json",
            ],
            body.as_bytes(),
        );
        let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        (status, json)
    }

    /// The data of a request that must succeed.
    #[track_caller]
    pub fn ok(&self, query: &str, variables: serde_json::Value) -> serde_json::Value {
        let (status, body) = self.post(query, variables);
        assert_eq!(status, 200, "{body}");
        assert!(body.get("errors").is_none(), "{body}");
        body["data"].clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs curl on `url` + `path` with `args`, `body` on stdin (POSTed when not empty);
/// the HTTP status and the response body. Bounded by curl's `--max-time`.
pub fn curl(url: &str, path: &str, args: &[&str], body: &[u8]) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code}"])
        .args(args);
    if !body.is_empty() {
        cmd.args(["--data-binary", "@-"]);
    }
    cmd.arg(format!("{url}{path}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run curl");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = stdin.write_all(body);
    }
    let out = child.wait_with_output().expect("curl's output");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    let status = status.trim().parse().unwrap_or_else(|_| {
        panic!(
            "curl gave no status: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (status, body.to_owned())
}

/// The path of `name` under the store's temporary directory.
pub fn tmp(store: &Store, name: &str) -> PathBuf {
    store.root().join(name)
}

/// Whether `path` exists (for readability in the tests).
pub fn exists(path: &Path) -> bool {
    path.exists()
}

/// openssl with `args` in `dir`; fails the test on an error.
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.pem`) made by openssl in `dir`, and a certificate it signed for 127.0.0.1
/// (`server.pem`, key `server.key`): the paths of the certificate, its key and the CA.
pub fn tls_files(dir: &Path) -> (String, String, String) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=ipamctl test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    );
    let path = |name: &str| dir.join(name).display().to_string();
    (path("server.pem"), path("server.key"), path("ca.pem"))
}
