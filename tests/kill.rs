//! SIGKILL at random instants: `allocate`, `release` and `apply` processes are killed, a few
//! at a time, after a random delay that spans a whole run of the process. Afterwards the files must
//! satisfy invariants 1–3 (and 6), and asking again for every owner must converge: each owner
//! ends with exactly one allocation, and an owner whose claim had completed gets that same
//! address back (invariant 4).
//!
//! CI-sized by default (150 kills); `IPAMCTL_STRESS=long` makes it 3,000:
//!
//! ```text
//! IPAMCTL_STRESS=long cargo test --release --test kill -- --nocapture
//! ```
//!
//! The delays come from a xorshift generator seeded from the clock; the seed is printed, and
//! `IPAMCTL_SEED=<seed>` replays the same sequence of operations and delays.

mod torture;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use torture::{Rng, State, code, long_run, pool_yaml};

const SIGKILL: i32 = 9;

/// Processes started at once in each batch, each killed at its own instant.
const BATCH: usize = 3;

/// A pool, as `ipamctl` arguments: `-n NS` (or nothing) and the pool name.
#[derive(Clone, Copy)]
struct Pool {
    namespace: Option<&'static str>,
    name: &'static str,
}

const POOLS: [Pool; 2] = [
    Pool {
        namespace: None,
        name: "edge",
    },
    Pool {
        namespace: Some("kill/tenant"),
        name: "vpc",
    },
];

/// Owner identities; some share a name and differ only in their uid.
const OWNERS: [(&str, Option<&str>); 10] = [
    ("FloatingIP/fip-0", None),
    ("FloatingIP/fip-0", Some("uid-a")),
    ("FloatingIP/fip-0", Some("uid-b")),
    ("FloatingIP/fip-1", Some("uid-c")),
    ("VirtualMachine/vm-0/0", Some("uid-d")),
    ("VirtualMachine/vm-0/1", Some("uid-d")),
    ("VirtualMachine/vm-1/0", None),
    ("VPC/router", Some("uid-e")),
    ("Node/10.9.0.0/24", None),
    ("Node/node-2", Some("uid-f")),
];

fn args(pool: Pool, rest: &[&str], owner: (&str, Option<&str>)) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if let Some(ns) = pool.namespace {
        v.extend(["-n".to_owned(), ns.to_owned()]);
    }
    v.extend(rest.iter().map(|s| s.to_string()));
    v.extend(["--owner".to_owned(), owner.0.to_owned()]);
    if let Some(uid) = owner.1 {
        v.extend(["--uid".to_owned(), uid.to_owned()]);
    }
    v
}

fn allocate(pool: Pool, owner: (&str, Option<&str>)) -> Vec<String> {
    args(pool, &["allocate", pool.name], owner)
}

/// What one owner holds in one pool, from the files.
fn held(state: &State, pool: Pool, owner: (&str, Option<&str>)) -> Vec<Ipv4Addr> {
    state
        .scan()
        .held_by(pool.namespace, pool.name, owner.0, owner.1)
}

/// How long an uninterrupted `allocate` of a new owner takes here (the median of a few), so
/// that the kill delays cover a whole run whatever the build and the disk.
fn calibrate(state: &State) -> Duration {
    let mut times: Vec<Duration> = (0..7)
        .map(|i| {
            let start = Instant::now();
            let owner = format!("FloatingIP/calibrate-{i}");
            let out = state.run(&allocate(POOLS[0], (&owner, None)));
            assert_eq!(out.code, Some(code::OK), "{}", out.describe());
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

#[test]
fn sigkill_at_any_instant_keeps_the_invariants_and_retries_converge() {
    let target = if long_run() { 3000 } else { 150 };
    let state = State::new();
    let pools = format!(
        "{}---\n{}",
        pool_yaml("edge", None, "10.30.0.0/24", &["10.30.0.5"]),
        pool_yaml("vpc", Some("kill/tenant"), "10.31.0.0/24", &[])
    );
    let out = state.apply(&pools);
    assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    let updates: Vec<String> = [&["10.30.0.5"][..], &["10.30.0.5", "10.30.0.240/28"][..]]
        .iter()
        .enumerate()
        .map(|(i, excludes)| {
            let path = state.outside.join(format!("edge-{i}.yaml"));
            std::fs::write(&path, pool_yaml("edge", None, "10.30.0.0/24", excludes))
                .expect("write an update");
            path.to_str().expect("UTF-8 path").to_owned()
        })
        .collect();
    let run_time = calibrate(&state);
    // [0, ~3 ms] at the least; as long as a whole run where processes take longer (a debug
    // build, a disk with slow fsync).
    let max_delay = run_time.clamp(Duration::from_millis(3), Duration::from_millis(60));
    let mut rng = Rng::from_env_or_time();
    let seed = rng.seed();
    eprintln!(
        "kill: seed {seed} (IPAMCTL_SEED={seed} replays it); allocate takes {run_time:?}, delays in [0, {max_delay:?}]"
    );

    let mut violations = Vec::new();
    let (mut kills, mut finished) = (0usize, 0usize);
    while kills < target {
        let mut batch = Vec::new();
        for _ in 0..BATCH {
            let pool = POOLS[rng.below(POOLS.len() as u64) as usize];
            let owner = OWNERS[rng.below(OWNERS.len() as u64) as usize];
            let argv = match rng.below(20) {
                0..=13 => allocate(pool, owner),
                14..=16 => args(pool, &["release", pool.name], owner),
                17 | 18 => {
                    // A guarded release of some low address, held by anyone or no one.
                    let net = if pool.namespace.is_some() { 31 } else { 30 };
                    let addr = format!("10.{net}.0.{}", 1 + rng.below(12));
                    args(pool, &["release", pool.name, &addr], owner)
                }
                // An update of `edge` that strands nothing (allocations stay low).
                _ => {
                    let update = &updates[rng.below(2) as usize];
                    vec!["apply".to_owned(), "-f".to_owned(), update.clone()]
                }
            };
            let delay = Duration::from_nanos(rng.below(max_delay.as_nanos() as u64 + 1));
            batch.push((delay, argv));
        }
        batch.sort_by_key(|(delay, _)| *delay);
        let start = Instant::now();
        let children: Vec<_> = batch.iter().map(|(_, argv)| state.spawn(argv)).collect();
        for ((delay, argv), mut child) in batch.into_iter().zip(children) {
            if let Some(left) = delay.checked_sub(start.elapsed()) {
                std::thread::sleep(left);
            }
            // SIGKILL; harmless if the process already exited (it is not reaped yet).
            let _ = child.kill();
            let out = torture::finish(&argv, child);
            if out.signal == Some(SIGKILL) {
                kills += 1;
                continue;
            }
            finished += 1;
            // A process that ran to its end must have succeeded (or refused a guarded
            // release of someone else's address) without panicking.
            let release = argv.iter().any(|a| a == "release");
            let allowed =
                out.code == Some(code::OK) || (release && out.code == Some(code::CONFLICT));
            if !allowed || out.crashed() {
                violations.push(format!("unkilled process: {}", out.describe()));
            }
        }
    }
    let scan = state.scan();
    violations.extend(scan.violations());
    let temp_files = scan.temp_files.len();
    let has_check = state.has_check();
    if has_check {
        let out = state.run(&["check", "-o", "json"]);
        if out.code != Some(code::OK) || out.crashed() {
            violations.push(format!("after the kills, check: {}", out.describe()));
        }
    }

    // Every owner asks again, unkilled: a completed claim comes back, else a fresh one.
    let mut returned = 0;
    for pool in POOLS {
        for owner in OWNERS {
            let before = held(&state, pool, owner);
            let out = state.run(&allocate(pool, owner));
            let got: Option<Ipv4Addr> = out.stdout.trim().parse().ok();
            if out.code != Some(code::OK) || got.is_none() || out.crashed() {
                violations.push(format!("retry: {}", out.describe()));
                continue;
            }
            match before.as_slice() {
                [] => {}
                [had] if Some(*had) == got => returned += 1,
                _ => violations.push(format!(
                    "retry: {} held {before:?} before the retry, which printed {got:?}",
                    owner.0
                )),
            }
            let after = held(&state, pool, owner);
            if after.len() != 1 || after.first().copied() != got {
                violations.push(format!(
                    "retry: {} holds {after:?} after the retry, which printed {got:?}",
                    owner.0
                ));
            }
        }
    }
    violations.extend(state.scan().violations());
    if has_check {
        let out = state.run(&["check", "-o", "json"]);
        if out.code != Some(code::OK) || out.crashed() {
            violations.push(format!("after the retries, check: {}", out.describe()));
        }
    }

    eprintln!(
        "kill: {kills} kills, {} violations ({finished} processes finished before their kill, \
         {temp_files} temporary files left, {returned} of {} owners got their completed claim back, check {})",
        violations.len(),
        POOLS.len() * OWNERS.len(),
        if has_check {
            "included"
        } else {
            "not available"
        }
    );
    assert!(
        violations.is_empty(),
        "seed {seed}: {} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// The state a `git pull` leaves when another machine released an address and gave it to
/// another owner: git unlinks the file and creates it again, and ext4 and xfs hand the
/// freed inode number straight back, so an owner index keyed by inode numbers would still
/// match while the owner changed. The index records each file's size and change time too,
/// and a file created after the record was made has a later change time.
///
/// The new owner must get its address back, not a second one (invariants 2 and 4).
#[test]
fn an_allocation_replaced_outside_ipamctl_on_a_recycled_inode_is_found_by_its_owner() {
    use std::os::unix::fs::MetadataExt;

    let state = State::new();
    let out = state.apply(&pool_yaml("p", None, "10.40.0.0/28", &[]));
    assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    let old = state.run(&["allocate", "p", "--owner", "FloatingIP/old"]);
    assert_eq!(old.stdout, "10.40.0.1\n", "{}", old.describe());
    // Old enough for a look-up to record it in the index; then one that does.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let other = state.run(&["allocate", "p", "--owner", "FloatingIP/other"]);
    assert_eq!(other.stdout, "10.40.0.2\n", "{}", other.describe());
    let index = state.root.join("cluster/ipallocations/.index/p.idx");
    let recorded = std::fs::read_to_string(&index).unwrap();
    assert!(recorded.contains("\n10.40.0.1 "), "{recorded}");

    let path = state.root.join("cluster/ipallocations/p-10-40-0-1.yaml");
    let inode = std::fs::metadata(&path).unwrap().ino();
    let text = std::fs::read_to_string(&path).unwrap();
    let rewritten = text.replace("name: old", "name: new");
    assert_eq!(text.len(), rewritten.len());
    // As git checks a changed file out: unlink, then create.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, rewritten).unwrap();
    // Whether or not this filesystem recycled the inode just now, make the index believe
    // the worst case: the file under its current inode (same size) is the old owner's.
    let now = std::fs::metadata(&path).unwrap().ino();
    eprintln!("inode before {inode}, after {now}");
    let forged = recorded.replace(
        &format!("\n10.40.0.1 {inode} "),
        &format!("\n10.40.0.1 {now} "),
    );
    std::fs::write(&index, forged).unwrap();

    let new = state.run(&["allocate", "p", "--owner", "FloatingIP/new"]);
    let holds = state.scan().held_by(None, "p", "FloatingIP/new", None);
    assert_eq!(
        (new.stdout.as_str(), holds.as_slice()),
        (
            "10.40.0.1\n",
            ["10.40.0.1".parse::<Ipv4Addr>().unwrap()].as_slice()
        ),
        "FloatingIP/new already held 10.40.0.1: {}",
        new.describe()
    );
}
