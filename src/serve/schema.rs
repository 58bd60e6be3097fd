//! The GraphQL schema: the contract of issue 42. Every mutation's input is a batch line's
//! fields (`allocate -f`), camelCased, and is made the engine's typed request by the same
//! reader and constructor ([`crate::engine::request`]): a resolver checks no rule and
//! builds no command line. Claims and releases run through the executor ([`super::work`]),
//! queries on a reader's store.

use std::sync::Arc;

use async_graphql::{Context, InputObject, Object, SimpleObject};
use serde::Serialize;

use super::errors::Graphql;
pub use super::errors::RequestError;
pub use super::objects::{Action, Allocation, Held, Pool, Selectors, Subnet, Vpc, vpc_now};
use super::work::Work;
use crate::engine::executor::{Done, Request};
use crate::engine::request::field::{namespace, pool_ref};
use crate::engine::request::{AllocateInput as Allocate, ReleaseInput as Release};
use crate::engine::request::{AllocateRequest, Claimed, Defaults, ReleaseRequest};
use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::{Namespace, PoolName};

pub(super) fn work<'a>(ctx: &Context<'a>) -> &'a Arc<Work> {
    ctx.data_unchecked::<Arc<Work>>()
}

/// The caller's scope: every request reached the schema through the authenticator
/// ([`super::auth`]), which put its caller in the request's data.
pub(super) fn scope(ctx: &Context<'_>) -> Scope {
    ctx.data_unchecked::<super::auth::Caller>().scope.clone()
}

/// What an owner holds after `allocate`.
#[derive(SimpleObject, Debug)]
pub struct Claim {
    pub owner: String,
    /// One address per pool, in the order of the pools (none for a prefix).
    pub addresses: Vec<String>,
    /// A child prefix of a supernet pool.
    pub prefix: Option<String>,
    pub action: Action,
    /// What the owner holds, each object with its manifest as stored (none for a dry run's
    /// prefix).
    pub held: Vec<Held>,
    /// What the command line would say about it on stderr (a dry run's `dry run: …`).
    pub notes: Vec<String>,
}

/// One `allocateMany` input's outcome.
#[derive(SimpleObject, Debug)]
pub struct ClaimOutcome {
    pub index: i32,
    pub claim: Option<Claim>,
    pub error: Option<RequestError>,
}

/// `allocate`'s input: a batch line's fields.
#[derive(InputObject, Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct AllocateInput {
    namespace: Option<String>,
    pool: Option<String>,
    pools: Option<Vec<String>>,
    owner: String,
    uid: Option<String>,
    subnet: Option<String>,
    subnets: Option<Vec<String>>,
    address: Option<String>,
    within: Option<String>,
    zone: Option<String>,
    mac: Option<String>,
    prefix_length: Option<i32>,
    /// Addresses the claim must not take (`--reserved`).
    reserved: Option<Vec<String>>,
    /// The tenant of a floating IP claimed from a public pool (`--tenant`).
    tenant: Option<String>,
    /// An exact child prefix of a supernet (`--prefix`).
    prefix: Option<String>,
    dry_run: Option<bool>,
    /// A lease that lapses unless renewed (`90s`, `15m`, `1h`, `7d`); the owner asking
    /// again with a TTL renews it.
    ttl: Option<String>,
}

/// `release`'s input: a batch line's fields.
#[derive(InputObject, Serialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseInput {
    namespace: Option<String>,
    pool: Option<String>,
    address: Option<String>,
    owner: Option<String>,
    uid: Option<String>,
    kind: Option<String>,
    /// A tenant's floating IPs (`--tenant`).
    tenant: Option<String>,
    /// Only the addresses inside this prefix (`--within`).
    within: Option<String>,
    /// A label selector (`release -l`), read as `list -l` reads it. Not a batch line's
    /// field (a batch line takes none): set on the request the line makes.
    #[serde(skip)]
    labels: Option<String>,
    force: Option<bool>,
    ignore_not_found: Option<bool>,
    dry_run: Option<bool>,
}

/// `input` as its batch line, read by the batch's reader: fields left out are absent
/// (never `null`, which a batch reads as "not the default").
fn line(input: &impl Serialize) -> serde_json::Value {
    let mut value = serde_json::to_value(input).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    value
}

impl AllocateInput {
    /// The typed request: the batch's reader, then the one constructor (`explain`:
    /// `--explain`, which the constructor allows with one pool only).
    fn request(&self, scope: &Scope, explain: bool) -> Result<Request> {
        let input = Allocate {
            explain,
            ..Allocate::read(line(self), &Defaults::default())?
        };
        Ok(Request::Allocate(Box::new(AllocateRequest::new(
            &input, scope,
        )?)))
    }
}

impl ReleaseInput {
    pub(super) fn request(&self, scope: &Scope) -> Result<Request> {
        let mut input = Release::read(line(self), &Defaults::default())?;
        input.select.labels = self.labels.clone();
        Ok(Request::Release(Box::new(ReleaseRequest::new(
            &input, scope,
        )?)))
    }
}

/// What a claim came to, for the owner `owner`.
pub(super) fn claim(owner: &str, claimed: Claimed) -> Claim {
    let mut held = Vec::new();
    let (addresses, prefix, action) = match claimed {
        Claimed::Addresses(allocated) => {
            let actions: Vec<Action> = allocated.iter().map(Action::from).collect();
            let addresses = allocated
                .iter()
                .map(|a| a.manifest().spec.address.to_string())
                .collect();
            for (a, action) in allocated.into_iter().zip(&actions) {
                held.push(Held::new(*action, a.into_manifest()));
            }
            let action = [Action::Created, Action::WouldCreate]
                .into_iter()
                .find(|a| actions.contains(a))
                .unwrap_or(Action::Existing);
            (addresses, None, action)
        }
        Claimed::Prefix(m, created) => {
            let action = if created {
                Action::Created
            } else {
                Action::Existing
            };
            let prefix = m.spec.prefix.to_string();
            held.push(Held::new(action, m));
            (Vec::new(), Some(prefix), action)
        }
        Claimed::WouldPrefix(p) => (Vec::new(), Some(p.to_string()), Action::WouldCreate),
    };
    Claim {
        owner: owner.to_owned(),
        addresses,
        prefix,
        action,
        held,
        notes: Vec::new(),
    }
}

/// The outcome of one claim through the executor; a failure carries the notes the command
/// line prints before its error (an exhausted pool's `--explain` lines).
async fn run_claim(
    work: &Work,
    input: &AllocateInput,
    scope: &Scope,
    explain: bool,
) -> async_graphql::Result<Claim> {
    let outcome = work.submit(input.request(scope, explain)).wait().await;
    match outcome.result {
        Ok(Done::Claimed(claimed)) => Ok(Claim {
            notes: outcome.notes,
            ..claim(&input.owner, claimed)
        }),
        Ok(Done::Freed(..)) => unreachable!("an allocate request claims"),
        Err(e) => Err(super::errors::graphql_noted(&e, &outcome.notes)),
    }
}

/// The scopes a query over many pools covers: `namespace` alone (not found outside the
/// caller's scope), else every scope the caller may read.
fn scopes(
    store: &dyn crate::store::Store,
    scope: &Scope,
    ns: Option<&str>,
) -> Result<Vec<Option<Namespace>>> {
    crate::engine::scopes::scopes(store, scope, Verb::Read, namespace(ns)?)
}

/// A `pool` argument, validated (exit 2 naming `--pool`).
fn pool_name(pool: Option<String>) -> Result<Option<PoolName>> {
    pool.map(|p| crate::engine::request::field::flag("--pool", PoolName::new(&p)))
        .transpose()
}

#[derive(Default)]
pub struct Query;

// Named apart from the merged `Query` the schema shows ([`super::api::Queries`]).
#[Object(name = "ReadQuery")]
impl Query {
    /// The pools of `namespace` (every namespace without it), with their usage.
    async fn pools(
        &self,
        ctx: &Context<'_>,
        namespace: Option<String>,
        all_namespaces: Option<bool>,
    ) -> async_graphql::Result<Vec<Pool>> {
        let _ = all_namespaces;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let scopes = scopes(store, &scope, namespace.as_deref())?;
                let listed = crate::engine::pool::list(store, &scopes, &mut Warnings::default())?;
                Ok(listed
                    .iter()
                    .map(|(m, u)| Pool::listed(store, m, u))
                    .collect())
            })
            .await
            .gql()
    }

    /// One pool, or null if it does not exist.
    async fn pool(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: Option<String>,
    ) -> async_graphql::Result<Option<Pool>> {
        let pool = pool_ref(namespace.as_deref(), &name).gql()?;
        let scope = scope(ctx);
        let found = work(ctx)
            .read(move |store| {
                let shown = crate::engine::pool::show(store, &scope, &pool)?;
                Ok(Pool::listed(store, &shown.manifest, &shown.usage(None).0))
            })
            .await;
        match found {
            Err(Error::NotFound { .. }) => Ok(None),
            found => found.map(Some).gql(),
        }
    }

    /// One pool as `pool show` shows it (its usage within `within`, a range inside it, if
    /// given), or null if it does not exist.
    async fn pool_shown(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: Option<String>,
        within: Option<String>,
    ) -> async_graphql::Result<Option<super::objects::PoolShown>> {
        let pool = pool_ref(namespace.as_deref(), &name).gql()?;
        let within = within
            .map(|w| crate::engine::request::field::prefix("--within", &w))
            .transpose()
            .gql()?;
        let scope = scope(ctx);
        let found = work(ctx)
            .read(move |store| super::objects::pool_shown(store, &scope, &pool, within))
            .await;
        match found {
            Err(Error::NotFound { .. }) => Ok(None),
            found => found.map(Some).gql(),
        }
    }

    /// What `pool show --map` draws of an address pool over `within` (a range inside it,
    /// else the whole pool), with the holders of its addresses if `owners`; null if it does
    /// not exist.
    async fn pool_map(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: Option<String>,
        within: Option<String>,
        owners: Option<bool>,
    ) -> async_graphql::Result<Option<super::pool_map::PoolMap>> {
        let pool = pool_ref(namespace.as_deref(), &name).gql()?;
        let within = within
            .map(|w| crate::engine::request::field::prefix("--within", &w))
            .transpose()
            .gql()?;
        let (scope, owners) = (scope(ctx), owners.unwrap_or(false));
        let found = work(ctx)
            .read(move |store| super::pool_map::pool_map(store, &scope, &pool, within, owners))
            .await;
        match found {
            Err(Error::NotFound { .. }) => Ok(None),
            found => found.map(Some).gql(),
        }
    }

    /// The allocations the selectors pick, sorted by namespace, pool and address.
    #[allow(clippy::too_many_arguments)]
    async fn allocations(
        &self,
        ctx: &Context<'_>,
        namespace: Option<String>,
        all_namespaces: Option<bool>,
        pool: Option<String>,
        owner: Option<String>,
        uid: Option<String>,
        mac: Option<String>,
        selectors: Option<Selectors>,
    ) -> async_graphql::Result<Vec<Allocation>> {
        let _ = all_namespaces;
        let listing =
            super::objects::Listing::read(namespace, pool, owner, uid, mac, selectors).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let named = listing.named();
                let (scopes, query) = listing.scoped(store, &scope)?;
                let mut warnings = Warnings::default();
                let mut found =
                    crate::engine::list::collect(store, scopes.as_deref(), &query, &mut warnings)?;
                // The public pools' floating IPs of tenants the caller does not see, gone.
                found.retain(|m| scope.sees_owner(&m.spec.owner));
                // A tenant's own floating IPs, in the cluster's public pools, are its too.
                if !named && !scope.cluster() {
                    let cluster =
                        crate::engine::list::collect(store, Some(&[None]), &query, &mut warnings)?;
                    found.extend(
                        cluster
                            .into_iter()
                            .filter(|m| crate::engine::floating::visible(&scope, m)),
                    );
                }
                super::objects::allocations(store, &found, &scope)
            })
            .await
            .gql()
    }

    /// The subnets of `namespace`'s pools (of `pool` only, if given).
    async fn subnets(
        &self,
        ctx: &Context<'_>,
        namespace: Option<String>,
        pool: Option<String>,
    ) -> async_graphql::Result<Vec<Subnet>> {
        let ns = crate::engine::request::field::namespace(namespace.as_deref()).gql()?;
        let pool = pool_name(pool).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                scope.check(Verb::Read, ns.as_ref(), || match &ns {
                    Some(ns) => crate::engine::admin::no_namespace(ns),
                    None => "no cluster-scoped subnets".into(),
                })?;
                let found = crate::engine::subnet::list(store, ns.as_ref(), pool.as_ref())?;
                Ok(found.iter().map(Subnet::from).collect())
            })
            .await
            .gql()
    }

    /// The subnets of `namespace`'s pools (every namespace without it), of `pool` only if
    /// given, with their manifests and usage (`subnet list`).
    async fn subnets_shown(
        &self,
        ctx: &Context<'_>,
        namespace: Option<String>,
        pool: Option<String>,
    ) -> async_graphql::Result<Vec<super::objects::SubnetShown>> {
        let pool = pool_name(pool).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                super::objects::subnets_shown(store, &scope, namespace.as_deref(), pool.as_ref())
            })
            .await
            .gql()
    }

    /// One stored subnet as `subnet show` shows it (its manifest and usage), or null if it
    /// does not exist; without `namespace`, a cluster-scoped pool's subnet.
    async fn subnet_shown(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: Option<String>,
    ) -> async_graphql::Result<Option<super::objects::SubnetShown>> {
        let ns = crate::engine::request::field::namespace(namespace.as_deref()).gql()?;
        let name =
            crate::engine::request::field::flag("NAME", crate::model::SubnetName::new(&name))
                .gql()?;
        let scope = scope(ctx);
        let found = work(ctx)
            .read(move |store| super::objects::subnet_shown(store, &scope, ns.as_ref(), &name))
            .await;
        match found {
            Err(Error::NotFound { .. }) => Ok(None),
            found => found.map(Some).gql(),
        }
    }

    /// A VPC, or null if it does not exist.
    async fn vpc(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: String,
    ) -> async_graphql::Result<Option<Vpc>> {
        let scope = scope(ctx);
        let found = work(ctx)
            .read(move |store| vpc_now(store, &scope, &namespace, &name))
            .await;
        match found {
            Err(Error::NotFound { .. }) => Ok(None),
            found => found.map(Some).gql(),
        }
    }

    /// The VPCs of `namespace` (every namespace without it).
    async fn vpcs(
        &self,
        ctx: &Context<'_>,
        namespace: Option<String>,
        all_namespaces: Option<bool>,
    ) -> async_graphql::Result<Vec<Vpc>> {
        let _ = all_namespaces;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let mut warnings = Warnings::default();
                let scopes = scopes(store, &scope, namespace.as_deref())?;
                let vpcs = crate::engine::vpc::list(store, &scopes, &mut warnings)?;
                let usages = crate::engine::pool::list(store, &scopes, &mut warnings)?;
                Ok(vpcs.iter().map(|v| Vpc::new(v, &usages)).collect())
            })
            .await
            .gql()
    }
}

/// The claims' mutations.
#[derive(Default)]
pub struct ClaimMutation;

#[Object]
impl ClaimMutation {
    /// Claims an address (or a child prefix) for an owner; the same owner asking again gets
    /// what it holds. With `explain` (`--explain`, one pool), `notes` says why the address
    /// is the one, as the command line's stderr does (on failure, the error's
    /// `extensions.notes`); it needs `read` where the pool lives.
    async fn allocate(
        &self,
        ctx: &Context<'_>,
        input: AllocateInput,
        explain: Option<bool>,
    ) -> async_graphql::Result<Claim> {
        run_claim(work(ctx), &input, &scope(ctx), explain.unwrap_or(false)).await
    }

    /// One claim per input, each its own request: one outcome per input, in order, and a
    /// failed one does not stop the others.
    async fn allocate_many(
        &self,
        ctx: &Context<'_>,
        inputs: Vec<AllocateInput>,
    ) -> Vec<ClaimOutcome> {
        let work = work(ctx);
        let scope = scope(ctx);
        // Every request is handed to the executor before any answer is awaited: they run
        // as a batch's lines do, in order, grouped where the store groups.
        let pending: Vec<_> = inputs
            .iter()
            .map(|input| work.submit(input.request(&scope, false)))
            .collect();
        let mut outcomes = Vec::with_capacity(pending.len());
        for (index, (input, pending)) in inputs.iter().zip(pending).enumerate() {
            let outcome = pending.wait().await;
            let result = match outcome.result {
                Ok(Done::Claimed(claimed)) => Ok(Claim {
                    notes: outcome.notes,
                    ..claim(&input.owner, claimed)
                }),
                Ok(Done::Freed(..)) => unreachable!("an allocate request claims"),
                Err(e) => Err(e),
            };
            outcomes.push((index, result));
        }
        outcomes
            .into_iter()
            .map(|(index, result)| {
                let index = i32::try_from(index).unwrap_or(i32::MAX);
                match result {
                    Ok(claim) => ClaimOutcome {
                        index,
                        claim: Some(claim),
                        error: None,
                    },
                    Err(e) => ClaimOutcome {
                        index,
                        claim: None,
                        error: Some(RequestError::from(&e)),
                    },
                }
            })
            .collect()
    }

    /// Releases what the input picks; how many addresses and prefixes were released.
    async fn release(&self, ctx: &Context<'_>, input: ReleaseInput) -> async_graphql::Result<i32> {
        match work(ctx)
            .submit(input.request(&scope(ctx)))
            .wait()
            .await
            .result
            .gql()?
        {
            Done::Freed(freed, _) => {
                let n = freed.addresses.len() + freed.prefixes.len();
                Ok(i32::try_from(n).unwrap_or(i32::MAX))
            }
            Done::Claimed(_) => unreachable!("a release request releases"),
        }
    }
}
