//! `createSubnet` and `deleteSubnet` (`subnet create`, `subnet delete`): a stored subnet of
//! a pool, given as a prefix or carved as the next free block of a length
//! ([`crate::engine::subnet`]).

use crate::engine::request::field::{address, flag, prefix};
use crate::engine::scope::Scope;
use crate::engine::subnet::Put;
use crate::error::{Error, Result};
use crate::model::subnet::SubnetManifest;
use crate::model::{Exclude, Namespace, PoolName, PoolRef, SubnetName};
use crate::store::Store;

/// `createSubnet`'s input (`subnet create`'s flags), as a user gives it: exactly one of
/// `cidr` and `prefix_length`; `gateway` and `reserved` only with `cidr`.
#[derive(Clone, Debug, Default)]
pub struct CreateSubnetInput {
    pub name: String,
    /// `-n`: the pool's scope (none: the cluster's).
    pub namespace: Option<String>,
    pub pool: String,
    pub cidr: Option<String>,
    pub prefix_length: Option<u8>,
    pub gateway: Option<String>,
    /// Addresses or prefixes of the subnet never handed out.
    pub reserved: Vec<String>,
    pub dry_run: bool,
}

/// A `createSubnet` request, valid in every way that does not need the store.
#[derive(Clone, Debug)]
pub struct SubnetCreate {
    name: SubnetName,
    pool: PoolRef,
    form: Form,
    dry_run: bool,
}

#[derive(Clone, Debug)]
enum Form {
    /// The subnet as given.
    Given(Box<SubnetManifest>),
    /// The next free block of this length.
    Carve(u8),
}

impl SubnetCreate {
    /// The request `input` stands for, or exit 2 naming the flag that is wrong.
    pub fn new(input: &CreateSubnetInput) -> Result<SubnetCreate> {
        let name = flag("NAME", SubnetName::new(&input.name))?;
        let pool = PoolRef {
            namespace: input
                .namespace
                .as_deref()
                .map(|ns| super::namespace("--namespace", ns))
                .transpose()?,
            name: flag("--pool", PoolName::new(&input.pool))?,
        };
        let form = match (&input.cidr, input.prefix_length) {
            (Some(cidr), None) => {
                let gateway = input
                    .gateway
                    .as_deref()
                    .map(|a| address("--gateway", a))
                    .transpose()?;
                let reserved = input
                    .reserved
                    .iter()
                    .map(|r| flag("--reserved", Exclude::try_from(r.clone())))
                    .collect::<Result<Vec<_>>>()?;
                let manifest =
                    SubnetManifest::new(&name, &pool, prefix("--cidr", cidr)?, gateway, reserved);
                manifest
                    .validate()
                    .map_err(|e| Error::invalid("subnet create", e))?;
                Form::Given(Box::new(manifest))
            }
            (None, Some(len)) => {
                if input.gateway.is_some() || !input.reserved.is_empty() {
                    return Err(Error::usage(
                        "a carved subnet (`--prefix-length`) takes its gateway and no reserved addresses: give `--cidr` to set them",
                    ));
                }
                Form::Carve(len)
            }
            _ => {
                return Err(Error::usage(
                    "give exactly one of `--cidr CIDR` and `--prefix-length N`",
                ));
            }
        };
        Ok(SubnetCreate {
            name,
            pool,
            form,
            dry_run: input.dry_run,
        })
    }
}

/// Creates the subnet (`admin` in its pool's namespace; outside the scope, not found):
/// the subnet and [`Put::Created`], or [`Put::Unchanged`] when it exists as asked.
pub fn create_subnet(
    store: &dyn Store,
    scope: &Scope,
    request: &SubnetCreate,
) -> Result<(SubnetManifest, Put)> {
    let pool = &request.pool;
    super::check_admin(scope, pool.namespace.as_ref(), || {
        format!(
            "pool `{}` not found ({})",
            pool.name,
            super::place(pool.namespace.as_ref())
        )
    })?;
    match &request.form {
        Form::Carve(len) => {
            crate::engine::subnet::carve(store, scope, &request.name, pool, *len, request.dry_run)
        }
        Form::Given(manifest) => {
            let put = crate::engine::subnet::put(store, scope, manifest, false, request.dry_run)?;
            Ok((manifest.as_ref().clone(), put))
        }
    }
}

/// `deleteSubnet`'s input (`subnet delete`'s), as a user gives it.
#[derive(Clone, Debug, Default)]
pub struct DeleteSubnetInput {
    pub name: String,
    pub namespace: Option<String>,
    pub ignore_not_found: bool,
    pub dry_run: bool,
}

/// A `deleteSubnet` request, valid in every way that does not need the store.
#[derive(Clone, Debug)]
pub struct SubnetDelete {
    name: SubnetName,
    namespace: Option<Namespace>,
    ignore_not_found: bool,
    dry_run: bool,
}

impl SubnetDelete {
    /// The request `input` stands for, or exit 2 naming the flag that is wrong.
    pub fn new(input: &DeleteSubnetInput) -> Result<SubnetDelete> {
        Ok(SubnetDelete {
            name: flag("NAME", SubnetName::new(&input.name))?,
            namespace: input
                .namespace
                .as_deref()
                .map(|ns| super::namespace("--namespace", ns))
                .transpose()?,
            ignore_not_found: input.ignore_not_found,
            dry_run: input.dry_run,
        })
    }
}

/// Deletes the subnet (`admin` in its namespace; outside the scope, not found): exit 4
/// while an allocation holds an address inside it. With `ignore_not_found`, a subnet that
/// does not exist is [`super::Deletion::Absent`].
pub fn delete_subnet(
    store: &dyn Store,
    scope: &Scope,
    request: &SubnetDelete,
) -> Result<super::Deletion<SubnetManifest>> {
    let (ns, name) = (request.namespace.as_ref(), &request.name);
    super::check_admin(scope, ns, || {
        format!("subnet `{name}` not found ({})", super::place(ns))
    })?;
    super::absent_ok(
        crate::engine::subnet::delete(store, scope, ns, name, request.dry_run),
        request.ignore_not_found,
    )
}
