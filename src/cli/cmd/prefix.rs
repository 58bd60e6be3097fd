//! `ipamctl allocate --prefix-length N` / `--prefix PREFIX`: claim a child prefix of a
//! supernet pool and print it in CIDR form.

use crate::cli::{AllocateArgs, GlobalArgs};
use crate::engine::prefix::Want;
use crate::error::{Error, Result};
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::{Owner, OwnerFilter, PoolName, PoolRef};
use crate::store::Store;

/// What a child-prefix request got.
pub(super) enum PrefixOutcome {
    /// The owner's prefix, and whether this request claimed it.
    Held(Box<PrefixClaimManifest>, bool),
    /// `--dry-run`: the prefix the claim would answer.
    Would(ipnet::IpNet),
}

/// The child-prefix form of [`super::allocate::allocate_request`]: `--prefix-length N` or
/// `--prefix PREFIX` of one supernet pool.
pub(super) fn allocate(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &AllocateArgs,
    owner: Owner,
) -> Result<PrefixOutcome> {
    let [pool] = args.pools.as_slice() else {
        return Err(Error::usage(
            "--prefix-length and --prefix claim from one pool; name exactly one",
        ));
    };
    let pool = super::pool_ref(g, pool)?;
    let want = match (args.prefix_length, &args.prefix) {
        (Some(len), None) => Want::Length(len),
        (None, Some(p)) => Want::Exact(super::prefix("--prefix", p)?),
        _ => {
            return Err(Error::usage(
                "give one of --prefix-length N and --prefix PREFIX",
            ));
        }
    };
    if args.dry_run {
        // What the claim would answer now: the owner's prefix, else the best fit.
        let prefix = crate::engine::prefix::predict(store, &pool, &owner, want)?;
        crate::cli::output::diagnostic(&format!(
            "dry run: `{owner}` would hold {prefix} in pool `{pool}`; nothing written"
        ));
        return Ok(PrefixOutcome::Would(prefix));
    }
    let claimed = crate::engine::prefix::claim(store, &pool, &owner, want)?;
    Ok(PrefixOutcome::Held(
        Box::new(claimed.manifest),
        claimed.created,
    ))
}

/// The prefix claims of the scopes `-n` names (every scope without it) whose owner passes
/// `filter`, of `pool` only if given.
pub fn matching(
    store: &dyn Store,
    g: &GlobalArgs,
    pool: Option<&PoolName>,
    filter: &OwnerFilter,
) -> Result<Vec<PrefixClaimManifest>> {
    let scopes = match super::named_scopes(store, g)? {
        Some(scopes) => scopes,
        None => store.scopes()?,
    };
    let mut out = Vec::new();
    for ns in scopes {
        out.extend(crate::engine::prefix::claims_matching(
            store,
            ns.as_ref(),
            pool,
            filter,
        )?);
    }
    Ok(out)
}

/// `release POOL PREFIX`: guarded as an address release is (exit 2 naming the holder when
/// no `--owner`/`--uid`/`--kind` is given and no `--force`). Nothing, when nobody claims it.
pub fn release_one(
    store: &dyn Store,
    pool: &PoolRef,
    prefix: ipnet::IpNet,
    guard: &OwnerFilter,
    force: bool,
    dry_run: bool,
) -> Result<Vec<PrefixClaimManifest>> {
    if guard.is_empty() && !force {
        let claims = crate::engine::prefix::pool_claims(store, pool)?;
        if let Some(c) = claims.iter().find(|c| c.spec.prefix == prefix) {
            let owner = &c.spec.owner;
            let uid = owner
                .uid()
                .map(|u| format!(" --uid {u}"))
                .unwrap_or_default();
            return Err(Error::Usage {
                message: format!(
                    "release of {prefix} in pool `{pool}` names no owner; it is held by `{owner}`"
                ),
                hint: Some(format!(
                    "guard it with `--owner {owner}{uid}`, or pass `--force` to release it whoever holds it"
                )),
            });
        }
    }
    match crate::engine::prefix::release_prefix(store, pool, prefix, guard, dry_run)? {
        Some(m) => Ok(vec![m]),
        // Nobody claims it (in a pool that exists): the caller says so.
        None => {
            crate::store::read::load_pool(store, pool)?;
            Ok(Vec::new())
        }
    }
}
