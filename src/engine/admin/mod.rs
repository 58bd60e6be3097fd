//! The administrative operations as engine calls, one typed input and one function each,
//! that the command line and the API's resolvers both call (`createPublicPool`,
//! `deletePool`, `createVpc`, `deleteVpc`, `createSubnet`, `deleteSubnet`): each input is text as a user
//! gives it, made typed by one constructor that holds every rule needing no store, and each
//! operation checks the caller's scope first, before any lock: `admin` in the object's
//! namespace (the cluster scope for a public pool); outside the scope, "not found". Results
//! come back as values; nothing here prints.

mod pool_delete;
mod public_pool;
mod subnet;
mod vpc;

pub use pool_delete::{DeletePoolInput, PoolDelete, delete_pool};
pub use public_pool::{CreatePublicPoolInput, PublicPool, create_public_pool};
pub use subnet::{
    CreateSubnetInput, DeleteSubnetInput, SubnetCreate, SubnetDelete, create_subnet, delete_subnet,
};
pub use vpc::{
    CreateVpcInput, DeleteVpcInput, FromPoolInput, VpcCreate, VpcCreated, VpcDelete, create_vpc,
    delete_vpc,
};

use crate::engine::scope::{Scope, Verb};
use crate::error::{Error, Result};
use crate::model::Namespace;

/// What a delete that may find nothing did: deleted `T`, or (with `ignoreNotFound`) found
/// nothing, saying what it did not find.
#[derive(Debug)]
pub enum Deletion<T> {
    Deleted(T),
    /// Nothing to delete: the not-found error's message (`vpc `web` not found …`).
    Absent(String),
}

/// `result`, or [`Deletion::Absent`] for a not-found error when `ignore_not_found`.
fn absent_ok<T>(result: Result<T>, ignore_not_found: bool) -> Result<Deletion<T>> {
    match result {
        Ok(done) => Ok(Deletion::Deleted(done)),
        Err(Error::NotFound { message, .. }) if ignore_not_found => Ok(Deletion::Absent(message)),
        Err(e) => Err(e),
    }
}

/// Checks that `scope` holds `admin` in `namespace` (`None`: the cluster scope); outside
/// it, not found with `missing` as the message.
fn check_admin(
    scope: &Scope,
    namespace: Option<&Namespace>,
    missing: impl FnOnce() -> String,
) -> Result<()> {
    scope.check(Verb::Admin, namespace, missing)
}

/// Where an object of scope `ns` is, as not-found messages say it.
fn place(ns: Option<&Namespace>) -> String {
    match ns {
        Some(ns) => format!("in namespace `{ns}`"),
        None => "cluster-scoped".into(),
    }
}

/// The message of a namespace outside the caller's scope, as for one that holds nothing.
pub(crate) fn no_namespace(ns: &Namespace) -> String {
    format!("namespace `{ns}` not found: it holds no pool and no allocation")
}

/// A namespace given as text, validated (exit 2 naming `what`).
fn namespace(what: &str, text: &str) -> Result<Namespace> {
    crate::engine::request::field::flag(what, Namespace::new(text))
}
