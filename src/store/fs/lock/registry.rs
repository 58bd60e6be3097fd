//! The in-process registry of held locks, and a process never waiting for itself.
//!
//! A process that already holds a byte through this store reuses its hold instead of
//! waiting for itself (OFD locks have no deadlock detection): two targets that hash to one
//! byte (`target.rs`) become one lock, which excludes others no less. (Asking exclusively
//! for a byte held shared by the same process is refused, exit 1: no claim does it, and an
//! upgrade could deadlock with another upgrader.) The registry also keeps this process's
//! hold on the state directory as a whole (`fence.rs`) for as long as any byte is held.
//!
//! Holds can be kept past the work that took them ([`Registry::keep_all`]: a batch keeps a
//! claim's locks until its name is durable, `flush.rs`). While any is kept, a lock that
//! is not granted at once is waited for only after every kept hold is gone: a wait while
//! holding an earlier request's locks would be out of the order every process takes them
//! in (a process that holds what this one waits for, and waits for what it keeps, would
//! stall both until the timeout), and an exclusive lock of a byte kept shared would be
//! refused as an upgrade.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::store::fs::lock::fence::Whole;
use crate::store::fs::lock::target::Target;
use crate::store::fs::lock::wait::{set_lock, timeout, wait_for};
use crate::store::fs::{FsStore, MARKER};
use crate::store::{Hold, LockMode};

/// The locks this store's process holds, by offset (how, and how many holds share each),
/// and its hold on the state directory as a whole while it holds any.
#[derive(Debug, Default)]
pub(in crate::store::fs) struct Registry {
    held: Mutex<Held>,
    /// Signalled when the last kept hold goes.
    unkept: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct Held {
    bytes: HashMap<i64, Shared>,
    /// The hold on the whole while any byte is held: every byte is locked through it.
    whole: std::sync::Weak<Whole>,
    /// How many holds [`Registry::keep_all`] made are not dropped yet.
    kept: usize,
}

#[derive(Debug)]
struct Shared {
    mode: LockMode,
    holds: usize,
    whole: Arc<Whole>,
}

/// One hold of a lock ([`Hold::UntilDropped`]): the byte is unlocked when the last hold of it in
/// this process is dropped (or when the process dies).
#[derive(Debug)]
struct FileHold {
    registry: Arc<Registry>,
    offset: i64,
    /// Made by [`Registry::keep_all`].
    kept: bool,
}

impl Drop for FileHold {
    fn drop(&mut self) {
        let mut held = self.registry.held.lock().unwrap_or_else(|e| e.into_inner());
        if self.kept {
            held.kept -= 1;
            if held.kept == 0 {
                self.registry.unkept.notify_all();
            }
        }
        let Some(shared) = held.bytes.get_mut(&self.offset) else {
            return;
        };
        shared.holds -= 1;
        if shared.holds == 0
            && let Some(shared) = held.bytes.remove(&self.offset)
            && let Some(file) = &shared.whole.file
        {
            // Other bytes stay locked through the same descriptor: this one is unlocked by
            // hand (closing the descriptor, with the last byte, releases everything).
            let _ = set_lock(file, libc::F_UNLCK, self.offset);
        }
    }
}

impl Registry {
    /// One more hold of every byte this process holds now, kept until the result is
    /// dropped: a batch's claim whose name is made durable later (`flush.rs`) keeps its
    /// locks until then. Never waits: each byte is held already. Until every kept hold is
    /// dropped, [`FsStore::lock`] waits for no lock (see the module docs).
    pub(in crate::store::fs) fn keep_all(registry: &Arc<Registry>) -> Vec<Hold> {
        let mut held = registry.held.lock().unwrap_or_else(|e| e.into_inner());
        let Held { bytes, kept, .. } = &mut *held;
        bytes
            .iter_mut()
            .map(|(&offset, shared)| {
                shared.holds += 1;
                *kept += 1;
                Hold::UntilDropped(Box::new(FileHold {
                    registry: Arc::clone(registry),
                    offset,
                    kept: true,
                }))
            })
            .collect()
    }

    /// Whether any hold [`Registry::keep_all`] made is not dropped yet.
    fn keeps_any(&self) -> bool {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).kept > 0
    }

    /// Waits until no kept hold is left, or `deadline`.
    fn wait_unkept(&self, deadline: Instant) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        while held.kept > 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            held = match self.unkept.wait_timeout(held, left) {
                Ok((held, _)) => held,
                Err(e) => e.into_inner().0,
            };
        }
    }
}

impl FsStore {
    /// Locks `target` through this store's hold on the whole (`fence.rs`), or
    /// reuses this process's hold of the same byte, waiting until the lock timeout.
    ///
    /// While holds are kept ([`Registry::keep_all`]), a lock granted at once is taken; any
    /// other only once every kept hold is gone (an undo of a dual-stack claim locks a pool
    /// with `reuseAfter` exclusively, which a kept shared hold would refuse), within the
    /// same timeout.
    pub(in crate::store::fs) fn lock(&self, target: Target<'_>, mode: LockMode) -> Result<Hold> {
        let deadline = Instant::now() + timeout()?;
        if self.locks.keeps_any() {
            if let Ok(hold) = self.lock_by(target, mode, Instant::now()) {
                return Ok(hold);
            }
            self.locks.wait_unkept(deadline);
        }
        self.lock_by(target, mode, deadline)
    }

    /// [`FsStore::lock`], waiting until `deadline` at most.
    pub(super) fn lock_by(
        &self,
        target: Target<'_>,
        mode: LockMode,
        deadline: Instant,
    ) -> Result<Hold> {
        let offset = target.offset();
        let mut held = self.locks.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = held.bytes.get_mut(&offset) {
            if shared.mode == LockMode::Shared && mode == LockMode::Exclusive {
                return Err(Error::io(
                    self.root().join(MARKER),
                    std::io::Error::other(format!(
                        "{} shares its byte with a lock this process holds shared; nothing \
                         was changed (rename the pool or owner)",
                        target.describe()
                    )),
                ));
            }
            shared.holds += 1;
        } else {
            let whole = match held.whole.upgrade() {
                Some(whole) => whole,
                None => {
                    let whole = Arc::new(self.hold_whole(deadline)?);
                    held.whole = Arc::downgrade(&whole);
                    whole
                }
            };
            if let Some(file) = &whole.file {
                wait_for(file, &whole.path, target, mode, deadline, whole.ino)?;
            }
            held.bytes.insert(
                offset,
                Shared {
                    mode,
                    holds: 1,
                    whole,
                },
            );
        }
        Ok(Hold::UntilDropped(Box::new(FileHold {
            registry: Arc::clone(&self.locks),
            offset,
            kept: false,
        })))
    }

    /// How many holds of `target`'s byte this process has through this store.
    #[cfg(test)]
    pub(super) fn holds(&self, target: Target<'_>) -> usize {
        let held = self.locks.held.lock().unwrap_or_else(|e| e.into_inner());
        held.bytes.get(&target.offset()).map_or(0, |s| s.holds)
    }
}
