//! Locks that survive `git clean`, `rm`, `git checkout`, `cp -a` and `rsync -a`: byte-range
//! locks on this checkout's lock file, `.index/lock-<inode of the root>`, each generation of
//! which is fenced by a `flock` of the root directory itself.
//!
//! A lock is only as good as the file it locks; how this one survives the tools that delete
//! or replace files is the fenced protocol, told where it is kept. One file per job:
//!
//! - `fence.rs`: the fenced lock-file protocol (the root's `flock`, the lock file made only
//!   under it held exclusively, the windows a deletion or replacement leaves, read-only
//!   state directories);
//! - `target.rs`: what a lock guards ([`Target`]) and the byte it hashes to;
//! - `registry.rs`: the in-process registry (holds counted per byte, a byte this process
//!   holds reused rather than waited for, a batch's locks kept until its names are durable);
//! - `wait.rs`: bounded waits, every one polled against [`LOCK_TIMEOUT_VAR`], and the error
//!   that names the holder;
//! - `holder.rs`: who holds a byte, from `/proc/locks` and `/proc/PID/fdinfo`.
//!
//! The file store's [`Locks`]: a pool, a scope, and the locks of a claim, which are the
//! pools' locks (shared) and then, because nothing on disk arbitrates between two requests
//! for one owner, the owner's lock in each pool. The owner's lock is also taken by a release
//! (`claims.rs`). Every guard holds a [`Hold::UntilDropped`](crate::store::Hold::UntilDropped); the order
//! they are taken in is [`crate::store::guard`]'s.

mod fence;
mod holder;
mod registry;
mod target;
mod wait;

pub use fence::LOCK_FILE_PREFIX;
pub(super) use registry::Registry;
pub use target::Target;
pub(super) use target::scope_text;
pub use wait::{DEFAULT_TIMEOUT_SECS, LOCK_TIMEOUT_VAR, timeout};

use crate::error::Result;
use crate::model::{Namespace, Owner, PoolName};
use crate::store::fs::FsStore;
use crate::store::{ClaimLock, LockMode, Locks, PoolLock, QuotaLock, ScopeLock};

impl Locks for FsStore {
    fn lock_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<PoolLock> {
        let target = Target::Pool {
            scope: scope_text(ns),
            pool: pool.as_str(),
        };
        Ok(PoolLock::new(self.lock(target, mode)?))
    }

    fn lock_scope(&self, ns: Option<&Namespace>) -> Result<ScopeLock> {
        let target = Target::Scope {
            scope: scope_text(ns),
        };
        Ok(ScopeLock::new(self.lock(target, LockMode::Exclusive)?))
    }

    fn lock_quota(&self, ns: &Namespace) -> Result<QuotaLock> {
        let target = Target::Quota { scope: ns.as_str() };
        Ok(QuotaLock::new(self.lock(target, LockMode::Exclusive)?))
    }

    fn lock_claim(
        &self,
        ns: Option<&Namespace>,
        pools: &[PoolName],
        owner: &Owner,
    ) -> Result<ClaimLock> {
        let scope = scope_text(ns);
        let mut held = Vec::with_capacity(pools.len());
        for pool in pools {
            let pool = pool.as_str();
            held.push(self.lock(Target::Pool { scope, pool }, LockMode::Shared)?);
        }
        // After every pool's lock (the order of `crate::store::guard`): the owner's lock
        // serialises requests for one owner, which no file name arbitrates (invariant 2).
        // It is the name's, whatever the uid: a request for the name under another
        // identity waits too, and then finds this one's allocation (`engine::identity`).
        let mut owners = Vec::with_capacity(pools.len());
        for pool in pools {
            for target in Target::owners(ns, pool, owner) {
                owners.push(self.lock(target, LockMode::Exclusive)?);
            }
        }
        Ok(ClaimLock::new(held, owners))
    }
}

#[cfg(test)]
mod tests;
