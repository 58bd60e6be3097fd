//! `IPAMCTL_TEST_STORE=server`: every command the builder runs that `--server` supports
//! (`allocate`, `release`, `list`, `pool list|show|create|delete`, `vpc create|get|list|delete`,
//! `subnet create|list|show|delete`, `mac set`, `metrics` without `--dhcp-leases`, `quota
//! list`) runs through a fresh
//! `ipamctl serve` on the test's state directory, as `ipamctl --server URL …` with the token
//! in `IPAMCTL_TOKEN`; the others run locally, as always. The state is the directory's, so
//! every check on files sees what the server wrote.
//!
//! What does not apply, and why, is listed in docs/src/server.md ("Through a server, the
//! suites"): a not-found error's hint (a server gives none), messages naming the state
//! directory's files (the server's paths are absolute), warnings about broken files (they
//! stay in the server's log).

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Do the tests run their supported commands through a server
/// (`IPAMCTL_TEST_STORE=server`)?
pub fn on_server() -> bool {
    std::env::var("IPAMCTL_TEST_STORE").is_ok_and(|v| v == "server")
}

/// The tokens file the harness's servers (and `tests/serve_common`'s) read, and its one
/// token's secret: `test`, with every verb on every namespace and the cluster scope. Made
/// once per test process by `ipamctl token create`, and kept while the process runs.
pub fn tokens() -> &'static (PathBuf, String) {
    static TOKENS: OnceLock<(PathBuf, String)> = OnceLock::new();
    TOKENS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory").keep();
        let file = dir.join("tokens.yaml");
        let made = Command::new(super::BIN)
            .args(["token", "create", "test", "--tokens"])
            .arg(&file)
            .args([
                "--namespace",
                "*",
                "--verbs",
                "read,claim,admin",
                "--cluster",
            ])
            .output()
            .expect("run ipamctl token create");
        assert!(made.status.success(), "token create: {made:?}");
        let secret = String::from_utf8(made.stdout)
            .expect("UTF-8")
            .trim()
            .to_owned();
        (file, secret)
    })
}

/// Whether `args` (a command line after `-d state`) is one `--server` runs.
pub fn supported(args: &[OsString]) -> bool {
    let mut words = args.iter().map(|a| a.to_string_lossy().into_owned());
    let mut command = Vec::new();
    while let Some(w) = words.next() {
        match w.as_str() {
            // The global flags that take a value.
            "-n" | "--namespace" | "-o" | "--output" => {
                words.next();
            }
            "-d" | "--state-dir" | "--store" | "--server" => return false,
            w if w.starts_with('-') => {}
            w => {
                command.push(w.to_owned());
                if command.len() == 2 {
                    break;
                }
            }
        }
    }
    match command.first().map(String::as_str) {
        Some("allocate" | "release" | "list" | "vpc" | "subnet" | "quota") => true,
        Some("pool") => matches!(
            command.get(1).map(String::as_str),
            Some("list" | "show" | "create" | "delete")
        ),
        Some("mac") => command.get(1).map(String::as_str) == Some("set"),
        // The lease files `--dhcp-leases` reads are the client's: exit 2 through a server.
        Some("metrics") => !args
            .iter()
            .any(|a| a.to_str().is_some_and(|a| a.starts_with("--dhcp-leases"))),
        _ => false,
    }
}

/// A server on a state directory, killed when dropped.
pub struct Serving {
    child: Child,
    pub url: String,
}

impl Serving {
    /// `ipamctl serve` on `state`, once it says where it listens (within 30 s).
    pub fn start(state: &Path) -> Serving {
        let mut child = Command::new(super::BIN)
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("IPAMCTL_STORE")
            .arg("-d")
            .arg(state)
            .args(["serve", "--listen", "127.0.0.1:0", "--tokens"])
            .arg(&tokens().0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ipamctl serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let url = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "ipamctl serve on {} did not listen within 30 s",
                    state.display()
                );
            }
        };
        Serving { child, url }
    }

    /// `cmd` (a command line without `-d`) sent to this server.
    pub fn command(&self, args: &[OsString]) -> Command {
        let mut cmd = Command::new(super::BIN);
        cmd.env_remove("IPAMCTL_STATE_DIR")
            .env("IPAMCTL_TOKEN", &tokens().1)
            .arg("--server")
            .arg(&self.url)
            .args(
                args.iter()
                    .map(OsString::as_os_str)
                    .collect::<Vec<&OsStr>>(),
            );
        cmd
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
