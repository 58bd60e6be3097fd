//! The fast path's tests: canonical bytes take it, every other form is declined (and read
//! by the YAML library), and for any manifest and any small edit of its bytes the two
//! paths agree (proptest).

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use proptest::prelude::*;

use crate::model::PoolRef;
use crate::model::cooldown::CooldownRecord;
use crate::model::{AllocationManifest, Namespace, Owner, OwnerKind, PoolName, Uid};
use crate::yaml::{
    decode_allocation, decode_allocation_with_library, decode_canonical_allocation,
    decode_canonical_cooldown, decode_cooldown, decode_cooldown_with_library, encode,
};

/// An allocation as ipamctl wrote it.
const CANONICAL: &str = include_str!(
    "../../../testdata/demo/namespaces/acme/prod/ipallocations/vpc-main-10-42-0-1.yaml"
);

/// Words a YAML 1.1 or 1.2 reader resolves to something other than a string.
const TRICKY: &[&str] = &[
    "null",
    "true",
    "false",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "0",
    "123",
    "0x1f",
    "0o17",
    "1e3",
    "1-2",
    "nan",
    "inf",
    "12-30",
    "2001-01-01",
];

/// Like [`TRICKY`], for strings that allow more than a label does.
const TRICKY_TEXT: &[&str] = &[
    "~", "Null", "NULL", "True", "TRUE", "Yes", "NO", "-1", "1_000", "0.5", ".5", "1.", ".inf",
    "-.inf", ".nan", "12:30", "12:30:00", "0b101", "-", ":", "::", "--", "...", "---", "-a", ":a",
    "a:", "a:b", ".", "/",
];

fn label() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?",
        1 => prop::sample::select(TRICKY).prop_map(str::to_owned),
    ]
}

fn text(plain: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => plain,
        1 => prop::sample::select(TRICKY).prop_map(str::to_owned),
        1 => prop::sample::select(TRICKY_TEXT).prop_map(str::to_owned),
    ]
}

fn namespace() -> impl Strategy<Value = Option<Namespace>> {
    let ns = prop::collection::vec(label(), 1..4)
        .prop_filter_map("reserved segment", |s| Namespace::new(&s.join("/")).ok());
    prop::option::of(ns)
}

fn owner() -> impl Strategy<Value = Owner> {
    let uid = prop::option::of(
        text("[A-Za-z0-9._:-]{1,40}").prop_filter_map("invalid uid", |u| Uid::new(&u).ok()),
    );
    let vm = (prop::collection::vec(label(), 1..3), 0u16..10_000).prop_map(|(host, nic)| {
        (
            OwnerKind::VirtualMachine,
            format!("{}/{nic}", host.join(".")),
        )
    });
    let fip = label().prop_map(|l| (OwnerKind::FloatingIp, l));
    let vpc = Just((OwnerKind::Vpc, "router".to_owned()));
    let node_label = label().prop_map(|l| (OwnerKind::Node, l));
    let node_net = (any::<u32>(), 0u8..=32).prop_map(|(a, len)| {
        let net = Ipv4Net::new(Ipv4Addr::from(a), len).expect("len <= 32");
        (OwnerKind::Node, net.trunc().to_string())
    });
    (prop_oneof![vm, fip, vpc, node_label, node_net], uid).prop_map(|((kind, name), uid)| {
        Owner::new(kind, &name, uid).expect("generated names follow their kind")
    })
}

/// Valid allocations with the values `encode` writes plain or double-quoted without
/// escapes: the ones the fast path must take.
fn manifest() -> impl Strategy<Value = AllocationManifest> {
    let map = || {
        prop::collection::btree_map(
            text("[a-z0-9]([a-z0-9./_-]{0,20}[a-z0-9])?"),
            text("[A-Za-z0-9._/:-]{0,20}"),
            0..4,
        )
    };
    (label(), namespace(), any::<u32>(), owner(), map(), map()).prop_map(
        |(pool, ns, address, owner, labels, annotations)| {
            let pool = PoolName::new(&pool).expect("labels are pool names");
            let mut m =
                AllocationManifest::new(&pool, ns.as_ref(), Ipv4Addr::from(address).into(), owner);
            m.metadata.labels.extend(labels);
            m.metadata.annotations = annotations;
            m
        },
    )
}

/// Byte and line edits of `text`: insert, delete, replace a byte; duplicate, drop or swap
/// lines.
fn mutate(text: &str, edits: &[(u8, usize, usize, u8)]) -> String {
    const BYTES: &[u8] = b" \t\r\n\"'#:-{}[]&*!|>%@`,?0aA\\~.";
    let mut bytes = text.as_bytes().to_vec();
    for &(op, at, other, byte) in edits {
        let n = bytes.len();
        let at = at % (n + 1);
        let byte = BYTES[usize::from(byte) % BYTES.len()];
        match op % 6 {
            0 => bytes.insert(at, byte),
            1 if at < n => drop(bytes.remove(at)),
            2 if at < n => bytes[at] = byte,
            op => {
                let mut lines: Vec<Vec<u8>> = bytes
                    .split_inclusive(|&b| b == b'\n')
                    .map(<[u8]>::to_vec)
                    .collect();
                if lines.is_empty() {
                    continue;
                }
                let (i, j) = (at % lines.len(), other % lines.len());
                match op {
                    3 => lines.insert(j, lines[i].clone()),
                    4 => drop(lines.remove(i)),
                    _ => lines.swap(i, j),
                }
                bytes = lines.concat();
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The fast path declines `text`, and `decode_allocation` answers as the library does.
fn assert_declined(text: &str) {
    assert_eq!(decode_canonical_allocation(text), None, "{text:?}");
    assert_eq!(
        decode_allocation(text),
        decode_allocation_with_library(text),
        "{text:?}"
    );
}

#[test]
fn canonical_text_takes_the_fast_path() {
    let fast = decode_canonical_allocation(CANONICAL).expect("canonical");
    assert_eq!(Ok(fast), decode_allocation_with_library(CANONICAL));
}

#[test]
fn comments_are_declined() {
    assert_declined(&format!("# written by hand\n{CANONICAL}"));
    assert_declined(&CANONICAL.replace("web-01/0", "web-01/0 # nic 0"));
    assert_declined(&CANONICAL.replace("spec:", "# spec follows\nspec:"));
}

#[test]
fn reordered_keys_are_declined() {
    assert_declined(&CANONICAL.replace(
        "apiVersion: pivirt.hu/v1\nkind: IPAllocation\n",
        "kind: IPAllocation\napiVersion: pivirt.hu/v1\n",
    ));
    assert_declined(&CANONICAL.replace(
        "    kind: VirtualMachine\n    uid: 0f8fad5b-d9cb-469f-a165-70867728950e\n",
        "    uid: 0f8fad5b-d9cb-469f-a165-70867728950e\n    kind: VirtualMachine\n",
    ));
}

#[test]
fn unquoted_address_is_declined_but_read() {
    let text = CANONICAL.replace("\"10.42.0.1\"", "10.42.0.1");
    assert_declined(&text);
    assert_eq!(decode_allocation(&text), decode_allocation(CANONICAL));
}

#[test]
fn crlf_and_trailing_spaces_are_declined() {
    assert_declined(&CANONICAL.replace('\n', "\r\n"));
    assert_declined(&CANONICAL.replace("vpc-main\n", "vpc-main  \n"));
    assert_declined(&CANONICAL.replace("\"10.42.0.1\"", "\"10.42.0.1\" "));
    assert_declined(&CANONICAL.replace("metadata:", "metadata: "));
}

#[test]
fn duplicate_keys_are_declined() {
    assert_declined(
        &CANONICAL.replace("  pool: vpc-main\n", "  pool: vpc-main\n  pool: vpc-main\n"),
    );
    assert_declined(&CANONICAL.replace(
        "    pivirt.hu/managed-by: director\n",
        "    pivirt.hu/managed-by: director\n    pivirt.hu/managed-by: director\n",
    ));
    assert_declined(&CANONICAL.replace(
        "    pivirt.hu/managed-by: director\n",
        "    pivirt.hu/managed-by: director\n    pivirt.hu/managed-by: other\n",
    ));
    assert_declined(&format!("{CANONICAL}kind: IPAllocation\n"));
}

#[test]
fn other_yaml_forms_are_declined() {
    let flow = "  owner: {kind: VirtualMachine, uid: 0f8fad5b-d9cb-469f-a165-70867728950e, name: web-01/0}\n";
    let owner_start = CANONICAL.find("  owner:").expect("owner");
    assert_declined(&format!("{}{flow}", &CANONICAL[..owner_start]));
    assert_declined(&format!("---\n{CANONICAL}"));
    assert_declined(&format!("{CANONICAL}...\n"));
    assert_declined(&format!("\u{feff}{CANONICAL}"));
    assert_declined(&format!("{CANONICAL}\n"));
    assert_declined(CANONICAL.trim_end());
    assert_declined(&CANONICAL.replace("  ", "\t"));
    assert_declined(&CANONICAL.replace("    ", "   "));
    assert_declined(&CANONICAL.replace("\"10.42.0.1\"", "'10.42.0.1'"));
    assert_declined(&CANONICAL.replace("\"10.42.0.1\"", "\"10.42.0.\\x31\""));
    assert_declined(&CANONICAL.replace("pool: vpc-main", "pool: !!str vpc-main"));
    assert_declined(&CANONICAL.replace("pool: vpc-main", "pool: &p vpc-main"));
    assert_declined(&CANONICAL.replace("  labels:\n", "  annotations:\n    a: b\n  labels:\n"));
}

#[test]
fn invalid_manifests_are_declined_with_the_library_error() {
    assert_declined(&CANONICAL.replace("vpc-main-10-42-0-1", "vpc-main-10-42-0-9"));
    assert_declined(&CANONICAL.replace("pivirt.hu/v1", "pivirt.hu/v2"));
    assert_declined(&CANONICAL.replace("kind: IPAllocation", "kind: IPAMPool"));
    assert_declined(&CANONICAL.replace("web-01/0", "web-01"));
    assert_declined(&CANONICAL.replace("VirtualMachine", "Pod"));
    assert_declined(&CANONICAL.replace("10.42.0.1", "10.42.0.256"));
    assert_declined(&CANONICAL.replace("acme/prod", "acme/ipallocations"));
    assert_declined("");
}

/// A MAC looks like a YAML 1.1 sexagesimal number (`52:54:00`), so it is written quoted,
/// and that form takes the fast path.
#[test]
fn a_mac_is_written_quoted_and_takes_the_fast_path() {
    let mut m = decode_canonical_allocation(CANONICAL).expect("canonical");
    m.spec.mac = Some(crate::model::mac::Mac::parse("52:54:00:12:34:56").expect("valid"));
    let text = crate::yaml::encode(&m);
    assert!(
        text.ends_with("  mac: '52:54:00:12:34:56'\n")
            || text.ends_with("  mac: \"52:54:00:12:34:56\"\n"),
        "{text}"
    );
    assert_eq!(decode_canonical_allocation(&text), Some(m.clone()));
    assert_eq!(decode_allocation_with_library(&text), Ok(m));
}

#[test]
fn the_demo_allocations_take_the_fast_path() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/demo/namespaces/acme/prod/ipallocations"
    );
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("demo fixture") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("utf-8");
        let fast = decode_canonical_allocation(&text).expect("ipamctl wrote it");
        assert_eq!(Ok(fast), decode_allocation_with_library(&text));
        seen += 1;
    }
    assert!(seen > 0);
}

/// The record of `m`'s owner releasing `m`'s address `secs` seconds after the epoch.
fn record_of(m: &AllocationManifest, secs: u32) -> CooldownRecord {
    let pool = PoolRef {
        namespace: m.metadata.namespace.clone(),
        name: m.spec.pool.clone(),
    };
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::from(secs) * 1009);
    CooldownRecord::new(&pool, m.spec.address, m.spec.owner.clone(), at)
}

#[test]
fn a_record_as_release_writes_it_takes_the_fast_path() {
    let fast = decode_canonical_allocation(CANONICAL).expect("canonical");
    let record = record_of(&fast, 1_764_000_000);
    let text = encode(&record);
    assert!(text.contains("releasedAt: \"") && text.contains("  namespace: acme/prod\n"));
    assert_eq!(
        decode_canonical_cooldown(&text),
        Some(record.clone()),
        "{text}"
    );
    assert_eq!(decode_cooldown_with_library(&text), Ok(record));
    // Hand-edited or foreign text goes to the library, which answers as before.
    for edited in [
        format!("# kept by hand\n{text}"),
        text.replace("releasedAt: \"", "releasedAt: '")
            .replace("Z\"\n", "Z'\n"),
        text.replace("  pool: vpc-main\n", "  pool: vpc-main\n  pool: vpc-main\n"),
        text.replace("vpc-main-10-42-0-1", "vpc-main-10-42-0-2"),
    ] {
        assert_eq!(decode_canonical_cooldown(&edited), None, "{edited}");
        assert_eq!(
            decode_cooldown(&edited),
            decode_cooldown_with_library(&edited)
        );
    }
}

proptest! {
    // Failures are reported with their minimal input; nothing to persist between runs.
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn what_encode_writes_takes_the_fast_path(m in manifest()) {
        let text = encode(&m);
        prop_assert_eq!(decode_canonical_allocation(&text), Some(m.clone()), "{}", text);
        prop_assert_eq!(decode_allocation_with_library(&text), Ok(m), "{}", text);
    }

    #[test]
    fn any_annotation_round_trips(m in manifest(), key in "[a-z][a-z0-9./-]{0,12}", value in any::<String>()) {
        let mut m = m;
        m.metadata.annotations.insert(key, value);
        let text = encode(&m);
        prop_assert_eq!(decode_allocation_with_library(&text), Ok(m.clone()), "{}", text);
        if let Some(fast) = decode_canonical_allocation(&text) {
            prop_assert_eq!(&fast, &m, "{}", text);
        }
    }

    #[test]
    fn what_release_writes_takes_the_fast_path(m in manifest(), secs in any::<u32>()) {
        let record = record_of(&m, secs);
        let text = encode(&record);
        prop_assert_eq!(decode_canonical_cooldown(&text), Some(record.clone()), "{}", text);
        prop_assert_eq!(decode_cooldown_with_library(&text), Ok(record), "{}", text);
    }

    #[test]
    fn an_edited_record_decodes_as_the_library_reads_it(
        m in manifest(),
        secs in any::<u32>(),
        edits in prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let text = mutate(&encode(&record_of(&m, secs)), &edits);
        let library = decode_cooldown_with_library(&text);
        if let Some(fast) = decode_canonical_cooldown(&text) {
            prop_assert_eq!(Ok(&fast), library.as_ref(), "{:?}", text);
        }
        prop_assert_eq!(decode_cooldown(&text), library, "{:?}", text);
    }

    #[test]
    fn edited_text_decodes_as_the_library_reads_it(
        m in manifest(),
        edits in prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let text = mutate(&encode(&m), &edits);
        let library = decode_allocation_with_library(&text);
        if let Some(fast) = decode_canonical_allocation(&text) {
            prop_assert_eq!(Ok(&fast), library.as_ref(), "{:?}", text);
        }
        prop_assert_eq!(decode_allocation(&text), library, "{:?}", text);
    }
}

#[test]
fn a_lease_takes_the_fast_path() {
    let text = format!("{CANONICAL}  expiresAt: \"2026-12-06T19:36:55Z\"\n");
    let fast = decode_canonical_allocation(&text).expect("canonical");
    assert_eq!(
        fast.spec.expires_at.map(|t| t.to_string()).as_deref(),
        Some("2026-12-06T19:36:55Z")
    );
    assert_eq!(Ok(fast), decode_allocation_with_library(&text));
    assert_declined(&text.replace("19:36:55Z", "19:36:55+00:00"));
}
