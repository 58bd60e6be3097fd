//! `deletePool`: a pool deleted with its subnets and cooldown records, refused (exit 4)
//! while it holds allocations or claimed prefixes; `pool delete` and the API both call
//! [`delete_pool`], which checks the caller's scope and then runs
//! [`crate::engine::pool::delete`], the one home of the rule.

use crate::engine::scope::Scope;
use crate::error::Result;
use crate::model::{PoolManifest, PoolRef};
use crate::store::Store;

/// `deletePool`'s input, as a user gives it.
#[derive(Clone, Debug, Default)]
pub struct DeletePoolInput {
    pub name: String,
    /// The pool's namespace; `None` for a cluster-scoped pool.
    pub namespace: Option<String>,
    pub dry_run: bool,
}

/// A `deletePool` request, valid in every way that does not need the store.
#[derive(Clone, Debug)]
pub struct PoolDelete {
    pool: PoolRef,
    dry_run: bool,
}

impl PoolDelete {
    /// The request `input` stands for, or exit 2 naming the flag that is wrong (`POOL`,
    /// `--namespace`, as `pool delete` names them).
    pub fn new(input: &DeletePoolInput) -> Result<PoolDelete> {
        Ok(PoolDelete {
            pool: crate::engine::request::field::pool_ref(input.namespace.as_deref(), &input.name)?,
            dry_run: input.dry_run,
        })
    }

    /// The pool to delete.
    pub fn pool(&self) -> &PoolRef {
        &self.pool
    }
}

/// Deletes the pool (`admin` in its namespace, the cluster scope for a cluster-scoped
/// pool; outside the scope, not found as a pool that does not exist): exit 3 if it does
/// not exist, 4 while an allocation or a claimed prefix holds it. Answers the manifest
/// deleted (in a dry run, that would be).
pub fn delete_pool(store: &dyn Store, scope: &Scope, request: &PoolDelete) -> Result<PoolManifest> {
    let pool = &request.pool;
    super::check_admin(scope, pool.namespace.as_ref(), || {
        crate::store::read::pool_missing(pool)
    })?;
    crate::engine::pool::delete(store, pool, request.dry_run)
}
