//! What a claim or a release holds, as stored: each object's manifest (the YAML document the
//! store keeps), so that a client renders `-o json|yaml|name` as the command line does from
//! the same values ([`crate::cli::remote`] decodes them with the same codec). The
//! `releaseHeld` mutation: `release` answering what it released, not only how many.

use async_graphql::{Context, Object, SimpleObject};

use super::errors::Graphql;
use super::schema::{ReleaseInput, scope, work};
use crate::engine::executor::Done;
use crate::yaml;

/// What `releaseHeld` released (or, with `dryRun`, would release).
#[derive(SimpleObject, Debug)]
pub struct Released {
    /// The `IPAllocation` documents released, as they were stored.
    pub allocations: Vec<String>,
    /// The `IPPrefixClaim` documents released.
    pub prefix_claims: Vec<String>,
    /// Why nothing was released, as the command line says it on stderr.
    pub note: Option<String>,
    /// What else the command line would say on stderr (a dry run's `dry run: …`).
    pub notes: Vec<String>,
}

/// The release that answers with what it released.
#[derive(Default)]
pub struct HeldMutation;

#[Object]
impl HeldMutation {
    /// Releases what the input picks, as `release` does, and answers with the manifests of
    /// what it released (the command line's `release -o json|yaml|name`).
    async fn release_held(
        &self,
        ctx: &Context<'_>,
        input: ReleaseInput,
    ) -> async_graphql::Result<Released> {
        let outcome = work(ctx).submit(input.request(&scope(ctx))).wait().await;
        match outcome.result.gql()? {
            Done::Freed(freed, _) => Ok(Released {
                notes: outcome.notes,
                allocations: freed.addresses.iter().map(yaml::encode).collect(),
                prefix_claims: freed.prefixes.iter().map(yaml::encode).collect(),
                note: freed.note,
            }),
            Done::Claimed(_) => unreachable!("a release request releases"),
        }
    }
}
