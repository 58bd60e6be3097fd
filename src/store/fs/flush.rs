//! A batch's claims made durable behind it: the directory `fsync` of one claim runs on a
//! thread of its own while the batch's next request is looked up, instead of before it.
//!
//! # Why
//!
//! A claim is durable in two steps (`beneath::write`): its bytes are `fsync`ed before its
//! name is made, and its directory after. The second wait, about a fifth of a millisecond
//! on this project's test machine, is half of the floor a claim cannot go below, and a
//! batch spent it idle between two requests.
//!
//! # What stays true
//!
//! - **Nothing is said of a claim before its name is durable.** A batch's worker runs its
//!   requests in groups ([`crate::store::Units::grouped`]); the group's results go out only
//!   once every name made in it is durable ([`Flusher::settle`]). A batch killed or a
//!   machine lost before that has printed nothing of those claims: each is then whole on
//!   disk or absent, and the same file again answers `existing` or claims anew.
//! - **No other process sees more than it saw before.** Every lock this process holds when
//!   a name is made is held one more time until that name is durable
//!   ([`super::lock::Registry::keep_all`]), so the owner's lock and the pool's go only
//!   then, as they did when the claim waited. Before, as now, a reader that takes no lock
//!   (`list`) may see a claim whose directory is not yet `fsync`ed.
//! - **Two requests' locks, but never a wait.** The next request takes its own locks while
//!   the earlier one's are still held: only locks granted at once. A lock it would have to
//!   wait for, or a byte it wants exclusively that is held shared, it takes only after the
//!   earlier names are durable and their locks gone: the lock registry keeps that rule for
//!   every hold kept past its work, and knows nothing of this file (`lock/registry.rs`).
//! - **The bytes are never behind the name:** they are `fsync`ed before the rename, as
//!   always. Only the directory's `fsync` moves.
//! - A claim that takes a MAC writes the MAC's record, durably, before its file
//!   (`macs.rs`): a crash that takes the claim's name back leaves a record that names an
//!   allocation that is not there, which the next claim of the MAC takes over. So those
//!   claims run behind the next request too.
//! - A failed `fsync` of a directory fails the group (exit 1, "outcome unknown"): the
//!   claims exist, whether they would survive a crash is not known, as when a single
//!   claim's `fsync` fails.
//!
//! One `fsync` of a directory makes durable every name made in it before the call, so a
//! flush that finds several claims of one directory waiting syncs it once.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::store::Hold;

/// Names made but not yet durable, and the thread that makes them so.
#[derive(Debug, Default)]
pub(super) struct Flusher {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when work is queued (for the thread) and when a flush ends (for waiters).
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Directories to `fsync`, each with the locks to release once it is.
    queued: Vec<(Arc<OwnedFd>, Vec<Hold>)>,
    /// How many were ever queued, and how many of those are durable.
    sent: u64,
    synced: u64,
    /// The first `fsync` that failed, not yet reported by [`Flusher::settle`].
    failed: Option<std::io::Error>,
    /// The store is going away: the thread ends once the queue is empty.
    closing: bool,
}

impl Flusher {
    /// Queues `dir` for an `fsync`, with `holds` released after it.
    pub(super) fn defer(&self, dir: Arc<OwnedFd>, holds: Vec<Hold>) {
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.queued.push((dir, holds));
        state.sent += 1;
        drop(state);
        self.shared.changed.notify_all();
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if thread.is_none() {
            let shared = Arc::clone(&self.shared);
            *thread = Some(std::thread::spawn(move || shared.run()));
        }
    }

    /// Waits until every directory queued so far is durable; the first `fsync` that failed
    /// since the last call is the error.
    pub(super) fn settle(&self) -> Result<()> {
        self.wait_synced()?;
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.failed.take() {
            Some(e) => Err(unknown(&format!(
                "a claim's directory could not be synced: {e}"
            ))),
            None => Ok(()),
        }
    }

    /// Waits until every directory queued so far is durable and its locks released; a
    /// failed `fsync` is left for [`Flusher::settle`] to report, with its group.
    fn wait_synced(&self) -> Result<()> {
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let target = state.sent;
        while state.synced < target {
            // The thread never waits for anything but `fsync`: a thread that died (it cannot
            // panic short of running out of memory) would leave this waiting, so look.
            let alive = self
                .thread
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|t| !t.is_finished());
            if !alive {
                return Err(unknown("the thread that syncs the batch's claims ended"));
            }
            let wait = std::time::Duration::from_millis(100);
            state = match self.shared.changed.wait_timeout(state, wait) {
                Ok((state, _)) => state,
                Err(e) => e.into_inner().0,
            };
        }
        Ok(())
    }
}

impl Drop for Flusher {
    /// Makes what is queued durable before the store goes.
    fn drop(&mut self) {
        let _ = self.settle();
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.closing = true;
        drop(state);
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    /// The thread: takes what is queued, syncs each directory once, releases the locks.
    fn run(&self) {
        loop {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            while state.queued.is_empty() && !state.closing {
                state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            if state.queued.is_empty() {
                return;
            }
            let batch = std::mem::take(&mut state.queued);
            let upto = state.sent;
            drop(state);
            failpoint!("flush-before-sync");
            let mut synced: Vec<i32> = Vec::new();
            let mut failed = None;
            for (dir, _) in &batch {
                if synced.contains(&dir.as_raw_fd()) {
                    continue;
                }
                synced.push(dir.as_raw_fd());
                if let Err(e) = sync(dir) {
                    failed.get_or_insert(e);
                }
            }
            // The locks go only now: until here, no other process could act on these claims.
            drop(batch);
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.synced = upto;
            if let Some(e) = failed {
                state.failed.get_or_insert(e);
            }
            drop(state);
            self.changed.notify_all();
        }
    }
}

/// A directory's `fsync`. The fail point `flush-sync-fails` makes it fail as a disk's error
/// would (`tests/batch_flush.rs`).
fn sync(dir: &OwnedFd) -> std::io::Result<()> {
    #[cfg(feature = "failpoints")]
    fail::fail_point!("flush-sync-fails", |_| Err(std::io::Error::other(
        "injected by the fail point flush-sync-fails"
    )));
    rustix::fs::fsync(dir).map_err(std::io::Error::from)
}

fn unknown(message: &str) -> Error {
    Error::OutcomeUnknown {
        message: format!(
            "{message}: whether the group's claims would survive a crash is not known"
        ),
    }
}
