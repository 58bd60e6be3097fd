//! The outside world, running beside ipamctl: real tools in loops on background threads
//! while a stress or kill test runs, on a state directory that is a git working tree.
//!
//! - `git clean -qfdX` deletes the git-ignored owner index, owner hints and temporary files
//!   at any instant;
//! - `git pull --ff-only` brings in commits of a second clone that add, remove, move, hand
//!   over and re-create allocations of the world's own owners (`FloatingIP/world-<j>`), in
//!   the test's pools but only at addresses ([`Slots`]) the test's processes never claim;
//! - `cp` copies an allocation file over itself from a snapshot (the same bytes, so the same
//!   owner), in place, and `touch -c` restamps allocation files, so their status changes all
//!   the time. Only files the test declares stable (never released while the world runs) are
//!   copied; a [`World::focus`] owner's file is copied in a tight loop.
//!
//! No change of the world gives an owner a second address or an address a second holder,
//! so the invariants of [`super::Scan::violations`] must hold whenever the loops are paused
//! ([`World::quiet`]), and an owner of the world that asks ipamctl once the loops have
//! stopped must get the address git gave it ([`World::finish`]).
//!
//! - the second adversary (issue 20): `pv -qL` rewrites a stable file in place with its own
//!   bytes, slowly, so readers meet prefixes that parse as other owners (`slow`); a world
//!   file is replaced as `git checkout` replaces a relabelled file, by unlink then an
//!   exclusive create, and back (`relabel`); a world file is removed by `rm` and
//!   made again by `cp` (`rmcp`); and `rsync -a` syncs a second clone's marker and
//!   `.gitignore` (same bytes, other mtimes) over the state, replacing `.ipamctl` with a new
//!   inode while locks are held (`rsync`).
//!
//! To tell causes apart when a run fails, `IPAMCTL_WORLD_SKIP=cp,touch,clean,pull` (any of
//! them, and `slow,relabel,rmcp,rsync`) leaves those loops out.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ipamctl::model::{AllocationManifest, Namespace, Owner, PoolName, Uid};

use super::{Outcome, Rng, State, code};

/// Addresses of one pool that belong to the world: the test's processes never claim them
/// (a `--within` range, or a pool too large for them to get this far), and the world's
/// commits only ever put allocations there.
#[derive(Clone, Debug)]
pub struct Slots {
    pub namespace: Option<&'static str>,
    pub pool: &'static str,
    pub addresses: Vec<IpAddr>,
}

impl Slots {
    /// Every address from `first` to `last`, inclusive.
    pub fn range(
        namespace: Option<&'static str>,
        pool: &'static str,
        first: &str,
        last: &str,
    ) -> Slots {
        let first: Ipv4Addr = first.parse().expect("an address");
        let last: Ipv4Addr = last.parse().expect("an address");
        Slots {
            namespace,
            pool,
            addresses: (u32::from(first)..=u32::from(last))
                .map(|a| IpAddr::V4(Ipv4Addr::from(a)))
                .collect(),
        }
    }

    /// The allocations directory of the pool's scope, relative to the root.
    fn dir(&self) -> PathBuf {
        scope_dir(self.namespace)
    }
}

/// `cluster/ipallocations` or `namespaces/<segments>/ipallocations`.
pub fn scope_dir(namespace: Option<&str>) -> PathBuf {
    let mut dir = PathBuf::new();
    match namespace {
        None => dir.push("cluster"),
        Some(ns) => {
            dir.push("namespaces");
            dir.extend(ns.split('/'));
        }
    }
    dir.push("ipallocations");
    dir
}

/// What the world does.
pub struct Config {
    /// Where the second clone's commits put the world's allocations.
    pub slots: Vec<Slots>,
    /// Allocation files of owners for which this holds are never released or replaced while
    /// the world runs: `cp` may copy them over themselves.
    pub stable: fn(&AllocationManifest) -> bool,
}

/// How often each loop ran, and what the test's processes met.
#[derive(Default)]
struct Counts {
    cleans: AtomicUsize,
    cleans_failed: AtomicUsize,
    commits: AtomicUsize,
    pulls: AtomicUsize,
    pulls_failed: AtomicUsize,
    cps: AtomicUsize,
    focus_cps: AtomicUsize,
    touches: AtomicUsize,
    slow_rewrites: AtomicUsize,
    relabels: AtomicUsize,
    rm_cps: AtomicUsize,
    rsyncs: AtomicUsize,
    /// ipamctl processes that failed with a transient I/O error (exit 1).
    transient: AtomicUsize,
    /// ipamctl processes that warned about an allocation file they could not parse.
    warned: AtomicUsize,
}

/// A file the `cp` loop may copy over itself, with the bytes it must hold.
#[derive(Clone)]
struct Stable {
    rel: PathBuf,
    snapshot: PathBuf,
}

/// The owner whose file the `cp` loop copies over itself in a tight loop.
#[derive(Clone)]
struct Focus {
    dir: PathBuf,
    owner: String,
    uid: Option<String>,
    found: Option<Stable>,
}

struct Shared {
    root: PathBuf,
    clone: PathBuf,
    snapshots: PathBuf,
    config: Config,
    stop: AtomicBool,
    /// Every loop holds it (read) for one iteration; [`World::quiet`] takes it (write).
    all: RwLock<()>,
    /// The `cp` loop holds it (read) for one iteration; [`World::steady`] takes it (write).
    copies: RwLock<()>,
    focus: Mutex<Option<Focus>>,
    /// Held by `git pull` and by the `rm` + `cp` of a world file, which must not bring back
    /// a file the pull just moved.
    world_files: Mutex<()>,
    counts: Counts,
    /// The last events, with their wall-clock time, for the report of a failure.
    log: Mutex<VecDeque<String>>,
    /// The first few failures of git and transient ipamctl errors, for the summary.
    samples: Mutex<Vec<String>>,
}

/// The loops, running until [`World::finish`].
pub struct World {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    seed: u64,
}

/// One of the loops, run on a thread of its own until the world stops.
type Loop = fn(&Shared, Rng);

/// How many times [`World::retry`] runs a process again.
pub const RETRIES: usize = 20;

/// How many events the log keeps.
const LOG_EVENTS: usize = 50_000;

impl World {
    /// Makes the state directory a git working tree with everything in it committed, clones
    /// it beside the root, and starts the loops. Needs `pv` and `rsync` (a test that starts
    /// the world carries `#[cfg_attr(not(all(has_pv, has_rsync)), ignore = …)]`): without
    /// them it fails at once, since `sh -c 'pv … > FILE'` would leave FILE empty for good and
    /// every claim beside it would wait out its timeout.
    pub fn start(state: &State, config: Config) -> World {
        let skip = std::env::var("IPAMCTL_WORLD_SKIP").unwrap_or_default();
        let skipped = |name: &str| skip.split(',').any(|s| s.trim() == name);
        if !skipped("slow") {
            super::needs::require("pv");
        }
        if !skipped("rsync") {
            super::needs::require("rsync");
        }
        let root = state.root.clone();
        let clone = state.outside.join("world-clone");
        let snapshots = state.outside.join("world-snapshots");
        std::fs::create_dir_all(&snapshots).expect("create the snapshot directory");
        let mut rng = Rng::from_env_or_time();
        let seed = rng.seed();
        // A quarter of the slots held from the first commit on, so that every allocations
        // directory the world shares holds a tracked file: `git clean -dX` removes an
        // untracked directory whose entries are all ignored *as a whole*, with whatever
        // lands in it meanwhile (a claim just renamed into place), which is a deletion by
        // the world, not a change ipamctl could answer for.
        let mut holdings: Vec<Holdings> = config.slots.iter().cloned().map(Holdings::new).collect();
        for pool in &mut holdings {
            for _ in 0..pool.slots.addresses.len().div_ceil(4) {
                let (Some(a), Some(o)) = (pool.free_slot(&mut rng), pool.idle_owner(&mut rng))
                else {
                    break;
                };
                pool.give(&root, a, o);
            }
        }
        git_ok(&root, &["init", "-q"]);
        git_ok(&root, &["add", "-A"]);
        git_ok(&root, &["commit", "-qm", "pools"]);
        git_ok(
            &state.outside,
            &[
                "clone",
                "-q",
                root.to_str().expect("UTF-8 path"),
                "world-clone",
            ],
        );
        let shared = Arc::new(Shared {
            root,
            clone,
            snapshots,
            config,
            stop: AtomicBool::new(false),
            all: RwLock::new(()),
            copies: RwLock::new(()),
            focus: Mutex::new(None),
            world_files: Mutex::new(()),
            counts: Counts::default(),
            log: Mutex::new(VecDeque::new()),
            samples: Mutex::new(Vec::new()),
        });
        let mut threads = Vec::new();
        let loops: [(&str, Loop); 7] = [
            ("clean", clean_loop),
            ("cp", cp_loop),
            ("touch", touch_loop),
            ("slow", slow_loop),
            ("relabel", relabel_loop),
            ("rmcp", rm_cp_loop),
            ("rsync", rsync_loop),
        ];
        for (name, one) in loops {
            let shared = Arc::clone(&shared);
            let rng = Rng::new(rng.next());
            if !skipped(name) {
                threads.push(thread::spawn(move || one(&shared, rng)));
            }
        }
        if !skipped("pull") {
            let shared = Arc::clone(&shared);
            let rng = Rng::new(rng.next());
            threads.push(thread::spawn(move || pull_loop(&shared, rng, holdings)));
        }
        World {
            shared,
            threads,
            seed,
        }
    }

    /// The seed of the world's choices (`IPAMCTL_SEED=<it>` replays them, as far as timing
    /// allows).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Runs `f` with every loop paused (in-flight iterations finish first): the files are
    /// then as the last completed `git pull` and `cp` left them.
    pub fn quiet<T>(&self, f: impl FnOnce() -> T) -> T {
        let _paused = self.shared.all.write().unwrap_or_else(|e| e.into_inner());
        f()
    }

    /// Runs `f` with the `cp` loop paused: the only loop that writes into a file the test's
    /// owners hold, so their files read whole meanwhile.
    pub fn steady<T>(&self, f: impl FnOnce() -> T) -> T {
        let _paused = self
            .shared
            .copies
            .write()
            .unwrap_or_else(|e| e.into_inner());
        f()
    }

    /// From now on the `cp` loop copies the file of `owner` (with `uid`) in `namespace`'s
    /// allocations over itself in a tight loop, once that file exists and while its owner
    /// is stable (see [`Config::stable`]).
    pub fn focus(&self, namespace: Option<&str>, owner: &str, uid: Option<&str>) {
        *self.shared.focus.lock().unwrap_or_else(|e| e.into_inner()) = Some(Focus {
            dir: scope_dir(namespace),
            owner: owner.to_owned(),
            uid: uid.map(str::to_owned),
            found: None,
        });
    }

    /// Notes an event of the test in the world's log.
    pub fn note(&self, event: impl AsRef<str>) {
        self.shared.note(event.as_ref());
    }

    /// Is `out` a failure the outside world may cause? Exit 1 with one `error:` line saying
    /// that temporary files kept vanishing (`git clean` deleted each one ipamctl wrote
    /// before its rename), or that a file vanished. Counts it, and counts every process
    /// that warned about an allocation file it could not parse (one `cp` or `git` was
    /// writing).
    pub fn transient(&self, out: &Outcome) -> bool {
        if out.stderr.contains("warning: ") {
            self.shared.counts.warned.fetch_add(1, Ordering::Relaxed);
        }
        let lines: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| !l.starts_with("warning: "))
            .collect();
        let transient = out.code == Some(code::FAILURE)
            && !out.crashed()
            && lines.len() == 1
            && lines[0].starts_with("error: ")
            && (lines[0].contains("temporary files keep vanishing")
                || lines[0].contains("No such file or directory")
                // A file the slow writers kept changing past a claim's or release's wait.
                || lines[0].contains("try again"));
        if transient {
            self.shared.counts.transient.fetch_add(1, Ordering::Relaxed);
            self.shared.sample(format!("transient: {}", out.describe()));
            self.shared.note(&format!("transient: {}", out.describe()));
        }
        transient
    }

    /// Runs `argv` on `state`, again while it fails transiently (see [`World::retry`]).
    pub fn run(&self, state: &State, argv: &[String]) -> Outcome {
        self.retry(|| state.run(argv))
    }

    /// Runs `f`, again (up to [`RETRIES`] times) while it fails transiently: with
    /// `git clean` in a tight loop, a run fails that way often enough for a few in a row.
    pub fn retry(&self, f: impl Fn() -> Outcome) -> Outcome {
        let mut out = f();
        for _ in 0..RETRIES {
            if !self.transient(&out) {
                break;
            }
            out = f();
        }
        out
    }

    /// Stops the loops, pulls the clone's last commit, and asks ipamctl for every owner of
    /// the world that holds an address in the files: each must get that address back (the
    /// owner index must have seen every change git made). Returns the violations and prints
    /// the summary line.
    pub fn finish(&mut self, state: &State) -> (Vec<String>, String) {
        self.stop();
        let mut violations = Vec::new();
        let pulled = git(&self.shared.root, &pull_args(&self.shared.clone));
        if !pulled.status.success() {
            violations.push(format!(
                "world: the last `git pull` failed: {}",
                String::from_utf8_lossy(&pulled.stderr).trim()
            ));
        }
        let scan = state.scan();
        let mut asked = 0;
        for slots in &self.shared.config.slots {
            for ((scope, pool, owner), addrs) in scan.holdings() {
                if scope.as_deref() != slots.namespace
                    || pool != slots.pool
                    || !owner.name().starts_with("world-")
                {
                    continue;
                }
                let mut argv: Vec<String> = Vec::new();
                if let Some(ns) = slots.namespace {
                    argv.extend(["-n".into(), ns.into()]);
                }
                argv.extend(["allocate".into(), pool.clone(), "--owner".into()]);
                argv.push(owner.to_string());
                if let Some(uid) = owner.uid() {
                    argv.extend(["--uid".into(), uid.to_string()]);
                }
                let out = state.run(&argv);
                asked += 1;
                let got: Option<IpAddr> = out.stdout.trim().parse().ok();
                if out.code != Some(code::OK) || got.is_none() || addrs != [got.unwrap()] {
                    violations.push(format!(
                        "world: {owner} holds {addrs:?} after the last pull; asking for it: {}",
                        out.describe()
                    ));
                }
            }
        }
        let c = &self.shared.counts;
        let n = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        let skipped = std::env::var("IPAMCTL_WORLD_SKIP").unwrap_or_default();
        let summary = format!(
            "world{}: seed {}; {} git clean ({} failed), {} git pull ({} failed) of {} commits, {} cp ({} of \
             the focus owner's file), {} touch, {} slow in-place rewrites, {} relabelling \
             replacements, {} rm + cp, {} rsync -a; ipamctl: {} transient exit 1, {} warned \
             about a torn file; {asked} world owners asked at the end",
            if skipped.is_empty() {
                String::new()
            } else {
                format!(" (without {skipped})")
            },
            self.seed,
            n(&c.cleans),
            n(&c.cleans_failed),
            n(&c.pulls),
            n(&c.pulls_failed),
            n(&c.commits),
            n(&c.cps) + n(&c.focus_cps),
            n(&c.focus_cps),
            n(&c.touches),
            n(&c.slow_rewrites),
            n(&c.relabels),
            n(&c.rm_cps),
            n(&c.rsyncs),
            n(&c.transient),
            n(&c.warned),
        );
        (violations, summary)
    }

    /// The first few transient failures and failed git commands, one per line, each
    /// line starting with a newline (empty when there were none).
    pub fn examples(&self) -> String {
        let samples = self
            .shared
            .samples
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        samples.iter().map(|s| format!("\n  e.g. {s}")).collect()
    }

    /// Copies the state directory (its `.git`, index and hints too), the clone and the
    /// world's log to a new directory under `/tmp` that outlives the test, and returns it.
    pub fn preserve(&self, state: &State, label: &str) -> PathBuf {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let keep = PathBuf::from(format!(
            "/tmp/ipamctl-{label}-{stamp}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&keep).expect("create the directory to keep");
        let _ = Command::new("cp")
            .arg("-a")
            .arg(&state.root)
            .arg(&self.shared.clone)
            .arg(&keep)
            .status();
        let log = self.shared.log.lock().unwrap_or_else(|e| e.into_inner());
        let text: String = log.iter().map(|l| format!("{l}\n")).collect();
        let _ = std::fs::write(keep.join("world.log"), text);
        keep
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            t.join().expect("a world loop panicked");
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::SeqCst)
    }

    fn note(&self, event: &str) {
        let ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() == LOG_EVENTS {
            log.pop_front();
        }
        log.push_back(format!(
            "{}.{:09} {event}",
            ns / 1_000_000_000,
            ns % 1_000_000_000
        ));
    }

    fn sample(&self, what: String) {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if samples.len() < 5 {
            samples.push(what);
        }
    }

    /// Runs one iteration of a loop: paused while [`World::quiet`] holds the gate.
    fn iteration(&self, f: impl FnOnce()) {
        let _running = self.all.read().unwrap_or_else(|e| e.into_inner());
        f();
    }
}

fn sleep_up_to(rng: &mut Rng, max_us: u64) {
    thread::sleep(Duration::from_micros(rng.below(max_us + 1)));
}

/// `git clean -qfdX` in the state directory, again and again.
fn clean_loop(shared: &Shared, mut rng: Rng) {
    while shared.running() {
        shared.iteration(|| {
            let out = git(&shared.root, &["clean", "-qfdX"]);
            // It fails now and then racing ipamctl (a file it listed is gone by its lstat).
            if !out.status.success() {
                shared.counts.cleans_failed.fetch_add(1, Ordering::Relaxed);
            }
            shared.counts.cleans.fetch_add(1, Ordering::Relaxed);
        });
        sleep_up_to(&mut rng, 3_000);
    }
}

/// One pool of the world as the clone has it.
struct Holdings {
    slots: Slots,
    /// Slot -> owner number.
    held: BTreeMap<IpAddr, usize>,
    /// Owner number -> slot.
    owners: Vec<Option<IpAddr>>,
    /// Allocations removed before, to be re-created with the same bytes.
    removed: Vec<(IpAddr, usize)>,
}

impl Holdings {
    fn new(slots: Slots) -> Holdings {
        let owners = vec![None; slots.addresses.len() * 3 / 2 + 2];
        Holdings {
            slots,
            held: BTreeMap::new(),
            owners,
            removed: Vec::new(),
        }
    }

    fn path(&self, clone: &Path, address: IpAddr) -> PathBuf {
        let pool = PoolName::new(self.slots.pool).expect("a valid pool name");
        clone.join(self.slots.dir()).join(format!(
            "{}.yaml",
            ipamctl::model::allocation_name(&pool, address)
        ))
    }

    fn manifest(&self, address: IpAddr, owner: usize) -> String {
        let pool = PoolName::new(self.slots.pool).expect("a valid pool name");
        let ns = self
            .slots
            .namespace
            .map(|n| Namespace::new(n).expect("a valid namespace"));
        let uid =
            Uid::parse_uuid(&format!("00000000-0000-4000-8000-{owner:012x}")).expect("a valid uid");
        let owner =
            Owner::parse(&format!("FloatingIP/world-{owner}"), Some(uid)).expect("a valid owner");
        ipamctl::yaml::encode(&AllocationManifest::new(&pool, ns.as_ref(), address, owner))
    }

    fn give(&mut self, clone: &Path, address: IpAddr, owner: usize) {
        let path = self.path(clone, address);
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("create a directory");
        std::fs::write(&path, self.manifest(address, owner)).expect("write in the clone");
        self.held.insert(address, owner);
        self.owners[owner] = Some(address);
    }

    fn take(&mut self, clone: &Path, address: IpAddr) -> usize {
        std::fs::remove_file(self.path(clone, address)).expect("remove in the clone");
        let owner = self.held.remove(&address).expect("held");
        self.owners[owner] = None;
        owner
    }

    fn free_slot(&self, rng: &mut Rng) -> Option<IpAddr> {
        let free: Vec<IpAddr> = (self.slots.addresses.iter().copied())
            .filter(|a| !self.held.contains_key(a))
            .collect();
        (!free.is_empty()).then(|| free[rng.below(free.len() as u64) as usize])
    }

    fn idle_owner(&self, rng: &mut Rng) -> Option<usize> {
        let idle: Vec<usize> = (0..self.owners.len())
            .filter(|&o| self.owners[o].is_none())
            .collect();
        (!idle.is_empty()).then(|| idle[rng.below(idle.len() as u64) as usize])
    }

    fn held_slot(&self, rng: &mut Rng) -> Option<IpAddr> {
        let held: Vec<IpAddr> = self.held.keys().copied().collect();
        (!held.is_empty()).then(|| held[rng.below(held.len() as u64) as usize])
    }

    /// One change, chosen at random among those that keep one address per owner and one
    /// owner per address; describes it.
    fn change(&mut self, clone: &Path, rng: &mut Rng) -> Option<String> {
        let pool = self.slots.pool;
        match rng.below(6) {
            // A new allocation.
            0 | 1 => {
                let (a, o) = (self.free_slot(rng)?, self.idle_owner(rng)?);
                self.give(clone, a, o);
                Some(format!("{pool}: add {a} for world-{o}"))
            }
            // A release, never of the last one (see `World::start`).
            2 => {
                let a = self.held_slot(rng).filter(|_| self.held.len() > 1)?;
                let o = self.take(clone, a);
                self.removed.push((a, o));
                Some(format!("{pool}: remove {a} of world-{o}"))
            }
            // An owner moves to another address (its old file goes in the same commit).
            3 => {
                let a = self.held_slot(rng)?;
                let b = self.free_slot(rng)?;
                let o = self.take(clone, a);
                self.give(clone, b, o);
                Some(format!("{pool}: move world-{o} from {a} to {b}"))
            }
            // An address handed to another owner (same file name, new content).
            4 => {
                let a = self.held_slot(rng)?;
                let to = self.idle_owner(rng)?;
                let from = self.take(clone, a);
                self.give(clone, a, to);
                Some(format!("{pool}: hand {a} from world-{from} to world-{to}"))
            }
            // A removed allocation re-created with the same bytes.
            _ => {
                let (a, o) = self.removed.pop()?;
                if self.held.contains_key(&a) || self.owners[o].is_some() {
                    return None;
                }
                self.give(clone, a, o);
                Some(format!("{pool}: re-create {a} for world-{o}"))
            }
        }
    }
}

fn pull_args(clone: &Path) -> Vec<&str> {
    vec![
        "pull",
        "-q",
        "--ff-only",
        "--no-rebase",
        clone.to_str().expect("UTF-8 path"),
        "main",
    ]
}

/// Commits in the clone and `git pull`s them into the state directory, again and again.
fn pull_loop(shared: &Shared, mut rng: Rng, mut pools: Vec<Holdings>) {
    let mut turn = 0usize;
    while shared.running() {
        turn += 1;
        let mut changes = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(pools.len() as u64) as usize;
            changes.extend(pools[at].change(&shared.clone, &mut rng));
        }
        if changes.is_empty() {
            continue;
        }
        git_ok(&shared.clone, &["add", "-A"]);
        // Two changes may cancel out (a release, then its re-creation).
        git_ok(
            &shared.clone,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("world {turn}"),
            ],
        );
        shared.counts.commits.fetch_add(1, Ordering::Relaxed);
        shared.note(&format!("commit {turn}: {}", changes.join("; ")));
        shared.iteration(|| {
            let _pulling = shared.world_files.lock().unwrap_or_else(|e| e.into_inner());
            let out = git(&shared.root, &pull_args(&shared.clone));
            shared.counts.pulls.fetch_add(1, Ordering::Relaxed);
            if out.status.success() {
                shared.note(&format!("pulled {turn}"));
            } else {
                shared.counts.pulls_failed.fetch_add(1, Ordering::Relaxed);
                let why = String::from_utf8_lossy(&out.stderr).trim().to_owned();
                shared.note(&format!("pull {turn} failed: {why}"));
                shared.sample(format!("git pull: {why}"));
            }
        });
        sleep_up_to(&mut rng, 5_000);
    }
}

/// Every `*.yaml` file in every allocations directory, relative to the root.
fn allocation_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in read.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                walk(root, &path, out);
            } else if name.ends_with(".yaml")
                && dir.file_name().is_some_and(|d| d == "ipallocations")
            {
                out.push(path.strip_prefix(root).expect("under the root").to_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

/// Reads `rel` and, if it is a whole allocation of a stable owner (for which `keep`
/// holds), snapshots its bytes beside the root.
fn snapshot(
    shared: &Shared,
    rel: &Path,
    keep: impl Fn(&AllocationManifest) -> bool,
) -> Option<Stable> {
    let bytes = std::fs::read(shared.root.join(rel)).ok()?;
    let manifest = ipamctl::yaml::decode_allocation(std::str::from_utf8(&bytes).ok()?).ok()?;
    if !(shared.config.stable)(&manifest) || !keep(&manifest) {
        return None;
    }
    let snapshot = shared
        .snapshots
        .join(rel.to_string_lossy().replace('/', "_"));
    std::fs::write(&snapshot, &bytes).ok()?;
    Some(Stable {
        rel: rel.to_owned(),
        snapshot,
    })
}

/// `cp SNAPSHOT FILE`: the same bytes over the file, in place (cp truncates and writes).
fn copy_over(shared: &Shared, stable: &Stable) {
    let _ = Command::new("cp")
        .arg(&stable.snapshot)
        .arg(shared.root.join(&stable.rel))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Copies stable allocation files over themselves: the focus owner's file in a tight loop,
/// others now and then.
fn cp_loop(shared: &Shared, mut rng: Rng) {
    let mut stable: Vec<Stable> = Vec::new();
    let mut turn = 0u64;
    while shared.running() {
        turn += 1;
        let focus = shared
            .focus
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let focused = focus.as_ref().and_then(|f| f.found.clone());
        shared.iteration(|| {
            let _copying = shared.copies.read().unwrap_or_else(|e| e.into_inner());
            if let Some(target) = &focused
                && !turn.is_multiple_of(4)
            {
                copy_over(shared, target);
                shared.note(&format!("cp over {}", target.rel.display()));
                shared.counts.focus_cps.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if let Some(f) = &focus
                && f.found.is_none()
                && let Some(found) = find_focus(shared, f)
            {
                shared.note(&format!("focus: {}", found.rel.display()));
                let mut slot = shared.focus.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(now) = slot.as_mut()
                    && now.owner == f.owner
                    && now.uid == f.uid
                {
                    now.found = Some(found);
                }
            }
            if turn % 64 == 1 || stable.is_empty() {
                stable = allocation_files(&shared.root)
                    .iter()
                    .filter_map(|rel| snapshot(shared, rel, |_| true))
                    .collect();
            }
            if !stable.is_empty() {
                let one = &stable[rng.below(stable.len() as u64) as usize];
                copy_over(shared, one);
                shared.note(&format!("cp over {}", one.rel.display()));
                shared.counts.cps.fetch_add(1, Ordering::Relaxed);
            }
        });
        if focused.is_none() {
            sleep_up_to(&mut rng, 1_000);
        }
    }
}

/// The stable files (see [`Config::stable`]) as they are now, snapshotted.
fn stable_files(shared: &Shared) -> Vec<Stable> {
    allocation_files(&shared.root)
        .iter()
        .filter_map(|rel| snapshot(shared, rel, |_| true))
        .collect()
}

/// Rewrites stable files in place with their own bytes at 600 bytes a second (`pv -qL`,
/// which writes every tenth of a second): for half a second each file holds prefixes of
/// itself, some of them whole manifests of another owner (`name: fip` of `name: fip-1`).
fn slow_loop(shared: &Shared, mut rng: Rng) {
    let mut stable: Vec<Stable> = Vec::new();
    let mut turn = 0u64;
    while shared.running() {
        turn += 1;
        shared.iteration(|| {
            let _copying = shared.copies.read().unwrap_or_else(|e| e.into_inner());
            if turn % 16 == 1 || stable.is_empty() {
                stable = stable_files(shared);
            }
            if stable.is_empty() {
                return;
            }
            let one = &stable[rng.below(stable.len() as u64) as usize];
            let _ = Command::new("sh")
                .arg("-c")
                .arg("pv -qL 600 \"$1\" > \"$2\"")
                .arg("sh")
                .arg(&one.snapshot)
                .arg(shared.root.join(&one.rel))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            shared.note(&format!("pv over {}", one.rel.display()));
            shared.counts.slow_rewrites.fetch_add(1, Ordering::Relaxed);
        });
        sleep_up_to(&mut rng, 200_000);
    }
}

/// Replaces world files as `git checkout` replaces a file whose new version differs only in
/// its labels: unlink, then an exclusive create of the new bytes (the same owner, a label
/// added), and a moment later back the same way (so `git pull` finds the file as it left
/// it). Only the world's own files, at addresses no test process claims: while the name is
/// free, any claimer may take the address, and the file's owner has then lost it to an
/// outside delete (docs/src/guarantees.md), not to ipamctl.
fn relabel_loop(shared: &Shared, mut rng: Rng) {
    const LABEL: &str = "    example.com/relabelled: \"yes\"\n";
    let replace = |path: &Path, bytes: &str| -> bool {
        if std::fs::remove_file(path).is_err() {
            return false;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .and_then(|mut file| {
                use std::io::Write as _;
                file.write_all(bytes.as_bytes())
            })
            .is_ok()
    };
    while shared.running() {
        shared.iteration(|| {
            let _moving = shared.world_files.lock().unwrap_or_else(|e| e.into_inner());
            let world = world_files(shared);
            if world.is_empty() {
                return;
            }
            let rel = &world[rng.below(world.len() as u64) as usize];
            let path = shared.root.join(rel);
            let Ok(now) = std::fs::read_to_string(&path) else {
                return;
            };
            if !now.contains("  labels:\n") || now.contains(LABEL) {
                return;
            }
            let next = now.replacen("  labels:\n", &format!("  labels:\n{LABEL}"), 1);
            if replace(&path, &next) {
                sleep_up_to(&mut rng, 20_000);
                replace(&path, &now);
            }
            shared.note(&format!("relabel {}", rel.display()));
            shared.counts.relabels.fetch_add(1, Ordering::Relaxed);
        });
        sleep_up_to(&mut rng, 50_000);
    }
}

/// The world's own allocation files (owners `world-*`), relative to the root.
fn world_files(shared: &Shared) -> Vec<PathBuf> {
    allocation_files(&shared.root)
        .into_iter()
        .filter(|rel| {
            std::fs::read_to_string(shared.root.join(rel))
                .is_ok_and(|t| t.contains("    name: world-"))
        })
        .collect()
}

/// Removes a world file with `rm` and makes it again with `cp` from a copy (same bytes, a
/// new inode): only the world's own owners, which no test process asks for while the world
/// runs, since a claim for an owner between the two would rightly find it holds nothing.
fn rm_cp_loop(shared: &Shared, mut rng: Rng) {
    while shared.running() {
        shared.iteration(|| {
            let _moving = shared.world_files.lock().unwrap_or_else(|e| e.into_inner());
            let world = world_files(shared);
            if world.is_empty() {
                return;
            }
            let rel = &world[rng.below(world.len() as u64) as usize];
            let path = shared.root.join(rel);
            let aside = shared.snapshots.join("rmcp.yaml");
            if std::fs::copy(&path, &aside).is_err() {
                return;
            }
            let quiet = |cmd: &mut Command| {
                let _ = cmd
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            };
            quiet(Command::new("rm").arg("-f").arg(&path));
            quiet(Command::new("cp").arg("-n").arg(&aside).arg(&path));
            shared.note(&format!("rm + cp {}", rel.display()));
            shared.counts.rm_cps.fetch_add(1, Ordering::Relaxed);
        });
        sleep_up_to(&mut rng, 20_000);
    }
}

/// `rsync -a` from a second clone that holds the marker and `.gitignore` with the state's
/// bytes but other mtimes: each run replaces `.ipamctl` with a new inode, whatever locks
/// ipamctl holds on the old. (Not the pools: a test may change them meanwhile.)
fn rsync_loop(shared: &Shared, mut rng: Rng) {
    let second = shared.snapshots.join("rsync-clone");
    while shared.running() {
        shared.iteration(|| {
            let _ = std::fs::remove_dir_all(&second);
            if std::fs::create_dir_all(&second).is_err() {
                return;
            }
            for name in [".ipamctl", ".gitignore"] {
                let _ = std::fs::copy(shared.root.join(name), second.join(name));
            }
            let stamp = format!("@{}", 1_000_000_000 + rng.below(100_000_000));
            let _ = Command::new("sh")
                .arg("-c")
                .arg("find \"$1\" -exec touch -h -d \"$2\" {} +")
                .arg("sh")
                .arg(&second)
                .arg(&stamp)
                .status();
            let out = Command::new("rsync")
                .arg("-a")
                .arg(format!("{}/", second.display()))
                .arg(format!("{}/", shared.root.display()))
                .stdin(Stdio::null())
                .output();
            if out.is_ok_and(|o| o.status.success()) {
                shared.note("rsync -a from the second clone");
                shared.counts.rsyncs.fetch_add(1, Ordering::Relaxed);
            }
        });
        sleep_up_to(&mut rng, 100_000);
    }
}

fn find_focus(shared: &Shared, focus: &Focus) -> Option<Stable> {
    let read = std::fs::read_dir(shared.root.join(&focus.dir)).ok()?;
    read.flatten().find_map(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !name.ends_with(".yaml") {
            return None;
        }
        snapshot(shared, &focus.dir.join(&name), |m| {
            m.spec.owner.to_string() == focus.owner
                && m.spec.owner.uid().map(|u| u.to_string()) == focus.uid
        })
    })
}

/// `touch -c` of a few allocation files at a time, again and again.
fn touch_loop(shared: &Shared, mut rng: Rng) {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut turn = 0u64;
    while shared.running() {
        turn += 1;
        shared.iteration(|| {
            if turn % 32 == 1 || files.is_empty() {
                files = allocation_files(&shared.root);
            }
            if files.is_empty() {
                return;
            }
            let mut cmd = Command::new("touch");
            cmd.arg("-c").current_dir(&shared.root);
            for _ in 0..1 + rng.below(8) {
                cmd.arg(&files[rng.below(files.len() as u64) as usize]);
            }
            let _ = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            shared.counts.touches.fetch_add(1, Ordering::Relaxed);
        });
        sleep_up_to(&mut rng, 2_000);
    }
}

/// `git ARGS` in `dir`, isolated from the machine's and the user's configuration.
fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args([
            "-c",
            "user.name=World",
            "-c",
            "user.email=world@example.com",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .expect("start git")
}

/// `git ARGS` in `dir`; must succeed.
fn git_ok(dir: &Path, args: &[&str]) {
    let out = git(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {} failed: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Elapsed time as seconds with milliseconds, for summaries.
pub fn seconds(since: Instant) -> String {
    format!("{:.1} s", since.elapsed().as_secs_f64())
}
