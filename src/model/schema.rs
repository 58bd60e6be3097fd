//! JSON Schemas (draft-07, which every editor's YAML support reads) of the manifests,
//! derived from the model types with schemars, so they describe what the files contain:
//! the strings the validated newtypes accept, as patterns and formats, and no unknown field
//! anywhere. Checks across fields (a gateway inside the cidr, an allocation name that
//! matches its address) stay with `ipamctl check`.
//!
//! The model's serde is custom (strings parsed by `try_from`, `with` modules for addresses),
//! so the string types have their schemas written here by hand; `tests/schema.rs` validates
//! every fixture manifest against them and keeps `schema/*.json` current.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};
use std::borrow::Cow;

use crate::model::cooldown::{COOLDOWN_KIND, CooldownRecord};
use crate::model::subnet::{SUBNET_KIND, SubnetManifest};
use crate::model::{
    ALLOCATION_KIND, API_VERSION, AllocationManifest, Exclude, Metadata, Namespace, ObjectKind,
    Owner, OwnerKind, POOL_KIND, PoolManifest, PoolName, Uid,
};

/// `kind` of a cooldown record: always `CooldownRecord`.
pub(crate) fn cooldown_kind(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": COOLDOWN_KIND })
}

/// An RFC 1123 label: what `PoolName`, a namespace segment and a zone are made of.
const LABEL: &str = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?";
/// An IPv4 octet without leading zeros, as `Ipv4Addr` parses it.
const OCTET: &str = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
/// A prefix length, 0–32, without leading zeros.
const PREFIX_LEN: &str = "(3[0-2]|[12]?[0-9])";
/// An IPv6 prefix length, 0–128, without leading zeros.
const PREFIX_LEN_V6: &str = "(12[0-8]|1[01][0-9]|[1-9]?[0-9])";
/// One group of an IPv6 address.
const HEX: &str = "[0-9a-fA-F]{1,4}";

fn address_pattern() -> String {
    format!("{OCTET}\\.{OCTET}\\.{OCTET}\\.{OCTET}")
}

/// Every RFC 4291 §2.2 text form of an IPv6 address (with `::` at any place, and an IPv4
/// tail), as `Ipv6Addr` parses them: the eight cases of where `::` stands, spelt out.
fn address_v6_pattern() -> String {
    let v4 = address_pattern();
    let forms = [
        format!("({HEX}:){{7}}{HEX}"),
        format!("({HEX}:){{1,7}}:"),
        format!("({HEX}:){{1,6}}:{HEX}"),
        format!("({HEX}:){{1,5}}(:{HEX}){{1,2}}"),
        format!("({HEX}:){{1,4}}(:{HEX}){{1,3}}"),
        format!("({HEX}:){{1,3}}(:{HEX}){{1,4}}"),
        format!("({HEX}:){{1,2}}(:{HEX}){{1,5}}"),
        format!("{HEX}:(:{HEX}){{1,6}}"),
        format!(":((:{HEX}){{1,7}}|:)"),
        format!("({HEX}:){{6}}{v4}"),
        format!("({HEX}:){{0,5}}:({HEX}:){{0,5}}{v4}"),
    ];
    format!("({})", forms.join("|"))
}

/// An IPv4 or IPv6 address.
fn any_address_pattern() -> String {
    format!("({}|{})", address_pattern(), address_v6_pattern())
}

/// An IPv4 or IPv6 prefix (`/` and a length that fits the family).
fn any_prefix_pattern() -> String {
    format!(
        "({}/{PREFIX_LEN}|{}/{PREFIX_LEN_V6})",
        address_pattern(),
        address_v6_pattern()
    )
}

/// The schema of one manifest kind, as `ipamctl schema <kind>` prints it.
pub fn of(kind: ObjectKind) -> Value {
    let (schema, title, description) = match kind {
        ObjectKind::Subnet => (
            generator().into_root_schema_for::<SubnetManifest>(),
            SUBNET_KIND,
            "A named range of a pool, with its gateway and reserved addresses.",
        ),
        ObjectKind::Cooldown => (
            generator().into_root_schema_for::<CooldownRecord>(),
            COOLDOWN_KIND,
            "An address released recently from a pool with `reuseAfter`, written only by `ipamctl release`.",
        ),
        ObjectKind::Pool => (
            generator().into_root_schema_for::<PoolManifest>(),
            POOL_KIND,
            "An IPv4 address pool managed by ipamctl.",
        ),
        ObjectKind::Allocation => (
            generator().into_root_schema_for::<AllocationManifest>(),
            ALLOCATION_KIND,
            "An IPv4 address held by one owner, written only by `ipamctl allocate`.",
        ),
    };
    let mut value = schema.to_value();
    let object = value
        .as_object_mut()
        .expect("a root schema is a JSON object");
    object.insert("title".into(), title.into());
    object.insert("description".into(), description.into());
    value
}

/// Every schema, keyed by manifest kind: what `ipamctl schema` prints without an argument.
pub fn all() -> Value {
    json!({
        POOL_KIND: of(ObjectKind::Pool),
        ALLOCATION_KIND: of(ObjectKind::Allocation),
        SUBNET_KIND: of(ObjectKind::Subnet),
        COOLDOWN_KIND: of(ObjectKind::Cooldown),
    })
}

fn generator() -> SchemaGenerator {
    SchemaSettings::draft07().for_deserialize().into_generator()
}

fn string_schema(pattern: &str, max_length: usize, description: &str) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": format!("^{pattern}$"),
        "maxLength": max_length,
        "description": description,
    })
}

macro_rules! string_impl {
    ($ty:ty, $name:literal, $schema:expr) => {
        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }
            fn schema_id() -> Cow<'static, str> {
                concat!("ipamctl::model::", $name).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                $schema
            }
        }
    };
}

string_impl!(
    PoolName,
    "PoolName",
    string_schema(
        LABEL,
        63,
        "A lowercase RFC 1123 label of at most 63 characters."
    )
);

string_impl!(Namespace, "Namespace", {
    let mut schema = string_schema(
        &format!("{LABEL}(/{LABEL})*"),
        253,
        "`/`-separated RFC 1123 labels, none of them `ipampools`, `ipallocations`, `subnets` or `cooldown`.",
    );
    schema.insert(
        "not".into(),
        json!({ "pattern": "(^|/)(ipampools|ipallocations|subnets|cooldown)(/|$)" }),
    );
    schema
});

string_impl!(
    Uid,
    "Uid",
    string_schema(
        "[A-Za-z0-9._:-]{1,128}",
        128,
        "The owner's uid (a UUID, typically)."
    )
);

string_impl!(
    Exclude,
    "Exclude",
    string_schema(
        &format!("({}|{})", any_address_pattern(), any_prefix_pattern()),
        49,
        "An address, or a prefix without host bits, inside the pool and of its family."
    )
);

impl JsonSchema for Owner {
    fn schema_name() -> Cow<'static, str> {
        "Owner".into()
    }

    fn schema_id() -> Cow<'static, str> {
        "ipamctl::model::Owner".into()
    }

    /// The name's rule depends on the kind, so each kind gets an `if`/`then`.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let kind = generator.subschema_for::<OwnerKind>();
        let uid = generator.subschema_for::<Option<Uid>>();
        let node = format!("{LABEL}|{}", any_prefix_pattern());
        let name_rules: Vec<Value> = OwnerKind::ALL
            .into_iter()
            .map(|k| {
                let name = match k {
                    OwnerKind::VirtualMachine => {
                        json!({ "pattern": format!("^{LABEL}(\\.{LABEL})*/(0|[1-9][0-9]{{0,3}})$") })
                    }
                    OwnerKind::FloatingIp => json!({ "pattern": format!("^{LABEL}$") }),
                    OwnerKind::Vpc => json!({ "const": "router" }),
                    OwnerKind::Node => json!({ "pattern": format!("^({node})$") }),
                };
                json!({
                    "if": { "properties": { "kind": { "const": k.as_str() } } },
                    "then": { "properties": { "name": name } },
                })
            })
            .collect();
        json_schema!({
            "description": "Who holds the address; (kind, name, uid) is the identity.",
            "type": "object",
            "properties": {
                "kind": kind,
                "uid": uid,
                "name": {
                    "type": "string",
                    "description": "VirtualMachine: `<hostname>/<nic index>`; FloatingIP: a label; VPC: `router`; Node: a label or a prefix.",
                },
            },
            "required": ["kind", "name"],
            "additionalProperties": false,
            "allOf": name_rules,
        })
    }
}

/// `apiVersion`: always [`API_VERSION`].
pub(crate) fn api_version(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": API_VERSION })
}

/// `kind` of a pool: always [`POOL_KIND`].
pub(crate) fn pool_kind(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": POOL_KIND })
}

/// `kind` of a subnet: always `Subnet`.
pub(crate) fn subnet_kind(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": SUBNET_KIND })
}

/// An RFC 3339 UTC time, as `releasedAt` holds it (to the millisecond).
pub(crate) fn released_at(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time" })
}

/// A duration as `spec.reuseAfter` takes it.
pub(crate) fn duration(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": ["string", "null"],
        "pattern": "^[0-9]+ ?[a-z]+( ?[0-9]+ ?[a-z]+)*$",
        "description": "A duration: `90s`, `10m`, `1h 30m`, `1d`.",
    })
}

/// `kind` of an allocation: always [`ALLOCATION_KIND`].
pub(crate) fn allocation_kind(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": ALLOCATION_KIND })
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

/// A prefix without host bits (host bits cannot be said in a pattern; `check` refuses them).
pub(crate) fn cidr(_: &mut SchemaGenerator) -> Schema {
    string_schema(
        &any_prefix_pattern(),
        49,
        "An IPv4 or IPv6 prefix without host bits, e.g. `10.42.0.0/16` or `fd00:42::/48`.",
    )
}

/// An address, IPv4 or IPv6 (`spec.address`, written in RFC 5952 canonical form).
pub(crate) fn address(_: &mut SchemaGenerator) -> Schema {
    string_schema(
        &any_address_pattern(),
        45,
        "An IPv4 address, or an IPv6 address in RFC 5952 canonical form.",
    )
}

/// An optional address (`spec.gateway`), of the pool's family.
pub(crate) fn optional_address(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": ["string", "null"],
        "pattern": format!("^{}$", any_address_pattern()),
        "maxLength": 45,
        "description": "An address of the pool's family, never allocated.",
    })
}

/// `metadata.creationTimestamp`: RFC 3339 in UTC, to the second, as Kubernetes writes it.
pub(crate) fn timestamp(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": ["string", "null"],
        "format": "date-time",
        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
        "description": "When the object was created (for an allocation: the claim), RFC 3339 in UTC to the second, e.g. `2026-12-01T07:00:00Z`. Absent in state written by older versions.",
    })
}

/// An optional label (`spec.zone`).
pub(crate) fn optional_label(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": ["string", "null"],
        "pattern": format!("^{LABEL}$"),
        "maxLength": 63,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_schemas_are_keyed_by_kind() {
        let all = all();
        assert_eq!(all["IPAMPool"]["title"], "IPAMPool");
        assert_eq!(all["IPAllocation"]["title"], "IPAllocation");
    }

    #[test]
    fn manifests_refuse_unknown_fields() {
        let pool = of(ObjectKind::Pool);
        assert_eq!(pool["additionalProperties"], false);
    }
}
