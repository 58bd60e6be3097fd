//! What `quota list` and the API's `quotas` query show: the quotas of the namespaces the
//! caller's [`Scope`] covers, each ceiling with what is held ([`crate::engine::quota::usage`]).
//! Outside the scope reads as a namespace that does not exist, as every listing does.

use crate::engine::quota::{Usage, usage};
use crate::engine::scope::{Scope, Verb};
use crate::error::Result;
use crate::model::Namespace;
use crate::store::Store;

/// Every ceiling of the quotas of `ns` (exit 3 when it holds nothing or lies outside
/// `scope`), else of every namespace `scope` may read, in namespace, quota and resource
/// order.
pub fn list(store: &dyn Store, scope: &Scope, ns: Option<Namespace>) -> Result<Vec<Usage>> {
    let scopes = crate::engine::scopes::named_scopes(store, scope, Verb::Read, ns)?;
    let namespaces: Option<Vec<Namespace>> = scopes.map(|all| all.into_iter().flatten().collect());
    usage(store, namespaces.as_deref())
}
