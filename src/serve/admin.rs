//! The director's seed operations beside `allocate`: `createPublicPool`, `createVpc`,
//! `deleteVpc`, `createSubnet`, `deleteSubnet`, `claimFloatingIp` and `releaseFloatingIp`.
//! Each input is the engine's (`engine::admin`, `engine::floating`), made a request by its
//! one constructor; the engine checks the caller's scope before any lock. A floating IP's
//! claim and release are requests of the executor, as `allocate`'s are; the rest run on a
//! reader's store (rare, and each takes its own locks).

use std::sync::atomic::AtomicBool;

use async_graphql::{Context, InputObject, Object};

use super::errors::Graphql;
use super::schema::{Claim, Subnet, Vpc, claim, scope, work};
use crate::engine::admin::{self, Deletion};
use crate::engine::executor::{Done, Request};
use crate::engine::floating::ReleaseFloatingInput;
use crate::engine::floating::{ClaimFloatingInput as Floating, FloatingClaim, FloatingRelease};
use crate::engine::vpc::Deleted;
use crate::engine::warning::Warnings;
use crate::error::Result;
use crate::model::subnet::SubnetManifest;

#[derive(InputObject)]
pub struct CreatePublicPoolInput {
    name: String,
    cidr: String,
    gateway: Option<String>,
    exclude: Option<Vec<String>>,
    zone: Option<String>,
}

impl CreatePublicPoolInput {
    /// The engine's request, through its one constructor (exit 2 naming the field).
    pub(super) fn request(self, dry_run: bool) -> Result<admin::PublicPool> {
        admin::PublicPool::new(&admin::CreatePublicPoolInput {
            name: self.name,
            cidr: self.cidr,
            gateway: self.gateway,
            exclude: self.exclude.unwrap_or_default(),
            zone: self.zone,
            dry_run,
        })
    }
}

#[derive(InputObject)]
pub struct FromPoolInput {
    pool: String,
    prefix_length: u8,
}

#[derive(InputObject)]
pub struct CreateVpcInput {
    name: String,
    namespace: String,
    cidrs: Option<Vec<String>>,
    from_pools: Option<Vec<FromPoolInput>>,
    /// The VPC's uid (`vpc create --uid`; else a new UUID, or the uid of the pools that
    /// exist).
    uid: Option<String>,
    /// A MAC prefix per pool, IPv4 first (`--mac-prefix`).
    mac_prefixes: Option<Vec<String>>,
    uplink_zone: Option<String>,
}

impl CreateVpcInput {
    /// The engine's request (its one constructor), a dry run if `dry_run`.
    pub(super) fn request(self, dry_run: bool) -> Result<admin::VpcCreate> {
        admin::VpcCreate::new(&admin::CreateVpcInput {
            name: self.name,
            namespace: self.namespace,
            cidrs: self.cidrs.unwrap_or_default(),
            from_pools: self
                .from_pools
                .unwrap_or_default()
                .into_iter()
                .map(|f| admin::FromPoolInput {
                    pool: f.pool,
                    prefix_length: f.prefix_length,
                })
                .collect(),
            uid: self.uid,
            mac_prefixes: self.mac_prefixes.unwrap_or_default(),
            uplink_zone: self.uplink_zone,
            dry_run,
        })
    }
}

#[derive(InputObject)]
pub struct CreateSubnetInput {
    name: String,
    /// The pool's namespace; without it, a cluster-scoped pool's subnet (`admin` with the
    /// cluster scope).
    namespace: Option<String>,
    pool: String,
    cidr: Option<String>,
    prefix_length: Option<u8>,
    gateway: Option<String>,
    reserved: Option<Vec<String>>,
}

impl CreateSubnetInput {
    /// The engine's request (its one constructor), a dry run if `dry_run`.
    pub(super) fn request(self, dry_run: bool) -> Result<admin::SubnetCreate> {
        admin::SubnetCreate::new(&admin::CreateSubnetInput {
            name: self.name,
            namespace: self.namespace,
            pool: self.pool,
            cidr: self.cidr,
            prefix_length: self.prefix_length,
            gateway: self.gateway,
            reserved: self.reserved.unwrap_or_default(),
            dry_run,
        })
    }
}

#[derive(InputObject)]
pub struct ClaimFloatingIpInput {
    namespace: String,
    name: String,
    uid: Option<String>,
    zone: Option<String>,
    pool: Option<String>,
}

/// The seed operations' mutations.
#[derive(Default)]
pub struct AdminMutation;

#[Object]
impl AdminMutation {
    /// Creates a cluster-scoped public pool (`admin` with the cluster scope); the same pool
    /// again is unchanged, another spec under its name a conflict.
    async fn create_public_pool(
        &self,
        ctx: &Context<'_>,
        input: CreatePublicPoolInput,
    ) -> async_graphql::Result<super::schema::Pool> {
        let request = input.request(false).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let (pool, _) = admin::create_public_pool(store, &scope, &request)?;
                let shown = crate::engine::pool::show(
                    store,
                    &scope,
                    &crate::model::PoolRef {
                        namespace: None,
                        name: crate::model::PoolName::new(&pool.metadata.name)
                            .map_err(|e| crate::error::Error::invalid("name", e))?,
                    },
                )?;
                Ok(super::schema::Pool::new(
                    &shown.manifest,
                    &shown.usage(None).0,
                ))
            })
            .await
            .gql()
    }

    /// Creates a VPC (its pools, and with `uplinkZone` its router's uplink); the same VPC
    /// again answers the same.
    async fn create_vpc(
        &self,
        ctx: &Context<'_>,
        input: CreateVpcInput,
    ) -> async_graphql::Result<Vpc> {
        let (namespace, name) = (input.namespace.clone(), input.name.clone());
        let request = input.request(false).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let mut warnings = Warnings::default();
                admin::create_vpc(store, &scope, &request, &mut warnings)?;
                super::schema::vpc_now(store, &scope, &namespace, &name)
            })
            .await
            .gql()
    }

    /// Deletes a VPC, releasing its router's uplinks: `true`, or `false` for one that did
    /// not exist with `ignoreNotFound`.
    async fn delete_vpc(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: String,
        ignore_not_found: Option<bool>,
    ) -> async_graphql::Result<bool> {
        let flags = (ignore_not_found.unwrap_or(false), false);
        let done = vpc_deletion(ctx, name, namespace, flags).await?;
        Ok(matches!(done, Deletion::Deleted(_)))
    }

    /// Creates a subnet of a pool, by its CIDR or carved by `prefixLength`.
    async fn create_subnet(
        &self,
        ctx: &Context<'_>,
        input: CreateSubnetInput,
    ) -> async_graphql::Result<Subnet> {
        let request = input.request(false).gql()?;
        let scope = scope(ctx);
        work(ctx)
            .read(move |store| {
                let (subnet, _) = admin::create_subnet(store, &scope, &request)?;
                Ok(Subnet::from(&subnet))
            })
            .await
            .gql()
    }

    /// Deletes a subnet: `true`, or `false` for one that did not exist with
    /// `ignoreNotFound`.
    async fn delete_subnet(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: String,
        ignore_not_found: Option<bool>,
    ) -> async_graphql::Result<bool> {
        let flags = (ignore_not_found.unwrap_or(false), false);
        let done = subnet_deletion(ctx, name, Some(namespace), flags).await?;
        Ok(matches!(done, Deletion::Deleted(_)))
    }

    /// Claims a tenant's floating IP (owner `FloatingIP/<namespace>/<name>`) from a zone's
    /// public pools or one public pool: `claim` in the tenant's namespace is enough. Two
    /// tenants' floating IPs of one name are two owners.
    async fn claim_floating_ip(
        &self,
        ctx: &Context<'_>,
        input: ClaimFloatingIpInput,
    ) -> async_graphql::Result<Claim> {
        let claimed = FloatingClaim::new(&Floating {
            namespace: input.namespace,
            name: input.name,
            uid: input.uid,
            zone: input.zone,
            pool: input.pool,
            dry_run: false,
        })
        .gql()?;
        let request = claimed
            .request(&scope(ctx))
            .map(|r| Request::Allocate(Box::new(r)));
        let owner = request_owner(&request);
        match work(ctx).submit(request).wait().await.result.gql()? {
            Done::Claimed(done) => Ok(claim(&owner, done)),
            Done::Freed(..) => unreachable!("a floating IP's claim claims"),
        }
    }

    /// Releases a tenant's floating IP (its own only): `true`, or `false` when it held none
    /// and `ignoreNotFound`.
    async fn release_floating_ip(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
        ignore_not_found: Option<bool>,
    ) -> async_graphql::Result<bool> {
        let release = FloatingRelease::new(&ReleaseFloatingInput {
            namespace,
            name,
            ignore_not_found: ignore_not_found.unwrap_or(false),
            dry_run: false,
        })
        .gql()?;
        let request = release
            .request(&scope(ctx))
            .map(|r| Request::Release(Box::new(r)));
        match work(ctx).submit(request).wait().await.result.gql()? {
            Done::Freed(freed, _) => Ok(!freed.addresses.is_empty()),
            Done::Claimed(_) => unreachable!("a floating IP's release releases"),
        }
    }
}

/// The owner a request claims for, as the answer names it.
fn request_owner(request: &Result<Request>) -> String {
    match request {
        Ok(Request::Allocate(r)) => r.owner().to_string(),
        _ => String::new(),
    }
}

/// Deletes VPC `name` of `namespace` for the caller, with `(ignore_not_found, dry_run)`.
pub(super) async fn vpc_deletion(
    ctx: &Context<'_>,
    name: String,
    namespace: String,
    (ignore_not_found, dry_run): (bool, bool),
) -> async_graphql::Result<Deletion<Deleted>> {
    let request = admin::VpcDelete::new(&admin::DeleteVpcInput {
        name,
        namespace,
        ignore_not_found,
        dry_run,
    })
    .gql()?;
    let scope = scope(ctx);
    work(ctx)
        .read(move |store| {
            // A request runs whole: the server's drain waits for it.
            let stop = AtomicBool::new(false);
            let mut warnings = Warnings::default();
            admin::delete_vpc(store, &scope, &request, &stop, &mut warnings)
        })
        .await
        .gql()
}

/// Deletes subnet `name` of `namespace` for the caller, with `(ignore_not_found, dry_run)`.
pub(super) async fn subnet_deletion(
    ctx: &Context<'_>,
    name: String,
    namespace: Option<String>,
    (ignore_not_found, dry_run): (bool, bool),
) -> async_graphql::Result<Deletion<SubnetManifest>> {
    let request = admin::SubnetDelete::new(&admin::DeleteSubnetInput {
        name,
        namespace,
        ignore_not_found,
        dry_run,
    })
    .gql()?;
    let scope = scope(ctx);
    work(ctx)
        .read(move |store| admin::delete_subnet(store, &scope, &request))
        .await
        .gql()
}
