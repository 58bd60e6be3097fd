//! What the stress, kill and hostile tests share: a fresh state directory driven by real
//! `ipamctl` processes, many of them at once, and the invariants of `docs/src/guarantees.md`
//! checked from the files themselves (never through ipamctl's own reading code paths, only
//! its manifest parser).
//!
//! The invariants checked by [`Scan::violations`]:
//! 1. no two allocations hold the same address of a pool;
//! 2. one owner identity (kind, name, uid) holds at most one address per pool;
//! 3. every manifest under its final name parses, and its name and namespace agree with its
//!    path;
//! 6. every allocation lies among its pool's candidates, and its pool exists.

// Every test crate uses a different subset.
#![allow(dead_code)]

// A test binary may also include `tests/common`, which has them too.
#[allow(clippy::duplicate_mod)]
#[path = "../budget/mod.rs"]
pub mod budget;
#[allow(clippy::duplicate_mod)]
#[path = "../needs/mod.rs"]
pub mod needs;
pub mod outside;

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::net::IpAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use ipamctl::model::candidates::Candidates;
use ipamctl::model::{AllocationManifest, PoolManifest};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_ipamctl");

/// Exit codes, as README documents them.
pub mod code {
    pub const OK: i32 = 0;
    pub const FAILURE: i32 = 1;
    pub const INVALID: i32 = 2;
    pub const NOT_FOUND: i32 = 3;
    pub const CONFLICT: i32 = 4;
    pub const EXHAUSTED: i32 = 5;
}

/// `IPAMCTL_STRESS=long` asks for the long run.
pub fn long_run() -> bool {
    std::env::var("IPAMCTL_STRESS").is_ok_and(|v| v == "long")
}

/// A pool manifest; `excludes` may hold addresses or prefixes.
pub fn pool_yaml(name: &str, namespace: Option<&str>, cidr: &str, excludes: &[&str]) -> String {
    let kind = if namespace.is_some() {
        "private"
    } else {
        "public"
    };
    let mut text = format!("apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\n");
    if let Some(ns) = namespace {
        text.push_str(&format!("  namespace: {ns}\n"));
    }
    text.push_str(&format!("spec:\n  cidr: {cidr}\n  kind: {kind}\n"));
    if !excludes.is_empty() {
        text.push_str(&format!("  exclude: [{}]\n", excludes.join(", ")));
    }
    text
}

/// How one process ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The argument vector, for messages.
    pub args: Vec<String>,
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// A panic, or an exit by signal, is never acceptable from a process nobody killed.
    pub fn crashed(&self) -> bool {
        self.code.is_none() || self.stderr.contains("panicked")
    }

    /// One line describing the outcome, for violation messages.
    pub fn describe(&self) -> String {
        format!(
            "`ipamctl {}` exited {:?}; stdout {:?}; stderr {:?}",
            self.args.join(" "),
            self.code,
            self.stdout.trim(),
            self.stderr.trim()
        )
    }
}

/// A fresh, initialised state directory in a temporary directory of its own.
pub struct State {
    _tmp: tempfile::TempDir,
    /// The state directory (`<tmp>/state`).
    pub root: PathBuf,
    /// A directory next to the root, for things that must stay outside it.
    pub outside: PathBuf,
    /// `ipamctl` processes started on this state directory, for the summary line.
    spawned: AtomicUsize,
}

impl State {
    /// Runs `ipamctl init` on a new temporary directory.
    pub fn new() -> State {
        let tmp = tempfile::tempdir().expect("create a temporary directory");
        let root = tmp.path().join("state");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).expect("create the outside directory");
        let state = State {
            _tmp: tmp,
            root,
            outside,
            spawned: AtomicUsize::new(0),
        };
        let init = state.run(&["init", state.root.to_str().expect("UTF-8 temp path")]);
        assert_eq!(init.code, Some(code::OK), "{}", init.describe());
        state
    }

    /// `ipamctl -d ROOT ARGS...`, with stdout and stderr captured.
    pub fn command<S: AsRef<str>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("-d")
            .arg(&self.root)
            .args(args.iter().map(|a| a.as_ref()))
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("FAILPOINTS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Starts a process; the caller waits for it (or kills it).
    pub fn spawn<S: AsRef<str>>(&self, args: &[S]) -> Child {
        self.spawned.fetch_add(1, Ordering::Relaxed);
        self.command(args).spawn().expect("start ipamctl")
    }

    /// Runs a process to its end.
    pub fn run<S: AsRef<str>>(&self, args: &[S]) -> Outcome {
        self.run_stdin(args, None)
    }

    /// Runs a process to its end, feeding `stdin` if given.
    pub fn run_stdin<S: AsRef<str>>(&self, args: &[S], stdin: Option<&[u8]>) -> Outcome {
        self.spawned.fetch_add(1, Ordering::Relaxed);
        let mut cmd = self.command(args);
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().expect("start ipamctl");
        if let Some(bytes) = stdin {
            let mut pipe = child.stdin.take().expect("piped stdin");
            // The process may refuse the input before reading all of it (a closed pipe).
            let _ = pipe.write_all(bytes);
        }
        finish(args, child)
    }

    /// `apply -f -` with `yaml` on stdin.
    pub fn apply(&self, yaml: &str) -> Outcome {
        self.run_stdin(&["apply", "-f", "-"], Some(yaml.as_bytes()))
    }

    /// Runs every argument vector as its own process, all released at once from a barrier,
    /// and returns the outcomes in the same order.
    pub fn run_all(&self, argvs: &[Vec<String>]) -> Vec<Outcome> {
        self.run_all_by(argvs, |argv| self.run(argv))
    }

    /// [`State::run_all`], each process run by `run` (which may run it again).
    pub fn run_all_by(
        &self,
        argvs: &[Vec<String>],
        run: impl Fn(&[String]) -> Outcome + Sync,
    ) -> Vec<Outcome> {
        let gate = Arc::new(Barrier::new(argvs.len()));
        let run = &run;
        thread::scope(|s| {
            let handles: Vec<_> = argvs
                .iter()
                .map(|argv| {
                    let gate = Arc::clone(&gate);
                    s.spawn(move || {
                        gate.wait();
                        run(argv)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a runner thread panicked"))
                .collect()
        })
    }

    /// How many `ipamctl` processes were started on this state directory.
    pub fn spawned(&self) -> usize {
        self.spawned.load(Ordering::Relaxed)
    }

    /// Reads every file of the state directory and checks it.
    pub fn scan(&self) -> Scan {
        Scan::of(&self.root)
    }

    /// Is `ipamctl check` in this build?
    pub fn has_check(&self) -> bool {
        self.run(&["check", "--help"]).code == Some(code::OK)
    }
}

/// Waits for a child and collects its output.
pub fn finish<S: AsRef<str>>(args: &[S], child: Child) -> Outcome {
    let out = child.wait_with_output().expect("wait for ipamctl");
    Outcome {
        args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
        code: out.status.code(),
        signal: out.status.signal(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `None` for the cluster scope, else the namespace.
pub type Scope = Option<String>;

/// An allocation as found on disk.
#[derive(Debug, Clone)]
pub struct Found {
    /// Relative to the root.
    pub path: PathBuf,
    pub scope: Scope,
    pub manifest: AllocationManifest,
}

/// Everything read from a state directory, and what was wrong with it.
#[derive(Debug, Default)]
pub struct Scan {
    /// Pools by (scope, name).
    pub pools: BTreeMap<(Scope, String), PoolManifest>,
    /// Every allocation that parsed.
    pub allocations: Vec<Found>,
    /// Leftover temporary files (`.tmp-*`), relative to the root.
    pub temp_files: Vec<PathBuf>,
    /// Invariant 3: files that do not parse or disagree with their path.
    problems: Vec<String>,
}

impl Scan {
    /// Reads the whole state directory under `root`. Follows no symlink.
    pub fn of(root: &Path) -> Scan {
        let mut scan = Scan::default();
        scan.walk(root, root);
        scan
    }

    fn walk(&mut self, root: &Path, dir: &Path) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in read.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).expect("under the root").to_owned();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if name.starts_with(".tmp-") {
                self.temp_files.push(rel);
            } else if name.starts_with('.') || kind.is_symlink() {
                // Locks, the derived index, the marker.
            } else if kind.is_dir() {
                self.walk(root, &path);
            } else if let Some(stem) = name.strip_suffix(".yaml") {
                self.read_manifest(&path, &rel, stem);
            }
        }
    }

    fn read_manifest(&mut self, path: &Path, rel: &Path, stem: &str) {
        let parts: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let (kind_dir, scope_parts) = match parts.as_slice() {
            [scope @ .., kind, _file] => (kind.as_str(), scope),
            _ => return,
        };
        let scope = match scope_parts {
            [c] if c == "cluster" => None,
            [n, rest @ ..] if n == "namespaces" && !rest.is_empty() => Some(rest.join("/")),
            _ => return, // not a place the layout has (`pools.yaml` copied in, say)
        };
        let text = match std::fs::read(path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                self.problems
                    .push(format!("{}: unreadable: {e}", rel.display()));
                return;
            }
        };
        let mut problem = |why: String| self.problems.push(format!("{}: {why}", rel.display()));
        match kind_dir {
            "ipampools" => match ipamctl::yaml::decode_pool(&text) {
                Ok(pool) => {
                    let ns = pool.metadata.namespace.as_ref().map(|n| n.to_string());
                    if pool.metadata.name != stem || ns != scope {
                        problem(format!(
                            "pool `{}` in namespace {ns:?} does not belong at this path",
                            pool.metadata.name
                        ));
                    }
                    self.pools.insert((scope, stem.to_owned()), pool);
                }
                Err(e) => problem(format!("does not parse: {e}")),
            },
            "ipallocations" => match ipamctl::yaml::decode_allocation(&text) {
                Ok(manifest) => {
                    let ns = manifest.metadata.namespace.as_ref().map(|n| n.to_string());
                    if manifest.metadata.name != stem || ns != scope {
                        problem(format!(
                            "allocation `{}` in namespace {ns:?} does not belong at this path",
                            manifest.metadata.name
                        ));
                    }
                    self.allocations.push(Found {
                        path: rel.to_owned(),
                        scope,
                        manifest,
                    });
                }
                Err(e) => problem(format!("does not parse: {e}")),
            },
            _ => {}
        }
    }

    /// Every allocation with a MAC whose record (`<scope>/macs/<pool>-<12 hex digits>`,
    /// under `root`) is missing or names another address: none, whatever was killed (the
    /// record is made before the allocation), unless a record was deleted from outside.
    pub fn mac_records_astray(&self, root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for found in &self.allocations {
            let spec = &found.manifest.spec;
            let Some(mac) = spec.mac.as_ref() else {
                continue;
            };
            let hex: String = mac.to_string().split(':').collect();
            let scope_dir = found
                .path
                .parent()
                .and_then(Path::parent)
                .expect("<scope>/ipallocations/<file>");
            let record = scope_dir.join("macs").join(format!("{}-{hex}", spec.pool));
            match std::fs::read_to_string(root.join(&record)) {
                // `<address>\n<owner>\n` (an older version's: the address alone).
                Ok(text) if text.lines().next() == Some(spec.address.to_string().as_str()) => {}
                Ok(text) => out.push(format!(
                    "{} holds MAC {mac} at {}, but {} names {}",
                    found.path.display(),
                    spec.address,
                    record.display(),
                    text.trim()
                )),
                Err(e) => out.push(format!(
                    "{} holds MAC {mac}, but {}: {e}",
                    found.path.display(),
                    record.display()
                )),
            }
        }
        out
    }

    /// Every broken invariant (1, 2, 3, 6), one message each.
    pub fn violations(&self) -> Vec<String> {
        let mut out = self.problems.clone();
        let mut by_address: HashMap<(Scope, String, IpAddr), &Found> = HashMap::new();
        for found in &self.allocations {
            let spec = &found.manifest.spec;
            let key = (found.scope.clone(), spec.pool.to_string(), spec.address);
            if let Some(first) = by_address.insert(key, found) {
                out.push(format!(
                    "invariant 1: {} and {} both hold {}",
                    first.path.display(),
                    found.path.display(),
                    spec.address
                ));
            }
            match self.pools.get(&(found.scope.clone(), spec.pool.to_string())) {
                None => out.push(format!(
                    "invariant 6: {} belongs to pool `{}`, which does not exist",
                    found.path.display(),
                    spec.pool
                )),
                Some(pool) if !Candidates::of_pool(&pool.spec).contains(spec.address) => out
                    .push(format!(
                        "invariant 6: {} holds {}, which is not a candidate of pool `{}` ({}, exclude {:?})",
                        found.path.display(),
                        spec.address,
                        spec.pool,
                        pool.spec.cidr,
                        pool.spec.exclude
                    )),
                Some(_) => {}
            }
        }
        // A MAC names one NIC per pool (`store/fs/macs.rs`).
        let mut by_mac: HashMap<(Scope, String, String), &Found> = HashMap::new();
        for found in &self.allocations {
            let spec = &found.manifest.spec;
            let Some(mac) = spec.mac.as_ref() else {
                continue;
            };
            let key = (found.scope.clone(), spec.pool.to_string(), mac.to_string());
            if let Some(first) = by_mac.insert(key, found) {
                out.push(format!(
                    "MAC {mac}: {} and {} both hold it",
                    first.path.display(),
                    found.path.display()
                ));
            }
        }
        for ((scope, pool, owner), addrs) in self.holdings() {
            if addrs.len() > 1 {
                out.push(format!(
                    "invariant 2: owner {owner} (uid {:?}) holds {addrs:?} in pool `{pool}` of scope {scope:?}",
                    owner.uid().map(|u| u.to_string())
                ));
            }
        }
        out
    }

    /// What each owner identity holds, per (scope, pool), addresses ascending.
    pub fn holdings(&self) -> BTreeMap<(Scope, String, ipamctl::model::Owner), Vec<IpAddr>> {
        let mut map: BTreeMap<_, Vec<IpAddr>> = BTreeMap::new();
        for found in &self.allocations {
            let spec = &found.manifest.spec;
            map.entry((
                found.scope.clone(),
                spec.pool.to_string(),
                spec.owner.clone(),
            ))
            .or_default()
            .push(spec.address);
        }
        for addrs in map.values_mut() {
            addrs.sort();
        }
        map
    }

    /// The addresses held in `pool` of `scope` (`None`: the cluster) by the owner `KIND/NAME`
    /// with `uid`, ascending.
    pub fn held_by(
        &self,
        scope: Option<&str>,
        pool: &str,
        owner: &str,
        uid: Option<&str>,
    ) -> Vec<IpAddr> {
        let mut addrs: Vec<IpAddr> = self
            .allocations
            .iter()
            .filter(|f| f.scope.as_deref() == scope && f.manifest.spec.pool.as_str() == pool)
            .filter(|f| {
                let o = &f.manifest.spec.owner;
                o.to_string() == owner && o.uid().map(|u| u.as_str()) == uid
            })
            .map(|f| f.manifest.spec.address)
            .collect();
        addrs.sort();
        addrs
    }
}

/// xorshift64*: small, seedable, good enough to pick delays and operations.
pub struct Rng(u64);

impl Rng {
    /// Seeded from `IPAMCTL_SEED` if set (to replay a run), else from the clock.
    pub fn from_env_or_time() -> Rng {
        let seed = std::env::var("IPAMCTL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0x9e37_79b9_7f4a_7c15)
            });
        Rng::new(seed)
    }

    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The seed this generator would replay with (`IPAMCTL_SEED=<it>`).
    pub fn seed(&self) -> u64 {
        self.0
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0), near enough.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
