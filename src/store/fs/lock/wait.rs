//! Bounded waits: every wait of the file store's locks is polled against one deadline.
//!
//!
//! Every wait (for a byte, for the root's shared `flock` while another process makes the
//! lock file, for the exclusive one while others finish) is polled, not waited for in the
//! kernel, for at most [`LOCK_TIMEOUT_VAR`] seconds (default [`DEFAULT_TIMEOUT_SECS`]) in
//! all; then the command fails (exit 1) naming what it waited for and, from `/proc/locks`,
//! the process that holds it. Each round of each wait looks at the deadline and sleeps
//! before the next try, including the round in which a lock file that cannot be used sits
//! at its path while others hold the root shared (the wait for the root exclusively is then
//! never cut short as if the file had just been made: that spun past the deadline). A value
//! of the variable that is no finite number of seconds, 0 or more, is exit 2.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, fcntl};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::store::LockMode;
use crate::store::fs::lock::holder::holder;
use crate::store::fs::lock::target::Target;

/// The variable that bounds a lock wait, in seconds (a decimal number; `0` waits not at all).
pub const LOCK_TIMEOUT_VAR: &str = "IPAMCTL_LOCK_TIMEOUT";

/// How long a lock is waited for when [`LOCK_TIMEOUT_VAR`] is not set.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

/// How long a lock is waited for: [`LOCK_TIMEOUT_VAR`] (unset or empty: the default,
/// [`DEFAULT_TIMEOUT_SECS`]). A value that is no finite number of seconds, 0 or more
/// (`abc`, `-5`, `nan`, `inf`) is exit 2 naming it: a wait it meant to bound must not
/// silently become another.
pub fn timeout() -> Result<Duration> {
    let value = match std::env::var(LOCK_TIMEOUT_VAR) {
        Ok(v) if !v.trim().is_empty() => v,
        Ok(_) | Err(std::env::VarError::NotPresent) => {
            return Ok(Duration::from_secs(DEFAULT_TIMEOUT_SECS));
        }
        Err(std::env::VarError::NotUnicode(v)) => v.to_string_lossy().into_owned(),
    };
    match value.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Duration::from_secs_f64(s.min(1e9))),
        _ => Err(Error::Usage {
            message: format!(
                "{LOCK_TIMEOUT_VAR} `{}` is not a number of seconds (a finite decimal, 0 or more)",
                value.escape_debug()
            ),
            hint: Some(format!(
                "e.g. {LOCK_TIMEOUT_VAR}=30, or unset it for the default ({DEFAULT_TIMEOUT_SECS} s)"
            )),
        }),
    }
}

/// Sets (or clears, with `F_UNLCK`) the open-file-description lock of byte `offset` of
/// `fd`, without waiting: `EAGAIN`/`EACCES` when another holds it.
pub(super) fn set_lock(fd: &OwnedFd, kind: i32, offset: i64) -> nix::Result<()> {
    let range = libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: offset,
        l_len: 1,
        // Must be 0 for open-file-description locks.
        l_pid: 0,
    };
    fcntl(fd.as_fd(), FcntlArg::F_OFD_SETLK(&range)).map(drop)
}

/// The next pause of a polled wait: doubling from 0.5 ms up to 20 ms, never past `deadline`.
pub(super) fn pause(pause: &mut Duration, deadline: Instant) {
    std::thread::sleep((*pause).min(deadline.saturating_duration_since(Instant::now())));
    *pause = (*pause * 2).min(Duration::from_millis(20));
}

/// Takes the lock of `target` on `fd`, polling until it is granted or `deadline` passes
/// (then exit 1, naming the lock and its holder where `/proc/locks` says).
pub(super) fn wait_for(
    fd: &OwnedFd,
    path: &Path,
    target: Target<'_>,
    mode: LockMode,
    deadline: Instant,
    ino: u64,
) -> Result<()> {
    let kind = match mode {
        LockMode::Shared => libc::F_RDLCK,
        LockMode::Exclusive => libc::F_WRLCK,
    };
    let mut wait = Duration::from_micros(500);
    loop {
        match set_lock(fd, kind, target.offset()) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {}
            Err(e) => return Err(Error::io(path, e.into())),
        }
        if Instant::now() >= deadline {
            return Err(timed_out(
                path,
                &target.describe(),
                holder(ino, target.offset()),
            ));
        }
        pause(&mut wait, deadline);
    }
}

/// The error of a wait that reached its deadline: what it waited for, and who held it.
pub(super) fn timed_out(path: &Path, what: &str, holder: Option<String>) -> Error {
    let holder = holder.map(|h| format!(", held by {h}")).unwrap_or_default();
    Error::io(
        path,
        std::io::Error::other(format!(
            "timed out after {} s waiting for {what}{holder}; set {LOCK_TIMEOUT_VAR} \
             (seconds) to wait longer",
            timeout().unwrap_or_default().as_secs_f64(),
        )),
    )
}

/// Polls for the root's `flock` in `mode` until it is granted (`Ok(true)`), `stop` says to
/// stop waiting (`Ok(false)`), or `deadline` passes (exit 1, naming what it waited for).
/// `Ok(true)` also where the file system has no `flock` of directories: nothing to wait for.
pub(super) fn flock_root(
    root: &OwnedFd,
    path: &Path,
    mode: LockMode,
    deadline: Instant,
    mut stop: impl FnMut() -> bool,
) -> Result<bool> {
    use rustix::fs::FlockOperation;
    let op = match mode {
        LockMode::Shared => FlockOperation::NonBlockingLockShared,
        LockMode::Exclusive => FlockOperation::NonBlockingLockExclusive,
    };
    let mut wait = Duration::from_micros(500);
    loop {
        match rustix::fs::flock(root, op) {
            Ok(()) => return Ok(true),
            Err(Errno::INTR) => continue,
            Err(Errno::WOULDBLOCK) => {}
            Err(Errno::NOLCK | Errno::OPNOTSUPP | Errno::INVAL | Errno::BADF) => return Ok(true),
            Err(e) => return Err(Error::io(path, e.into())),
        }
        if stop() {
            return Ok(false);
        }
        if Instant::now() >= deadline {
            let ino = rustix::fs::fstat(root).map(|s| s.st_ino).unwrap_or(0);
            let what = match mode {
                LockMode::Shared => {
                    "the state directory, held whole by an ipamctl process making its lock \
                     file (or one that cannot use it)"
                }
                LockMode::Exclusive => {
                    "the ipamctl processes working in the state directory to finish: its lock \
                     file was removed while they ran, and a new one is made only after them"
                }
            };
            return Err(timed_out(path, what, holder(ino, 0)));
        }
        pause(&mut wait, deadline);
    }
}
