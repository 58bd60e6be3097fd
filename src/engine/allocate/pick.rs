//! The order in which a claim tries a pool's free candidates, by the pool's `spec.pick`
//! ([`crate::model::pick`]): the lowest first, or from the owner's hashed start upward and
//! around. Every claim of an address passes here (the command, the batch, a zone, dual
//! stack), so both stores and every front end walk one order.

use std::net::IpAddr;

use crate::engine::subnet;
use crate::error::Result;
use crate::model::candidates::Candidates;
use crate::model::pick::{self, Pick};
use crate::model::{Namespace, PoolManifest, PoolName};
use crate::store::read::load_pool;
use crate::store::{FreeIter, Store};

use super::{Request, request_candidates, request_subnet};

/// Where the walk of `req` in pool `spec` starts, as an ordinal: `None` for `pick: lowest`
/// (and when nothing is a candidate). `candidates` are the request's
/// ([`request_candidates`]: the pool's, narrowed by `--subnet`, `--within` and
/// `--reserved`), before taken and cooling addresses are cut out, so that the start of an
/// owner moves only when the pool, its subnets or the request do.
pub(super) fn start(spec: &PoolManifest, req: &Request, candidates: &Candidates) -> Option<u128> {
    match spec.spec.pick {
        Pick::Lowest => None,
        Pick::Hashed => {
            let key = pick::key(req.pool.namespace.as_ref(), &req.pool.name, &req.owner);
            candidates.hashed_start(key)
        }
    }
}

/// The free candidates among `untaken`, in the pick's order: lowest first without a
/// `start`; else from `start` upward, then from the lowest up to it. A hashed walk asks the
/// store for each part as a range of its own, so neither part is the whole pool and a store
/// keeps no low-water hint from it (on PostgreSQL the hint stays a true lower bound: a
/// hashed claim only takes addresses, and a release lowers it as ever).
pub(super) fn free_in_order<'a>(
    store: &'a dyn Store,
    ns: Option<&Namespace>,
    pool: &PoolName,
    untaken: Candidates,
    start: Option<u128>,
    whole_pool: bool,
) -> Result<FreeIter<'a>> {
    let Some(start) = start else {
        return store.free_candidates(ns, pool, &untaken, whole_pool);
    };
    let (upper, lower) = untaken.wrapped_at(start);
    let upward = store.free_candidates(ns, pool, &upper, false)?;
    let around = store.free_candidates(ns, pool, &lower, false)?;
    Ok(Box::new(upward.chain(around)))
}

/// Where the walk of `req` starts as [`super::allocate`] computes it, read from the store
/// now (for `--explain`); `None` for `pick: lowest`, `--address`, or a request with no
/// candidate.
pub fn walk_start(store: &dyn Store, req: &Request) -> Result<Option<IpAddr>> {
    if req.address.is_some() {
        return Ok(None);
    }
    let spec = load_pool(store, &req.pool)?;
    let subnets = subnet::of_pool(store, &req.pool)?;
    let subnet = request_subnet(store, req)?;
    let candidates = request_candidates(&spec, &subnets, req, subnet.as_ref())?;
    Ok(start(&spec, req, &candidates).map(|s| candidates.address(s)))
}
