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

/// `setMac`'s input: `mac set`'s arguments.
#[derive(async_graphql::InputObject, Debug)]
pub struct SetMacInput {
    namespace: Option<String>,
    pool: String,
    /// The address the NIC holds.
    address: String,
    /// Who must hold it (`KIND/NAME`), and its uid if given: a guard, as `release`'s.
    owner: String,
    uid: Option<String>,
    /// The new MAC, or `auto` for one derived from the pool's prefixes.
    mac: String,
}

/// One allocation of the NIC after `setMac`.
#[derive(SimpleObject, Debug)]
pub struct MacChanged {
    /// Whether its MAC changed (false: it held the MAC already).
    pub changed: bool,
    /// The `IPAllocation` document as it is now.
    pub manifest: String,
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

    /// Gives the NIC holding `address` in `pool` a new MAC on every allocation it holds in
    /// the namespace, all or nothing (`mac set`); `claim` in the namespace is needed.
    async fn set_mac(
        &self,
        ctx: &Context<'_>,
        input: SetMacInput,
    ) -> async_graphql::Result<Vec<MacChanged>> {
        let request = crate::engine::mac::SetRequest::new(&crate::engine::mac::SetInput {
            namespace: input.namespace,
            pool: input.pool,
            address: input.address,
            owner: input.owner,
            uid: input.uid,
            mac: input.mac,
        })
        .gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let set = crate::engine::mac::set(store, &scope, &request)?;
                Ok(set
                    .changes
                    .iter()
                    .map(|(before, after)| MacChanged {
                        changed: before != after,
                        manifest: yaml::encode(after),
                    })
                    .collect())
            })
            .await
            .gql()
    }
}
