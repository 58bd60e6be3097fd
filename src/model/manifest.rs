//! What every manifest shares: `apiVersion`, the kinds, and `metadata`.

pub use crate::model::kind::{ALLOCATION_KIND, API_VERSION, POOL_KIND};
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use schemars::{Schema, SchemaGenerator, json_schema};

use crate::model::names::Namespace;
use crate::model::owner::OwnerRef;
use crate::model::schema::fields::{LABEL, OCTET};
use crate::model::time::Timestamp;

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
    /// UTC with second precision. Absent in state written by older versions. On a pool
    /// or subnet ipamctl sets it (`apply` drops one given) only when its DHCP subnet id would
    /// otherwise move an existing one's (`engine::created`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::model::schema::fields::timestamp")]
    pub creation_timestamp: Option<Timestamp>,
    /// When `vpc delete` or `pool delete` began removing the object (pools only), as
    /// Kubernetes marks an object being deleted: from then on no claim is made in the pool
    /// (exit 4), and running the delete again finishes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::model::schema::fields::timestamp")]
    pub deletion_timestamp: Option<Timestamp>,
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

/// A pool's `metadata`, whose name is a pool name.
pub(crate) fn pool_metadata(generator: &mut SchemaGenerator) -> Schema {
    metadata_named(generator, LABEL, "The pool's name: an RFC 1123 label.")
}

/// An allocation's `metadata`, whose name is `<pool>-<a-b-c-d>` or, for IPv6, the pool's
/// name and the eight groups of four lowercase hex digits.
pub(crate) fn allocation_metadata(generator: &mut SchemaGenerator) -> Schema {
    let name =
        format!("{LABEL}-({OCTET}-{OCTET}-{OCTET}-{OCTET}|[0-9a-f]{{4}}(-[0-9a-f]{{4}}){{7}})");
    metadata_named(
        generator,
        &name,
        "`<pool>-<a-b-c-d>` for IPv4, `<pool>-<8 groups of 4 lowercase hex digits, dashed>` for IPv6 (`vpc-main-v6-2001-0db8-0000-0000-0000-0000-0000-0001`).",
    )
}

/// A cooldown record's `metadata`: named as the allocation it cools, or as the prefix claim
/// (`<pool>-<address>-<length>`) for a supernet's prefix.
pub(crate) fn cooldown_metadata(generator: &mut SchemaGenerator) -> Schema {
    let name = format!(
        "{LABEL}-({OCTET}-{OCTET}-{OCTET}-{OCTET}|[0-9a-f]{{4}}(-[0-9a-f]{{4}}){{7}})(-(12[0-8]|1[01][0-9]|[1-9]?[0-9])(\\.prefix)?)?"
    );
    metadata_named(
        generator,
        &name,
        "The allocation's name (`<pool>-<a-b-c-d>`, or the IPv6 spelling) for an address; the prefix claim's followed by `.prefix` (`<pool>-<address>-<length>.prefix`) for a supernet's prefix; records written before the marker are named as the claim.",
    )
}

/// `Metadata` with a narrower `name`, as an `allOf` (draft-07 ignores a `$ref`'s siblings).
fn metadata_named(generator: &mut SchemaGenerator, pattern: &str, description: &str) -> Schema {
    let metadata = generator.subschema_for::<Metadata>();
    json_schema!({
        "allOf": [
            metadata,
            {
                "required": ["name"],
                "properties": {
                    "name": { "pattern": format!("^{pattern}$"), "description": description },
                },
            },
        ],
    })
}
