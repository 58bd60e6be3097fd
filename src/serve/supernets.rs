//! Supernets and prefix claims as the queries answer them: a supernet pool's prefixes
//! (`pool list`'s and `pool show`'s figures of one, [`crate::engine::supernet`]) and the
//! prefix claims `list` shows beside the allocations, each with its manifest as stored and,
//! for a VPC's range, its VPC ([`crate::engine::range_holder`]). The caller's scope is
//! applied as for the pools and allocations: a supernet is read only once its pool passed
//! the caller's scope, and `prefixClaims` covers the scopes `allocations` covers.

use async_graphql::{Context, Object, SimpleObject};

use super::errors::Graphql;
use super::objects::{Pool, Selectors};
use super::schema::{RequestError, scope, work};
use crate::engine::range_holder::{Holder, Holders};
use crate::error::Result;
use crate::model::candidates::Usage;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::{PoolKind, PoolManifest, PoolRef};
use crate::store::Store;

/// A supernet's free space: its claimed prefixes, the largest free block, and how many free
/// blocks of each handed-out length are left.
#[derive(SimpleObject, Debug)]
pub struct Supernet {
    /// Claimed prefixes, lowest first.
    pub claimed: Vec<String>,
    /// The largest free block; null when the pool is full.
    pub largest_free: Option<String>,
    /// Free blocks of each handed-out length, shortest length first.
    pub free_blocks: Vec<FreeBlock>,
}

/// How many free blocks of one length a supernet has left.
#[derive(SimpleObject, Debug)]
pub struct FreeBlock {
    pub length: i32,
    /// A decimal string (an IPv6 supernet's exceed 64 bits).
    pub count: String,
}

impl From<&crate::engine::prefix::Usage> for Supernet {
    fn from(u: &crate::engine::prefix::Usage) -> Supernet {
        Supernet {
            claimed: u.claimed.iter().map(ToString::to_string).collect(),
            largest_free: u.largest.map(|b| b.to_string()),
            free_blocks: u
                .free
                .iter()
                .map(|(length, n)| FreeBlock {
                    length: i32::from(*length),
                    count: n.to_string(),
                })
                .collect(),
        }
    }
}

/// A child prefix held by an owner (an `IPPrefixClaim`).
#[derive(SimpleObject, Debug)]
pub struct PrefixClaim {
    pub name: String,
    pub namespace: Option<String>,
    pub pool: String,
    pub prefix: String,
    pub owner: String,
    pub uid: Option<String>,
    /// The `IPPrefixClaim` document, as the store keeps it.
    pub manifest: String,
    /// The VPC (`NAMESPACE/NAME`) whose range it is, as `list` and `pool show` show it.
    pub vpc: Option<String>,
}

impl PrefixClaim {
    fn new(m: &PrefixClaimManifest, holder: &Holder) -> PrefixClaim {
        PrefixClaim {
            name: m.metadata.name.clone(),
            namespace: m.metadata.namespace.as_ref().map(ToString::to_string),
            pool: m.spec.pool.to_string(),
            prefix: m.spec.prefix.to_string(),
            owner: m.spec.owner.to_string(),
            uid: m.spec.owner.uid().map(ToString::to_string),
            manifest: crate::yaml::encode(m),
            vpc: holder
                .vpc
                .as_ref()
                .map(|v| format!("{}/{}", v.namespace, v.name)),
        }
    }
}

/// The pool `manifest` names, of its own scope.
fn pool_ref(manifest: &PoolManifest) -> PoolRef {
    PoolRef {
        namespace: manifest.metadata.namespace.clone(),
        name: manifest.name(),
    }
}

impl Pool {
    /// A pool the caller may read, as `pools` and `pool` answer it: a supernet with its
    /// prefixes, read now (or the error that kept them from being read).
    pub(super) fn listed(store: &dyn Store, manifest: &PoolManifest, usage: &Usage) -> Pool {
        let mut pool = Pool::new(manifest, usage);
        if manifest.spec.kind == PoolKind::Supernet {
            match crate::engine::supernet::usage(store, &pool_ref(manifest), manifest) {
                Ok(u) => pool.supernet = Some(Supernet::from(&u)),
                Err(e) => pool.supernet_error = Some(RequestError::from(&e)),
            }
        }
        pool
    }
}

/// `pool show`'s figures and claims of the pool `pool`, which the caller's scope let it read
/// (`manifest`): a supernet's, none for an address pool.
pub(super) fn shown(
    store: &dyn Store,
    pool: &PoolRef,
    manifest: &PoolManifest,
) -> Result<(Option<Supernet>, Vec<PrefixClaim>)> {
    if manifest.spec.kind != PoolKind::Supernet {
        return Ok((None, Vec::new()));
    }
    let (usage, held) = crate::engine::supernet::show(store, pool, manifest)?;
    let claims = held.iter().map(|(c, h)| PrefixClaim::new(c, h)).collect();
    Ok((Some(Supernet::from(&usage)), claims))
}

/// The prefix claims' query.
#[derive(Default)]
pub struct SupernetQuery;

#[Object]
impl SupernetQuery {
    /// The prefix claims `allocations`' selectors pick, of the scopes `allocations` covers:
    /// only the pool and owner selectors pick a prefix claim, so with any other there are
    /// none (`list` shows them after the allocations).
    #[allow(clippy::too_many_arguments)]
    async fn prefix_claims(
        &self,
        ctx: &Context<'_>,
        namespace: Option<String>,
        all_namespaces: Option<bool>,
        pool: Option<String>,
        owner: Option<String>,
        uid: Option<String>,
        mac: Option<String>,
        selectors: Option<Selectors>,
    ) -> async_graphql::Result<Vec<PrefixClaim>> {
        let _ = all_namespaces;
        let more = selectors.unwrap_or_default();
        let (query, subnet, expired) = more.query(pool, owner, uid, mac).gql()?;
        let ns = crate::engine::request::field::namespace(namespace.as_deref()).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let (scopes, query) =
                    super::objects::list_query(store, &scope, ns, query, subnet.as_ref(), expired)?;
                let found = crate::engine::request::listed_prefix_claims(
                    store,
                    scopes.as_deref(),
                    &query,
                )?;
                let mut holders = Holders::new(store);
                found
                    .iter()
                    .map(|m| Ok(PrefixClaim::new(m, &holders.of(m)?)))
                    .collect()
            })
            .await
            .gql()
    }
}
