//! The prefix claims' query: the claims `list` shows after the allocations, picked by
//! `allocations`' own arguments and in the scopes `allocations` covers
//! ([`super::objects::Listing`]), each with its holder ([`super::supernets::PrefixClaim`]).

use async_graphql::{Context, Object};

use super::errors::Graphql;
use super::objects::Selectors;
use super::schema::{scope, work};
use super::supernets::PrefixClaim;
use crate::engine::range_holder::Holders;

/// The prefix claims' query.
#[derive(Default)]
pub struct PrefixClaimQuery;

#[Object]
impl PrefixClaimQuery {
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
        let listing =
            super::objects::Listing::read(namespace, pool, owner, uid, mac, selectors).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let (scopes, query) = listing.scoped(store, &scope)?;
                let found =
                    crate::engine::request::listed_prefix_claims(store, scopes.as_deref(), &query)?;
                let mut holders = Holders::new(store);
                found
                    .iter()
                    .filter(|m| scope.sees_owner(&m.spec.owner))
                    .map(|m| Ok(PrefixClaim::new(m, &holders.of(m)?, &scope)))
                    .collect()
            })
            .await
            .gql()
    }
}
