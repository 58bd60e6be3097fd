//! The seed operations answering what they did, as the command line reports it:
//! `createPublicPoolDone`, `deletePool`, `createVpcDone`, `deleteVpcDone`,
//! `createSubnetDone` and `deleteSubnetDone` take `createPublicPool`'s … inputs ([`super::admin`]), and a dry run, through the same constructors
//! and engine calls, and answer with each object's manifest as stored and what was done to
//! it, so that `ipamctl --server` prints them with the local command's own printer
//! ([`crate::cli::remote`]).

use async_graphql::{Context, Enum, Object, SimpleObject};

use super::admin::{
    CreatePublicPoolInput, CreateSubnetInput, CreateVpcInput, subnet_deletion, vpc_deletion,
};
use super::errors::Graphql;
use super::objects::{Action, Held};
use super::schema::{RequestError, scope, work};
use crate::engine::admin::{self, Deletion};
use crate::engine::vpc::{Made, Removal};
use crate::engine::warning::Warnings;
use crate::yaml;

/// What `createVpcDone` did (or, in a dry run, would do).
#[derive(SimpleObject, Debug)]
pub struct VpcCreation {
    /// The VPC's uid, new or adopted from the pools that existed.
    pub uid: String,
    /// The `IPPrefixClaim`s of the ranges drawn from supernets: `CREATED` or `EXISTING`.
    pub claims: Vec<Held>,
    /// The `IPAMPool`s, IPv4 first: `CREATED` (in a dry run, would be) or `EXISTING`.
    pub pools: Vec<Held>,
    /// The router's uplink `IPAllocation`, with `uplinkZone`.
    pub uplink: Option<Held>,
}

/// What kind of object a delete removed.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
pub enum RemovedKind {
    Allocation,
    Subnet,
    Pool,
    PrefixClaim,
}

/// One object a delete removed (or, in a dry run, would), as it was stored.
#[derive(SimpleObject, Debug)]
pub struct Removed {
    pub kind: RemovedKind,
    pub manifest: String,
}

/// What `deleteVpcDone` did.
#[derive(SimpleObject, Debug)]
pub struct VpcDeletion {
    /// With `ignoreNotFound`, the not-found message of a VPC that did not exist (nothing
    /// was deleted).
    pub absent: Option<String>,
    /// What was removed, in order: per pool its allocations (the uplinks first), its
    /// subnets, the pool, then the ranges' claims.
    pub removed: Vec<Removed>,
    /// The failure the command line reports after the removals (allocations it could
    /// not release, so their pool was kept); what was removed stays removed.
    pub kept: Option<RequestError>,
}

/// How a subnet came to be as asked.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
pub enum SubnetPut {
    Created,
    Configured,
    Unchanged,
}

/// How a public pool came to be as asked: a create never changes a pool (another spec is a
/// conflict), so it is made or found as it is.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
pub enum PoolPut {
    Created,
    Unchanged,
}

/// What `createSubnetDone` did (in a dry run, would do).
#[derive(SimpleObject, Debug)]
pub struct SubnetCreation {
    pub action: SubnetPut,
    /// The `Subnet` document, as stored (or would be).
    pub manifest: String,
}

/// What `deleteSubnetDone` did.
#[derive(SimpleObject, Debug)]
pub struct SubnetDeletion {
    /// With `ignoreNotFound`, the not-found message of a subnet that did not exist.
    pub absent: Option<String>,
    /// The `Subnet` document deleted (or, in a dry run, that would be), as it was stored.
    pub manifest: Option<String>,
}

/// What `createPublicPoolDone` did (in a dry run, would do).
#[derive(SimpleObject, Debug)]
pub struct PoolCreation {
    /// `CREATED`, or `UNCHANGED` for a pool that exists as asked.
    pub action: PoolPut,
    /// The `IPAMPool` document, as stored (or would be).
    pub manifest: String,
}

/// What `deletePool` did.
#[derive(SimpleObject, Debug)]
pub struct PoolDeletion {
    /// The `IPAMPool` document deleted (or, in a dry run, that would be), as it was stored.
    pub manifest: String,
}

/// The mutations that answer what they did.
#[derive(Default)]
pub struct DoneMutation;

#[Object]
impl DoneMutation {
    /// `createPublicPool` answering how the pool came to be (`pool create`'s report); with
    /// `dryRun`, how it would.
    async fn create_public_pool_done(
        &self,
        ctx: &Context<'_>,
        input: CreatePublicPoolInput,
        dry_run: Option<bool>,
    ) -> async_graphql::Result<PoolCreation> {
        let request = input.request(dry_run.unwrap_or(false)).gql()?;
        let scope = scope(ctx);
        let (manifest, put) = work(ctx)
            .read(move |store| admin::create_public_pool(store, &scope, &request))
            .await
            .gql()?;
        // `engine::admin::create_public_pool` answers no other (it shares the subnets' `Put`).
        let action = match put {
            crate::engine::subnet::Put::Created => PoolPut::Created,
            _ => PoolPut::Unchanged,
        };
        Ok(PoolCreation {
            action,
            manifest: yaml::encode(&manifest),
        })
    }

    /// Deletes a pool with its subnets and cooldown records (`pool delete`): `admin` in its
    /// namespace, the cluster scope without `namespace`; exit 4 while it holds allocations
    /// or claimed prefixes. With `dryRun`, only checks.
    async fn delete_pool(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: Option<String>,
        dry_run: Option<bool>,
    ) -> async_graphql::Result<PoolDeletion> {
        let request = admin::PoolDelete::new(&admin::DeletePoolInput {
            name,
            namespace,
            dry_run: dry_run.unwrap_or(false),
        })
        .gql()?;
        let scope = scope(ctx);
        let manifest = work(ctx)
            .read(move |store| admin::delete_pool(store, &scope, &request))
            .await
            .gql()?;
        Ok(PoolDeletion {
            manifest: yaml::encode(&manifest),
        })
    }

    /// `createVpc` answering what it did to each object (`vpc create`'s report); with
    /// `dryRun`, what it would do, writing nothing.
    async fn create_vpc_done(
        &self,
        ctx: &Context<'_>,
        input: CreateVpcInput,
        dry_run: Option<bool>,
    ) -> async_graphql::Result<VpcCreation> {
        let request = input.request(dry_run.unwrap_or(false)).gql()?;
        let scope = scope(ctx);
        let made = work(ctx)
            .read(move |store| admin::create_vpc(store, &scope, &request, &mut Warnings::default()))
            .await
            .gql()?;
        let created = &made.created;
        Ok(VpcCreation {
            uid: created.uid.to_string(),
            claims: created.claims.iter().map(|(m, d)| held(m, d)).collect(),
            pools: created.pools.iter().map(|(m, d)| held(m, d)).collect(),
            uplink: made
                .uplink
                .as_ref()
                .map(|a| Held::new(Action::from(a), a.manifest().clone())),
        })
    }

    /// `deleteVpc` answering what it removed (`vpc delete`'s report); with `dryRun`, what
    /// it would remove.
    async fn delete_vpc_done(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: String,
        ignore_not_found: Option<bool>,
        dry_run: Option<bool>,
    ) -> async_graphql::Result<VpcDeletion> {
        let flags = (ignore_not_found.unwrap_or(false), dry_run.unwrap_or(false));
        Ok(match vpc_deletion(ctx, name, namespace, flags).await? {
            Deletion::Absent(message) => VpcDeletion {
                absent: Some(message),
                removed: Vec::new(),
                kept: None,
            },
            Deletion::Deleted(deleted) => VpcDeletion {
                absent: None,
                removed: deleted.removed.iter().map(removed).collect(),
                kept: deleted.kept.as_ref().map(RequestError::from),
            },
        })
    }

    /// `createSubnet` answering how the subnet came to be (`subnet create`'s report); with
    /// `dryRun`, how it would.
    async fn create_subnet_done(
        &self,
        ctx: &Context<'_>,
        input: CreateSubnetInput,
        dry_run: Option<bool>,
    ) -> async_graphql::Result<SubnetCreation> {
        let request = input.request(dry_run.unwrap_or(false)).gql()?;
        let scope = scope(ctx);
        let (manifest, put) = work(ctx)
            .read(move |store| admin::create_subnet(store, &scope, &request))
            .await
            .gql()?;
        Ok(SubnetCreation {
            action: subnet_put(put),
            manifest: yaml::encode(&manifest),
        })
    }

    /// `deleteSubnet` answering what it deleted (`subnet delete`'s report); with `dryRun`,
    /// what it would. Without `namespace`, a cluster-scoped pool's subnet.
    async fn delete_subnet_done(
        &self,
        ctx: &Context<'_>,
        name: String,
        namespace: Option<String>,
        ignore_not_found: Option<bool>,
        dry_run: Option<bool>,
    ) -> async_graphql::Result<SubnetDeletion> {
        let flags = (ignore_not_found.unwrap_or(false), dry_run.unwrap_or(false));
        Ok(match subnet_deletion(ctx, name, namespace, flags).await? {
            Deletion::Absent(message) => SubnetDeletion {
                absent: Some(message),
                manifest: None,
            },
            Deletion::Deleted(m) => SubnetDeletion {
                absent: None,
                manifest: Some(yaml::encode(&m)),
            },
        })
    }
}

/// What a put did, as the API says it.
fn subnet_put(put: crate::engine::subnet::Put) -> SubnetPut {
    use crate::engine::subnet::Put;
    match put {
        Put::Created => SubnetPut::Created,
        Put::Configured => SubnetPut::Configured,
        Put::Unchanged => SubnetPut::Unchanged,
    }
}

/// A pool or a range's claim `vpc create` made, or found made.
fn held<M: serde::Serialize + Clone + Send + Sync + 'static>(m: &M, made: &Made) -> Held {
    let action = match made {
        Made::Created => Action::Created,
        Made::Existing => Action::Existing,
    };
    Held::new(action, m.clone())
}

/// A removal as the API shows it.
fn removed(r: &Removal) -> Removed {
    let (kind, manifest) = match r {
        Removal::Allocation(m) => (RemovedKind::Allocation, yaml::encode(m)),
        Removal::Subnet(m) => (RemovedKind::Subnet, yaml::encode(m)),
        Removal::Pool(m) => (RemovedKind::Pool, yaml::encode(m)),
        Removal::Claim(m) => (RemovedKind::PrefixClaim, yaml::encode(m)),
    };
    Removed { kind, manifest }
}
