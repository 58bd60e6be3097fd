//! MACs on NICs with the outside world running beside ipamctl (issue 30): `git clean -fdX`
//! in a loop, `cp` of allocation files and MAC records over themselves (the same bytes,
//! in place), and a relabelling checkout of the holders' allocation files (unlink, then an
//! exclusive create of the same bytes, as `git checkout` replaces a file), while rounds of
//! concurrent claims ask for the holders' MACs and for MACs of their own (claimed and
//! released again). No MAC may ever be on two allocations of the pool, read from the files
//! themselves whenever the loops are paused; every claim of a held MAC is refused.

mod torture;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::thread;

use torture::budget::Budget;
use torture::{Rng, State, code};

const POOL: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: lan
spec:
  cidr: 10.0.0.0/24
  kind: public
";

/// How many claim rounds run while the world does (each of 16 processes): 12, in at most
/// 2 minutes, and at least 4.
const ROUNDS: usize = 12;

fn holder_mac(i: usize) -> String {
    format!("02:00:00:00:0a:{i:02x}")
}

/// Every MAC of the pool `lan` and the allocations holding it, from the files.
fn macs_on_disk(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let dir = root.join("cluster/ipallocations");
    for entry in std::fs::read_dir(&dir).expect("list the allocations") {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let m = ipamctl::yaml::decode_allocation(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Some(mac) = m.spec.mac {
            held.entry(mac.to_string())
                .or_default()
                .push(m.spec.address.to_string());
        }
    }
    held
}

fn git(root: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .current_dir(root)
        .args(args)
        .env("GIT_AUTHOR_NAME", "world")
        .env("GIT_AUTHOR_EMAIL", "world@example.invalid")
        .env("GIT_COMMITTER_NAME", "world")
        .env("GIT_COMMITTER_EMAIL", "world@example.invalid")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Replaces `path` as `git checkout` does: unlink, then an exclusive create of `bytes`.
fn relabel(path: &Path, bytes: &[u8]) {
    let _ = std::fs::remove_file(path);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        let _ = f.write_all(bytes);
    }
}

#[test]
fn no_mac_is_ever_on_two_allocations_while_the_world_runs() {
    let state = State::new();
    let root = state.root.clone();
    assert_eq!(state.apply(POOL).code, Some(code::OK));
    // Eight holders, never released while the world runs.
    for i in 0..8 {
        let owner = format!("VirtualMachine/holder-{i}/0");
        let out = state.run(&[
            "allocate",
            "lan",
            "--owner",
            &owner,
            "--mac",
            &holder_mac(i),
        ]);
        assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    }
    assert!(git(&root, &["init", "-q"]));
    assert!(git(&root, &["add", "-A"]));
    assert!(git(&root, &["commit", "-qm", "holders"]));
    // The holders' files as they are: what `cp` and the relabelling write back.
    let mut stable: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for dir in ["cluster/ipallocations", "cluster/macs"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                stable.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    assert_eq!(stable.len(), 16);
    let stable = Arc::new(stable);
    let stop = Arc::new(AtomicBool::new(false));
    // The loops hold it (read) for one step; the checks take it (write): the quiet moments.
    let pause = Arc::new(RwLock::new(()));
    let counts = Arc::new([
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ]);
    let mut loops = Vec::new();
    let seed = Rng::from_env_or_time().seed();
    for which in 0..3 {
        let (stop, pause, counts, stable, root) = (
            Arc::clone(&stop),
            Arc::clone(&pause),
            Arc::clone(&counts),
            Arc::clone(&stable),
            root.clone(),
        );
        let mut rng = Rng::new(seed.wrapping_add(which as u64));
        loops.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                {
                    let _step = pause.read().unwrap();
                    let (path, bytes) = &stable[rng.below(stable.len() as u64) as usize];
                    match which {
                        0 => {
                            git(&root, &["clean", "-qfdX"]);
                        }
                        // `cp` over the file itself: the same bytes, in place.
                        1 => {
                            let _ = std::fs::write(path, bytes);
                        }
                        // Only allocation files: a record relabelled under a claim of its
                        // MAC is the window `store/fs/macs.rs` leaves to `check`.
                        _ => {
                            if path.extension().is_some_and(|e| e == "yaml") {
                                relabel(path, bytes);
                            }
                        }
                    }
                    counts[which].fetch_add(1, Ordering::Relaxed);
                }
                thread::sleep(std::time::Duration::from_micros(200 + rng.below(800)));
            }
        }));
    }
    let mut refused = 0;
    let mut claimed = 0;
    let mut taken_in_a_gap = 0;
    let rounds = Budget::new("mac rounds", ROUNDS, std::time::Duration::from_secs(120)).at_least(4);
    for round in rounds.rounds() {
        // Sixteen at once: eight ask for holders' MACs, eight for two MACs of their own.
        let argvs: Vec<Vec<String>> = (0..16)
            .map(|j| {
                let owner = format!("VirtualMachine/r{round}-{j}/0");
                let mac = if j < 8 {
                    holder_mac(j)
                } else {
                    format!("02:00:00:00:0b:{:02x}", j % 2)
                };
                ["allocate", "lan", "--owner", &owner, "--mac", &mac]
                    .map(String::from)
                    .to_vec()
            })
            .collect();
        let outcomes = state.run_all(&argvs);
        for (argv, out) in argvs.iter().zip(&outcomes) {
            let mac = &argv[5];
            match out.code {
                Some(code::OK) => {
                    // A holder's MAC goes to another NIC only with the holder's own address:
                    // a relabelling (unlink, then create) left that address free for an
                    // instant and this claim's exclusive create took it, and the MAC's record
                    // names that address. The address was free when it was claimed (the
                    // file store's documented relabelling window, `store/fs/mod.rs`); the
                    // MAC is still on one allocation, which the quiet check below verifies.
                    if let Some(i) = mac.strip_prefix("02:00:00:00:0a:") {
                        let i = usize::from_str_radix(i, 16).expect("a holder's MAC");
                        assert_eq!(
                            out.stdout.trim(),
                            format!("10.0.0.{}", i + 1),
                            "a holder's MAC was given to another NIC at another address: {}",
                            out.describe()
                        );
                        taken_in_a_gap += 1;
                    }
                    claimed += 1;
                }
                Some(code::CONFLICT) => {
                    assert!(
                        out.stderr.contains(&format!("MAC {mac} is held")),
                        "{}",
                        out.describe()
                    );
                    refused += 1;
                }
                // A transient I/O error of the world's making (a file gone under a read).
                Some(code::FAILURE) => {}
                _ => panic!("{}", out.describe()),
            }
        }
        {
            let _quiet = pause.write().unwrap();
            let twice: Vec<_> = macs_on_disk(&root)
                .into_iter()
                .filter(|(_, at)| at.len() > 1)
                .collect();
            assert!(
                twice.is_empty(),
                "round {round} (seed {seed}): a MAC on two allocations: {twice:?}"
            );
        }
        // Release this round's own MACs, so the next round claims them again.
        for j in 8..16 {
            let owner = format!("VirtualMachine/r{round}-{j}/0");
            let out = state.run(&["release", "--owner", &owner, "--ignore-not-found"]);
            assert!(
                matches!(out.code, Some(code::OK | code::FAILURE)),
                "{}",
                out.describe()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.join().unwrap();
    }
    let held = macs_on_disk(&root);
    for i in 0..8 {
        assert_eq!(held.get(&holder_mac(i)).map(Vec::len), Some(1), "{held:?}");
    }
    assert!(held.values().all(|at| at.len() == 1), "{held:?}");
    let check = state.run(&["check"]);
    assert_eq!(check.code, Some(code::OK), "{}", check.describe());
    eprintln!(
        "{}; seed {seed}: {claimed} claimed ({taken_in_a_gap} at a holder's address in a relabelling gap), {refused} refused; {} cleans, {} cps, {} relabels",
        rounds.finish(),
        counts[0].load(Ordering::Relaxed),
        counts[1].load(Ordering::Relaxed),
        counts[2].load(Ordering::Relaxed)
    );
    assert!(
        refused >= rounds.done() * 8 - 8,
        "too few claims of held MACs were refused: {refused} in {} rounds",
        rounds.done()
    );
}
