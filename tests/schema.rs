//! The JSON Schemas: `schema/*.json` match what `ipamctl schema` generates, every fixture
//! manifest ipamctl reads is valid against them, and manifests ipamctl refuses are refused
//! by them too. Regenerate the files with `IPAMCTL_BLESS=1 cargo test --test schema`.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use ipamctl::cli::SchemaKind;
use ipamctl::yaml::{self, Document};
use jsonschema::{Draft, Validator};
use serde_json::{Value, json};

use common::Test;

fn validator(kind: SchemaKind) -> Validator {
    jsonschema::options()
        .with_draft(Draft::Draft7)
        .should_validate_formats(true)
        .build(&ipamctl::cli::schema::of(kind))
        .expect("the schema is a valid draft-07 schema")
}

fn errors(validator: &Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn committed_schemas_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
    let files = ipamctl::cli::schema::files();
    if std::env::var_os("IPAMCTL_BLESS").is_some() {
        fs::create_dir_all(&dir).unwrap();
        for (name, text) in &files {
            fs::write(dir.join(name), text).unwrap();
        }
    }
    for (name, text) in &files {
        let on_disk = fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(
            on_disk == *text,
            "schema/{name} is stale; run IPAMCTL_BLESS=1 cargo test --test schema"
        );
    }
}

#[test]
fn schema_command_prints_one_kind_as_committed_or_both_keyed_by_kind() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
    let pool = fs::read_to_string(dir.join("ipampool.json")).unwrap();
    Test::without_state()
        .args(["schema", "ipampool"])
        .stdout(&pool)
        .run();
    let ran = Test::without_state().args(["schema"]).run();
    let both: Value = serde_json::from_str(&ran.stdout).unwrap();
    let keys: Vec<&String> = both.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "CooldownRecord",
            "IPAMPool",
            "IPAllocation",
            "IPPrefixClaim",
            "Quota",
            "Subnet"
        ]
    );
    let quota = fs::read_to_string(dir.join("quota.json")).unwrap();
    Test::without_state()
        .args(["schema", "quota"])
        .stdout(&quota)
        .run();
    assert_eq!(
        both["Quota"],
        serde_json::from_str::<Value>(&quota).unwrap()
    );
    assert_eq!(
        both["IPAMPool"],
        serde_json::from_str::<Value>(&pool).unwrap()
    );
    assert_eq!(
        both["IPAllocation"]["properties"]["kind"]["const"],
        "IPAllocation"
    );
}

/// Every non-dot `.yaml` file under `testdata/*/`, recursively.
fn fixture_manifests() -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                walk(&path, found);
            } else if name.ends_with(".yaml") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata"),
        &mut found,
    );
    found.sort();
    found
}

#[test]
fn every_fixture_manifest_ipamctl_accepts_is_valid_against_its_schema() {
    let pools = validator(SchemaKind::Ipampool);
    let allocations = validator(SchemaKind::Ipallocation);
    let subnets = validator(SchemaKind::Subnet);
    let quotas = validator(SchemaKind::Quota);
    let (mut checked, mut refused) = (0, 0);
    for path in fixture_manifests() {
        let Ok(text) = String::from_utf8(fs::read(&path).unwrap()) else {
            refused += 1;
            continue;
        };
        // Fixtures of broken state hold files ipamctl refuses: those have nothing to match.
        let values: Vec<(&Validator, Value)> = if let Ok(m) = yaml::decode_allocation(&text) {
            vec![(&allocations, serde_json::to_value(m).unwrap())]
        } else if let Ok(docs) = yaml::decode_documents(&text) {
            docs.into_iter()
                .filter_map(|d| match d {
                    Document::Pool(p) => Some((&pools, serde_json::to_value(*p).unwrap())),
                    Document::Subnet(s) => Some((&subnets, serde_json::to_value(*s).unwrap())),
                    Document::Quota(q) => Some((&quotas, serde_json::to_value(*q).unwrap())),
                    Document::Allocation => None,
                })
                .collect()
        } else {
            refused += 1;
            continue;
        };
        for (validator, value) in values {
            let errors = errors(validator, &value);
            assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} manifests checked");
    assert!(
        refused > 0,
        "the broken fixtures were expected to hold refused files"
    );
}

fn pool() -> Value {
    json!({
        "apiVersion": "pivirt.hu/v1",
        "kind": "IPAMPool",
        "metadata": { "name": "vpc-main", "namespace": "acme/prod" },
        "spec": {
            "cidr": "10.42.0.0/16", "kind": "private",
            "gateway": "10.42.0.1", "exclude": ["10.42.0.2", "10.42.255.0/24"],
        },
    })
}

/// [`pool`] with every DHCP option.
fn pool_with_options() -> Value {
    with(
        pool(),
        "spec/dhcp",
        Some(json!({
            "dnsServers": ["10.42.0.53"], "domain": "prod.acme.example", "leaseTime": "12h",
            "mtu": 1450, "ntpServers": ["10.42.0.123"],
            "routes": [{ "to": "198.51.100.0/24", "via": "10.42.0.254" }],
        })),
    )
}

fn allocation() -> Value {
    json!({
        "apiVersion": "pivirt.hu/v1",
        "kind": "IPAllocation",
        "metadata": {
            "name": "vpc-main-10-42-0-3", "namespace": "acme/prod",
            "labels": { "pivirt.hu/managed-by": "director" },
        },
        "spec": {
            "pool": "vpc-main", "address": "10.42.0.3",
            "owner": { "kind": "VirtualMachine", "uid": "u-1", "name": "web-01/0" },
        },
    })
}

fn prefix_claim() -> Value {
    json!({
        "apiVersion": "pivirt.hu/v1",
        "kind": "IPPrefixClaim",
        "metadata": {
            "name": "provider-v6-2001-0db8-0100-0000-0000-0000-0000-0000-56",
            "creationTimestamp": "2026-12-02T12:00:00Z",
            "labels": { "pivirt.hu/managed-by": "director" },
        },
        "spec": {
            "pool": "provider-v6", "prefix": "2001:db8:100::/56",
            "owner": { "kind": "VPC", "uid": "3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5c", "name": "router" },
        },
    })
}

fn quota() -> Value {
    json!({
        "apiVersion": "pivirt.hu/v1",
        "kind": "Quota",
        "metadata": { "name": "default", "namespace": "acme/prod" },
        "spec": { "hard": { "addresses": 10, "floatingIPs": 2, "prefixes": 1 } },
    })
}

/// `value` with the member at `path` (`/`-separated) set to `to`, or removed when `None`.
fn with(mut value: Value, path: &str, to: Option<Value>) -> Value {
    let (parent, key) = path.rsplit_once('/').unwrap_or(("", path));
    let target = if parent.is_empty() {
        &mut value
    } else {
        value.pointer_mut(&format!("/{parent}")).unwrap()
    };
    let object = target.as_object_mut().unwrap();
    match to {
        Some(to) => object.insert(key.to_owned(), to),
        None => object.remove(key),
    };
    value
}

/// JSON is YAML, so ipamctl's own reader can be asked about the same document.
fn library_accepts(kind: SchemaKind, value: &Value) -> bool {
    let text = serde_json::to_string(value).unwrap();
    match kind {
        SchemaKind::Ipampool => yaml::decode_pool(&text).is_ok(),
        SchemaKind::Ipallocation => yaml::decode_allocation(&text).is_ok(),
        SchemaKind::Subnet => yaml::decode_subnet(&text).is_ok(),
        SchemaKind::Cooldownrecord => yaml::decode_cooldown(&text).is_ok(),
        SchemaKind::Ipprefixclaim => yaml::decode_prefix_claim(&text).is_ok(),
        SchemaKind::Quota => yaml::decode_quota(&text).is_ok(),
    }
}

#[test]
fn the_examples_are_valid_for_both_the_schema_and_ipamctl() {
    for (kind, value) in [
        (SchemaKind::Ipampool, pool()),
        (SchemaKind::Ipampool, pool_with_options()),
        (SchemaKind::Ipallocation, allocation()),
        (SchemaKind::Ipprefixclaim, prefix_claim()),
        (SchemaKind::Quota, quota()),
    ] {
        assert_eq!(errors(&validator(kind), &value), Vec::<String>::new());
        assert!(library_accepts(kind, &value), "{value}");
    }
}

#[test]
fn manifests_ipamctl_refuses_are_invalid_against_the_schema() {
    let pools = [
        (
            "unknown top-level field",
            with(pool(), "status", Some(json!({}))),
        ),
        (
            "unknown spec field",
            with(pool(), "spec/size", Some(json!(3))),
        ),
        (
            "wrong apiVersion",
            with(pool(), "apiVersion", Some(json!("v1"))),
        ),
        (
            "wrong kind",
            with(pool(), "kind", Some(json!("IPAllocation"))),
        ),
        (
            "upper-case name",
            with(pool(), "metadata/name", Some(json!("Vpc"))),
        ),
        (
            "reserved namespace segment",
            with(pool(), "metadata/namespace", Some(json!("acme/ipampools"))),
        ),
        (
            "a scope's MAC records as a namespace segment",
            with(pool(), "metadata/namespace", Some(json!("acme/macs"))),
        ),
        (
            "a scope's prefix claims as a namespace segment",
            with(
                pool(),
                "metadata/namespace",
                Some(json!("ipprefixclaims/a")),
            ),
        ),
        (
            "IPv6 cidr over 128",
            with(pool(), "spec/cidr", Some(json!("2001:db8::/129"))),
        ),
        (
            "bare address as cidr",
            with(pool(), "spec/cidr", Some(json!("10.42.0.0"))),
        ),
        (
            "unknown pool kind",
            with(pool(), "spec/kind", Some(json!("shared"))),
        ),
        (
            "gateway not an address",
            with(pool(), "spec/gateway", Some(json!("10.42.0.256"))),
        ),
        (
            "leading zero",
            with(pool(), "spec/gateway", Some(json!("10.42.0.01"))),
        ),
        (
            "bad exclude",
            with(pool(), "spec/exclude", Some(json!(["10.42.0.0/33"]))),
        ),
        ("missing spec", with(pool(), "spec", None)),
        (
            "unknown DHCP option",
            with(pool_with_options(), "spec/dhcp/tftp", Some(json!("x"))),
        ),
        (
            "MTU below IPv4's 68",
            with(pool_with_options(), "spec/dhcp/mtu", Some(json!(60))),
        ),
        (
            "domain with an underscore",
            with(
                pool_with_options(),
                "spec/dhcp/domain",
                Some(json!("a_b.example")),
            ),
        ),
        (
            "DNS server not an address",
            with(
                pool_with_options(),
                "spec/dhcp/dnsServers",
                Some(json!(["ns1"])),
            ),
        ),
        (
            "route without a router",
            with(
                pool_with_options(),
                "spec/dhcp/routes",
                Some(json!([{ "to": "198.51.100.0/24" }])),
            ),
        ),
        (
            "lease time not a duration",
            with(
                pool_with_options(),
                "spec/dhcp/leaseTime",
                Some(json!("soon")),
            ),
        ),
    ];
    let allocations = [
        (
            "unknown owner field",
            with(allocation(), "spec/owner/ip", Some(json!("x"))),
        ),
        (
            "unknown owner kind",
            with(allocation(), "spec/owner/kind", Some(json!("Pod"))),
        ),
        ("VPC owner not router", {
            let a = with(allocation(), "spec/owner/kind", Some(json!("VPC")));
            with(a, "spec/owner/name", Some(json!("edge")))
        }),
        (
            "VM name without NIC",
            with(allocation(), "spec/owner/name", Some(json!("web-01"))),
        ),
        (
            "uid with a space",
            with(allocation(), "spec/owner/uid", Some(json!("a b"))),
        ),
        (
            "address not an address",
            with(allocation(), "spec/address", Some(json!("2001:db8::g"))),
        ),
        (
            "IPv6 name not eight groups of four",
            with(
                allocation(),
                "metadata/name",
                Some(json!("vpc-main-2001-db8--1")),
            ),
        ),
        (
            "name not pool-a-b-c-d",
            with(allocation(), "metadata/name", Some(json!("web"))),
        ),
        (
            "unknown metadata field",
            with(allocation(), "metadata/uid", Some(json!("x"))),
        ),
    ];
    let cases = pools
        .into_iter()
        .map(|(why, v)| (SchemaKind::Ipampool, why, v))
        .chain(
            allocations
                .into_iter()
                .map(|(why, v)| (SchemaKind::Ipallocation, why, v)),
        );
    for (kind, why, value) in cases {
        assert!(!library_accepts(kind, &value), "ipamctl accepts: {why}");
        assert!(
            !validator(kind).is_valid(&value),
            "the schema accepts: {why}\n{value:#}"
        );
    }
}

#[test]
fn a_subnet_and_a_cooldown_record_as_ipamctl_writes_them_are_valid() {
    let subnet = yaml::decode_subnet(
        "apiVersion: pivirt.hu/v1\nkind: Subnet\nmetadata:\n  name: web\n  namespace: acme/prod\nspec:\n  pool: vpc-main\n  cidr: 10.42.1.0/24\n  gateway: \"10.42.1.1\"\n  reserved:\n  - 10.42.1.0/28\n",
    )
    .unwrap();
    let value = serde_json::to_value(subnet).unwrap();
    assert_eq!(
        errors(&validator(SchemaKind::Subnet), &value),
        Vec::<String>::new()
    );
    let bad = with(value, "spec/cidr", Some(serde_json::json!("10.42.1.0/33")));
    assert!(!errors(&validator(SchemaKind::Subnet), &bad).is_empty());
    let record = yaml::decode_cooldown(
        "apiVersion: pivirt.hu/v1\nkind: CooldownRecord\nmetadata:\n  name: edge-198-51-100-2\nspec:\n  pool: edge\n  address: \"198.51.100.2\"\n  owner:\n    kind: FloatingIP\n    name: a\n  releasedAt: \"2026-12-01T07:00:00.000Z\"\n",
    )
    .unwrap();
    let value = serde_json::to_value(record).unwrap();
    assert_eq!(
        errors(&validator(SchemaKind::Cooldownrecord), &value),
        Vec::<String>::new()
    );
}
