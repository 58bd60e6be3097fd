//! What the tests that race ipamctl against real processes share (`outside_world.rs`,
//! `adversary.rs`): running the binary and the tools, holding a window open with strace's
//! fault injection, and reading the outcome from the files.

// Each test crate uses a different subset.
#![allow(dead_code)]

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{Test, code};
use crate::torture::{Outcome, Scan, finish};

/// The public pool of the `seed` and `populated` fixtures.
pub const POOL: &str = "public-zone-a";

/// One test at a time (see the module docs).
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `ipamctl -d state ARGS` on the test's state directory, not started yet.
pub fn ipamctl_cmd(test: &Test, args: &[&str]) -> Command {
    let mut cmd = test.command(args);
    cmd.env_remove("FAILPOINTS");
    cmd
}

/// Starts `cmd` with stdin closed and stdout and stderr captured.
pub fn spawn(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {:?}: {e}", cmd.get_program()))
}

/// Runs `ipamctl ARGS` on the test's state directory to its end.
pub fn ipamctl(test: &Test, args: &[&str]) -> Outcome {
    finish(args, spawn(ipamctl_cmd(test, args)))
}

/// The trimmed stdout of a process that must have exited 0.
#[track_caller]
pub fn succeeded(out: &Outcome) -> String {
    assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    out.stdout.trim().to_owned()
}

/// `allocate public-zone-a --owner OWNER`, which must succeed; the address it printed.
#[track_caller]
pub fn allocate(test: &Test, owner: &str) -> String {
    succeeded(&ipamctl(test, &["allocate", POOL, "--owner", owner]))
}

/// A process that must succeed (`rm`, `cp`, `git`).
#[track_caller]
pub fn sh(program: &str, args: &[&str], dir: &Path) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("start {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `cmd` run by `program PRE_ARGS... cmd's program and arguments`, with `cmd`'s working
/// directory and environment.
pub fn wrapped(cmd: &Command, program: &str, pre_args: &[String]) -> Command {
    let mut outer = Command::new(program);
    outer
        .args(pre_args)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        outer.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => outer.env(key, value),
            None => outer.env_remove(key),
        };
    }
    outer
}

/// `cmd` under strace's fault injection `inject` (`SYSCALLS:ACTION...`, see `-e inject` in
/// strace(1)): `delay_exit` holds the window after a system call open, `delay_enter` the one
/// before it, `signal=KILL` kills the process right there. strace follows forks and prints
/// nothing of its own.
pub fn under_strace(cmd: &Command, inject: &str) -> Command {
    require_strace();
    let syscalls = inject.split(':').next().expect("a syscall set");
    let pre = [
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-e",
        &format!("trace={syscalls}"),
        "-e",
        &format!("inject={inject}"),
        "--",
    ]
    .map(String::from);
    wrapped(cmd, "strace", &pre)
}

/// Fails (rather than skips) without a working strace: a skipped race proves nothing.
pub fn require_strace() {
    static WORKS: OnceLock<bool> = OnceLock::new();
    let works = *WORKS.get_or_init(|| {
        Command::new("strace")
            .args([
                "-f",
                "-qq",
                "-o",
                "/dev/null",
                "-e",
                "inject=openat:delay_exit=1",
            ])
            .arg("true")
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(
        works,
        "these tests need strace with fault injection (`apt-get install strace`) and ptrace"
    );
}

/// Waits until the process that `strace` (started as `tracer`) runs is held in an injected
/// delay: stopped by its tracer for 300 ms on end (a plain system-call stop lasts
/// microseconds). False if that did not happen within `timeout`.
pub fn wait_until_held(tracer: &Child, timeout: Duration) -> bool {
    let children = format!("/proc/{0}/task/{0}/children", tracer.id());
    let mut held_since: Option<Instant> = None;
    wait_until(timeout, || {
        let tracee = fs::read_to_string(&children).unwrap_or_default();
        let Some(pid) = tracee.split_whitespace().next() else {
            return false;
        };
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state is the first field after the parenthesised command name.
        let stopped = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('t'));
        if !stopped {
            held_since = None;
            return false;
        }
        let since = *held_since.get_or_insert_with(Instant::now);
        since.elapsed() >= Duration::from_millis(300)
    })
}

/// Polls `cond` every millisecond until it holds (true) or `timeout` passes (false).
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// [`under_strace`], writing the trace to `trace` and tracing (so delaying) only the calls
/// that name one of `paths` (`strace -P`), if any are given.
pub fn under_strace_to(cmd: &Command, trace: &Path, inject: &str, paths: &[&str]) -> Command {
    require_strace();
    let syscalls = inject.split(':').next().expect("a syscall set");
    let mut pre: Vec<String> = ["-f", "-qq", "-o"].map(String::from).to_vec();
    pre.push(trace.to_str().expect("a UTF-8 path").to_owned());
    pre.extend(["-e".into(), format!("trace={syscalls}")]);
    pre.extend(["-e".into(), format!("inject={inject}")]);
    for path in paths {
        pre.extend(["-P".into(), (*path).to_owned()]);
    }
    pre.push("--".into());
    wrapped(cmd, "strace", &pre)
}

// ---- Reading the state from the files ---------------------------------------------------

/// The file of `address` in the public pool, relative to the state directory.
pub fn allocation_file(address: &str) -> String {
    format!(
        "cluster/ipallocations/{POOL}-{}.yaml",
        address.replace('.', "-")
    )
}

/// The addresses `owner` (no uid) holds in the public pool, from the files.
pub fn held(test: &Test, owner: &str) -> Vec<String> {
    held_in(&test.state(), owner)
}

/// [`held`] in the state directory `state`.
pub fn held_in(state: &Path, owner: &str) -> Vec<String> {
    Scan::of(state)
        .held_by(None, POOL, owner, None)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Asserts that the files break none of the invariants `torture` checks.
#[track_caller]
pub fn assert_consistent(state: &Path) {
    let violations = Scan::of(state).violations();
    assert!(
        violations.is_empty(),
        "the state's files break invariants:\n{}",
        violations.join("\n")
    );
}
