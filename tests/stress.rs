//! Concurrency stress: many real `ipamctl` processes at once on one state directory, with
//! readers (`list`, `pool list`, `check`) running throughout. After every round the
//! invariants are checked from the files themselves (see `torture/mod.rs`) and with
//! `ipamctl check`.
//!
//! The last test runs the storms with the outside world working the same state directory
//! (`torture/outside.rs`: `git clean`, `git pull` of another clone's commits, `cp` and
//! `touch`).
//!
//! CI-sized by default, each test's rounds also ending at 2 minutes (failing below a third of
//! them); `IPAMCTL_STRESS=long` runs more rounds with more processes, for at most 3 hours
//! each (`IPAMCTL_STORM_SECONDS=S` sets the time):
//!
//! ```text
//! IPAMCTL_STRESS=long cargo test --release --test stress -- --nocapture
//! ```

mod torture;

use std::collections::{BTreeSet, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use torture::budget::Budget;
use torture::outside::{self, Slots, World};
use torture::{Outcome, State, code, long_run, pool_yaml};

/// One stress test: its state directory, the readers' verdicts and the violations so far.
struct Stress {
    name: &'static str,
    state: State,
    has_check: bool,
    rounds: usize,
    /// The most processes one round started at once.
    width: usize,
    violations: Vec<String>,
    /// The outside world, once started: it runs through every later round.
    world: Option<World>,
    /// Reader runs that met what the outside world was in the middle of writing: a
    /// warning from `list`, a `check` that found something.
    readers_disturbed: AtomicUsize,
    /// How many rounds it may run, and for how long.
    budget: Budget,
    /// What the checks after each round found so far.
    reported: HashSet<String>,
}

impl Stress {
    /// A test of at most `rounds` rounds, and of at least a third of them, in 2 minutes
    /// (3 hours for a long run).
    fn new(name: &'static str, rounds: usize) -> Stress {
        let limit = Duration::from_secs(if long_run() { 3 * 3600 } else { 120 });
        let budget = Budget::new(name, rounds, limit).at_least(rounds.div_ceil(3));
        let state = State::new();
        let has_check = state.has_check();
        Stress {
            name,
            state,
            has_check,
            rounds: 0,
            width: 0,
            violations: Vec::new(),
            world: None,
            readers_disturbed: AtomicUsize::new(0),
            budget,
            reported: HashSet::new(),
        }
    }

    /// The next round's number, while the budget allows one.
    fn next_round(&self) -> Option<usize> {
        self.budget.more(self.rounds).then_some(self.rounds)
    }

    /// Applies pools before the stress starts; these must succeed (after a retry, if the
    /// outside world deleted a temporary file).
    fn apply(&self, yaml: &str) {
        let out = match &self.world {
            Some(world) => world.retry(|| self.state.apply(yaml)),
            None => self.state.apply(yaml),
        };
        assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    }

    /// Starts the outside world on the state directory as it is now.
    fn start_world(&mut self, config: outside::Config) {
        let world = World::start(&self.state, config);
        eprintln!(
            "{}: outside world seed {1} (IPAMCTL_SEED={1} replays its choices)",
            self.name,
            world.seed()
        );
        self.world = Some(world);
    }

    /// Runs `round` with readers going all the time, then checks the invariants.
    fn round(&mut self, width: usize, round: impl FnOnce(&State, &mut Vec<String>)) {
        self.round_in_world(width, |state, _, found| round(state, found));
    }

    /// [`Stress::round`], with the outside world (if started) running throughout; the
    /// invariants are checked with it paused.
    fn round_in_world(
        &mut self,
        width: usize,
        round: impl FnOnce(&State, Option<&World>, &mut Vec<String>),
    ) {
        self.rounds += 1;
        self.width = self.width.max(width);
        let stop = AtomicBool::new(false);
        let state = &self.state;
        let world = self.world.as_ref();
        let has_check = self.has_check;
        let disturbed = &self.readers_disturbed;
        let mut found = Vec::new();
        let reader_found = thread::scope(|s| {
            let reader = s.spawn(|| read_until(state, has_check, &stop, world, disturbed));
            let _stop = StopOnDrop(&stop);
            round(state, world, &mut found);
            drop(_stop);
            reader.join().expect("the reader thread panicked")
        });
        self.violations.extend(found);
        self.violations.extend(reader_found);
        let checked = match &self.world {
            Some(world) => world.quiet(|| check_state(&self.state, self.has_check)),
            None => check_state(&self.state, self.has_check),
        };
        let round = self.rounds - 1;
        // A broken invariant stays broken: report it after the round it first appeared in.
        for v in checked {
            if self.reported.insert(v.clone()) {
                self.violations.push(format!("after round {round}: {v}"));
            }
        }
    }

    /// Prints the summary line and fails on any violation; with the outside world, stops
    /// it first, asks for its owners and checks once more.
    fn finish(mut self) {
        let mut kept = None;
        if let Some(mut world) = self.world.take() {
            let (found, summary) = world.finish(&self.state);
            self.violations.extend(found);
            for v in check_state(&self.state, self.has_check) {
                if !self.reported.contains(&v) {
                    self.violations
                        .push(format!("after the world stopped: {v}"));
                }
            }
            eprintln!(
                "{summary}; {} reader runs met a file being written{}",
                self.readers_disturbed.load(Ordering::Relaxed),
                world.examples()
            );
            if !self.violations.is_empty() {
                kept = Some(world.preserve(&self.state, self.name));
            }
        }
        eprintln!(
            "stress: {} rounds x {} processes, {} violations ({}: {} ipamctl runs in all, check {})",
            self.rounds,
            self.width,
            self.violations.len(),
            self.name,
            self.state.spawned(),
            if self.has_check {
                "included"
            } else {
                "not available"
            }
        );
        assert!(
            self.violations.is_empty(),
            "{} violations{}:\n{}",
            self.violations.len(),
            kept.map(|k| format!(" (state kept in {})", k.display()))
                .unwrap_or_default(),
            self.violations.join("\n")
        );
        eprintln!("{}", self.budget.finish());
    }
}

/// Invariants 1, 2, 3 and 6 from the files; no temporary file left behind by a process
/// that was not killed; `ipamctl check` clean.
fn check_state(state: &State, has_check: bool) -> Vec<String> {
    let scan = state.scan();
    let mut found = scan.violations();
    for tmp in &scan.temp_files {
        found.push(format!("temporary file left behind: {}", tmp.display()));
    }
    if has_check {
        let out = state.run(&["check", "-o", "json"]);
        if out.code != Some(code::OK) || out.crashed() {
            // The findings alone, so that one that persists reads the same every round.
            found.push(format!(
                "check exited {:?}: {} {}",
                out.code,
                out.stdout.trim(),
                out.stderr
                    .lines()
                    .filter(|l| l.contains("panicked"))
                    .collect::<String>()
            ));
        }
    }
    found
}

/// Sets the flag when dropped, so the reader stops even if a round panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Invariant 7: `list -o json`, `pool list -o json` and `check -o json` in a loop until
/// `stop`. Each must exit 0 and print whole objects. Returns what went wrong.
///
/// With the outside world running, a reader may meet a file that `cp` or `git` is in the
/// middle of writing: `list` then warns about it (and still exits 0 with whole objects), and
/// `check` reports it (exit 1); both are counted in `disturbed`, not as violations.
fn read_until(
    state: &State,
    has_check: bool,
    stop: &AtomicBool,
    world: Option<&World>,
    disturbed: &AtomicUsize,
) -> Vec<String> {
    let mut found = Vec::new();
    let mut turn = 0usize;
    // At least one full cycle, even when the round is over before the reader starts.
    while turn < 3 || !stop.load(Ordering::SeqCst) {
        let which = turn % 3;
        turn += 1;
        let out = match which {
            0 => state.run(&["list", "-o", "json"]),
            1 => state.run(&["pool", "list", "-o", "json"]),
            _ if has_check => state.run(&["check", "-o", "json"]),
            _ => continue,
        };
        if world.is_some() {
            let warned = out.stderr.lines().any(|l| l.starts_with("warning: "));
            let dirty_check = which == 2 && out.code == Some(code::FAILURE);
            if warned || dirty_check {
                disturbed.fetch_add(1, Ordering::Relaxed);
            }
            let only_warnings =
                which == 2 || out.stderr.lines().all(|l| l.starts_with("warning: "));
            if !(out.code == Some(code::OK) || dirty_check) || out.crashed() || !only_warnings {
                found.push(format!("reader: {}", out.describe()));
                continue;
            }
        // `check` prints its summary to stderr; the others print nothing there unless wrong.
        } else if out.code != Some(code::OK)
            || out.crashed()
            || (which != 2 && !out.stderr.is_empty())
        {
            found.push(format!("reader: {}", out.describe()));
            continue;
        }
        let json: serde_json::Value = match serde_json::from_str(&out.stdout) {
            Ok(v) => v,
            Err(e) => {
                found.push(format!("reader: torn JSON ({e}): {}", out.describe()));
                continue;
            }
        };
        match which {
            0 => {
                let whole = json["items"].as_array().is_some_and(|items| {
                    items.iter().all(|item| {
                        serde_json::from_value::<ipamctl::model::AllocationManifest>(item.clone())
                            .is_ok_and(|m| m.validate().is_ok())
                    })
                });
                if !whole {
                    found.push(format!("reader: torn allocation in {}", out.describe()));
                }
            }
            1 => {
                let whole = json["items"].as_array().is_some_and(|items| {
                    items.iter().all(|item| {
                        item["status"]["candidates"].is_u64()
                            && serde_json::from_value::<ipamctl::model::PoolManifest>(
                                without_status(item),
                            )
                            .is_ok_and(|p| p.validate().is_ok())
                    })
                });
                if !whole {
                    found.push(format!("reader: torn pool in {}", out.describe()));
                }
            }
            _ => {}
        }
    }
    found
}

fn without_status(item: &serde_json::Value) -> serde_json::Value {
    let mut item = item.clone();
    if let Some(map) = item.as_object_mut() {
        map.remove("status");
    }
    item
}

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// The address an `allocate` printed, if it printed one.
fn address(out: &Outcome) -> Option<IpAddr> {
    out.stdout.trim().parse().ok()
}

fn unexpected(out: &Outcome) -> String {
    format!("unexpected outcome: {}", out.describe())
}

/// (a) Distinct owners race for a pool with fewer candidates than owners: exactly as many
/// succeed as there are candidates, each with its own address, and the rest exit 5. Then
/// half of them are released with a guard that matches and half with a wrong uid, all at
/// once: exactly the first half goes.
#[test]
fn distinct_owners_fill_a_pool_to_exhaustion() {
    let (rounds, prefix, owners) = if long_run() {
        (30, 26, 80) // 62 candidates
    } else {
        (3, 27, 40) // 30 candidates
    };
    let candidates = (1usize << (32 - prefix)) - 2;
    let mut stress = Stress::new("fill", rounds);
    while let Some(r) = stress.next_round() {
        let pool = format!("fill-{r}");
        stress.apply(&pool_yaml(
            &pool,
            None,
            &format!("10.{r}.0.0/{prefix}"),
            &[],
        ));
        stress.round(owners, |state, found| {
            let argvs: Vec<Vec<String>> = (0..owners)
                .map(|i| {
                    argv(&[
                        "allocate",
                        &pool,
                        "--owner",
                        &format!("FloatingIP/fip-{i}"),
                        "--uid",
                        &format!("00000000-0000-4000-8000-{r:04x}{i:08x}"),
                    ])
                })
                .collect();
            let outs = state.run_all(&argvs);
            let mut won = Vec::new();
            for (i, out) in outs.iter().enumerate() {
                match out.code {
                    Some(code::OK) => match address(out) {
                        Some(a) => won.push((i, a)),
                        None => found.push(unexpected(out)),
                    },
                    Some(code::EXHAUSTED) if !out.crashed() => {}
                    _ => found.push(unexpected(out)),
                }
            }
            let distinct: HashSet<IpAddr> = won.iter().map(|&(_, a)| a).collect();
            if won.len() != candidates || distinct.len() != candidates {
                found.push(format!(
                    "round {r}: {} owners won {} distinct addresses of {candidates} candidates",
                    won.len(),
                    distinct.len()
                ));
            }
            let scan = state.scan();
            for &(i, a) in &won {
                let held = scan.held_by(None, &pool, &format!("FloatingIP/fip-{i}"), Some(&format!("00000000-0000-4000-8000-{r:04x}{i:08x}")));
                if held != [a] {
                    found.push(format!("round {r}: fip-{i} was told {a} but holds {held:?}"));
                }
            }

            // Guarded releases, all at once: even winners with the right uid, odd winners
            // with a wrong one (exit 4, nothing deleted).
            let argvs: Vec<Vec<String>> = won
                .iter()
                .map(|&(i, a)| {
                    let uid = if i % 2 == 0 {
                        format!("00000000-0000-4000-8000-{r:04x}{i:08x}")
                    } else {
                        format!("00000000-0000-4001-8000-{r:04x}{i:08x}")
                    };
                    argv(&[
                        "release",
                        &pool,
                        &a.to_string(),
                        "--owner",
                        &format!("FloatingIP/fip-{i}"),
                        "--uid",
                        &uid,
                    ])
                })
                .collect();
            let outs = state.run_all(&argvs);
            for (&(i, _), out) in won.iter().zip(&outs) {
                let ok = if i % 2 == 0 {
                    out.code == Some(code::OK) && out.stdout.contains("released")
                } else {
                    out.code == Some(code::CONFLICT) && out.stdout.is_empty()
                };
                if !ok || out.crashed() {
                    found.push(unexpected(out));
                }
            }
            let scan = state.scan();
            for &(i, a) in &won {
                let held = scan.held_by(None, &pool, &format!("FloatingIP/fip-{i}"), Some(&format!("00000000-0000-4000-8000-{r:04x}{i:08x}")));
                let want: &[IpAddr] = if i % 2 == 0 { &[] } else { &[a] };
                if held != want {
                    found.push(format!(
                        "round {r}: after the guarded releases fip-{i} holds {held:?}, expected {want:?}"
                    ));
                }
            }
        });
    }
    stress.finish();
}

/// (b) Storms of one owner identity: every request for it prints the same address and
/// exactly one file holds it, also with several identities storming one pool at once.
#[test]
fn same_owner_storms_get_one_address() {
    let (rounds, identities, per_identity) = if long_run() { (30, 4, 24) } else { (3, 2, 16) };
    let mut stress = Stress::new("storm", rounds);
    stress.apply(&pool_yaml(
        "storm",
        Some("tenant/storm"),
        "10.100.0.0/24",
        &[],
    ));
    while let Some(r) = stress.next_round() {
        stress.round(identities * per_identity, |state, found| {
            // Interleaved, so the identities' requests start mixed together.
            let owner = |k: usize| format!("VirtualMachine/vm-{r}-{k}/0");
            let uid = |k: usize| format!("00000000-0000-4000-8000-{r:04x}{k:08x}");
            let argvs: Vec<Vec<String>> = (0..identities * per_identity)
                .map(|i| {
                    let k = i % identities;
                    argv(&[
                        "-n",
                        "tenant/storm",
                        "allocate",
                        "storm",
                        "--owner",
                        &owner(k),
                        "--uid",
                        &uid(k),
                    ])
                })
                .collect();
            let outs = state.run_all(&argvs);
            let scan = state.scan();
            for k in 0..identities {
                let printed: BTreeSet<Option<IpAddr>> = outs
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % identities == k)
                    .map(|(_, out)| {
                        if out.code != Some(code::OK) || out.crashed() {
                            found.push(unexpected(out));
                        }
                        address(out)
                    })
                    .collect();
                let held = scan.held_by(Some("tenant/storm"), "storm", &owner(k), Some(&uid(k)));
                let one: BTreeSet<Option<IpAddr>> = held.iter().copied().map(Some).collect();
                if held.len() != 1 || printed != one {
                    found.push(format!(
                        "round {r}: identity {k} was printed {printed:?} and holds {held:?}"
                    ));
                }
            }
        });
    }
    stress.finish();
}

/// (c) Release-and-reallocate churn on a small pool, so addresses change hands all the
/// time. Owners share a name across workers but not uids (`VPC/router`: the one kind whose
/// name is not its identity). A guarded release of an address
/// the worker no longer holds must never delete anything (exit 0 with nothing released, or
/// exit 4); the worker's own allocation must never vanish under it, and its own guarded
/// release must always find it.
#[test]
fn guarded_release_churn_never_deletes_another_owners_allocation() {
    let (rounds, workers) = if long_run() { (150, 8) } else { (10, 4) };
    let pool = "churn";
    let net = "10.200.0.0/28"; // 14 candidates
    let mut stress = Stress::new("churn", rounds);
    stress.apply(&pool_yaml(pool, None, net, &[]));
    let history: Vec<std::sync::Mutex<Vec<IpAddr>>> =
        (0..workers).map(|_| Default::default()).collect();
    let conflicts = AtomicUsize::new(0);
    while let Some(r) = stress.next_round() {
        stress.round(workers, |state, found| {
            let results: Vec<Vec<String>> = thread::scope(|s| {
                let handles: Vec<_> = (0..workers)
                    .map(|w| {
                        let history = &history[w];
                        let conflicts = &conflicts;
                        s.spawn(move || {
                            let mut history = history.lock().expect("one worker per history");
                            churn_once(state, None, pool, w, r, &mut history, conflicts)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a churn worker panicked"))
                    .collect()
            });
            found.extend(results.into_iter().flatten());
        });
    }
    eprintln!(
        "churn: {} guarded releases of addresses held by someone else were refused (exit 4)",
        conflicts.load(Ordering::Relaxed)
    );
    stress.finish();
}

/// One turn of one churn worker; returns violations.
fn churn_once(
    state: &State,
    world: Option<&World>,
    pool: &str,
    w: usize,
    r: usize,
    history: &mut Vec<IpAddr>,
    conflicts: &AtomicUsize,
) -> Vec<String> {
    let mut found = Vec::new();
    // With the outside world, a run that failed because `git clean` deleted its temporary
    // file runs again.
    let run = |argv: &[String]| match world {
        Some(world) => world.run(state, argv),
        None => state.run(argv),
    };
    // One name, an identity per worker: a VPC router's name is always `router` and its uid
    // tells VPCs apart, so every worker's guard names an owner of the same name (for every
    // other kind a name is one identity per pool, and a second one is refused its claim).
    let owner = "VPC/router".to_owned();
    let uid = format!("00000000-0000-4000-8000-{w:012x}");
    let me = |args: &[&str]| {
        let mut v = argv(args);
        v.extend(argv(&["--owner", &owner, "--uid", &uid]));
        v
    };
    let first = run(&me(&["allocate", pool]));
    let Some(mine) = address(&first).filter(|_| first.code == Some(code::OK)) else {
        found.push(format!("worker {w} round {r}: {}", unexpected(&first)));
        return found;
    };
    // A retry racing other workers' churn gets the same address back.
    let again = run(&me(&["allocate", pool]));
    if again.code != Some(code::OK) || address(&again) != Some(mine) {
        found.push(format!(
            "worker {w} round {r}: holds {mine}, retry said {}",
            again.describe()
        ));
    }
    // Guarded releases of addresses this identity does not hold (any holder is someone else:
    // an identity holds one address per pool, and this one holds `mine`). Exit 0 with
    // nothing released when the address is free (or the network/broadcast address).
    let mut stale: Vec<IpAddr> = history.iter().rev().take(3).copied().collect();
    stale.push(ipamctl::model::candidates::address(
        false,
        ipamctl::model::candidates::ordinal(mine) ^ 1,
    ));
    for addr in stale.into_iter().filter(|&a| a != mine) {
        let out = run(&me(&["release", pool, &addr.to_string()]));
        match out.code {
            Some(code::OK) if out.stdout.trim().is_empty() && !out.crashed() => {}
            Some(code::CONFLICT) if out.stdout.is_empty() && !out.crashed() => {
                conflicts.fetch_add(1, Ordering::Relaxed);
            }
            _ => found.push(format!(
                "worker {w} round {r}: stale release: {}",
                out.describe()
            )),
        }
    }
    // Nobody else deleted or took what this identity holds.
    let held = state.scan().held_by(None, pool, &owner, Some(&uid));
    if held != [mine] {
        found.push(format!(
            "worker {w} round {r}: should hold [{mine}], the files say {held:?}"
        ));
    }
    let out = run(&me(&["release", pool, &mine.to_string()]));
    if out.code != Some(code::OK) || !out.stdout.contains("released") || out.crashed() {
        found.push(format!(
            "worker {w} round {r}: own release: {}",
            out.describe()
        ));
    }
    history.push(mine);
    found
}

/// (d) `apply` updates (new excludes, a shrunk prefix) and `pool delete` race `allocate`:
/// each either wins or is refused, and afterwards no allocation lies outside its pool's
/// candidates and none belongs to a deleted pool (checked after every round by
/// `Stress::check_state`).
#[test]
fn pool_updates_and_deletes_racing_allocate_strand_nothing() {
    let (rounds, allocators) = if long_run() { (30, 40) } else { (3, 20) };
    let mut stress = Stress::new("reshape", rounds);
    let mut applied = 0;
    let mut deleted = 0;
    while let Some(r) = stress.next_round() {
        let ns = format!("race/r{r}");
        stress.apply(&format!(
            "{}---\n{}",
            pool_yaml("shrink", Some(&ns), "10.20.0.0/24", &[]),
            pool_yaml("doomed", Some(&ns), "10.21.0.0/28", &[])
        ));
        // Allocation goes lowest first, so whether each update strands an allocation (and is
        // refused) depends on how far the allocators got: both outcomes happen.
        let updates = [
            pool_yaml("shrink", Some(&ns), "10.20.0.0/24", &["10.20.0.16/29"]),
            pool_yaml("shrink", Some(&ns), "10.20.0.0/27", &["10.20.0.16/29"]),
            pool_yaml("shrink", Some(&ns), "10.20.0.0/24", &["10.20.0.128/25"]),
            pool_yaml("shrink", Some(&ns), "10.20.0.0/26", &[]),
        ];
        // 'a' allocate, 'd' pool delete, 'u' apply an update (its YAML goes to stdin).
        let mut jobs: Vec<(char, Vec<String>)> = Vec::new();
        for i in 0..allocators {
            let owner = format!("Node/node-{i}");
            jobs.push((
                'a',
                argv(&["-n", &ns, "allocate", "shrink", "--owner", &owner]),
            ));
            if i % 4 == 0 {
                jobs.push((
                    'a',
                    argv(&["-n", &ns, "allocate", "doomed", "--owner", &owner]),
                ));
            }
            if i == 1 || i == allocators / 2 {
                jobs.push(('d', argv(&["-n", &ns, "pool", "delete", "doomed"])));
            }
            if i % (allocators / updates.len()) == 0 {
                let update = &updates[i / (allocators / updates.len()) % updates.len()];
                jobs.push(('u', vec![update.clone()]));
            }
        }
        stress.round(jobs.len(), |state, found| {
            let gate = std::sync::Barrier::new(jobs.len());
            let outs: Vec<(char, Outcome)> = thread::scope(|s| {
                let handles: Vec<_> = jobs
                    .iter()
                    .map(|(kind, args)| {
                        let gate = &gate;
                        s.spawn(move || {
                            gate.wait();
                            let out = match kind {
                                'u' => state.apply(&args[0]),
                                _ => state.run(args),
                            };
                            (*kind, out)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a runner thread panicked"))
                    .collect()
            });
            for (kind, out) in &outs {
                let allowed: &[i32] = match kind {
                    // Exhausted once a shrink lands; not found once `doomed` is gone.
                    'a' => &[code::OK, code::NOT_FOUND, code::EXHAUSTED],
                    // Refused while an allocation would be stranded.
                    'u' => &[code::OK, code::CONFLICT],
                    // Refused while allocations exist; not found once another delete won.
                    _ => &[code::OK, code::NOT_FOUND, code::CONFLICT],
                };
                if out.crashed() || !out.code.is_some_and(|c| allowed.contains(&c)) {
                    found.push(format!("round {r}: {}", unexpected(out)));
                }
                if out.code == Some(code::OK) {
                    match kind {
                        'u' => applied += 1,
                        'd' => deleted += 1,
                        _ => {}
                    }
                }
            }
        });
    }
    eprintln!("reshape: {applied} racing updates applied, {deleted} racing deletes won");
    stress.finish();
}

/// (e) Storms of one owner, guarded-release churn and fills to exhaustion, all at once,
/// while the outside world works the same state directory (`torture/outside.rs`): `git
/// clean -qfdX`, `git pull` of another clone's commits that add, remove, move, hand over and
/// re-create allocations of the world's own owners in the storm's and the churn's pools,
/// `cp` of the storming owner's file over itself (and of other stable files), `touch`. None
/// of those changes gives an owner a second address, so every storming identity holds one
/// address and every process printed it, each fill hands out each candidate once, the churn
/// never loses an allocation, the invariants hold after every round, and every process exits
/// 0, 4 or 5 (or 1 when `git clean` deleted its temporary file; it then runs again).
#[test]
#[cfg_attr(
    not(all(has_pv, has_rsync)),
    ignore = "needs pv and rsync, the outside world's slow writer and second clone (apt-get install pv rsync)"
)]
fn storms_churn_and_fills_keep_the_invariants_while_git_and_cp_work_the_state() {
    const NS: &str = "tenant/outside";
    let (rounds, identities, per_identity, workers, fillers) = if long_run() {
        (300, 3, 16, 6, 20)
    } else {
        (4, 2, 8, 3, 16)
    };
    let fill_candidates = 14; // a /28
    let mut stress = Stress::new("outside", rounds);
    stress.apply(&format!(
        "{}---\n{}",
        pool_yaml("storm", Some(NS), "10.60.0.0/20", &[]),
        pool_yaml("churn", None, "10.61.0.0/27", &[])
    ));
    stress.start_world(outside::Config {
        // The storms claim within 10.60.0.0/21 (2,046 addresses). The churn's workers hold
        // at most `workers` addresses at once and allocation goes lowest first, so they stay
        // below .17.
        slots: vec![
            Slots::range(Some(NS), "storm", "10.60.8.1", "10.60.8.120"),
            Slots::range(None, "churn", "10.61.0.17", "10.61.0.30"),
        ],
        // Storm and fill owners are never released; churn owners are, and the world's own
        // allocations change with its pulls.
        stable: |m| {
            let name = m.spec.owner.name();
            name.starts_with("vm-") || name.starts_with("fill-")
        },
    });
    let history: Vec<Mutex<Vec<IpAddr>>> = (0..workers).map(|_| Default::default()).collect();
    let conflicts = AtomicUsize::new(0);
    while let Some(r) = stress.next_round() {
        let fill = format!("fill-{r}");
        let cidr = format!("10.62.{}.{}/28", r / 16, r % 16 * 16);
        stress.apply(&pool_yaml(&fill, None, &cidr, &[]));
        let width = identities * per_identity + workers + fillers;
        stress.round_in_world(width, |state, world, found| {
            let world = world.expect("the world was started");
            let owner = |k: usize| format!("VirtualMachine/vm-{r}-{k}/0");
            let uid = |k: usize| format!("00000000-0000-4000-8000-{r:04x}{k:08x}");
            world.note(format!("round {r}"));
            // Identity 0's file is copied over itself in a tight loop once it exists.
            world.focus(Some(NS), &owner(0), Some(&uid(0)));
            let run = |argv: &[String]| world.run(state, argv);
            let storm = || {
                let mut found = Vec::new();
                let argvs: Vec<Vec<String>> = (0..identities * per_identity)
                    .map(|i| {
                        let k = i % identities;
                        argv(&[
                            "-n",
                            NS,
                            "allocate",
                            "storm",
                            "--owner",
                            &owner(k),
                            "--uid",
                            &uid(k),
                            "--within",
                            "10.60.0.0/21",
                        ])
                    })
                    .collect();
                let outs = state.run_all_by(&argvs, run);
                let scan = world.steady(|| state.scan());
                for (i, out) in outs.iter().enumerate() {
                    world.note(format!("round {r} storm {i}: {}", out.describe()));
                }
                for k in 0..identities {
                    let mut printed = BTreeSet::new();
                    for out in outs.iter().skip(k).step_by(identities) {
                        match address(out) {
                            Some(a) if out.code == Some(code::OK) && !out.crashed() => {
                                printed.insert(a);
                            }
                            _ => found.push(format!("round {r}: {}", unexpected(out))),
                        }
                    }
                    let held = scan.held_by(Some(NS), "storm", &owner(k), Some(&uid(k)));
                    if held.len() != 1 || printed.iter().ne(held.iter()) {
                        found.push(format!(
                            "round {r}: identity {k} was printed {printed:?} and holds {held:?}"
                        ));
                    }
                }
                found
            };
            let fills = || {
                let mut found = Vec::new();
                let filler = |i: usize| format!("FloatingIP/fill-{r}-{i}");
                let argvs: Vec<Vec<String>> = (0..fillers)
                    .map(|i| argv(&["allocate", &fill, "--owner", &filler(i)]))
                    .collect();
                let outs = state.run_all_by(&argvs, run);
                let mut won = Vec::new();
                for (i, out) in outs.iter().enumerate() {
                    match (out.code, address(out)) {
                        (Some(code::OK), Some(a)) if !out.crashed() => won.push((i, a)),
                        (Some(code::EXHAUSTED), _) if !out.crashed() => {}
                        _ => found.push(format!("round {r}: {}", unexpected(out))),
                    }
                }
                let distinct: HashSet<IpAddr> = won.iter().map(|&(_, a)| a).collect();
                if won.len() != fill_candidates || distinct.len() != fill_candidates {
                    found.push(format!(
                        "round {r}: {} fillers won {} distinct addresses of {fill_candidates}",
                        won.len(),
                        distinct.len()
                    ));
                }
                let scan = world.steady(|| state.scan());
                for &(i, a) in &won {
                    let held = scan.held_by(None, &fill, &filler(i), None);
                    if held != [a] {
                        found.push(format!(
                            "round {r}: fill-{r}-{i} was told {a} but holds {held:?}"
                        ));
                    }
                }
                found
            };
            thread::scope(|s| {
                let storm = s.spawn(storm);
                let fills = s.spawn(fills);
                let churn: Vec<_> = (0..workers)
                    .map(|w| {
                        let (history, conflicts) = (&history[w], &conflicts);
                        s.spawn(move || {
                            let mut history = history.lock().expect("one worker per history");
                            churn_once(state, Some(world), "churn", w, r, &mut history, conflicts)
                        })
                    })
                    .collect();
                found.extend(storm.join().expect("the storm thread panicked"));
                found.extend(fills.join().expect("the fill thread panicked"));
                for one in churn {
                    found.extend(one.join().expect("a churn worker panicked"));
                }
            });
        });
    }
    eprintln!(
        "outside: {} guarded releases of addresses held by someone else were refused (exit 4)",
        conflicts.load(Ordering::Relaxed)
    );
    stress.finish();
}
