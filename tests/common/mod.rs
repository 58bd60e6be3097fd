//! The harness every integration test shares: a [`Test`] builder that copies a fixture state
//! directory from `testdata/<case>/` into a temporary directory, runs the real `ipamctl`
//! binary on it and checks stdout, stderr and the exit status, so that each test reads like
//! a line of the spec:
//!
//! ```ignore
//! Test::new("seed")
//!     .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-1"])
//!     .stdout("203.0.113.4\n")
//!     .run();
//! ```
//!
//! Layout of the temporary directory: `<tmp>/state/` is the copy of the fixture, and `<tmp>`
//! is the working directory of the command, which gets `-d state` in front of its arguments
//! unless the test says otherwise. Paths in the output that point into `<tmp>` read `[TMP]`.
//! Fixtures are never touched in place.
//!
//! # Fixtures
//!
//! Each `testdata/<case>/` is a state directory made by `ipamctl init` and `ipamctl apply`
//! (plus `allocate --address` where it holds allocations), with the git-ignored lock and
//! index files removed:
//!
//! | case | what it holds |
//! |---|---|
//! | `empty` | nothing but the marker and `.gitignore` |
//! | `seed` | `testdata/demo/pools.yaml` applied verbatim: `public-zone-a`, `acme/prod/vpc-main` |
//! | `populated` | the seed pools and `acme/dev/vpc-dev` (10.50.0.0/24, gateway .1); allocations at 203.0.113.4 and .10, 10.50.0.2, 10.42.0.2, .9, .10 and 10.42.1.7 (owners in [`uid`]) |
//! | `small-pools` | public `p31` (/31), `p32` (/32), `p30` (/30, gateway .5); private `lab/nogw` (/24, no gateway, excludes `10.0.0.0/28` and `10.0.0.100`) |
//! | `race` | public `race`, 10.7.0.0/27 without gateway: 30 candidates |
//! | `broken-allocation` | public `tiny`, 192.0.2.0/29 with gateway .1, and an unparsable allocation file for .2 |
//! | `dual-stack` | public IPv6 `public-v6` (2001:db8:0:1::/64, gateway ::1, excludes ::2/127 and ::5, zone `zone-a`), `v6-120`, `v6-126`, `v6-127`, `v6-128` (2001:db8:12x::/12x; the /128 is ::5), `v6-top` (the top /126, only the all-ones address left); private in acme/prod: `vpc-main` (10.42.0.0/16) and `vpc-main-v6` (fd00:42::/48), owned by one VPC, and `tiny` (10.9.0.0/30) and `tiny-v6` (fd00:9::/127), two candidates each |

//! # Both stores
//!
//! With `IPAMCTL_TEST_STORE=postgres`, every command the builder runs on a state directory
//! runs on PostgreSQL instead, with the same assertions: the state directory is imported
//! into a fresh database (see `tests/pg/mod.rs` for the server), the command gets
//! `--store URL` in place of `-d state`, and the database is exported back over the state
//! directory afterwards, so that the checks on files see what the database holds. A fixture
//! the database cannot hold (a broken file) fails the test, saying so.

// Every test crate uses a different subset of the harness.
#![allow(dead_code)]

pub mod hints;
#[path = "../needs/mod.rs"]
pub mod needs;
#[path = "../pg/mod.rs"]
pub mod pg;
pub mod server;

#[allow(unused_imports)]
pub use pg::budget;

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_ipamctl");

/// A cluster-scoped supernet `provider-v6` (2001:db8::/48, handing out /56 to /64), the
/// provider's IPv6 space that tenants' VPCs draw their ranges from.
pub const PROVIDER_V6: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: provider-v6
spec:
  cidr: 2001:db8::/48
  kind: supernet
  prefixLengths:
    min: 56
    max: 64
";

/// `PATH` with the binary under test's directory first, so that scripts and hooks that
/// call `ipamctl` run it.
pub fn path_with_bin() -> String {
    let dir = Path::new(BIN).parent().expect("the binary's directory");
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Exit codes, as the README documents them.
pub mod code {
    pub const OK: i32 = 0;
    pub const FAILURE: i32 = 1;
    pub const INVALID: i32 = 2;
    pub const NOT_FOUND: i32 = 3;
    pub const CONFLICT: i32 = 4;
    pub const EXHAUSTED: i32 = 5;
    pub const QUOTA: i32 = 7;
}

/// Owner uids used by the `populated` fixture.
pub mod uid {
    /// Holds `VirtualMachine/web-01/0` in acme/prod and acme/dev, `web-01/1` in acme/prod.
    pub const WEB01: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
    /// Holds `VirtualMachine/web-02/0` in acme/prod.
    pub const WEB02: &str = "6b3a1c9e-0d4f-4c1b-9f0e-2a7d5c8e1f30";
    /// Holds `FloatingIP/fip-1` in the public pool.
    pub const FIP1: &str = "a1b2c3d4-0000-4000-8000-000000000003";
    /// The VPC owning `vpc-main`; holds `VPC/router` in the public pool.
    pub const VPC: &str = "7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10";
}

/// `testdata/<case>`.
pub fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(case)
}

/// The seed example manifests of the issue, as shipped.
pub fn demo_pools() -> PathBuf {
    fixture("demo").join("pools.yaml")
}

/// Copies the files of a fixture state directory (fixtures hold no lock or index files).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for entry in std::fs::read_dir(from).expect("read the fixture directory") {
        let entry = entry.expect("read a fixture entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

/// Is any component of `rel` a dot-name (a lock, the index, a temporary file, the marker)?
fn is_dot_path(rel: &Path) -> bool {
    rel.components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in read {
        let entry = entry.expect("read a state entry");
        let path = entry.path();
        let rel = path.strip_prefix(root).expect("under the root").to_owned();
        if is_dot_path(&rel) {
            continue;
        }
        if entry.file_type().expect("file type").is_dir() {
            walk(root, &path, out);
        } else {
            out.push(rel);
        }
    }
}

/// The manifest files of a state directory (no dot-files), sorted, as `/`-separated paths.
pub fn files_of(state: &Path) -> Vec<String> {
    let mut files = Vec::new();
    walk(state, state, &mut files);
    let mut files: Vec<String> = files
        .iter()
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .collect();
    files.sort();
    files
}

/// Every manifest file of a state directory with its contents, sorted by path: equal
/// snapshots mean nothing a reviewer would see in git has changed.
pub fn snapshot_of(state: &Path) -> String {
    let mut text = String::new();
    for file in files_of(state) {
        let contents = std::fs::read_to_string(state.join(&file)).expect("read a state file");
        writeln!(text, "== {file}").expect("write to a String");
        text.push_str(&contents);
    }
    text
}

/// Temporary files (`.tmp-*`) anywhere under `dir`: a finished command leaves none.
pub fn temp_files_in(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in read {
            let entry = entry.expect("read a state entry");
            if entry.file_type().expect("file type").is_dir() {
                stack.push(entry.path());
            } else if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                found.push(entry.path());
            }
        }
    }
    found
}

/// Asserts `stderr` is one `error: ` line, optionally followed by `hint: ` lines.
#[track_caller]
pub fn assert_one_error(stderr: &str) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.first().is_some_and(|l| l.starts_with("error: ")),
        "stderr must start with one `error:` line:\n{stderr}"
    );
    assert!(
        lines[1..].iter().all(|l| l.starts_with("hint: ")),
        "only `hint:` lines may follow the `error:` line:\n{stderr}"
    );
}

/// Do the tests run their commands on PostgreSQL (`IPAMCTL_TEST_STORE=postgres`)?
pub fn on_postgres() -> bool {
    std::env::var("IPAMCTL_TEST_STORE").is_ok_and(|v| v == "postgres")
}

/// A state directory in a temporary directory, and the next command to run on it with what
/// that command must do.
pub struct Test {
    tmp: tempfile::TempDir,
    next: Next,
    /// Runs on the state directory even with `IPAMCTL_TEST_STORE=postgres`.
    file_store_only: bool,
}

/// The next command and its expectations; the default is no arguments, `-d state`, and
/// exit status 0.
#[derive(Default)]
struct Next {
    args: Vec<OsString>,
    stdin: Option<String>,
    envs: Vec<(OsString, OsString)>,
    current_dir: PathBuf,
    no_state_flag: bool,
    stdout: Option<String>,
    stderr: Option<String>,
    status: i32,
    error: bool,
    unchanged: bool,
}

impl Test {
    /// A copy of `testdata/<case>/` at `<tmp>/state`.
    pub fn new(case: &str) -> Test {
        let test = Test::without_state();
        let source = fixture(case);
        assert!(
            source.join(".ipamctl").is_file(),
            "{} is not a fixture state directory",
            source.display()
        );
        copy_tree(&source, &test.state());
        test
    }

    /// An empty temporary directory: `<tmp>/state` does not exist.
    pub fn without_state() -> Test {
        Test {
            tmp: tempfile::Builder::new()
                .prefix("ipamctl-test-")
                .tempdir()
                .expect("create a temporary directory"),
            next: Next::default(),
            file_store_only: false,
        }
    }

    /// This test is about the state directory itself (broken or planted files, the marker,
    /// `-d` and its environment variable): it runs on the file store under
    /// `IPAMCTL_TEST_STORE=postgres` too, since a database cannot hold what it tests.
    pub fn file_store_only(mut self) -> Test {
        self.file_store_only = true;
        self
    }

    /// The arguments (after the implicit `-d state`).
    pub fn args<I, S>(mut self, args: I) -> Test
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.next
            .args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Test {
        self.next.args.push(arg.as_ref().to_owned());
        self
    }

    /// Feeds `text` on stdin.
    pub fn stdin(mut self, text: &str) -> Test {
        self.next.stdin = Some(text.to_owned());
        self
    }

    /// Sets an environment variable (the test's own `IPAMCTL_STATE_DIR` is always removed).
    pub fn env(mut self, key: &str, value: &str) -> Test {
        self.next.envs.push((key.into(), value.into()));
        self
    }

    /// Runs in `<tmp>/<dir>` instead of `<tmp>`, without the implicit `-d state`.
    pub fn current_dir(mut self, dir: &str) -> Test {
        self.next.current_dir = PathBuf::from(dir);
        self.next.no_state_flag = true;
        self
    }

    /// Leaves out the implicit `-d state` (state directory from the environment, discovery,
    /// or an explicit `-d` among the arguments).
    pub fn no_state_flag(mut self) -> Test {
        self.next.no_state_flag = true;
        self
    }

    /// Stdout must be exactly `text`.
    pub fn stdout(mut self, text: &str) -> Test {
        self.next.stdout = Some(text.to_owned());
        self
    }

    /// Stderr must be exactly `text`.
    pub fn stderr(mut self, text: &str) -> Test {
        self.next.stderr = Some(text.to_owned());
        self
    }

    /// The exit status must be `code` (0 unless said otherwise).
    pub fn status(mut self, code: i32) -> Test {
        self.next.status = code;
        self
    }

    /// The command must fail with `code`, print nothing on stdout, print one `error:` line
    /// (plus `hint:` lines) on stderr and leave the state directory exactly as it was.
    pub fn fails(mut self, code: i32) -> Test {
        self.next.status = code;
        self.next.error = true;
        self.next.stdout.get_or_insert_with(String::new);
        self
    }

    /// The state directory must be exactly as it was before the command (a success that has
    /// nothing to do, or a dry run).
    pub fn unchanged(mut self) -> Test {
        self.next.unchanged = true;
        self
    }

    /// The temporary directory (the command's working directory by default).
    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    /// The state directory, `<tmp>/state`.
    pub fn state(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    /// A path inside the state directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.state().join(rel)
    }

    /// Reads a file of the state directory.
    #[track_caller]
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel))
            .unwrap_or_else(|e| panic!("read state file {rel}: {e}"))
    }

    /// Does this file of the state directory exist?
    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// Writes a file in the state directory (creating its directory).
    pub fn write(&self, rel: &str, contents: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("state files have a parent"))
            .expect("create the directory");
        std::fs::write(path, contents).expect("write a state file");
    }

    /// Removes a file of the state directory.
    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.path(rel)).expect("remove a state file");
    }

    /// Writes an input file (e.g. for `apply -f`) at `<tmp>/<name>`; returns `name`.
    pub fn input(&self, name: &str, contents: &str) -> String {
        std::fs::write(self.root().join(name), contents).expect("write an input file");
        name.to_owned()
    }

    /// The manifest files of the state directory, sorted.
    pub fn files(&self) -> Vec<String> {
        files_of(&self.state())
    }

    /// Every manifest file with its contents (see [`snapshot_of`]).
    pub fn snapshot(&self) -> String {
        snapshot_of(&self.state())
    }

    /// A `Command` for the binary on this state directory, in the working directory and with
    /// the `-d` of the next command, but without its expectations (for tests that spawn
    /// processes themselves). The environment's own `IPAMCTL_STATE_DIR` and backtrace
    /// settings are removed.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(self.root().join(&self.next.current_dir))
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE");
        if !self.next.no_state_flag {
            // Relative to `<tmp>`, so that messages naming the state directory read `state/...`.
            cmd.arg("-d").arg("state");
        }
        cmd.args(args);
        cmd
    }

    /// Replaces every spelling of the temporary directory's path by `[TMP]`, and the
    /// claim times of allocations by `[TIME]` (see [`redact_time`]).
    fn scrub(&self, text: &str) -> String {
        let mut text = redact_time(text);
        let mut roots = vec![self.root().to_path_buf()];
        if let Ok(canonical) = self.root().canonicalize() {
            roots.push(canonical);
        }
        for root in roots {
            text = text.replace(&*root.to_string_lossy(), "[TMP]");
        }
        text
    }

    /// Loads the state directory into a fresh database (`IPAMCTL_TEST_STORE=postgres`).
    #[track_caller]
    fn load_into_database(&self) -> pg::Db {
        let db = pg::Db::new();
        let out = db.run([OsStr::new("import"), self.state().as_os_str()]);
        assert!(
            out.status.success(),
            "this state directory cannot be loaded into PostgreSQL: {}",
            pg::stderr(&out)
        );
        db
    }

    /// Replaces the state directory's manifests with what the database holds.
    #[track_caller]
    fn store_from_database(&self, db: &pg::Db) {
        // Every pool's count ledger (what `pool list` reports) agrees with its rows, after
        // every command of every suite: ipamctl's statements count themselves, and a path
        // that forgot to would show here.
        let drift = db.count(
            "SELECT count(*) FROM
                 (SELECT namespace, pool, sum(delta) AS n FROM ipamctl.pool_counts
                  GROUP BY namespace, pool HAVING sum(delta) <> 0) ledger
             FULL JOIN
                 (SELECT namespace, pool, count(*) AS n FROM ipamctl.allocations
                  GROUP BY namespace, pool) rows USING (namespace, pool)
             WHERE ledger.n IS DISTINCT FROM rows.n",
        );
        assert_eq!(
            drift, 0,
            "pools whose count ledger disagrees with their rows"
        );
        let out = self.root().join("exported");
        let ran = db.run([OsStr::new("export"), out.as_os_str()]);
        assert!(ran.status.success(), "export: {}", pg::stderr(&ran));
        for tree in ["cluster", "namespaces"] {
            let _ = std::fs::remove_dir_all(self.state().join(tree));
            if out.join(tree).is_dir() {
                copy_tree(&out.join(tree), &self.state().join(tree));
            }
        }
        std::fs::remove_dir_all(&out).expect("remove the export");
    }

    /// Runs the command and checks every expectation; returns the output and, through
    /// [`Ran::then`], the state directory for the next command.
    #[track_caller]
    pub fn run(mut self) -> Ran {
        let database = (on_postgres()
            && !self.file_store_only
            && !self.next.no_state_flag
            && self.state().join(".ipamctl").is_file())
        .then(|| self.load_into_database());
        // `IPAMCTL_TEST_STORE=server`: a fresh server on the state directory, for as long
        // as the command runs.
        let serving = (server::on_server()
            && !self.file_store_only
            && !self.next.no_state_flag
            && self.state().join(".ipamctl").is_file()
            && server::supported(&self.next.args))
        .then(|| server::Serving::start(&self.state()));
        let mut cmd = match &database {
            Some(db) => {
                let mut cmd = db.cmd(&self.next.args);
                cmd.current_dir(self.root().join(&self.next.current_dir))
                    .env_remove("RUST_BACKTRACE")
                    .env_remove("RUST_LIB_BACKTRACE")
                    .env_remove("NO_COLOR");
                cmd
            }
            None => match &serving {
                Some(serving) => {
                    let mut cmd = serving.command(&self.next.args);
                    cmd.current_dir(self.root().join(&self.next.current_dir))
                        .env_remove("RUST_BACKTRACE")
                        .env_remove("RUST_LIB_BACKTRACE");
                    cmd
                }
                None => self.command(&self.next.args),
            },
        };
        let next = std::mem::take(&mut self.next);
        let before = (next.error || next.unchanged).then(|| self.snapshot());
        cmd.stdin(if next.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        for (k, v) in &next.envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn ipamctl");
        if let Some(text) = &next.stdin {
            let mut stdin = child.stdin.take().expect("piped stdin");
            stdin.write_all(text.as_bytes()).expect("write stdin");
        }
        let output = child.wait_with_output().expect("wait for ipamctl");
        drop(serving);
        if let Some(db) = &database {
            self.store_from_database(db);
        }
        let status = output
            .status
            .code()
            .expect("ipamctl exits by itself, not by a signal");
        let stdout = self.scrub(&String::from_utf8_lossy(&output.stdout));
        let stderr = self.scrub(&String::from_utf8_lossy(&output.stderr));
        let shown = format!(
            "ipamctl {:?}\n--- status: {status}\n--- stdout:\n{stdout}--- stderr:\n{stderr}---",
            next.args
        );
        assert_eq!(status, next.status, "unexpected exit status\n{shown}");
        if let Some(expected) = &next.stdout {
            assert_eq!(&stdout, expected, "unexpected stdout\n{shown}");
        }
        if let Some(expected) = &next.stderr {
            assert_eq!(&stderr, expected, "unexpected stderr\n{shown}");
        }
        assert!(
            !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
            "ipamctl panicked\n{shown}"
        );
        assert_eq!(
            temp_files_in(&self.state()),
            Vec::<PathBuf>::new(),
            "temporary files left behind\n{shown}"
        );
        if next.error {
            assert_one_error(&stderr);
        }
        if let Some(before) = before {
            assert_eq!(
                self.snapshot(),
                before,
                "the state directory changed\n{shown}"
            );
        }
        // Every hint it printed is a command that works on the state it was printed for.
        hints::run_hinted(
            &hints::Context {
                root: self.root(),
                current_dir: &next.current_dir,
                state_flag: !next.no_state_flag,
                envs: &next.envs,
                args: &next.args,
            },
            &String::from_utf8_lossy(&output.stdout),
            &String::from_utf8_lossy(&output.stderr),
        );
        Ran {
            stdout,
            stderr,
            status,
            test: self,
        }
    }
}

/// `text` with the value of every `creationTimestamp` (an allocation's claim time, which is
/// the clock's: YAML `creationTimestamp: "…"` or JSON `"creationTimestamp": "…"`) replaced
/// by `[TIME]`, for snapshots. Only the 20 characters of an RFC 3339 UTC time are replaced,
/// so a malformed value shows.
pub fn redact_time(text: &str) -> String {
    // `deletionTimestamp`: a pool `vpc delete` or `pool delete` marked before removing it.
    redact_key(&redact_key(text, "creationTimestamp"), "deletionTimestamp")
}

/// [`redact_time`] of one key.
fn redact_key(text: &str, key: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let (head, tail) = rest.split_at(at + key.len());
        out.push_str(head);
        rest = tail;
        for sep in [": \"", "\": \""] {
            if let Some(value) = rest.strip_prefix(sep)
                && value.len() > 20
                && value.as_bytes()[20] == b'"'
                && value.as_bytes()[19] == b'Z'
            {
                out.push_str(sep);
                out.push_str("[TIME]");
                rest = &value[20..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What a command printed, and the state directory it ran on.
pub struct Ran {
    /// Stdout, with the temporary directory's path scrubbed.
    pub stdout: String,
    /// Stderr, likewise.
    pub stderr: String,
    /// The exit status.
    pub status: i32,
    test: Test,
}

impl Ran {
    /// The same state directory, ready for the next command (expectations reset).
    pub fn then(self) -> Test {
        self.test
    }
}

impl std::ops::Deref for Ran {
    type Target = Test;
    fn deref(&self) -> &Test {
        &self.test
    }
}

/// The items of a kubectl `List` document as `-o json` prints every list; panics (naming
/// what was printed) if `json` is anything else.
#[track_caller]
pub fn list_items(json: &str) -> Vec<serde_json::Value> {
    let value: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}):\n{json}"));
    assert_eq!(value["apiVersion"], "v1", "not a List:\n{json}");
    assert_eq!(value["kind"], "List", "not a List:\n{json}");
    value["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a List without items:\n{json}"))
        .clone()
}

/// Starts `cmd` with its output captured, for a test that runs processes at once and waits
/// for them afterwards (`wait_with_output`).
pub fn spawn_piped(mut cmd: Command) -> std::process::Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ipamctl")
}

/// Runs `promtool ARGS`, feeding it `stdin`; panics with its output unless it succeeds.
#[track_caller]
pub fn promtool(args: &[&str], stdin: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write to promtool");
    let out = child.wait_with_output().expect("wait for promtool");
    assert!(
        out.status.success(),
        "promtool {args:?} refused it:\n{}{}\n--- input:\n{stdin}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
