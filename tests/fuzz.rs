//! Fuzzing, with proptest generators, of the two parsers that take untrusted input: the
//! manifest decoder (`apply -f` input and every file of a state directory) and the
//! command-line parser. Neither may panic on any input, and a manifest that decodes must
//! encode to one that decodes to the same value (what ipamctl writes, it can read back).
//!
//! 256 cases per property by default; `IPAMCTL_STRESS=long` runs 20,000 (`PROPTEST_CASES`
//! overrides both).

mod torture;

use clap::Parser as _;
use ipamctl::cli::Cli;
use ipamctl::yaml;
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config() -> Config {
    let default = if torture::long_run() { 20_000 } else { 256 };
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        // Failures are reported with their minimal input; nothing to persist between runs.
        failure_persistence: None,
        ..Config::default()
    }
}

const POOL: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: vpc-main
  namespace: acme/prod
  labels:
    team: net
  annotations:
    note: \"a: b # c\"
  ownerRefs:
  - kind: VPC
    uid: 7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10
    name: main
    controller: true
spec:
  cidr: 10.42.0.0/16
  kind: private
  gateway: 10.42.0.1
  exclude: [10.42.0.2, 10.42.255.0/24]
  zone: zone-a
";

const ALLOCATION: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAllocation
metadata:
  name: vpc-main-10-42-0-3
  namespace: acme/prod
  labels:
    pivirt.hu/managed-by: director
spec:
  pool: vpc-main
  address: \"10.42.0.3\"
  owner:
    kind: VirtualMachine
    uid: 0f8fad5b-d9cb-469f-a165-70867728950e
    name: web-01/0
";

/// Pieces that YAML and the manifests give meaning to.
const YAML_TOKENS: &[&str] = &[
    "apiVersion: ",
    "pivirt.hu/v1",
    "kind: ",
    "IPAMPool",
    "IPAllocation",
    "metadata:",
    "spec:",
    "status:",
    "name: ",
    "namespace: ",
    "labels:",
    "annotations:",
    "ownerRefs:",
    "cidr: ",
    "gateway: ",
    "exclude: ",
    "zone: ",
    "pool: ",
    "address: ",
    "owner:",
    "uid: ",
    "public",
    "private",
    "VirtualMachine",
    "FloatingIP",
    "VPC",
    "Node",
    "router",
    "web-01/0",
    "10.0.0.0/24",
    "10.0.0.1",
    "10.0.0.256",
    "0.0.0.0/0",
    "255.255.255.255/32",
    "::1",
    "2001:db8::/32",
    "\n",
    "\n  ",
    "\n    ",
    "  ",
    "- ",
    "-",
    ": ",
    ":",
    ",",
    "[",
    "]",
    "{",
    "}",
    "&a ",
    "*a",
    "&b ",
    "*b",
    "<<: ",
    "!!str ",
    "!!int ",
    "!!binary ",
    "!tag ",
    "? ",
    "|",
    "|-",
    ">",
    "'",
    "\"",
    "\\",
    "\\0",
    "\\u0000",
    "#",
    "---\n",
    "...\n",
    "--- ",
    "%YAML 1.2\n",
    "~",
    "null",
    "true",
    "yes",
    "no",
    "0x1f",
    "1e3",
    ".inf",
    ".nan",
    "\t",
    "\r",
    "\u{feff}",
    "\0",
    "é",
    "a",
    "x",
    "1",
];

/// Mutations of a byte string: insert, delete a range, replace, duplicate a range.
fn mutate(base: &str, ops: &[(u8, usize, usize, u8)]) -> String {
    let mut bytes = base.as_bytes().to_vec();
    for &(op, at, len, byte) in ops {
        let n = bytes.len();
        let at = if n == 0 { 0 } else { at % (n + 1) };
        let end = (at + len % 16).min(n);
        match op % 5 {
            0 => bytes.insert(at, byte),
            1 => {
                bytes.drain(at..end);
            }
            2 if at < n => bytes[at] = byte,
            3 => {
                let piece = bytes[at..end].to_vec();
                bytes.splice(at..at, piece);
            }
            _ => {
                let token = YAML_TOKENS[usize::from(byte) % YAML_TOKENS.len()];
                bytes.splice(at..at, token.bytes());
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn ops() -> impl Strategy<Value = Vec<(u8, usize, usize, u8)>> {
    prop::collection::vec(
        (any::<u8>(), any::<usize>(), any::<usize>(), any::<u8>()),
        1..12,
    )
}

fn yaml_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(YAML_TOKENS), 0..80).prop_map(|t| t.concat())
}

/// Runs every decoder on `text`; a decoded manifest must survive encoding and decoding.
fn decode_everything(text: &str) -> Result<(), TestCaseError> {
    if let Ok(pool) = yaml::decode_pool(text) {
        let again = yaml::decode_pool(&yaml::encode(&pool));
        prop_assert_eq!(again.as_ref(), Ok(&pool), "pool from {:?}", text);
    }
    if let Ok(alloc) = yaml::decode_allocation(text) {
        let again = yaml::decode_allocation(&yaml::encode(&alloc));
        prop_assert_eq!(again.as_ref(), Ok(&alloc), "allocation from {:?}", text);
    }
    if let Ok(docs) = yaml::decode_documents(text) {
        for doc in docs {
            if let yaml::Document::Pool(pool) = doc {
                let again = yaml::decode_pool(&yaml::encode(&*pool));
                prop_assert_eq!(again.as_ref(), Ok(&*pool), "document from {:?}", text);
            }
        }
    }
    Ok(())
}

#[test]
fn the_seed_manifests_decode() {
    assert!(
        yaml::decode_pool(POOL).is_ok(),
        "{:?}",
        yaml::decode_pool(POOL)
    );
    assert!(yaml::decode_allocation(ALLOCATION).is_ok());
    assert_eq!(
        yaml::decode_documents(&format!("{POOL}---\n{POOL}")).map(|d| d.len()),
        Ok(2)
    );
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_bytes_never_panic_the_manifest_decoder(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        decode_everything(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn yaml_soup_never_panics_the_manifest_decoder(text in yaml_soup()) {
        decode_everything(&text)?;
    }

    #[test]
    fn mutated_pools_never_panic_the_manifest_decoder(ops in ops()) {
        decode_everything(&mutate(POOL, &ops))?;
    }

    #[test]
    fn mutated_allocations_never_panic_the_manifest_decoder(ops in ops()) {
        decode_everything(&mutate(ALLOCATION, &ops))?;
    }

    #[test]
    fn mutated_streams_never_panic_the_manifest_decoder(ops in ops()) {
        decode_everything(&mutate(&format!("{POOL}---\n{ALLOCATION}---\n{POOL}"), &ops))?;
    }
}

/// Words the command line gives meaning to.
const ARGV_TOKENS: &[&str] = &[
    "init",
    "apply",
    "allocate",
    "release",
    "list",
    "pool",
    "show",
    "delete",
    "check",
    "completions",
    "bash",
    "zsh",
    "fish",
    "help",
    "-d",
    "--state-dir",
    "--state-dir=",
    "-o",
    "--output",
    "--output=json",
    "json",
    "yaml",
    "table",
    "-n",
    "--namespace",
    "-A",
    "--all-namespaces",
    "-f",
    "--filename",
    "-",
    "--",
    "--owner",
    "--owner=",
    "--uid",
    "--within",
    "--reserved",
    "--address",
    "--dry-run",
    "--fix",
    "--pool",
    "-h",
    "--help",
    "-V",
    "--version",
    "-oj",
    "-dn",
    "-An",
    "FloatingIP/fip-1",
    "VirtualMachine/web-01/0",
    "VPC/router",
    "Node/10.0.0.0/24",
    "10.0.0.0/24",
    "10.0.0.1",
    "::1",
    "acme/prod",
    "p",
    "..",
    "/",
    "",
    "=",
    "-x",
    "--x",
    "é",
    "\u{202e}",
    "\t",
];

fn argv() -> impl Strategy<Value = Vec<String>> {
    let word = prop_oneof![
        4 => prop::sample::select(ARGV_TOKENS).prop_map(str::to_owned),
        1 => any::<String>(),
    ];
    prop::collection::vec(word, 0..10).prop_map(|mut v| {
        v.insert(0, "ipamctl".to_owned());
        v
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_argv_never_panics_the_command_line_parser(argv in argv()) {
        match Cli::try_parse_from(&argv) {
            Ok(cli) => {
                let _ = format!("{cli:?}");
            }
            // Rendering the error (or the help, or the version) must not panic either.
            Err(e) => {
                let _ = e.render().to_string();
            }
        }
    }
}
