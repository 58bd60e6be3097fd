//! Pools being deleted: `vpc delete` and `pool delete` first mark a pool
//! (`metadata.deletionTimestamp`, as Kubernetes marks an object being deleted), and from then
//! on no claim, subnet or change is made in it, so a delete that is interrupted or crashes
//! leaves a pool that takes nothing new until the delete is run again and finishes.

use crate::engine::hint;
use crate::error::{Error, Result};
use crate::model::{PoolManifest, PoolRef};
use crate::store::{ObjectKind, Store};

/// Exit 4 when `manifest` (of `pool`) is being deleted: no claim, subnet or change is made
/// in it from the moment `vpc delete` or `pool delete` marked it.
pub fn refuse(manifest: &PoolManifest, pool: &PoolRef) -> Result<()> {
    match &manifest.metadata.deletion_timestamp {
        None => Ok(()),
        Some(at) => Err(Error::Conflict {
            message: format!(
                "pool `{pool}` is being deleted (since {at}); nothing is claimed in it"
            ),
            hint: Some(format!(
                "`{}` again finishes it",
                finish_command(manifest, pool)
            )),
        }),
    }
}

/// The command whose run marked `manifest` (of `pool`), which finishes it: `vpc delete` of
/// the VPC that owns it, else `pool delete`.
fn finish_command(manifest: &PoolManifest, pool: &PoolRef) -> String {
    match crate::model::vpc::owning_vpc(&pool.name, manifest) {
        Some(vpc) => hint::vpc_delete(vpc, pool),
        None => hint::pool_delete(pool),
    }
}

/// Marks `manifest` (of `pool`) as being deleted, so that claims refuse it from now on,
/// unless it is already; the caller holds the pool's lock exclusively. Returns the pool as
/// stored now.
pub fn mark(store: &dyn Store, pool: &PoolRef, mut manifest: PoolManifest) -> Result<PoolManifest> {
    if manifest.metadata.deletion_timestamp.is_none() {
        manifest.metadata.deletion_timestamp = Some(crate::model::Timestamp::now());
        let bytes = crate::yaml::encode(&manifest);
        store.replace(
            ObjectKind::Pool,
            pool.namespace.as_ref(),
            pool.name.as_str(),
            bytes.as_bytes(),
        )?;
    }
    Ok(manifest)
}
