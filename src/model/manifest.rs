//! What every manifest shares: `apiVersion`, the kinds, and `metadata`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::names::Namespace;
use crate::model::owner::OwnerRef;
use crate::model::time::Timestamp;

/// The only `apiVersion` ipamctl reads and writes.
pub const API_VERSION: &str = "pivirt.hu/v1";

/// `kind` of a pool manifest.
pub const POOL_KIND: &str = "IPAMPool";

/// `kind` of an allocation manifest.
pub const ALLOCATION_KIND: &str = "IPAllocation";

/// Label every allocation carries.
pub const MANAGED_BY_LABEL: &str = "pivirt.hu/managed-by";

/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "director";

/// `metadata` of both manifests. All listed fields are kept on read and write; others are
/// refused rather than silently dropped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    /// The object's name (a pool name, or `<pool>-<a-b-c-d>` for an allocation).
    pub name: String,
    /// The namespace; none for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Namespace>,
    /// When the object was created (allocations: written once, by the claim), RFC 3339 in
    /// UTC with second precision. Absent in state written by older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::model::schema::timestamp")]
    pub creation_timestamp: Option<Timestamp>,
    /// Labels, in key order.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations, in key order.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Owning objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_refs: Vec<OwnerRef>,
}
