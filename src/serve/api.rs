//! The whole schema the server runs: the queries and the claims' mutations
//! ([`super::schema`]) and the quotas' query ([`super::quota`]) merged with the seed operations' ([`super::admin`]), and its limits.

use std::sync::Arc;

use async_graphql::{EmptySubscription, Schema};

use super::admin::AdminMutation;
use super::quota::QuotaQuery;
use super::schema::{ClaimMutation, Query};
use super::work::Work;

/// The most directives one field may carry.
const DIRECTIVES: usize = 16;

/// The schema the server runs.
pub type IpamSchema = Schema<Queries, Mutation, EmptySubscription>;

// Every query: the pools', allocations', subnets' and VPCs' ([`super::schema`]), the
// quotas' ([`super::quota`]) and the prefix claims' ([`super::prefix_claims`]); named `Query` in the schema, as before the quotas came.
#[derive(async_graphql::MergedObject, Default)]
#[graphql(name = "Query")]
pub struct Queries(Query, QuotaQuery, super::prefix_claims::PrefixClaimQuery);

/// Every mutation: the claims' and the seed operations' ([`super::admin`], and answering
/// what they did: [`super::done`]).
#[derive(async_graphql::MergedObject, Default)]
pub struct Mutation(
    ClaimMutation,
    super::held::HeldMutation,
    AdminMutation,
    super::done::DoneMutation,
);

/// The schema, with its limits; `work` is absent only for printing the SDL.
pub fn build(limits: &super::Limits, work: Option<Arc<Work>>) -> IpamSchema {
    let mut builder = Schema::build(Queries::default(), Mutation::default(), EmptySubscription)
        .limit_depth(limits.depth)
        .limit_complexity(limits.complexity)
        .limit_recursive_depth(limits.depth.max(32))
        // Directives repeated on one field are no use to anyone here.
        .limit_directives(DIRECTIVES);
    if let Some(work) = work {
        builder = builder.data(work);
    }
    builder.finish()
}
