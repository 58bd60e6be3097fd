//! Concurrency stress: many real `ipamctl` processes at once on one state directory, with
//! readers (`list`, `pool list`, `check`) running throughout. After every round the
//! invariants are checked from the files themselves (see `torture/mod.rs`) and with
//! `ipamctl check`.
//!
//! CI-sized by default; `IPAMCTL_STRESS=long` runs more rounds with more processes:
//!
//! ```text
//! IPAMCTL_STRESS=long cargo test --release --test stress -- --nocapture
//! ```

mod torture;

use std::collections::{BTreeSet, HashSet};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

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
}

impl Stress {
    fn new(name: &'static str) -> Stress {
        let state = State::new();
        let has_check = state.has_check();
        Stress {
            name,
            state,
            has_check,
            rounds: 0,
            width: 0,
            violations: Vec::new(),
        }
    }

    /// Applies pools before the stress starts; these must succeed.
    fn apply(&self, yaml: &str) {
        let out = self.state.apply(yaml);
        assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    }

    /// Runs `round` with readers going all the time, then checks the invariants.
    fn round(&mut self, width: usize, round: impl FnOnce(&State, &mut Vec<String>)) {
        self.rounds += 1;
        self.width = self.width.max(width);
        let stop = AtomicBool::new(false);
        let state = &self.state;
        let has_check = self.has_check;
        let mut found = Vec::new();
        let reader_found = thread::scope(|s| {
            let reader = s.spawn(|| read_until(state, has_check, &stop));
            let _stop = StopOnDrop(&stop);
            round(state, &mut found);
            drop(_stop);
            reader.join().expect("the reader thread panicked")
        });
        self.violations.extend(found);
        self.violations.extend(reader_found);
        self.check_state();
    }

    /// Invariants 1, 2, 3 and 6 from the files; no temporary file left behind by a process
    /// that was not killed; `ipamctl check` clean.
    fn check_state(&mut self) {
        let scan = self.state.scan();
        let round = self.rounds;
        self.violations.extend(
            scan.violations()
                .into_iter()
                .map(|v| format!("round {round}: {v}")),
        );
        for tmp in &scan.temp_files {
            self.violations.push(format!(
                "round {round}: temporary file left behind: {}",
                tmp.display()
            ));
        }
        if self.has_check {
            let out = self.state.run(&["check", "-o", "json"]);
            if out.code != Some(code::OK) || out.crashed() {
                self.violations.push(format!(
                    "round {round}: check is not clean: {}",
                    out.describe()
                ));
            }
        }
    }

    /// Prints the summary line and fails on any violation.
    fn finish(self) {
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
            "{} violations:\n{}",
            self.violations.len(),
            self.violations.join("\n")
        );
    }
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
fn read_until(state: &State, has_check: bool, stop: &AtomicBool) -> Vec<String> {
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
        // `check` prints its summary to stderr; the others print nothing there unless wrong.
        if out.code != Some(code::OK) || out.crashed() || (which != 2 && !out.stderr.is_empty()) {
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
                let whole = json.as_array().is_some_and(|items| {
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
                let whole = json.as_array().is_some_and(|items| {
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
fn address(out: &Outcome) -> Option<Ipv4Addr> {
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
    let mut stress = Stress::new("fill");
    for r in 0..rounds {
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
                        &format!("uid-{r}-{i}"),
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
            let distinct: HashSet<Ipv4Addr> = won.iter().map(|&(_, a)| a).collect();
            if won.len() != candidates || distinct.len() != candidates {
                found.push(format!(
                    "round {r}: {} owners won {} distinct addresses of {candidates} candidates",
                    won.len(),
                    distinct.len()
                ));
            }
            let scan = state.scan();
            for &(i, a) in &won {
                let held = scan.held_by(None, &pool, &format!("FloatingIP/fip-{i}"), Some(&format!("uid-{r}-{i}")));
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
                        format!("uid-{r}-{i}")
                    } else {
                        format!("uid-{r}-{i}-not")
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
                let held = scan.held_by(None, &pool, &format!("FloatingIP/fip-{i}"), Some(&format!("uid-{r}-{i}")));
                let want: &[Ipv4Addr] = if i % 2 == 0 { &[] } else { &[a] };
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
    let mut stress = Stress::new("storm");
    stress.apply(&pool_yaml(
        "storm",
        Some("tenant/storm"),
        "10.100.0.0/24",
        &[],
    ));
    for r in 0..rounds {
        stress.round(identities * per_identity, |state, found| {
            // Interleaved, so the identities' requests start mixed together.
            let owner = |k: usize| format!("VirtualMachine/vm-{r}-{k}/0");
            let uid = |k: usize| format!("uid-{r}-{k}");
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
                let printed: BTreeSet<Option<Ipv4Addr>> = outs
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
                let one: BTreeSet<Option<Ipv4Addr>> = held.iter().copied().map(Some).collect();
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
/// time. Owners share names across workers but not uids. A guarded release of an address
/// the worker no longer holds must never delete anything (exit 0 with nothing released, or
/// exit 4); the worker's own allocation must never vanish under it, and its own guarded
/// release must always find it.
#[test]
fn guarded_release_churn_never_deletes_another_owners_allocation() {
    let (rounds, workers) = if long_run() { (150, 8) } else { (10, 4) };
    let pool = "churn";
    let net = "10.200.0.0/28"; // 14 candidates
    let mut stress = Stress::new("churn");
    stress.apply(&pool_yaml(pool, None, net, &[]));
    let history: Vec<std::sync::Mutex<Vec<Ipv4Addr>>> =
        (0..workers).map(|_| Default::default()).collect();
    let conflicts = AtomicUsize::new(0);
    for r in 0..rounds {
        stress.round(workers, |state, found| {
            let results: Vec<Vec<String>> = thread::scope(|s| {
                let handles: Vec<_> = (0..workers)
                    .map(|w| {
                        let history = &history[w];
                        let conflicts = &conflicts;
                        s.spawn(move || {
                            let mut history = history.lock().expect("one worker per history");
                            churn_once(state, pool, w, r, &mut history, conflicts)
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
    pool: &str,
    w: usize,
    r: usize,
    history: &mut Vec<Ipv4Addr>,
    conflicts: &AtomicUsize,
) -> Vec<String> {
    let mut found = Vec::new();
    let owner = format!("FloatingIP/churn-{}", w % 2);
    let uid = format!("worker-{w}");
    let me = |args: &[&str]| {
        let mut v = argv(args);
        v.extend(argv(&["--owner", &owner, "--uid", &uid]));
        v
    };
    let first = state.run(&me(&["allocate", pool]));
    let Some(mine) = address(&first).filter(|_| first.code == Some(code::OK)) else {
        found.push(format!("worker {w} round {r}: {}", unexpected(&first)));
        return found;
    };
    // A retry racing other workers' churn gets the same address back.
    let again = state.run(&me(&["allocate", pool]));
    if again.code != Some(code::OK) || address(&again) != Some(mine) {
        found.push(format!(
            "worker {w} round {r}: holds {mine}, retry said {}",
            again.describe()
        ));
    }
    // Guarded releases of addresses this identity does not hold (any holder is someone else:
    // an identity holds one address per pool, and this one holds `mine`). Exit 0 with
    // nothing released when the address is free (or the network/broadcast address).
    let mut stale: Vec<Ipv4Addr> = history.iter().rev().take(3).copied().collect();
    stale.push(Ipv4Addr::from(u32::from(mine) ^ 1));
    for addr in stale.into_iter().filter(|&a| a != mine) {
        let out = state.run(&me(&["release", pool, &addr.to_string()]));
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
    let out = state.run(&me(&["release", pool, &mine.to_string()]));
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
    let mut stress = Stress::new("reshape");
    let mut applied = 0;
    let mut deleted = 0;
    for r in 0..rounds {
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
