//! The schemas of the model's string types and fields, written by hand: the model's serde is
//! custom (strings parsed by `try_from`, `with` modules for addresses), so schemars cannot
//! derive them. The manifests name these in `#[schemars(schema_with = …)]`; this file names
//! no manifest, so that none of them is imported back.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};
use std::borrow::Cow;

use crate::model::address::Exclude;
use crate::model::kind::{ALLOCATION_KIND, API_VERSION, COOLDOWN_KIND, POOL_KIND, SUBNET_KIND};
use crate::model::layout::ScopeDir;
use crate::model::mac::{Mac, MacPrefix};
use crate::model::names::{Namespace, PoolName, Uid};
use crate::model::owner::{Owner, OwnerKind};

/// `kind` of a cooldown record: always `CooldownRecord`.
pub(crate) fn cooldown_kind(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": COOLDOWN_KIND })
}

/// An RFC 1123 label: what `PoolName`, a namespace segment and a zone are made of.
pub(crate) const LABEL: &str = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?";
/// An IPv4 octet without leading zeros, as `Ipv4Addr` parses it.
pub(crate) const OCTET: &str = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
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
    let reserved: Vec<&str> = ScopeDir::ALL.iter().map(|d| d.name()).collect();
    let listed: Vec<String> = reserved.iter().map(|d| format!("`{d}`")).collect();
    let mut schema = string_schema(
        &format!("{LABEL}(/{LABEL})*"),
        253,
        &format!(
            "`/`-separated RFC 1123 labels, none of them a directory of the state directory layout: {}.",
            listed.join(", ")
        ),
    );
    schema.insert(
        "not".into(),
        json!({ "pattern": format!("(^|/)({})(/|$)", reserved.join("|")) }),
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

string_impl!(
    Mac,
    "Mac",
    string_schema(
        "[0-9a-f]{2}(:[0-9a-f]{2}){5}",
        17,
        "A NIC's MAC (EUI-48, unicast), six lowercase hex octets joined by `:`, e.g. `52:54:00:12:34:56`."
    )
);

string_impl!(
    MacPrefix,
    "MacPrefix",
    string_schema(
        "[0-9a-f]{2}(:[0-9a-f]{2}){2}",
        8,
        "The first three octets of the MACs `allocate --mac auto` derives in this pool, locally administered and unicast, e.g. `52:54:00`."
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
                    "description": "VirtualMachine: `<hostname>/<nic index>`; FloatingIP: a label, or a tenant's `<namespace>/<label>`; VPC: `router`; Node: a label or a prefix.",
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

pub(crate) fn quota_kind(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": crate::model::kind::QUOTA_KIND })
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
        "description": "When the object was created (for an allocation: the claim), RFC 3339 in UTC to the second, e.g. `2026-12-01T07:00:00Z`. Absent in state written by older versions. On a pool or subnet ipamctl sets it (`apply` drops one given) only when its DHCP subnet id would otherwise move an existing one's: the older keeps its id, and one without a time counts as the oldest.",
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

/// A list of addresses (`spec.dhcp.dnsServers`, `ntpServers`), of the range's family.
pub(crate) fn addresses(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": address(generator),
        "maxItems": 8,
        "uniqueItems": true,
    })
}

/// A DNS name (`spec.dhcp.domain`): lowercase RFC 1123 labels joined by dots.
pub(crate) fn domain(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": ["string", "null"],
        "pattern": format!("^{LABEL}(\\.{LABEL})*$"),
        "maxLength": 253,
        "description": "A DNS name: lowercase RFC 1123 labels joined by dots, no trailing dot, e.g. `lab.example`.",
    })
}
