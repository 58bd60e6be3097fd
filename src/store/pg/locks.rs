//! Locks in PostgreSQL ([`Locks`]): row locks of the unit of work's transaction, which last
//! until it commits or rolls back ([`Hold::UntilUnitEnds`]); and the unit of work itself
//! ([`Units`]). A claim locks only its pools' rows, `FOR SHARE`: the unique owner
//! constraint arbitrates between requests for one owner, so no owner is locked.

use super::typed::Typed;
use super::{PgStore, ns_key};
use crate::error::Result;
use crate::model::{Namespace, Owner, PoolName};
use crate::store::{ClaimLock, Hold, LockMode, Locks, PoolLock, QuotaLock, ScopeLock, Units};

impl Locks for PgStore {
    fn lock_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<PoolLock> {
        self.lock_pool_row(ns, pool, mode)?;
        Ok(PoolLock::new(Hold::UntilUnitEnds))
    }

    fn lock_scope(&self, ns: Option<&Namespace>) -> Result<ScopeLock> {
        let ns = ns_key(ns);
        self.in_unit("a scope lock", |c| {
            c.exec(
                "INSERT INTO ipamctl.scope_locks (namespace) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&ns],
            )?;
            c.opt(
                "SELECT 1 FROM ipamctl.scope_locks WHERE namespace = $1 FOR UPDATE",
                &[&ns],
            )
        })?;
        Ok(ScopeLock::new(Hold::UntilUnitEnds))
    }

    fn lock_quota(&self, ns: &Namespace) -> Result<QuotaLock> {
        // A row of the scopes' lock table, under a key no namespace spells (`:` is in no
        // namespace segment): no migration, and the same row lock a scope's is.
        let key = format!("quota:{ns}");
        self.in_unit("a quota lock", |c| {
            c.exec(
                "INSERT INTO ipamctl.scope_locks (namespace) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&key],
            )?;
            c.opt(
                "SELECT 1 FROM ipamctl.scope_locks WHERE namespace = $1 FOR UPDATE",
                &[&key],
            )
        })?;
        Ok(QuotaLock::new(Hold::UntilUnitEnds))
    }

    fn lock_claim(
        &self,
        ns: Option<&Namespace>,
        pools: &[PoolName],
        owner: &Owner,
    ) -> Result<ClaimLock> {
        // The unit's first round trip locks every pool and reads ahead what the claim asks
        // next (`prefetch.rs`); later in a unit, one statement per pool.
        if !self.lock_claim_ahead(ns, pools, owner)? {
            for pool in pools {
                // A pool this unit locked already (a claim in several pools locks them all
                // first, then claims in each) stays locked until the unit ends.
                let locked = (self.session().locked_pools)
                    .contains_key(&(ns_key(ns).to_owned(), pool.to_string()));
                if !locked {
                    self.lock_pool_row(ns, pool, LockMode::Shared)?;
                }
            }
        }
        let held = pools.iter().map(|_| Hold::UntilUnitEnds).collect();
        Ok(ClaimLock::new(held, Vec::new()))
    }

    fn lock_prefix_claim(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
        len: Option<u8>,
    ) -> Result<PoolLock> {
        // The unit's first round trip locks the pool and reads ahead the owner's claim and
        // the free space (`prefix_free.rs`); later in a unit, the lock alone.
        self.lock_prefix_claim_row(ns, pool, owner, len)?;
        Ok(PoolLock::new(Hold::UntilUnitEnds))
    }
}

impl PgStore {
    /// Locks the pool's row `FOR SHARE` or `FOR UPDATE` in the unit's transaction, and keeps
    /// the manifest it read for the unit's reads of the pool.
    pub(super) fn lock_pool_row(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<()> {
        let ns = ns_key(ns);
        let statement = match mode {
            LockMode::Shared => {
                "SELECT manifest FROM ipamctl.pools WHERE namespace = $1 AND name = $2 FOR SHARE"
            }
            LockMode::Exclusive => {
                "SELECT manifest FROM ipamctl.pools WHERE namespace = $1 AND name = $2 FOR UPDATE"
            }
        };
        let row = self.in_unit("a pool lock", |c| c.opt(statement, &[&ns, &pool.as_str()]))?;
        // The row lock is the transaction's: it goes with COMMIT or ROLLBACK. Until then the
        // row cannot change but by this unit, so its manifest answers the unit's reads.
        let key = (ns.to_owned(), pool.to_string());
        let mut session = self.session();
        if mode == LockMode::Exclusive {
            session.kept_pools.insert(key.clone());
        }
        if let Some(row) = row {
            session.locked_pools.insert(key, row.get(0));
        }
        Ok(())
    }
}

impl Units for PgStore {
    fn atomically(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.unit(work)
    }

    fn batch(&self, workers: usize) {
        // Each worker runs its requests in groups (`group.rs`); workers of one batch hand
        // out addresses apart (`siblings.rs`), so that none waits for another's group.
        let _ = workers;
        self.session().group_size = super::group::GROUP;
    }

    fn batch_done(&self) {
        // The workers' claims moved no hint (`siblings.rs`): move each pool's past them.
        let Some(siblings) = &self.siblings else {
            return;
        };
        for ((ns, pool), searched) in siblings.take_claimed() {
            // Advice: a hint left where it was costs the next claim a longer walk.
            let _ = super::free::settle_hint(self, &ns, &pool, searched);
        }
    }

    fn lost(&self) -> bool {
        if self.lost.load(std::sync::atomic::Ordering::Relaxed) {
            return true;
        }
        // Every worker of a server asks this of every store, mid-group too (the executor's
        // `closed`, `engine::executor::all_lost`). A session busy with its own worker's
        // statement is not lost, and waiting for it would let a worker whose group holds
        // uncommitted rows wait, in this process, for a statement that waits in the database
        // for those rows: a deadlock the database cannot see, which only `lock_timeout`
        // broke (20 s, then exit 1 for every request in it; `tests/serve_replicas.rs`).
        match self.session.try_lock() {
            Ok(session) => session.client.is_closed(),
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner().client.is_closed(),
            Err(std::sync::TryLockError::WouldBlock) => false,
        }
    }

    fn revive(&self) -> Option<bool> {
        self.revived()
    }

    fn group_size(&self) -> usize {
        self.session().group_size
    }

    fn grouped(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.group(work)
    }
}
