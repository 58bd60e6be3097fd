//! A supernet pool as `pool list` and `pool show` read it, on the command line and through
//! a server alike: its free space ([`crate::engine::prefix::usage`] of its claims, read now)
//! and each claim with its holder by name ([`crate::engine::range_holder`]).

use crate::engine::prefix::{self, Usage};
use crate::engine::range_holder::{Holder, Holders};
use crate::error::Result;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::{PoolManifest, PoolRef};
use crate::store::Store;

/// The free space of the supernet `pool` (whose manifest is `manifest`), read now.
pub fn usage(store: &dyn Store, pool: &PoolRef, manifest: &PoolManifest) -> Result<Usage> {
    let claims = prefix::pool_claims(store, pool)?;
    Ok(prefix::usage(manifest, &claims))
}

/// `pool show` of a supernet: its free space and its claims, each with its holder by name,
/// lowest prefix first; both from one reading of the claims.
pub fn show(
    store: &dyn Store,
    pool: &PoolRef,
    manifest: &PoolManifest,
) -> Result<(Usage, Vec<(PrefixClaimManifest, Holder)>)> {
    let claims = prefix::pool_claims(store, pool)?;
    let usage = prefix::usage(manifest, &claims);
    Ok((usage, with_holders(store, claims)?))
}

/// Each claim of supernet `pool` with its holder by name, lowest prefix first.
pub fn holders(store: &dyn Store, pool: &PoolRef) -> Result<Vec<(PrefixClaimManifest, Holder)>> {
    with_holders(store, prefix::pool_claims(store, pool)?)
}

fn with_holders(
    store: &dyn Store,
    claims: Vec<PrefixClaimManifest>,
) -> Result<Vec<(PrefixClaimManifest, Holder)>> {
    let mut resolver = Holders::new(store);
    let mut held = Vec::new();
    for c in claims {
        let holder = resolver.of(&c)?;
        held.push((c, holder));
    }
    held.sort_by_key(|(c, _)| (c.spec.prefix.network(), c.spec.prefix.prefix_len()));
    Ok(held)
}
