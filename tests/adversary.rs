//! The file store against a second adversary (issue 20): a release whose delete an outside
//! `rm` and another claim slip in front of, one-second timestamps, files rewritten in place
//! slowly, a `git checkout` that relabels an owner's file under a claim, FIFOs, devices and
//! hard links planted at manifest paths, and `rsync -a`/`cp -a` from another clone while
//! locks are held. Each test drives the real binary beside real processes (`strace` fault
//! injection to hold a window open, `rm`, `cp`, `git`, `rsync`, `pv`, `mkfifo`, `mknod`,
//! `ln`, a loop-mounted ext4) and judges the outcome from the files.
//!
//! Needs root, `strace` (with `-e inject=`), `git`, `rsync` and `pv`: a test that needs
//! strace, rsync, pv or root is ignored, with the reason, on a machine without them (see
//! `build.rs`); one that needs git fails naming it. The one-second-timestamp test also needs loop devices: without
//! them it prints why and passes, except under `CI=true`. The tests run one at a time (their
//! windows are timed).

mod common;
mod torture;
mod traced;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Test, code};
use torture::needs::require;
use torture::{Outcome, finish};
use traced::*;

/// `cmd` under strace, its trace in `trace` (see [`under_strace_to`]).
fn under_strace(cmd: &Command, trace: &Path, inject: &str) -> Command {
    under_strace_to(cmd, trace, inject, &[])
}

/// The allocation `rel` with its owner's name `from` replaced by `to`.
fn relabelled(text: &str, from: &str, to: &str) -> String {
    let (old, new) = (format!("    name: {from}\n"), format!("    name: {to}\n"));
    assert!(text.contains(&old), "not held by {from}:\n{text}");
    text.replace(&old, &new)
}

// ---- A: a release deletes only the file it verified --------------------------------------

/// A release of fip-a's address is held by strace just before it deletes (the `unlinkat`
/// of the old code, the rename to a private name of the new, both delayed 3 s). Meanwhile
/// an outside `rm` removes fip-a's file and fip-b claims the address (the lowest free).
/// When the release goes on, it must not delete fip-b's claim: it finds what it took from
/// the name is not what it verified, puts it back and refuses (exit 4, held by fip-b).
#[test]
#[cfg_attr(not(has_strace), ignore = "needs strace (apt-get install strace)")]
fn a_release_whose_delete_is_preceded_by_an_outside_rm_and_a_claim_keeps_the_new_claim() {
    let _serial = serial();
    for (round, remove) in ["rm", "git"].into_iter().enumerate() {
        let test = Test::new("seed");
        let state = test.state();
        let a = format!("FloatingIP/fip-rel-a{round}");
        let addr = allocate(&test, &a);
        // Another tracked allocation, so that git keeps the directory when it removes one.
        allocate(&test, "FloatingIP/fip-rel-keep");
        if remove == "git" {
            // Upstream (`main`) released it; this clone is one commit behind.
            require("git");
            git(&state, &["init", "-q"]);
            git(&state, &["add", "-A"]);
            git(&state, &["commit", "-qm", "both"]);
            git(&state, &["rm", "-q", &allocation_file(&addr)]);
            git(&state, &["commit", "-qm", "upstream released it"]);
            git(&state, &["checkout", "-q", "HEAD~1"]);
            assert!(test.exists(&allocation_file(&addr)));
        }
        let args = ["release", POOL, addr.as_str(), "--owner", a.as_str()];
        let trace = test.root().join("release.strace");
        let slow = spawn(under_strace(
            &ipamctl_cmd(&test, &args),
            &trace,
            "unlinkat,renameat2:delay_enter=3000000",
        ));
        assert!(
            wait_until_held(&slow, Duration::from_secs(10)),
            "the release was never held"
        );
        if remove == "rm" {
            sh("rm", &[&allocation_file(&addr)], &state);
        } else {
            // The upstream release arrives: git deletes the file.
            git(&state, &["checkout", "-q", "main"]);
        }
        assert!(!test.exists(&allocation_file(&addr)), "{remove} removed it");
        let b = format!("FloatingIP/fip-rel-b{round}");
        assert_eq!(allocate(&test, &b), addr, "{b} takes the freed address");
        let out = finish(&args, slow);
        let traced = fs::read_to_string(&trace).expect("strace wrote its trace");
        assert!(traced.contains("DELAYED"), "nothing was delayed:\n{traced}");
        assert_eq!(
            held_in(&state, &b),
            std::slice::from_ref(&addr),
            "{remove}: {b}'s claim of {addr} was deleted by the release of {a} ({})",
            out.describe()
        );
        assert_eq!(out.code, Some(code::CONFLICT), "{}", out.describe());
        assert_consistent(&state);
    }
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("start git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- B: one-second timestamps -----------------------------------------------------------

/// A loop-mounted ext4 with 128-byte inodes (timestamps to the second), unmounted and
/// removed when dropped.
struct CoarseFs {
    mnt: PathBuf,
    _dir: tempfile::TempDir,
}

impl CoarseFs {
    /// `None` (after printing why) where loop devices cannot be used; under `CI=true` that
    /// fails instead.
    fn mount() -> Option<CoarseFs> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let img = dir.path().join("img");
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).expect("mkdir mnt");
        let step = |program: &str, args: &[&str]| -> Result<(), String> {
            let out = Command::new(program)
                .args(args)
                .output()
                .map_err(|e| format!("{program}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{program} {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        let (img_s, mnt_s) = (img.to_str().expect("UTF-8"), mnt.to_str().expect("UTF-8"));
        let made = step("truncate", &["-s", "64M", img_s])
            .and_then(|()| step("mkfs.ext4", &["-q", "-F", "-I", "128", img_s]))
            .and_then(|()| step("mount", &["-o", "loop", img_s, mnt_s]));
        match made {
            Ok(()) => Some(CoarseFs { mnt, _dir: dir }),
            Err(why) => {
                assert!(
                    std::env::var("CI").map_or(true, |v| v != "true"),
                    "CI=true and no loop-mounted ext4 (needs root, loop devices, e2fsprogs): {why}"
                );
                println!("skipped: no loop-mounted ext4 with 128-byte inodes here ({why})");
                None
            }
        }
    }
}

impl Drop for CoarseFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

/// The `seed` fixture copied to `dir/state`.
fn seed_at(dir: &Path) -> PathBuf {
    let state = dir.join("state");
    common::copy_tree(&common::fixture("seed"), &state);
    state
}

fn run_in(state: &Path, args: &[&str]) -> Outcome {
    let mut cmd = Command::new(common::BIN);
    cmd.arg("-d").arg(state).args(args).env_remove("FAILPOINTS");
    finish(args, spawn(cmd))
}

fn allocate_in(state: &Path, owner: &str) -> String {
    succeeded(&run_in(state, &["allocate", POOL, "--owner", owner]))
}

/// Nanoseconds into the current second of the wall clock.
fn subsecond() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .subsec_nanos()
}

/// On ext4 with 128-byte inodes a file's times are whole seconds. fa claims .N at the start
/// of a second; 300 ms later a look-up (qq's claim) reads and records it; then, in the same
/// second, `cp` rewrites it for fb with the same size: inode, size, mtime and ctime are all
/// as recorded. fb's claim must still find .N (its index may not have vouched for a file
/// changed within a second of the read), not take a second address.
#[test]
#[cfg_attr(
    not(has_root),
    ignore = "needs root (a loop-mounted ext4 with 128-byte inodes)"
)]
fn on_one_second_timestamps_a_same_size_rewrite_in_the_same_second_is_read_again() {
    let _serial = serial();
    let Some(coarse) = CoarseFs::mount() else {
        return;
    };
    let mut same_second = 0;
    for round in 0..5 {
        let dir = coarse.mnt.join(format!("r{round}"));
        fs::create_dir(&dir).expect("mkdir");
        let state = seed_at(&dir);
        // Warm: the pool file and the directories exist and are old.
        allocate_in(&state, "FloatingIP/warm");
        assert!(wait_until(Duration::from_secs(2), || subsecond() < 50_000_000));
        let fa = allocate_in(&state, "FloatingIP/fa");
        thread::sleep(Duration::from_millis(300));
        allocate_in(&state, "FloatingIP/qq");
        let file = state.join(allocation_file(&fa));
        let before = fs::metadata(&file).expect("fa's file");
        assert_eq!(before.ctime_nsec(), 0, "not a one-second file system");
        let other = dir.join("fb.yaml");
        fs::write(
            &other,
            relabelled(&fs::read_to_string(&file).expect("read"), "fa", "fb"),
        )
        .expect("write");
        sh(
            "cp",
            &[
                other.to_str().expect("UTF-8"),
                file.to_str().expect("UTF-8"),
            ],
            &dir,
        );
        let after = fs::metadata(&file).expect("fb's file");
        if (after.ino(), after.size(), after.mtime(), after.ctime())
            != (before.ino(), before.size(), before.mtime(), before.ctime())
        {
            // The second turned over: this round proves nothing.
            continue;
        }
        same_second += 1;
        let fb = allocate_in(&state, "FloatingIP/fb");
        assert_eq!(
            fb, fa,
            "fb was given a second address beside the file cp gave it"
        );
        assert_eq!(held_in(&state, "FloatingIP/fb"), vec![fa.clone()]);
        assert_consistent(&state);
    }
    assert!(
        same_second > 0,
        "no round rewrote the file within the second of its claim"
    );
}

// ---- D: a file rewritten in place, slowly ----------------------------------------------

/// Starts `pv -qL RATE` rewriting `file` in place with its own bytes (the way `cp`, an
/// editor or a sync tool does, slowly) and waits until the file is between `shorter_by`
/// bytes short of whole and whole: a prefix that is a complete manifest of another owner
/// (`name: fip` while `name: fip-web-01` is being written).
fn slow_rewrite(dir: &Path, file: &Path, rate: u32, shorter_by: u64) -> Child {
    require("pv");
    let bytes = fs::read(file).expect("read");
    let whole = bytes.len() as u64;
    let copy = dir.join("bak.yaml");
    fs::write(&copy, &bytes).expect("write the copy");
    let writer = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "pv -qL {rate} '{}' > '{}'",
            copy.display(),
            file.display()
        ))
        .spawn()
        .expect("start pv");
    assert!(
        wait_until(Duration::from_secs(60), || {
            fs::metadata(file).is_ok_and(|m| m.len() >= whole - shorter_by && m.len() < whole)
        }),
        "the rewrite never reached the owner's name"
    );
    writer
}

/// The seed state in which `owner` holds an address of the public pool: the test, its state
/// directory, the address and its allocation file.
fn seed_holding(owner: &str) -> (Test, PathBuf, String, PathBuf) {
    let test = Test::new("seed");
    let state = test.state();
    let addr = allocate(&test, owner);
    let file = state.join(allocation_file(&addr));
    (test, state, addr, file)
}

/// fip-web-01 holds .N; its file is rewritten in place with the same bytes at 40 bytes a
/// second. While the file holds a prefix that parses as the owner `fip`, fip-web-01 asks
/// again: it must get .N back (the file is in flight until it is exactly ipamctl's output
/// or stable), not a second address. Then, with fip-web-01 live, `reconcile --apply
/// --min-age 0` during another rewrite must release nothing.
#[test]
#[cfg_attr(not(has_pv), ignore = "needs pv (apt-get install pv)")]
fn a_file_rewritten_in_place_slowly_is_not_taken_for_its_prefixes_owner() {
    let _serial = serial();
    let owner = "FloatingIP/fip-web-01";
    let (test, state, addr, file) = seed_holding(owner);
    thread::sleep(Duration::from_millis(700));
    let mut writer = slow_rewrite(test.root(), &file, 40, 8);
    let again = allocate(&test, owner);
    writer.wait().expect("pv ran");
    assert_eq!(again, addr, "{owner} was given a second address");
    assert_eq!(held_in(&state, owner), vec![addr.clone()]);
    assert_consistent(&state);

    let live = test.root().join("live.txt");
    fs::write(&live, format!("{owner}\n")).expect("write the live list");
    thread::sleep(Duration::from_millis(700));
    let mut writer = slow_rewrite(test.root(), &file, 40, 8);
    let args = [
        "reconcile",
        "--live",
        live.to_str().expect("UTF-8"),
        "--apply",
        "--min-age",
        "0",
        "--max-release",
        "100%",
    ];
    let out = ipamctl(&test, &args);
    writer.wait().expect("pv ran");
    assert!(
        !out.stdout.contains("released"),
        "reconcile released the live owner's allocation: {}",
        out.describe()
    );
    assert_eq!(
        held_in(&state, owner),
        vec![addr.clone()],
        "{}",
        out.describe()
    );
    assert_consistent(&state);
}

// ---- F: a git checkout that relabels an owner's file under a claim ------------------------

/// fip-f holds .5 (.4 is free below it). A `git checkout` of a commit that only relabels
/// fip-f's file replaces it by unlink and create; a claim for fip-f whose look-up runs
/// between the two finds nothing and takes .4. Here the claim is slowed by strace before
/// its create and git's unlink (delayed 1 s) and create land between its look-up and its
/// create: after the create the claim sees fip-f's file is back, undoes its own and answers
/// .5. (Were git's create to come after the claim's re-check, fip-f would hold two, and
/// `check` reports it: README's Guarantees.)
#[test]
#[cfg_attr(not(has_strace), ignore = "needs strace (apt-get install strace)")]
fn a_claim_undoes_its_duplicate_when_a_relabelling_git_checkout_puts_the_owner_back() {
    let _serial = serial();
    require("git");
    let test = Test::new("seed");
    let state = test.state();
    let low = allocate(&test, "FloatingIP/fip-low");
    let addr = allocate(&test, "FloatingIP/fip-f");
    succeeded(&ipamctl(
        &test,
        &["release", POOL, &low, "--owner", "FloatingIP/fip-low"],
    ));
    let rel = allocation_file(&addr);
    git(&state, &["init", "-q"]);
    git(&state, &["add", "-A"]);
    git(&state, &["commit", "-qm", "fip-f"]);
    let text = test.read(&rel);
    let labelled = text.replace("  labels:\n", "  labels:\n    example.com/team: blue\n");
    assert_ne!(labelled, text, "no labels to add to:\n{text}");
    test.write(&rel, &labelled);
    git(&state, &["commit", "-qam", "relabel fip-f"]);
    git(&state, &["checkout", "-q", "HEAD~1"]);

    // The claim: held in its create's `fsync` (the first of the process), for 3 s.
    let args = ["allocate", POOL, "--owner", "FloatingIP/fip-f"];
    let claim_trace = test.root().join("claim.strace");
    let mut checkout = Command::new("git");
    checkout
        .args(["checkout", "-q", "main"])
        .current_dir(&state);
    let git_trace = test.root().join("git.strace");
    // git's unlink of the file, held 1 s after it is done.
    let git = spawn(under_strace_to(
        &checkout,
        &git_trace,
        "unlink,unlinkat:delay_exit=1000000",
        &[&rel],
    ));
    assert!(
        wait_until(Duration::from_secs(10), || !test.exists(&rel)),
        "git never unlinked {rel}"
    );
    let claim = spawn(under_strace(
        &ipamctl_cmd(&test, &args),
        &claim_trace,
        "fsync:delay_enter=3000000:when=1",
    ));
    let git = finish(&["git", "checkout"], git);
    assert_eq!(git.code, Some(0), "{}", git.describe());
    assert!(test.exists(&rel), "git put {rel} back");
    let out = finish(&args, claim);
    let traced = fs::read_to_string(&claim_trace).expect("trace");
    assert!(
        traced.contains("DELAYED"),
        "the claim was not held:\n{traced}"
    );
    assert_eq!(
        held_in(&state, "FloatingIP/fip-f"),
        vec![addr.clone()],
        "fip-f holds two addresses ({})",
        out.describe()
    );
    assert_eq!(succeeded(&out), addr);
    assert_consistent(&state);
}

// ---- C: special files and hard links -----------------------------------------------------

/// A FIFO with a writer blocked in `open`, and a character device (`mknod c 1 3`, the null
/// device), planted at allocation paths: `list` and `allocate` must open neither (strace
/// sees no `open` of them but with `O_PATH`), and the FIFO's writer is never woken.
#[test]
#[cfg_attr(
    not(all(has_strace, has_root)),
    ignore = "needs strace (apt-get install strace) and root (mknod)"
)]
fn a_fifo_and_a_device_at_allocation_paths_are_never_opened() {
    let _serial = serial();
    let test = Test::new("seed");
    let state = test.state();
    allocate(&test, "FloatingIP/fip-c");
    let fifo = allocation_file("203.0.113.9");
    let device = allocation_file("203.0.113.10");
    sh("mkfifo", &[&fifo], &state);
    sh("mknod", &[&device, "c", "1", "3"], &state);
    let mut writer = Command::new("sh")
        .arg("-c")
        .arg(format!("echo woken > '{fifo}'"))
        .current_dir(&state)
        .spawn()
        .expect("start the FIFO's writer");
    thread::sleep(Duration::from_millis(200));
    for args in [
        &["list"][..],
        &["allocate", POOL, "--owner", "FloatingIP/fip-c2"],
        &["allocate", POOL, "--owner", "FloatingIP/fip-c"],
    ] {
        let trace = test.root().join("c.strace");
        let out = finish(
            args,
            spawn(under_strace(
                &ipamctl_cmd(&test, args),
                &trace,
                "openat,open:delay_exit=1",
            )),
        );
        let traced = fs::read_to_string(&trace).expect("trace");
        let opened: Vec<&str> = traced
            .lines()
            .filter(|l| l.contains("openat(") || l.contains("open("))
            .filter(|l| l.contains("-9.yaml") || l.contains("-10.yaml"))
            .filter(|l| !l.contains("O_PATH"))
            .collect();
        assert!(
            opened.is_empty(),
            "{args:?} opened a special file ({}):\n{}",
            out.describe(),
            opened.join("\n")
        );
        assert_eq!(
            writer.try_wait().expect("wait"),
            None,
            "{args:?} woke the FIFO's writer ({})",
            out.describe()
        );
    }
    let _ = writer.kill();
    let _ = writer.wait();
}

/// A hard link planted at an allocation path to a root-only file elsewhere: `check`,
/// `list` and `allocate` never show its bytes; `list` and `allocate` refuse with one
/// `error:` line naming the file, `check` reports it.
#[test]
fn a_hard_link_at_an_allocation_path_is_refused_and_never_quoted() {
    let _serial = serial();
    let test = Test::new("seed");
    let state = test.state();
    allocate(&test, "FloatingIP/fip-h");
    let secret = test.root().join("shadow");
    let words = "root:$6$s3cr3tsalt$0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:19000:0:99999:7:::";
    fs::write(&secret, format!("{words}\n")).expect("write the secret");
    sh("chmod", &["600", secret.to_str().expect("UTF-8")], &state);
    let planted = allocation_file("203.0.113.9");
    sh("ln", &[secret.to_str().expect("UTF-8"), &planted], &state);
    for args in [
        &["check"][..],
        &["list"],
        &["allocate", POOL, "--owner", "FloatingIP/fip-h2"],
    ] {
        let out = ipamctl(&test, args);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(
            !all.contains("s3cr3t") && !all.contains("root:$6"),
            "{args:?} quoted the linked file: {}",
            out.describe()
        );
        assert_ne!(out.code, Some(code::OK), "{}", out.describe());
        if args[0] != "check" {
            common::assert_one_error(&out.stderr);
            assert!(
                out.stderr.starts_with("error: ")
                    && out.stderr.contains("203-0-113-9.yaml")
                    && out.stderr.contains("hard link"),
                "{}",
                out.describe()
            );
        } else {
            assert!(
                out.stdout.contains("203-0-113-9.yaml") && out.stdout.contains("hard link"),
                "{}",
                out.describe()
            );
        }
    }
    assert_eq!(
        fs::read_to_string(&secret).expect("read"),
        format!("{words}\n")
    );
}

// ---- Locks: rsync -a and cp -a from another clone, bounded waits ---------------------------

/// A claim for fip-l is held by strace inside its locks (before its create) while another
/// clone's files are synced over the state directory (`rsync -a`, then `cp -a`), which
/// replaces the marker `.ipamctl` with the other clone's. A second claim for fip-l must
/// still wait for the first (the lock file it also locks is this checkout's own), and with
/// `IPAMCTL_LOCK_TIMEOUT=1` give up: exit 1, naming the lock and the holder. fip-l ends up
/// with one address.
#[test]
#[cfg_attr(
    not(all(has_strace, has_rsync)),
    ignore = "needs strace and rsync (apt-get install strace rsync)"
)]
fn locks_hold_while_another_clone_is_synced_over_the_state_and_waits_are_bounded() {
    let _serial = serial();
    require("rsync");
    for tool in ["rsync", "cp"] {
        require(tool);
        let test = Test::new("seed");
        let state = test.state();
        let clone = test.root().join("clone");
        common::copy_tree(&common::fixture("seed"), &clone);
        // The other clone was made at another time: its marker differs in mtime.
        sh("touch", &["-d", "2001-01-01", ".ipamctl"], &clone);
        allocate(&test, "FloatingIP/warm");
        let owner = "FloatingIP/fip-l";
        let args = ["allocate", POOL, "--owner", owner];
        let first = held_at_first_fsync(&test, &args, "l");
        sync_over(tool, &clone, &state, test.root());
        let mut second = ipamctl_cmd(&test, &args);
        second.env("IPAMCTL_LOCK_TIMEOUT", "1");
        let second = finish(&args, spawn(second));
        let first = finish(&args, first);
        let got = succeeded(&first);
        assert_eq!(
            second.code,
            Some(code::FAILURE),
            "{tool}: the second claim did not wait for the first: {}",
            second.describe()
        );
        common::assert_one_error(&second.stderr);
        assert!(
            second.stderr.contains("timed out")
                && second.stderr.contains("the lock of")
                && second.stderr.contains("held by"),
            "{}",
            second.describe()
        );
        assert_eq!(held_in(&state, owner), vec![got], "{tool}");
        assert_consistent(&state);
    }
}

/// `args` run under strace, held 3 s at its first `fsync` (a claim's, after it chose and
/// before its file exists, its locks held), once it is held there.
fn held_at_first_fsync(test: &Test, args: &[&str], name: &str) -> Child {
    let trace = test.root().join(format!("{name}.strace"));
    let held = spawn(under_strace(
        &ipamctl_cmd(test, args),
        &trace,
        "fsync:delay_enter=3000000:when=1",
    ));
    assert!(
        wait_until_held(&held, Duration::from_secs(10)),
        "{name}: never held at its first fsync"
    );
    held
}

/// Syncs the other clone `clone` over `state` with `tool` (`rsync -a` or `cp -a`); with rsync,
/// checks that the marker was replaced by a new inode.
fn sync_over(tool: &str, clone: &Path, state: &Path, root: &Path) {
    let marker = state.join(".ipamctl");
    let ino = fs::metadata(&marker).expect("marker").ino();
    let (from, to) = (
        format!("{}/", clone.display()),
        format!("{}/", state.display()),
    );
    match tool {
        "rsync" => sh("rsync", &["-a", &from, &to], root),
        _ => sh("cp", &["-a", &format!("{from}."), &to], root),
    };
    if tool == "rsync" {
        assert_ne!(
            fs::metadata(&marker).expect("marker").ino(),
            ino,
            "rsync kept the marker's inode"
        );
    }
}

// ---- The lock-byte collision: two owners whose locks share a byte -------------------------

/// Two owners whose locks in pool `public-zone-a` share a byte (their owner keys hash to one
/// 60-bit offset), found by `cargo run --release --example lock_collision`, a birthday
/// search over the real hashes. `ipamctl::store::fs::lock`'s unit test checks that they do.
pub const COLLIDING: [&str; 2] = ["FloatingIP/c0d869d229a8fe4b", "FloatingIP/cdf8df1ad2d92236"];

/// A collision costs waiting, never correctness: a claim for the first owner is held by
/// strace inside its locks, and a claim for the second (another owner, another address)
/// waits for it as if it were the same owner: with `IPAMCTL_LOCK_TIMEOUT=1` it gives up
/// (exit 1, naming the owner lock and the holder) and changes nothing. Once the first is
/// done, the second claims its own address, and each owner holds one.
#[test]
#[cfg_attr(not(has_strace), ignore = "needs strace (apt-get install strace)")]
fn two_owners_whose_locks_share_a_byte_are_serialised_and_each_gets_its_own_address() {
    let _serial = serial();
    let test = Test::new("seed");
    let state = test.state();
    let [first, second] = COLLIDING;
    let args = |owner| ["allocate", POOL, "--owner", owner];
    let held = held_at_first_fsync(&test, &args(first), "collide");
    let mut waiting = ipamctl_cmd(&test, &args(second));
    waiting.env("IPAMCTL_LOCK_TIMEOUT", "1");
    let waited = finish(&args(second), spawn(waiting));
    assert_eq!(
        waited.code,
        Some(code::FAILURE),
        "the second owner's claim did not wait: {}",
        waited.describe()
    );
    common::assert_one_error(&waited.stderr);
    assert!(
        waited.stderr.contains("timed out") && waited.stderr.contains("the lock of one owner"),
        "{}",
        waited.describe()
    );
    let one = succeeded(&finish(&args(first), held));
    let two = succeeded(&ipamctl(&test, &args(second)));
    assert_ne!(one, two);
    assert_eq!(held_in(&state, first), [one]);
    assert_eq!(held_in(&state, second), [two]);
    assert_consistent(&state);
}

// ---- Both lock files replaced while a lock is held ---------------------------------------

/// A supernet's prefix claim decides under the pool's lock, held exclusively from its read
/// of the claims to its create. strace holds the first claim (a /26) at its first `fsync`,
/// after it chose 10.99.0.0/26 and before its file exists. Meanwhile another clone's files
/// are synced over the state (`rsync -a`, a new `.ipamctl`) and `.index/` is removed (`git
/// clean -fdX`, `rm -rf`): the files the old design locked are both replaced. A second
/// claim (a /28) must still wait for the first and then choose around its /26: the old
/// design let it in beside the first, and it chose 10.99.0.0/28, inside the /26.
#[test]
#[cfg_attr(
    not(all(has_strace, has_rsync)),
    ignore = "needs strace and rsync (apt-get install strace rsync)"
)]
fn a_prefix_claim_waits_for_one_holding_its_pool_lock_when_both_lock_files_are_replaced() {
    let _serial = serial();
    require("rsync");
    let test = Test::new("seed");
    let state = test.state();
    let pool = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\nspec:\n  \
                cidr: 10.99.0.0/24\n  kind: supernet\n";
    let file = test.input("sn.yaml", pool);
    succeeded(&ipamctl(&test, &["apply", "-f", &file]));
    // Every lock file there is, made by a first lock.
    succeeded(&ipamctl(
        &test,
        &[
            "allocate",
            "sn",
            "--prefix-length",
            "30",
            "--owner",
            "FloatingIP/warm",
        ],
    ));
    succeeded(&ipamctl(
        &test,
        &["release", "sn", "--owner", "FloatingIP/warm"],
    ));
    let clone = test.root().join("clone");
    fs::create_dir_all(&clone).expect("the other clone");
    fs::copy(state.join(".ipamctl"), clone.join(".ipamctl")).expect("its marker");
    sh("touch", &["-d", "2001-01-01", ".ipamctl"], &clone);
    let first_args = [
        "allocate",
        "sn",
        "--prefix-length",
        "26",
        "--owner",
        "FloatingIP/a",
    ];
    let first = held_at_first_fsync(&test, &first_args, "a");
    sync_over("rsync", &clone, &state, test.root());
    fs::remove_dir_all(state.join(".index")).expect("remove .index");
    let second_args = [
        "allocate",
        "sn",
        "--prefix-length",
        "28",
        "--owner",
        "FloatingIP/b",
    ];
    let second = succeeded(&finish(
        &second_args,
        spawn(ipamctl_cmd(&test, &second_args)),
    ));
    let first = succeeded(&finish(&first_args, first));
    assert_eq!(first, "10.99.0.0/26");
    let (a, b): (ipnet::IpNet, ipnet::IpNet) = (
        first.parse().expect("a prefix"),
        second.parse().expect("a prefix"),
    );
    assert!(
        !a.contains(&b) && !b.contains(&a),
        "the second claim was let in beside the first: {a} and {b} overlap"
    );
    let check = ipamctl(&test, &["check"]);
    assert_eq!(check.code, Some(code::OK), "{}", check.describe());
}

/// A lock file removed while a claim holds it is made again only after that claim is done,
/// so a claim for another owner meanwhile waits for it, and that wait is bounded like any
/// other: with `IPAMCTL_LOCK_TIMEOUT=1` it gives up (exit 1, one `error:` line saying what
/// it waited for and naming the process it waited for), having changed nothing. Once the
/// first is done, the second claims.
#[test]
#[cfg_attr(not(has_strace), ignore = "needs strace (apt-get install strace)")]
fn a_claim_after_the_lock_file_was_removed_under_another_waits_for_it_boundedly() {
    let _serial = serial();
    let test = Test::new("seed");
    let state = test.state();
    allocate(&test, "FloatingIP/warm");
    let first_args = ["allocate", POOL, "--owner", "FloatingIP/fip-first"];
    let first = held_at_first_fsync(&test, &first_args, "first");
    fs::remove_dir_all(state.join(".index")).expect("remove .index");
    let second_args = ["allocate", POOL, "--owner", "FloatingIP/fip-second"];
    let mut waiting = ipamctl_cmd(&test, &second_args);
    waiting.env("IPAMCTL_LOCK_TIMEOUT", "1");
    let waited = finish(&second_args, spawn(waiting));
    assert_eq!(waited.code, Some(code::FAILURE), "{}", waited.describe());
    common::assert_one_error(&waited.stderr);
    assert!(
        waited.stderr.contains("timed out")
            && waited
                .stderr
                .contains("ipamctl processes working in the state directory")
            && waited.stderr.contains("held by process"),
        "{}",
        waited.describe()
    );
    assert_eq!(
        held_in(&state, "FloatingIP/fip-second"),
        Vec::<String>::new(),
        "the claim that gave up holds an address"
    );
    let one = succeeded(&finish(&first_args, first));
    let two = succeeded(&ipamctl(&test, &second_args));
    assert_ne!(one, two);
    assert_consistent(&state);
}

/// The seed state after one claim made its lock file: the test, its state directory and
/// the lock file's path.
fn with_lock_file() -> (Test, PathBuf, PathBuf) {
    let test = Test::new("seed");
    let state = test.state();
    allocate(&test, "FloatingIP/warm");
    let ino = fs::metadata(&state).expect("the state directory").ino();
    let lock = state.join(format!(".index/lock-{ino}"));
    (test, state, lock)
}

/// Something other than a regular file planted at the lock file's own path (`git` checks out
/// a symlink there, or someone makes a FIFO): it is looked at, never opened, and never
/// followed. The claim goes on under the state directory's `flock` held exclusively (the
/// lock of everything where no lock file can be used), a FIFO's blocked writer is not woken,
/// and a symlink's target outside the root is left as it was. The design before opened the
/// lock file's path for writing before it looked, which wakes the FIFO's writer.
#[test]
#[cfg_attr(not(has_strace), ignore = "needs strace (apt-get install strace)")]
fn a_fifo_or_a_symlink_at_the_lock_files_path_is_never_opened() {
    let _serial = serial();
    let (test, state, lock) = with_lock_file();
    // A FIFO with a writer blocked in its open.
    fs::remove_file(&lock).expect("remove the lock file");
    sh("mkfifo", &[lock.to_str().expect("UTF-8")], &state);
    let mut writer = Command::new("sh")
        .arg("-c")
        .arg(format!("echo woken > '{}'", lock.display()))
        .spawn()
        .expect("start the FIFO's writer");
    thread::sleep(Duration::from_millis(200));
    let fip = succeeded(&ipamctl(
        &test,
        &["allocate", POOL, "--owner", "FloatingIP/fifo"],
    ));
    assert_eq!(
        writer.try_wait().expect("wait"),
        None,
        "the claim woke the writer of a FIFO at the lock file's path"
    );
    let _ = writer.kill();
    let _ = writer.wait();
    assert_eq!(held(&test, "FloatingIP/fifo"), [fip]);
    // A symlink to a file outside the root.
    fs::remove_file(&lock).expect("remove the FIFO");
    let outside = test.root().join("outside-secret");
    fs::write(&outside, "secret\n").expect("the outside file");
    std::os::unix::fs::symlink(&outside, &lock).expect("plant the symlink");
    let before = fs::metadata(&outside).expect("outside");
    let link = succeeded(&ipamctl(
        &test,
        &["allocate", POOL, "--owner", "FloatingIP/link"],
    ));
    let after = fs::metadata(&outside).expect("outside");
    assert_eq!(fs::read_to_string(&outside).expect("outside"), "secret\n");
    assert_eq!(
        (before.mtime(), before.mtime_nsec(), before.ctime_nsec()),
        (after.mtime(), after.mtime_nsec(), after.ctime_nsec()),
        "the file outside the root was touched"
    );
    assert!(
        fs::symlink_metadata(&lock)
            .expect("lock")
            .file_type()
            .is_symlink()
    );
    assert_eq!(held(&test, "FloatingIP/link"), [link]);
    assert_consistent(&state);
}

// ---- G: files that name an owner fail closed, whatever their size and while in flight ----

/// Issue 31, finding 7: fip-big holds .N, and its file is replaced (as `cp` would) by its
/// own bytes followed by a comment that makes it larger than a manifest may be (1 MiB). A
/// small file that does not parse and names its owner already fails closed (issue 19); the
/// large one was passed over, and fip-big was given a second address. Now fip-big's claim
/// is exit 1 naming the file, and nothing is claimed; another owner still claims.
#[test]
fn a_file_over_the_size_limit_that_names_its_owner_fails_the_claim_closed() {
    let _serial = serial();
    let owner = "FloatingIP/fip-big";
    let (test, state, addr, file) = seed_holding(owner);
    let mut bytes = fs::read(&file).expect("read");
    bytes.extend_from_slice(b"# ");
    bytes.extend(std::iter::repeat_n(b'x', 1 << 20));
    bytes.push(b'\n');
    fs::write(&file, &bytes).expect("write the large file");
    let out = ipamctl(&test, &["allocate", POOL, "--owner", owner]);
    assert_eq!(out.code, Some(code::FAILURE), "{}", out.describe());
    assert!(
        out.stderr.contains(&allocation_file(&addr)),
        "{}",
        out.describe()
    );
    assert_eq!(
        held_in(&state, owner),
        vec![addr.clone()],
        "{owner} was given a second address: {}",
        out.describe()
    );
    let other = allocate(&test, "FloatingIP/fip-other");
    assert_ne!(other, addr);
}

/// Issue 31, finding 8: fip-web-01 holds .N; half a second after the claim its file is
/// rewritten in place in two writes, the first ending inside the owner's name (so the file
/// parses as `fip-web-0`'s), the second 1.5 s later. A claim for fip-web-01 between the two
/// took the prefix for a whole file once it had not changed for half a second, and gave
/// fip-web-01 a second address. A file that is not exactly ipamctl's output is now in
/// flight for 2 s after its last change: the claim waits for the second write and answers
/// .N (or fails, exit 1, "try again"; never a second address).
#[test]
fn a_file_rewritten_in_place_in_two_writes_is_not_taken_for_its_prefixes_owner() {
    let _serial = serial();
    let owner = "FloatingIP/fip-web-01";
    let (test, state, addr, file) = seed_holding(owner);
    let bytes = fs::read(&file).expect("read");
    assert!(bytes.ends_with(b"name: fip-web-01\n"));
    let first = bytes.len() - 2;
    let copy = test.root().join("bak.yaml");
    fs::write(&copy, &bytes).expect("write the copy");
    let mut writer = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "sleep 0.5; head -c {first} '{copy}' > '{file}'; sleep 1.5; tail -c 2 '{copy}' >> '{file}'",
            copy = copy.display(),
            file = file.display(),
        ))
        .spawn()
        .expect("start sh");
    assert!(
        wait_until(Duration::from_secs(30), || {
            fs::metadata(&file).is_ok_and(|m| m.len() == first as u64)
        }),
        "the first write never happened"
    );
    let out = ipamctl(&test, &["allocate", POOL, "--owner", owner]);
    writer.wait().expect("sh ran");
    assert_eq!(
        fs::read(&file).expect("read"),
        bytes,
        "the rewrite is whole"
    );
    if out.code != Some(code::FAILURE) {
        assert_eq!(succeeded(&out), addr, "{owner} was given a second address");
    }
    assert_eq!(
        held_in(&state, owner),
        vec![addr.clone()],
        "{}",
        out.describe()
    );
    assert_consistent(&state);
}

// ---- H: every lock wait is bounded ---------------------------------------------------------

/// Issue 31, finding 6: the lock file is there but cannot be used (a hard link left by `cp
/// -al`: two names) while another process holds the root's `flock` shared. The wait for
/// the lock of everything (the `flock` exclusively) ended at once each time, because a
/// lock file "was made meanwhile", and the process spun at full CPU past
/// `IPAMCTL_LOCK_TIMEOUT`. Now it waits (sleeping) and gives up at the deadline: exit 1,
/// naming what it waited for; nothing claimed. (The 60 s below only ends a hung run.)
#[test]
fn a_wait_for_an_unusable_lock_file_under_a_shared_flock_ends_at_the_timeout() {
    let _serial = serial();
    let (test, state, lock) = with_lock_file();
    fs::hard_link(&lock, test.root().join("second-name")).expect("a second name");
    let mut holder = Command::new("flock")
        .args(["-s", state.to_str().expect("UTF-8"), "sleep", "120"])
        .spawn()
        .expect("start flock (util-linux)");
    thread::sleep(Duration::from_millis(300));
    let mut cmd = ipamctl_cmd(&test, &["allocate", POOL, "--owner", "FloatingIP/waiter"]);
    cmd.env("IPAMCTL_LOCK_TIMEOUT", "1");
    let mut child = spawn(cmd);
    let ended = wait_until(Duration::from_secs(60), || {
        child.try_wait().expect("wait").is_some()
    });
    if !ended {
        let _ = child.kill();
    }
    let out = finish(&["allocate"], child);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(ended, "the wait never ended: {}", out.describe());
    assert_eq!(out.code, Some(code::FAILURE), "{}", out.describe());
    assert!(
        out.stderr.contains("timed out after 1 s"),
        "{}",
        out.describe()
    );
    assert!(held(&test, "FloatingIP/waiter").is_empty());
}

/// `IPAMCTL_LOCK_TIMEOUT` that is no number of seconds (`abc`, `-5`, `nan`, `inf`) silently
/// meant 30 s; now it is exit 2 naming the value, and nothing is done.
#[test]
fn an_invalid_lock_timeout_is_exit_2_naming_it() {
    let test = Test::new("seed");
    for value in ["abc", "-5", "nan", "inf"] {
        let mut cmd = ipamctl_cmd(&test, &["allocate", POOL, "--owner", "FloatingIP/x"]);
        cmd.env("IPAMCTL_LOCK_TIMEOUT", value);
        let out = finish(&["allocate"], spawn(cmd));
        assert_eq!(out.code, Some(code::INVALID), "{value}: {}", out.describe());
        assert!(
            out.stderr.starts_with("error: ")
                && out
                    .stderr
                    .contains(&format!("IPAMCTL_LOCK_TIMEOUT `{value}`")),
            "{value}: {}",
            out.describe()
        );
        assert!(held(&test, "FloatingIP/x").is_empty());
    }
}
