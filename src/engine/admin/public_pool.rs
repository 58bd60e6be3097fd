//! `createPublicPool`: a cluster-scoped pool of kind `public` (floating IPs and VPC
//! uplinks come from it), made by `apply`'s unit of work so that every rule `apply` keeps
//! holds (no two public pools overlap; the pool's manifest is valid; a new pool moves no
//! DHCP subnet id).

use std::collections::BTreeMap;

use crate::engine::apply::{Manifests, apply};
use crate::engine::scope::Scope;
use crate::engine::subnet::Put;
use crate::error::{Error, Result};
use crate::model::{
    API_VERSION, Exclude, Metadata, POOL_KIND, PoolKind, PoolManifest, PoolName, PoolRef, PoolSpec,
};
use crate::store::Store;

/// `createPublicPool`'s input, as a user gives it.
#[derive(Clone, Debug, Default)]
pub struct CreatePublicPoolInput {
    pub name: String,
    pub cidr: String,
    pub gateway: Option<String>,
    /// Addresses or prefixes never handed out.
    pub exclude: Vec<String>,
    pub zone: Option<String>,
    pub dry_run: bool,
}

/// A public pool to create, valid in every way that does not need the store.
#[derive(Clone, Debug)]
pub struct PublicPool {
    manifest: PoolManifest,
    dry_run: bool,
}

impl PublicPool {
    /// The pool `input` stands for, or exit 2 naming the field that is wrong.
    pub fn new(input: &CreatePublicPoolInput) -> Result<PublicPool> {
        use crate::engine::request::field::{address, flag, prefix};
        let name = flag("name", PoolName::new(&input.name))?;
        let exclude = input
            .exclude
            .iter()
            .map(|e| flag("exclude", Exclude::try_from(e.clone())))
            .collect::<Result<Vec<_>>>()?;
        let manifest = PoolManifest {
            api_version: API_VERSION.into(),
            kind: POOL_KIND.into(),
            metadata: Metadata {
                name: name.to_string(),
                namespace: None,
                creation_timestamp: None,
                deletion_timestamp: None,
                labels: BTreeMap::new(),
                annotations: BTreeMap::new(),
                owner_refs: Vec::new(),
            },
            spec: PoolSpec {
                cidr: prefix("cidr", &input.cidr)?,
                kind: PoolKind::Public,
                prefix_lengths: None,
                gateway: input
                    .gateway
                    .as_deref()
                    .map(|g| address("gateway", g))
                    .transpose()?,
                exclude,
                zone: input.zone.clone(),
                reuse_after: None,
                mac_prefix: None,
                pick: Default::default(),
                dhcp: Default::default(),
            },
        };
        manifest
            .validate()
            .map_err(|e| Error::invalid("createPublicPool", e))?;
        Ok(PublicPool {
            manifest,
            dry_run: input.dry_run,
        })
    }

    /// The pool's manifest as it would be written.
    pub fn manifest(&self) -> &PoolManifest {
        &self.manifest
    }
}

/// Creates the public pool (`admin` in the cluster scope), answering the pool and what was
/// done: [`Put::Created`], or [`Put::Unchanged`] when it exists as asked (the same request
/// again). A pool of that name with another spec is exit 4 (change a pool with `apply`,
/// which checks what it holds); one that overlaps another public pool is exit 4.
pub fn create_public_pool(
    store: &dyn Store,
    scope: &Scope,
    pool: &PublicPool,
) -> Result<(PoolManifest, Put)> {
    let name = pool.manifest.name();
    super::check_admin(scope, None, || {
        format!("pool `{name}` not found (cluster-scoped)")
    })?;
    let at = PoolRef {
        namespace: None,
        name: name.clone(),
    };
    match crate::store::read::load_pool(store, &at) {
        Ok(existing) if existing.spec == pool.manifest.spec => {
            return Ok((existing, Put::Unchanged));
        }
        Ok(existing) => {
            return Err(Error::Conflict {
                message: format!(
                    "pool `{name}` exists with another spec ({} pool {}); a create does not change a pool",
                    existing.spec.kind, existing.spec.cidr
                ),
                hint: Some(format!(
                    "`ipamctl pool show {name}` shows it; `apply` of its manifest changes it, checking what it holds"
                )),
            });
        }
        Err(Error::NotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    let input = Manifests {
        pools: vec![pool.manifest.clone()],
        subnets: Vec::new(),
        quotas: Vec::new(),
    };
    // A pool alone: no quota is written, so no warning comes back.
    let put = apply(store, &input, pool.dry_run, &mut Default::default())?
        .first()
        .map(|(_, put)| *put)
        .unwrap_or(Put::Unchanged);
    if pool.dry_run {
        return Ok((pool.manifest.clone(), put));
    }
    Ok((crate::store::read::load_pool(store, &at)?, put))
}
