//! SIGKILL at random instants: `allocate`, `release` and `apply` processes are killed, a few
//! at a time, after a random delay that spans a whole run of the process. Afterwards the files must
//! satisfy invariants 1–3 (and 6), and asking again for every owner must converge: each owner
//! ends with exactly one allocation, and an owner whose claim had completed gets that same
//! address back (invariant 4). `VirtualMachine` owners claim with their NIC's MAC: no MAC
//! may end on two allocations of a pool, and once every owner has asked again each MAC's
//! record names its holder's address.
//!
//! The second test does the same while the outside world works the state directory
//! (`torture/outside.rs`: `git clean`, `git pull` of another clone's commits, `cp` and
//! `touch`), and asks again for the owner of every killed `allocate` right after its kill.
//!
//! CI-sized by default (150 kills, 90 with the outside world, each storm also ending at 3
//! minutes and failing below a third of its kills); `IPAMCTL_STRESS=long` makes them 3,000
//! and 10,000 in at most 3 hours (`IPAMCTL_KILLS=N` sets the count of either,
//! `IPAMCTL_STORM_SECONDS=S` the time):
//!
//! ```text
//! IPAMCTL_STRESS=long cargo test --release --test kill -- --nocapture
//! ```
//!
//! The outside world needs `pv` and `rsync` (its slow in-place writer and its second
//! clone): without them that test is ignored, saying so, and under `CI=true` it fails.
//!
//! The delays come from a xorshift generator seeded from the clock; the seed is printed, and
//! `IPAMCTL_SEED=<seed>` replays the same sequence of operations and delays.

mod torture;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use torture::budget::Budget;
use torture::outside::{self, Slots, World};
use torture::{Outcome, Rng, State, code, long_run, pool_yaml};

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

/// An owner identity: `KIND/NAME` and the uid, if any.
type OwnerId = (&'static str, Option<&'static str>);

/// Owner identities; some share a name and differ only in their uid (`VPC/router`, the one
/// kind whose name is not its identity: for the others a name is one identity per pool).
const OWNERS: [OwnerId; 10] = [
    ("FloatingIP/fip-0", None),
    ("VPC/router", Some("00000000-0000-4000-8000-00000000000a")),
    ("VPC/router", Some("00000000-0000-4000-8000-00000000000b")),
    (
        "FloatingIP/fip-1",
        Some("00000000-0000-4000-8000-00000000000c"),
    ),
    (
        "VirtualMachine/vm-0/0",
        Some("00000000-0000-4000-8000-00000000000d"),
    ),
    (
        "VirtualMachine/vm-0/1",
        Some("00000000-0000-4000-8000-00000000000d"),
    ),
    ("VirtualMachine/vm-1/0", None),
    ("VPC/router", Some("00000000-0000-4000-8000-00000000000e")),
    ("Node/10.9.0.0/24", None),
    ("Node/node-2", Some("00000000-0000-4000-8000-00000000000f")),
];

/// Owners that only ever allocate, never release (with the outside world only): their
/// files are the ones the world's `cp` copies over themselves.
const STICKY: [OwnerId; 2] = [
    (
        "VirtualMachine/sticky-0/0",
        Some("00000000-0000-4000-8000-000000000005"),
    ),
    ("FloatingIP/sticky-1", None),
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

/// The MAC of an owner's NIC: every `VirtualMachine` owner claims with its own, always the
/// same (its claims and retries then run the MAC's record protocol, `store/fs/macs.rs`).
fn mac_of(owner: &str) -> Option<String> {
    let nics = ["vm-0/0", "vm-0/1", "vm-1/0", "sticky-0/0"];
    let name = owner.strip_prefix("VirtualMachine/")?;
    let i = nics.iter().position(|n| *n == name)?;
    Some(format!("02:00:00:00:0c:{i:02x}"))
}

fn allocate(pool: Pool, owner: (&str, Option<&str>)) -> Vec<String> {
    let mut argv = args(pool, &["allocate", pool.name], owner);
    if let Some(mac) = mac_of(owner.0) {
        argv.extend(["--mac".to_owned(), mac]);
    }
    argv
}

/// What one owner holds in one pool, from the files (read with the world's `cp` paused, the
/// only outside writer into a file an owner here holds).
fn held(state: &State, world: Option<&World>, pool: Pool, owner: OwnerId) -> Vec<IpAddr> {
    let scan = || state.scan();
    let scan = match world {
        Some(world) => world.steady(scan),
        None => scan(),
    };
    scan.held_by(pool.namespace, pool.name, owner.0, owner.1)
}

/// Runs `argv` to its end; with the outside world, again while it fails transiently.
fn run(state: &State, world: Option<&World>, argv: &[String]) -> Outcome {
    match world {
        Some(world) => world.run(state, argv),
        None => state.run(argv),
    }
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

/// The owner asks again, unkilled: an address it held comes back, else it gets a fresh one,
/// and afterwards it holds exactly the one printed. Returns whether it got back what it
/// held, or what went wrong.
fn ask_again(
    state: &State,
    world: Option<&World>,
    pool: Pool,
    owner: OwnerId,
) -> Result<bool, String> {
    let before = held(state, world, pool, owner);
    let out = run(state, world, &allocate(pool, owner));
    let got: Option<IpAddr> = out.stdout.trim().parse().ok();
    if out.code != Some(code::OK) || got.is_none() || out.crashed() {
        return Err(format!("retry: {}", out.describe()));
    }
    let returned = match before.as_slice() {
        [] => false,
        [had] if Some(*had) == got => true,
        _ => {
            return Err(format!(
                "retry: {} held {before:?} before the retry, which printed {got:?} ({})",
                owner.0,
                out.describe()
            ));
        }
    };
    let after = held(state, world, pool, owner);
    if after.len() != 1 || after.first().copied() != got {
        return Err(format!(
            "retry: {} holds {after:?} after the retry, which printed {got:?}",
            owner.0
        ));
    }
    Ok(returned)
}

/// Invariants 1, 2, 3 and 6 from the files and `check`; returns the violations and the
/// number of temporary files left.
fn check_state(state: &State, has_check: bool, when: &str) -> (Vec<String>, usize) {
    let scan = state.scan();
    let mut violations: Vec<String> = scan
        .violations()
        .into_iter()
        .map(|v| format!("{when}: {v}"))
        .collect();
    if has_check {
        let out = state.run(&["check", "-o", "json"]);
        if out.code != Some(code::OK) || out.crashed() {
            violations.push(format!("{when}, check: {}", out.describe()));
        }
    }
    (violations, scan.temp_files.len())
}

#[test]
fn sigkill_at_any_instant_keeps_the_invariants_and_retries_converge() {
    sigkill_storm(None);
}

/// Killed while `git clean -qfdX`, `git pull` of another clone's commits into the same
/// pools, `cp` of files over themselves and `touch` run in loops: the invariants hold, every
/// process that was not killed exits 0 (4 for a guarded release of someone else's address,
/// 1 for a temporary file `git clean` deleted), and the owner of every killed `allocate`
/// gets back at once the address it had claimed, if it had.
#[test]
#[cfg_attr(
    not(all(has_pv, has_rsync)),
    ignore = "needs pv and rsync, the outside world's slow writer and second clone (apt-get install pv rsync)"
)]
fn sigkill_while_git_and_cp_work_the_state_keeps_every_owner_one_address() {
    sigkill_storm(Some(start_world));
}

/// The outside world of the second storm. The world's allocations sit well above what ten
/// owners claim lowest first, and below the exclude one update adds (which would strand
/// them).
fn start_world(state: &State) -> World {
    World::start(
        state,
        outside::Config {
            slots: vec![
                Slots::range(None, "edge", "10.30.0.160", "10.30.0.200"),
                Slots::range(Some("kill/tenant"), "vpc", "10.31.0.160", "10.31.0.200"),
            ],
            stable: |m| m.spec.owner.name().starts_with("sticky-"),
        },
    )
}

/// The storm, with the outside world `start_world` starts, if any.
fn sigkill_storm(start_world: Option<fn(&State) -> World>) {
    let outside = start_world.is_some();
    // IPAMCTL_KILLS sets the count, for a long run cut to the time there is.
    let target = std::env::var("IPAMCTL_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(match (long_run(), outside) {
            (true, false) => 3000,
            (true, true) => 10_000,
            (false, false) => 150,
            (false, true) => 90,
        });
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
    let mut world = start_world.map(|start| start(&state));
    let owners: Vec<OwnerId> = if outside {
        OWNERS.iter().chain(&STICKY).copied().collect()
    } else {
        OWNERS.to_vec()
    };

    let mut violations = Vec::new();
    let (mut kills, mut finished, mut returned_at_once) = (0usize, 0usize, 0usize);
    // Owners found holding two addresses, and how many later retries met them again.
    let mut doubled = std::collections::HashSet::new();
    let mut repeated = 0usize;
    let began = Instant::now();
    let mut reported = 0usize;
    // A third of the kills at the least: a storm whose every process waits out a timeout
    // (a file left empty by a missing writer) fails here instead of running for an hour.
    let limit = Duration::from_secs(if long_run() { 3 * 3600 } else { 180 });
    let budget = Budget::new("kill storm", target, limit).at_least(target / 3);
    while budget.more(kills) {
        // A long run says how far it got, so a run cut short still tells something.
        if long_run() && kills >= reported + 500 {
            reported = kills - kills % 500;
            eprintln!(
                "kill: {kills} kills, {finished} finished, {} violations so far, {} s",
                violations.len(),
                began.elapsed().as_secs()
            );
        }
        let world = world.as_ref();
        let mut batch = Vec::new();
        for _ in 0..BATCH {
            let pool = POOLS[rng.below(POOLS.len() as u64) as usize];
            let owner = owners[rng.below(owners.len() as u64) as usize];
            // Only the ten release; the sticky owners only allocate.
            let op = if STICKY.contains(&owner) {
                0
            } else {
                rng.below(20)
            };
            let argv = match op {
                0..=13 => allocate(pool, owner),
                14..=16 => args(pool, &["release", pool.name, "--ignore-not-found"], owner),
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
            if let Some(world) = world
                && STICKY.contains(&owner)
            {
                // Its file, if it has one, is copied over itself while it is killed.
                world.focus(pool.namespace, owner.0, owner.1);
            }
            let delay = Duration::from_nanos(rng.below(max_delay.as_nanos() as u64 + 1));
            batch.push((delay, (pool, owner, op), argv));
        }
        batch.sort_by_key(|(delay, _, _)| *delay);
        let start = Instant::now();
        let children: Vec<_> = batch.iter().map(|(_, _, argv)| state.spawn(argv)).collect();
        let mut killed_claims = Vec::new();
        for ((delay, (pool, owner, op), argv), mut child) in batch.into_iter().zip(children) {
            if let Some(left) = delay.checked_sub(start.elapsed()) {
                std::thread::sleep(left);
            }
            // SIGKILL; harmless if the process already exited (it is not reaped yet).
            let _ = child.kill();
            let out = torture::finish(&argv, child);
            if out.signal == Some(SIGKILL) {
                kills += 1;
                if op <= 13 {
                    killed_claims.push((pool, owner));
                }
                continue;
            }
            finished += 1;
            // A process that ran to its end must have succeeded (or refused a guarded
            // release of someone else's address) without panicking.
            let release = argv.iter().any(|a| a == "release");
            let allowed = out.code == Some(code::OK)
                || (release && out.code == Some(code::CONFLICT))
                || world.is_some_and(|w| w.transient(&out));
            if !allowed || out.crashed() {
                violations.push(format!("unkilled process: {}", out.describe()));
            }
        }
        // With the outside world: the owner of a killed claim asks again at once.
        if world.is_some() {
            for (pool, owner) in killed_claims {
                match ask_again(&state, world, pool, owner) {
                    Ok(true) => returned_at_once += 1,
                    Ok(false) => {}
                    // An owner with two addresses keeps them: report it once.
                    Err(_) if doubled.contains(&(pool.name, owner)) => repeated += 1,
                    Err(e) => {
                        if held(&state, world, pool, owner).len() > 1 {
                            doubled.insert((pool.name, owner));
                        }
                        violations.push(format!("after kill {kills}: {e}"));
                    }
                }
            }
        }
    }
    let has_check = state.has_check();
    let checked = || check_state(&state, has_check, "after the kills");
    let (found, temp_files) = match &world {
        Some(world) => world.quiet(checked),
        None => checked(),
    };
    violations.extend(found);

    // Every owner asks again, unkilled: a completed claim comes back, else a fresh one.
    let mut returned = 0;
    for pool in POOLS {
        for &owner in &owners {
            match ask_again(&state, world.as_ref(), pool, owner) {
                Ok(true) => returned += 1,
                Ok(false) => {}
                Err(e) => violations.push(e),
            }
        }
    }
    let mut summary = String::new();
    let mut kept = None;
    if let Some(world) = &mut world {
        let (found, world_summary) = world.finish(&state);
        violations.extend(found);
        summary = format!(
            "\n{world_summary}; {returned_at_once} killed claims came back at once; \
             {repeated} more retries met an owner already reported with two addresses{}",
            world.examples()
        );
    }
    violations.extend(check_state(&state, has_check, "after the retries").0);
    // Every owner has asked again: each MAC's record names its holder's address.
    let scan = state.scan();
    violations.extend(scan.mac_records_astray(&state.root));
    let with_mac = scan
        .allocations
        .iter()
        .filter(|f| f.manifest.spec.mac.is_some())
        .count();
    if let Some(world) = &world
        && !violations.is_empty()
    {
        kept = Some(world.preserve(&state, "kill"));
    }

    eprintln!(
        "kill: {kills} kills, {} violations ({finished} processes finished before their kill, \
         {temp_files} temporary files left, {returned} of {} owners got their completed claim back, {with_mac} hold a MAC, check {}){summary}",
        violations.len(),
        POOLS.len() * owners.len(),
        if has_check {
            "included"
        } else {
            "not available"
        }
    );
    assert!(
        violations.is_empty(),
        "seed {seed}: {} violations{}:\n{}",
        violations.len(),
        kept.map(|k| format!(" (state kept in {})", k.display()))
            .unwrap_or_default(),
        violations.join("\n")
    );
    eprintln!("{}", budget.finish());
}

#[test]
fn an_allocation_replaced_outside_ipamctl_on_a_recycled_inode_is_found_by_its_owner() {
    use std::os::unix::fs::MetadataExt;

    let state = State::new();
    let out = state.apply(&pool_yaml("p", None, "10.40.0.0/28", &[]));
    assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    let old = state.run(&["allocate", "p", "--owner", "FloatingIP/old"]);
    assert_eq!(old.stdout, "10.40.0.1\n", "{}", old.describe());
    // Old enough for a look-up to record it in the index (100 ms, or 2.1 s where the file
    // system stamps files to the second: its stamp then shows no fraction); then one that does.
    let claimed = state.root.join("cluster/ipallocations/p-10-40-0-1.yaml");
    let coarse = std::fs::metadata(&claimed).unwrap().ctime_nsec() == 0;
    std::thread::sleep(std::time::Duration::from_millis(if coarse {
        2300
    } else {
        200
    }));
    let other = state.run(&["allocate", "p", "--owner", "FloatingIP/other"]);
    assert_eq!(other.stdout, "10.40.0.2\n", "{}", other.describe());
    let index = state.root.join(".index/cluster/ipallocations/p.idx");
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
            ["10.40.0.1".parse::<IpAddr>().unwrap()].as_slice()
        ),
        "FloatingIP/new already held 10.40.0.1: {}",
        new.describe()
    );
}
