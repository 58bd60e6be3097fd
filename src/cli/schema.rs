//! The committed JSON Schemas of the manifests (`schema/*.json`), by the kind `ipamctl
//! schema` names; the schemas themselves are derived from the model ([`crate::model::schema`]).

use serde_json::Value;

use crate::cli::SchemaKind;
use crate::model::ObjectKind;

/// Every kind with a schema, in the order `ipamctl schema` prints them.
pub const KINDS: [SchemaKind; 6] = [
    SchemaKind::Ipampool,
    SchemaKind::Ipallocation,
    SchemaKind::Subnet,
    SchemaKind::Cooldownrecord,
    SchemaKind::Ipprefixclaim,
    SchemaKind::Quota,
];

/// The stored kind a schema kind describes.
fn object_kind(kind: SchemaKind) -> ObjectKind {
    match kind {
        SchemaKind::Ipampool => ObjectKind::Pool,
        SchemaKind::Ipallocation => ObjectKind::Allocation,
        SchemaKind::Subnet => ObjectKind::Subnet,
        SchemaKind::Cooldownrecord => ObjectKind::Cooldown,
        SchemaKind::Ipprefixclaim => ObjectKind::PrefixClaim,
        SchemaKind::Quota => ObjectKind::Quota,
    }
}

/// The name of a kind's schema file under `schema/`, without `.json`.
pub fn file_stem(kind: SchemaKind) -> &'static str {
    object_kind(kind).resource()
}

/// The schema of one manifest kind, as `ipamctl schema <kind>` prints it.
pub fn of(kind: SchemaKind) -> Value {
    crate::model::schema::of(object_kind(kind))
}

/// Every schema, keyed by manifest kind: what `ipamctl schema` prints without an argument.
pub fn all() -> Value {
    crate::model::schema::all()
}

/// The committed schema files under `schema/`, as (file name, contents).
pub fn files() -> Vec<(String, String)> {
    KINDS
        .iter()
        .map(|&k| {
            (
                format!("{}.json", file_stem(k)),
                crate::cli::output::json(&of(k)),
            )
        })
        .collect()
}
