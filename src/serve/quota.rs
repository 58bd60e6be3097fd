//! The `quotas` query: each quota's ceilings against what its namespace holds, as `quota
//! list` shows them, for the namespaces the caller's token covers.

use async_graphql::{Context, Object, SimpleObject};

use super::errors::Graphql;
use super::schema::{scope, work};

/// One ceiling of one quota (a row of `quota list`).
#[derive(SimpleObject, Debug)]
pub struct QuotaUsage {
    /// The quota's namespace.
    pub namespace: String,
    /// The quota's name.
    pub quota: String,
    /// `addresses`, `floatingIPs` or `prefixes`, as `spec.hard` spells it.
    pub resource: String,
    /// What the namespace holds of it now.
    pub used: u64,
    /// The ceiling; a claim that would go over it is refused (`QUOTA_EXCEEDED`).
    pub limit: u64,
}

/// The quota queries, merged into the schema's queries ([`super::api`]).
#[derive(Default)]
pub struct QuotaQuery;

#[Object]
impl QuotaQuery {
    /// The quotas of `namespace` (every namespace the token may read without it), one entry
    /// per ceiling, in namespace, quota and resource order. A namespace outside the token's
    /// scope is not found, as one that does not exist.
    async fn quotas(
        &self,
        ctx: &Context<'_>,
        namespace: Option<String>,
    ) -> async_graphql::Result<Vec<QuotaUsage>> {
        let ns = crate::engine::request::field::namespace(namespace.as_deref()).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let rows = crate::engine::quota_list::list(store, &scope, ns.clone())?;
                Ok(rows
                    .into_iter()
                    .map(|u| QuotaUsage {
                        namespace: u.namespace.to_string(),
                        quota: u.quota,
                        resource: u.resource.to_owned(),
                        used: u.used,
                        limit: u.limit,
                    })
                    .collect())
            })
            .await
            .gql()
    }
}
