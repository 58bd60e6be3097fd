//! The GraphQL schema: the contract of issue 42. Every mutation's input is a batch line's
//! fields (`allocate -f`), camelCased, and is made the engine's typed request by the same
//! reader and constructor ([`crate::engine::request`]): a resolver checks no rule and
//! builds no command line. Claims and releases run through the executor ([`super::work`]),
//! queries on a reader's store.

use std::sync::Arc;

use async_graphql::{Context, Enum, InputObject, Object, SimpleObject};
use serde::Serialize;

use super::errors::Graphql;
use super::work::Work;
use crate::engine::allocate::Allocated;
use crate::engine::executor::{Done, Request};
use crate::engine::request::field::{namespace, pool_ref};
use crate::engine::request::{AllocateInput as Allocate, ReleaseInput as Release};
use crate::engine::request::{AllocateRequest, Claimed, Defaults, ReleaseRequest};
use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::candidates::Usage;
use crate::model::{AllocationManifest, Namespace, PoolManifest, PoolName};

pub(super) fn work<'a>(ctx: &Context<'a>) -> &'a Arc<Work> {
    ctx.data_unchecked::<Arc<Work>>()
}

/// The caller's scope: every request reached the schema through the authenticator
/// ([`super::auth`]), which put its caller in the request's data.
pub(super) fn scope(ctx: &Context<'_>) -> Scope {
    ctx.data_unchecked::<super::auth::Caller>().scope.clone()
}

/// How a claim came about.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
pub enum Action {
    Created,
    Existing,
    WouldCreate,
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
}

/// One `allocateMany` input's outcome.
#[derive(SimpleObject, Debug)]
pub struct ClaimOutcome {
    pub index: i32,
    pub claim: Option<Claim>,
    pub error: Option<RequestError>,
}

/// A failure, as a command line would report it.
#[derive(SimpleObject, Debug)]
pub struct RequestError {
    pub code: String,
    pub exit: i32,
    pub message: String,
    pub hint: Option<String>,
}

impl From<&Error> for RequestError {
    fn from(e: &Error) -> RequestError {
        RequestError {
            code: super::errors::code(e).into(),
            exit: e.exit_code(),
            message: e.to_string(),
            hint: e.hint().map(str::to_owned),
        }
    }
}

/// A pool and its usage; counts are decimal strings (an IPv6 pool's exceed 64 bits).
#[derive(SimpleObject, Debug)]
pub struct Pool {
    pub name: String,
    pub namespace: Option<String>,
    pub cidr: String,
    pub kind: String,
    pub gateway: Option<String>,
    pub zone: Option<String>,
    pub candidates: String,
    pub allocated: String,
    pub free: String,
}

impl Pool {
    pub(super) fn new(m: &PoolManifest, usage: &Usage) -> Pool {
        Pool {
            name: m.metadata.name.clone(),
            namespace: m.metadata.namespace.as_ref().map(ToString::to_string),
            cidr: m.spec.cidr.to_string(),
            kind: m.spec.kind.to_string(),
            gateway: m.spec.gateway.map(|g| g.to_string()),
            zone: m.spec.zone.clone(),
            candidates: usage.candidates.to_string(),
            allocated: usage.allocated.to_string(),
            free: usage.free.to_string(),
        }
    }
}

/// An address held by an owner.
#[derive(SimpleObject, Debug)]
pub struct Allocation {
    pub name: String,
    pub namespace: Option<String>,
    pub pool: String,
    pub address: String,
    pub owner: String,
    pub uid: Option<String>,
    pub mac: Option<String>,
}

impl From<&AllocationManifest> for Allocation {
    fn from(m: &AllocationManifest) -> Allocation {
        Allocation {
            name: m.metadata.name.clone(),
            namespace: m.metadata.namespace.as_ref().map(ToString::to_string),
            pool: m.spec.pool.to_string(),
            address: m.spec.address.to_string(),
            owner: m.spec.owner.to_string(),
            uid: m.spec.owner.uid().map(ToString::to_string),
            mac: m.spec.mac.map(|mac| mac.to_string()),
        }
    }
}

/// A named subnet of a pool.
#[derive(SimpleObject, Debug)]
pub struct Subnet {
    pub name: String,
    pub namespace: Option<String>,
    pub pool: String,
    pub cidr: String,
    pub gateway: Option<String>,
}

impl From<&crate::model::subnet::SubnetManifest> for Subnet {
    fn from(s: &crate::model::subnet::SubnetManifest) -> Subnet {
        Subnet {
            name: s.metadata.name.clone(),
            namespace: s.metadata.namespace.as_ref().map(ToString::to_string),
            pool: s.spec.pool.to_string(),
            cidr: s.spec.cidr.to_string(),
            gateway: s.spec.gateway.map(|g| g.to_string()),
        }
    }
}

/// The VPC `name` of `namespace` as it stands, for the caller of `scope`.
pub(super) fn vpc_now(
    store: &dyn crate::store::Store,
    scope: &Scope,
    namespace: &str,
    name: &str,
) -> Result<Vpc> {
    let ns = crate::engine::request::field::namespace(Some(namespace))?
        .ok_or_else(|| Error::usage("a VPC lives in a namespace"))?;
    let pools = [
        pool_ref(Some(namespace), &crate::model::vpc::pool_name(name, false))?,
        pool_ref(Some(namespace), &crate::model::vpc::pool_name(name, true))?,
    ];
    let mut warnings = Warnings::default();
    let vpc = crate::engine::vpc::get(store, scope, &ns, &pools, name, &mut warnings)?;
    let usages = crate::engine::pool::list(store, &[Some(ns)], &mut warnings)?;
    Ok(Vpc::new(&vpc, &usages))
}

/// A VPC: its private pools and its router's uplinks.
#[derive(SimpleObject, Debug)]
pub struct Vpc {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub cidrs: Vec<String>,
    pub pools: Vec<Pool>,
    pub uplinks: Vec<String>,
}

impl Vpc {
    fn new(v: &crate::engine::vpc::Vpc, usages: &[(PoolManifest, Usage)]) -> Vpc {
        let usage = |m: &PoolManifest| {
            usages
                .iter()
                .find(|(p, _)| {
                    p.metadata.name == m.metadata.name
                        && p.metadata.namespace == m.metadata.namespace
                })
                .map(|(p, u)| Pool::new(p, u))
        };
        Vpc {
            name: v.metadata.name.clone(),
            namespace: v.metadata.namespace.to_string(),
            uid: v.metadata.uid.to_string(),
            cidrs: v.pools.iter().map(|p| p.spec.cidr.to_string()).collect(),
            pools: v.pools.iter().filter_map(usage).collect(),
            uplinks: v
                .uplinks
                .iter()
                .map(|a| a.spec.address.to_string())
                .collect(),
        }
    }
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
    /// The typed request: the batch's reader, then the one constructor.
    fn request(&self, scope: &Scope) -> Result<Request> {
        let input = Allocate::read(line(self), &Defaults::default())?;
        Ok(Request::Allocate(Box::new(AllocateRequest::new(
            &input, scope,
        )?)))
    }
}

impl ReleaseInput {
    fn request(&self, scope: &Scope) -> Result<Request> {
        let input = Release::read(line(self), &Defaults::default())?;
        Ok(Request::Release(Box::new(ReleaseRequest::new(
            &input, scope,
        )?)))
    }
}

/// What a claim came to, for the owner `owner`.
pub(super) fn claim(owner: &str, claimed: Claimed) -> Claim {
    let (addresses, prefix, action) = match claimed {
        Claimed::Addresses(allocated) => {
            let of = |a: &Allocated| match a {
                Allocated::Created(_) => Action::Created,
                Allocated::WouldCreate(_) => Action::WouldCreate,
                Allocated::Existing(_) => Action::Existing,
            };
            let actions: Vec<Action> = allocated.iter().map(of).collect();
            let action = [Action::Created, Action::WouldCreate]
                .into_iter()
                .find(|a| actions.contains(a))
                .unwrap_or(Action::Existing);
            let addresses = allocated
                .iter()
                .map(|a| a.manifest().spec.address.to_string())
                .collect();
            (addresses, None, action)
        }
        Claimed::Prefix(m, created) => {
            let action = if created {
                Action::Created
            } else {
                Action::Existing
            };
            (Vec::new(), Some(m.spec.prefix.to_string()), action)
        }
        Claimed::WouldPrefix(p) => (Vec::new(), Some(p.to_string()), Action::WouldCreate),
    };
    Claim {
        owner: owner.to_owned(),
        addresses,
        prefix,
        action,
    }
}

/// The outcome of one claim through the executor.
async fn run_claim(work: &Work, input: &AllocateInput, scope: &Scope) -> Result<Claim> {
    match work.submit(input.request(scope)).wait().await.result? {
        Done::Claimed(claimed) => Ok(claim(&input.owner, claimed)),
        Done::Freed(..) => unreachable!("an allocate request claims"),
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
                Ok(listed.iter().map(|(m, u)| Pool::new(m, u)).collect())
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
                Ok(Pool::new(&shown.manifest, &shown.usage(None).0))
            })
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
    ) -> async_graphql::Result<Vec<Allocation>> {
        let _ = all_namespaces;
        let select = crate::engine::request::SelectInput {
            owner,
            uid,
            ..Default::default()
        };
        let mut query = crate::engine::request::query(pool.as_deref(), None, &select).gql()?;
        query.mac = mac
            .as_deref()
            .map(|m| crate::engine::request::field::flag("--mac", m.parse()))
            .transpose()
            .gql()?;
        let ns = crate::engine::request::field::namespace(namespace.as_deref()).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let named = ns.is_some();
                let scopes = crate::engine::scopes::named_scopes(store, &scope, Verb::Read, ns)?;
                let mut warnings = Warnings::default();
                let mut found =
                    crate::engine::list::collect(store, scopes.as_deref(), &query, &mut warnings)?;
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
                Ok(found.iter().map(Allocation::from).collect())
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
        let pool = pool
            .map(|p| crate::engine::request::field::flag("--pool", PoolName::new(&p)))
            .transpose()
            .gql()?;
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
    /// what it holds.
    async fn allocate(
        &self,
        ctx: &Context<'_>,
        input: AllocateInput,
    ) -> async_graphql::Result<Claim> {
        run_claim(work(ctx), &input, &scope(ctx)).await.gql()
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
            .map(|input| work.submit(input.request(&scope)))
            .collect();
        let mut outcomes = Vec::with_capacity(pending.len());
        for (index, (input, pending)) in inputs.iter().zip(pending).enumerate() {
            let result = match pending.wait().await.result {
                Ok(Done::Claimed(claimed)) => Ok(claim(&input.owner, claimed)),
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
