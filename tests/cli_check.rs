//! `ipamctl check [--fix]`, driving the real binary: every kind of finding (severity, path
//! and message), the exit codes and summary line, `--fix`, read-only-ness and the output
//! formats.
//!
//! Fixtures (copied into a temporary directory, never used in place):
//! - `testdata/check-clean/`: made by `ipamctl init`, `apply` and `allocate`, lock and
//!   index files removed. Public `public-zone-a` (203.0.113.0/25, gateway .1, excludes .2
//!   and .3) holding .4 (`FloatingIP/fip-1`) and .5 (`VPC/router`); public `public-zone-b`
//!   (198.51.100.0/24); `acme/prod/vpc-main` (10.42.0.0/16, gateway 10.42.0.1, excludes
//!   10.42.0.8/29 and 10.42.255.200) holding 10.42.0.2 (`web-01/0`), .3 (`web-02/0`) and
//!   10.42.1.1 (`Node/10.42.1.0/24`); `globex/vpc-main`, the same range (private pools
//!   of different namespaces may overlap), holding 10.42.0.1 (`db-01/0`).
//! - `testdata/check-broken/`: the clean one plus a hand-made broken file for every finding
//!   that can be committed to git (temporary files, symlinks and sockets are made at run
//!   time).
//!
//! Tests that need a single problem copy `check-clean`, add it, and assert that the
//! findings are exactly the expected ones: detection and the absence of follow-on noise.

mod common;

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

const BIN: &str = env!("CARGO_BIN_EXE_ipamctl");

const FIP1_UID: &str = "0b6f3c3e-1111-4c1e-8d2a-000000000001";
const WEB01_UID: &str = "5e0c2b9a-2222-4f00-9c3b-000000000002";

/// A fixture copied to `<tmp>/state`; commands run in `<tmp>` with `-d state`.
struct State {
    tmp: tempfile::TempDir,
}

/// What a run printed and returned.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

#[derive(Debug, PartialEq, Eq, Deserialize)]
struct Finding {
    severity: String,
    path: String,
    message: String,
}

impl State {
    fn new(case: &str) -> State {
        let tmp = tempfile::tempdir().expect("temp dir");
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata")
            .join(case);
        copy_tree(&from, &tmp.path().join("state"));
        State { tmp }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> &State {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
        self
    }

    /// Writes `rel` and sets its modification time `age` into the past.
    fn write_aged(&self, rel: &str, age: Duration) -> &State {
        self.write(rel, "partial");
        File::options()
            .write(true)
            .open(self.path(rel))
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
        self
    }

    fn run(&self, args: &[&str]) -> Run {
        let out = Command::new(BIN)
            .current_dir(self.tmp.path())
            .env_remove("IPAMCTL_STATE_DIR")
            .args(["-d", "state"])
            .args(args)
            .output()
            .expect("run ipamctl");
        // Every command a finding or hint names works on this state (tests/hints.rs).
        let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
        common::hints::run_hinted(
            &common::hints::Context {
                root: self.tmp.path(),
                current_dir: Path::new(""),
                state_flag: true,
                envs: &[],
                args: &args,
            },
            &String::from_utf8_lossy(&out.stdout),
            &String::from_utf8_lossy(&out.stderr),
        );
        Run {
            code: out.status.code().expect("exited"),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    /// Runs `apply` on `manifest`, which takes the scope lock (`ipampools/.lock`) too.
    fn apply(&self, manifest: &str) {
        let file = self.tmp.path().join("apply.yaml");
        fs::write(&file, manifest).unwrap();
        let run = self.run(&["apply", "-f", file.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }

    fn findings(&self) -> Vec<Finding> {
        let run = self.run(&["check", "-o", "json"]);
        assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
        let items = list_items(&run.stdout);
        serde_json::from_value(items.into()).expect("check -o json lists findings")
    }

    /// Asserts the findings are exactly `expected` (severity, path, message), in order.
    fn expect(&self, expected: &[(&str, &str, &str)]) {
        let expected: Vec<Finding> = expected
            .iter()
            .map(|(s, p, m)| Finding {
                severity: s.to_string(),
                path: p.to_string(),
                message: m.to_string(),
            })
            .collect();
        assert_eq!(self.findings(), expected);
    }
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn pool(name: &str, namespace: Option<&str>, cidr: &str, kind: &str) -> String {
    let ns = namespace.map_or(String::new(), |ns| format!("  namespace: {ns}\n"));
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\n{ns}spec:\n  cidr: {cidr}\n  kind: {kind}\n"
    )
}

/// An allocation as `allocate` writes it. `owner` is `KIND/NAME`.
fn allocation(
    namespace: Option<&str>,
    pool: &str,
    address: &str,
    owner: &str,
    uid: Option<&str>,
) -> String {
    let name = format!("{pool}-{}", address.replace('.', "-"));
    let ns = namespace.map_or(String::new(), |ns| format!("  namespace: {ns}\n"));
    let (kind, owner_name) = owner.split_once('/').unwrap();
    let uid = uid.map_or(String::new(), |u| format!("    uid: {u}\n"));
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAllocation\nmetadata:\n  name: {name}\n{ns}  labels:\n    pivirt.hu/managed-by: director\nspec:\n  pool: {pool}\n  address: \"{address}\"\n  owner:\n    kind: {kind}\n{uid}    name: {owner_name}\n"
    )
}

const ACME_ALLOCS: &str = "namespaces/acme/prod/ipallocations";
const ACME_POOLS: &str = "namespaces/acme/prod/ipampools";

// --- exit codes and summary ---------------------------------------------------------------

#[test]
fn clean_state_exits_0_with_nothing_on_stdout() {
    let state = State::new("check-clean");
    let run = state.run(&["check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert_eq!(
        run.stderr,
        "ok: no problems found in state (4 pools, 6 allocations checked)\n"
    );
    assert_eq!(
        state.run(&["check", "-o", "json"]).stdout,
        "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": []\n}\n"
    );
}

#[test]
fn broken_state_exits_1_with_a_summary_on_stderr() {
    let run = State::new("check-broken").run(&["check"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: 31 errors, 10 warnings in state (16 pools, 24 allocations checked)\n"
    );
    assert!(run.stdout.starts_with("SEVERITY  PATH"), "{}", run.stdout);
}

#[test]
fn warnings_alone_exit_0() {
    let state = State::new("check-clean");
    state.write("cluster/foo.txt", "stray\n");
    let run = state.run(&["check"]);
    assert_eq!(run.code, 0);
    assert_eq!(
        run.stderr,
        "ok: no errors, 1 warning in state (4 pools, 6 allocations checked)\n"
    );
    assert_eq!(
        run.stdout,
        "SEVERITY  PATH             MESSAGE\nwarning   cluster/foo.txt  not part of the state directory layout; ipamctl ignores it\n"
    );
}

#[test]
fn namespace_flag_is_refused() {
    let run = State::new("check-clean").run(&["check", "-n", "acme/prod"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("drop `--namespace`"), "{}", run.stderr);
}

#[test]
fn outside_a_state_directory_exits_3() {
    let state = State::new("check-clean");
    fs::remove_file(state.path(".ipamctl")).unwrap();
    assert_eq!(state.run(&["check"]).code, 3);
}

// --- output formats ----------------------------------------------------------------------

#[test]
fn broken_fixture_json_snapshot() {
    let run = State::new("check-broken").run(&["check", "-o", "json"]);
    assert_eq!(run.code, 1);
    insta::assert_snapshot!(run.stdout);
}

#[test]
fn broken_fixture_table_snapshot() {
    let run = State::new("check-broken").run(&["check"]);
    insta::assert_snapshot!(run.stdout);
}

#[test]
fn yaml_output_snapshot() {
    let state = State::new("check-clean");
    state.write("cluster/foo.txt", "stray\n");
    state.write(
        "cluster/ipampools/renamed.yaml",
        pool("other", None, "192.0.2.0/24", "public"),
    );
    let run = state.run(&["check", "-o", "yaml"]);
    assert_eq!(run.code, 1);
    insta::assert_snapshot!(run.stdout);
}

// --- manifests that do not decode --------------------------------------------------------

#[test]
fn unparsable_yaml_is_an_error_with_the_parsers_line() {
    let state = State::new("check-clean");
    state.write(
        "cluster/ipampools/garbled.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: [unclosed\n",
    );
    state.expect(&[(
        "error",
        "cluster/ipampools/garbled.yaml",
        "line 3 column 11: expected mapping start",
    )]);
}

#[test]
fn wrong_api_version_is_an_error() {
    let state = State::new("check-clean");
    let text = pool("v2", None, "192.0.2.0/24", "public").replace("/v1", "/v2");
    state.write("cluster/ipampools/v2.yaml", text);
    state.expect(&[(
        "error",
        "cluster/ipampools/v2.yaml",
        "apiVersion: `pivirt.hu/v2` is not supported; expected `pivirt.hu/v1`",
    )]);
}

#[test]
fn wrong_kind_is_an_error() {
    let state = State::new("check-clean");
    let text = allocation(
        None,
        "public-zone-a",
        "203.0.113.9",
        "FloatingIP/fip-9",
        None,
    )
    .replace("kind: IPAllocation", "kind: IPClaim");
    state.write("cluster/ipallocations/public-zone-a-203-0-113-9.yaml", text);
    state.expect(&[(
        "error",
        "cluster/ipallocations/public-zone-a-203-0-113-9.yaml",
        "kind: expected `IPAllocation`, found `IPClaim`",
    )]);
}

#[test]
fn unknown_fields_are_errors() {
    let state = State::new("check-clean");
    let text = pool("typo", None, "192.0.2.0/24", "public") + "  excludes: []\n";
    state.write("cluster/ipampools/typo.yaml", text);
    let text = allocation(
        Some("acme/prod"),
        "vpc-main",
        "10.42.0.22",
        "VirtualMachine/typo/0",
        None,
    )
    .replace("  owner:", "  comment: by hand\n  owner:");
    state.write(&format!("{ACME_ALLOCS}/vpc-main-10-42-0-22.yaml"), text);
    state.expect(&[
        (
            "error",
            "cluster/ipampools/typo.yaml",
            "line 8 column 3: unknown field `excludes`, expected one of cidr, kind, prefixLengths, gateway, exclude, zone, reuseAfter, macPrefix, pick, dhcp",
        ),
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-22.yaml",
            "line 11 column 3: unknown field `comment`, expected one of pool, address, owner, mac, expiresAt",
        ),
    ]);
}

#[test]
fn empty_multi_document_binary_and_huge_files_are_errors() {
    let state = State::new("check-clean");
    let two = pool("two", None, "192.0.2.0/28", "public")
        + "---\n"
        + &pool("three", None, "192.0.2.16/28", "public");
    state
        .write("cluster/ipampools/empty.yaml", "")
        .write("cluster/ipampools/two.yaml", two)
        .write("cluster/ipampools/binary.yaml", b"\xff\xfe\x00\x01")
        .write("cluster/ipampools/huge.yaml", "#".repeat((1 << 20) + 1));
    state.expect(&[
        (
            "error",
            "cluster/ipampools/binary.yaml",
            "is not UTF-8 text",
        ),
        ("error", "cluster/ipampools/empty.yaml", "the file is empty"),
        (
            "error",
            "cluster/ipampools/huge.yaml",
            "is larger than 1048576 bytes; not a manifest",
        ),
        (
            "error",
            "cluster/ipampools/two.yaml",
            "holds 2 documents; a state file holds exactly one",
        ),
    ]);
}

#[test]
fn a_manifest_of_the_other_kind_is_named_as_such() {
    let state = State::new("check-clean");
    state
        .write(
            "cluster/ipallocations/stray.yaml",
            pool("stray", None, "192.0.2.0/24", "public"),
        )
        .write(
            "cluster/ipampools/public-zone-b-198-51-100-9.yaml",
            allocation(
                None,
                "public-zone-b",
                "198.51.100.9",
                "FloatingIP/fip-9",
                None,
            ),
        );
    state.expect(&[
        (
            "error",
            "cluster/ipallocations/stray.yaml",
            "is an IPAMPool manifest; pools belong in `ipampools/`",
        ),
        (
            "error",
            "cluster/ipampools/public-zone-b-198-51-100-9.yaml",
            "is an IPAllocation manifest; allocations belong in `ipallocations/`",
        ),
    ]);
}

// --- manifests against their paths -------------------------------------------------------

#[test]
fn pool_name_disagreeing_with_the_file_name_is_an_error() {
    let state = State::new("check-clean");
    state.write(
        "cluster/ipampools/renamed.yaml",
        pool("other", None, "192.0.2.0/24", "public"),
    );
    state.expect(&[(
        "error",
        "cluster/ipampools/renamed.yaml",
        "metadata.name is `other`, but the file is named `renamed.yaml`",
    )]);
}

#[test]
fn namespace_disagreeing_with_the_path_is_an_error() {
    let state = State::new("check-clean");
    state
        .write(
            &format!("{ACME_POOLS}/moved.yaml"),
            pool("moved", Some("globex"), "10.43.0.0/16", "private"),
        )
        .write(
            &format!("{ACME_ALLOCS}/vpc-main-10-42-0-20.yaml"),
            allocation(
                Some("globex"),
                "vpc-main",
                "10.42.0.20",
                "VirtualMachine/a/0",
                None,
            ),
        )
        .write(
            &format!("{ACME_ALLOCS}/vpc-main-10-42-0-21.yaml"),
            allocation(None, "vpc-main", "10.42.0.21", "VirtualMachine/b/0", None),
        )
        .write(
            "cluster/ipallocations/public-zone-a-203-0-113-20.yaml",
            allocation(
                Some("acme/prod"),
                "public-zone-a",
                "203.0.113.20",
                "FloatingIP/c",
                None,
            ),
        );
    state.expect(&[
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-20.yaml",
            "metadata.namespace is `acme/prod`, but the file is under `cluster/` (cluster-scoped)",
        ),
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-20.yaml",
            "metadata.namespace is `globex`, but the file is in the directory of namespace `acme/prod`",
        ),
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-21.yaml",
            "metadata.namespace is missing, but the file is in the directory of namespace `acme/prod`",
        ),
        (
            "error",
            "namespaces/acme/prod/ipampools/moved.yaml",
            "metadata.namespace is `globex`, but the file is in the directory of namespace `acme/prod`",
        ),
    ]);
}

#[test]
fn private_pool_outside_namespaces_and_public_pool_inside_are_errors() {
    let state = State::new("check-clean");
    state
        .write(
            "cluster/ipampools/priv.yaml",
            pool("priv", Some("acme/prod"), "172.16.0.0/24", "private"),
        )
        .write(
            &format!("{ACME_POOLS}/pub.yaml"),
            pool("pub", None, "192.0.2.0/24", "public"),
        );
    state.expect(&[
        (
            "error",
            "cluster/ipampools/priv.yaml",
            "private pool under `cluster/`: private pools belong in their namespace's directory, `namespaces/acme/prod/ipampools/`",
        ),
        (
            "error",
            "namespaces/acme/prod/ipampools/pub.yaml",
            "public pool in a namespace directory: public pools are cluster-scoped and belong in `cluster/ipampools/`",
        ),
    ]);
}

#[test]
fn allocation_name_not_of_its_own_address_is_an_error() {
    let state = State::new("check-clean");
    // metadata.name disagrees with spec.address inside the file.
    let text = allocation(None, "public-zone-a", "203.0.113.11", "FloatingIP/x", None)
        .replace("public-zone-a-203-0-113-11", "public-zone-a-203-0-113-10");
    state.write(
        "cluster/ipallocations/public-zone-a-203-0-113-10.yaml",
        text,
    );
    // The file is consistent, but its name claims another address.
    state.write(
        "cluster/ipallocations/public-zone-a-203-0-113-9.yaml",
        allocation(None, "public-zone-a", "203.0.113.8", "FloatingIP/y", None),
    );
    state.expect(&[
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-10.yaml",
            "metadata.name: `public-zone-a-203-0-113-10` does not match spec.pool and spec.address; expected `public-zone-a-203-0-113-11`",
        ),
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-9.yaml",
            "the file name does not match the allocation it holds (pool `public-zone-a`, address 203.0.113.8); it should be `public-zone-a-203-0-113-8.yaml`",
        ),
    ]);
}

// --- allocations against their pools -----------------------------------------------------

#[test]
fn allocation_of_a_missing_pool_is_an_error() {
    let state = State::new("check-clean");
    state
        .write(
            "cluster/ipallocations/gone-10-0-0-5.yaml",
            allocation(None, "gone", "10.0.0.5", "FloatingIP/x", None),
        )
        // A pool of that name in another scope does not count.
        .write(
            "namespaces/globex/ipallocations/public-zone-b-198-51-100-7.yaml",
            allocation(
                Some("globex"),
                "public-zone-b",
                "198.51.100.7",
                "FloatingIP/y",
                None,
            ),
        );
    state.expect(&[
        (
            "error",
            "cluster/ipallocations/gone-10-0-0-5.yaml",
            "pool `gone` does not exist: there is no `cluster/ipampools/gone.yaml`",
        ),
        (
            "error",
            "namespaces/globex/ipallocations/public-zone-b-198-51-100-7.yaml",
            "pool `public-zone-b` does not exist: there is no `namespaces/globex/ipampools/public-zone-b.yaml`",
        ),
    ]);
}

#[test]
fn addresses_that_are_not_candidates_of_their_pool_are_errors() {
    let state = State::new("check-clean");
    for (address, owner) in [
        ("203.0.113.200", "FloatingIP/outside"),
        ("203.0.113.0", "FloatingIP/network"),
        ("203.0.113.127", "FloatingIP/broadcast"),
        ("203.0.113.1", "FloatingIP/gateway"),
        ("203.0.113.3", "FloatingIP/excluded"),
    ] {
        let name = format!("public-zone-a-{}", address.replace('.', "-"));
        state.write(
            &format!("cluster/ipallocations/{name}.yaml"),
            allocation(None, "public-zone-a", address, owner, None),
        );
    }
    state.write(
        &format!("{ACME_ALLOCS}/vpc-main-10-42-0-10.yaml"),
        allocation(
            Some("acme/prod"),
            "vpc-main",
            "10.42.0.10",
            "VirtualMachine/x/0",
            None,
        ),
    );
    let hint = "was `cluster/ipampools/public-zone-a.yaml` edited after the allocation was made?";
    state.expect(&[
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-0.yaml",
            &format!("address 203.0.113.0 is the network address of pool `public-zone-a` (203.0.113.0/25); {hint}"),
        ),
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-1.yaml",
            &format!("address 203.0.113.1 is the gateway of pool `public-zone-a`; {hint}"),
        ),
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-127.yaml",
            &format!("address 203.0.113.127 is the broadcast address of pool `public-zone-a` (203.0.113.0/25); {hint}"),
        ),
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-200.yaml",
            &format!("address 203.0.113.200 is outside pool `public-zone-a`'s prefix 203.0.113.0/25; {hint}"),
        ),
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-3.yaml",
            &format!("address 203.0.113.3 is excluded by pool `public-zone-a` (exclude entry `203.0.113.3`); {hint}"),
        ),
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-10.yaml",
            "address 10.42.0.10 is excluded by pool `vpc-main` (exclude entry `10.42.0.8/29`); was `namespaces/acme/prod/ipampools/vpc-main.yaml` edited after the allocation was made?",
        ),
    ]);
}

#[test]
fn a_pool_edited_after_the_fact_strands_its_allocations() {
    let state = State::new("check-clean");
    // Hand edit: the gateway moves onto an address that is already held.
    let path = format!("{ACME_POOLS}/vpc-main.yaml");
    let text = fs::read_to_string(state.path(&path)).unwrap();
    state.write(
        &path,
        text.replace("gateway: \"10.42.0.1\"", "gateway: \"10.42.0.3\""),
    );
    state.expect(&[(
        "error",
        "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-3.yaml",
        "address 10.42.0.3 is the gateway of pool `vpc-main`; was `namespaces/acme/prod/ipampools/vpc-main.yaml` edited after the allocation was made?",
    )]);
}

#[test]
fn one_owner_holding_two_addresses_in_one_pool_is_an_error() {
    let state = State::new("check-clean");
    state.write(
        &format!("{ACME_ALLOCS}/vpc-main-10-42-0-4.yaml"),
        allocation(
            Some("acme/prod"),
            "vpc-main",
            "10.42.0.4",
            "VirtualMachine/web-01/0",
            Some(WEB01_UID),
        ),
    );
    let message = format!(
        "owner `VirtualMachine/web-01/0` (uid {WEB01_UID}) holds 2 addresses in pool `vpc-main`: 10.42.0.2, 10.42.0.4; an owner holds at most one per pool"
    );
    state.expect(&[
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-2.yaml",
            &message,
        ),
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-4.yaml",
            &message,
        ),
    ]);
}

#[test]
fn the_same_owner_in_another_pool_or_a_vpc_router_with_another_uid_is_fine() {
    let state = State::new("check-clean");
    state
        .write(
            "cluster/ipallocations/public-zone-b-198-51-100-5.yaml",
            allocation(
                None,
                "public-zone-b",
                "198.51.100.5",
                "FloatingIP/fip-1",
                Some(FIP1_UID),
            ),
        )
        // Another VPC's router: a VPC's name is always `router`, its uid is its identity.
        .write(
            "cluster/ipallocations/public-zone-a-203-0-113-6.yaml",
            allocation(
                None,
                "public-zone-a",
                "203.0.113.6",
                "VPC/router",
                Some("0b6f3c3e-1111-4c1e-8d2a-0000000000ff"),
            ),
        );
    state.expect(&[]);
}

/// An owner's name is one identity per pool (issue 46): the same name under another uid,
/// or none, in the pool is an error on each file.
#[test]
fn the_same_owner_name_with_another_uid_in_a_pool_is_an_error() {
    let state = State::new("check-clean");
    state.write(
        "cluster/ipallocations/public-zone-a-203-0-113-7.yaml",
        allocation(
            None,
            "public-zone-a",
            "203.0.113.7",
            "FloatingIP/fip-1",
            None,
        ),
    );
    let message = format!(
        "owner `FloatingIP/fip-1` is held under 2 identities in pool `public-zone-a`: 203.0.113.4 (uid {FIP1_UID}) in cluster/ipallocations/public-zone-a-203-0-113-4.yaml, 203.0.113.7 (no uid) in cluster/ipallocations/public-zone-a-203-0-113-7.yaml; an owner's name is one identity per pool: release the one whose NIC is gone (`ipamctl release public-zone-a ADDRESS --owner FloatingIP/fip-1 --uid UID`, without `--uid` for the one that has none)"
    );
    state.expect(&[
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-4.yaml",
            &message,
        ),
        (
            "error",
            "cluster/ipallocations/public-zone-a-203-0-113-7.yaml",
            &message,
        ),
    ]);
}

#[test]
fn overlapping_public_pools_are_errors() {
    let state = State::new("check-clean");
    state.write(
        "cluster/ipampools/wide.yaml",
        pool("wide", None, "203.0.0.0/16", "public"),
    );
    state.expect(&[
        (
            "error",
            "cluster/ipampools/public-zone-a.yaml",
            "public pool `public-zone-a` (203.0.113.0/25) overlaps public pool `wide` (203.0.0.0/16)",
        ),
        (
            "error",
            "cluster/ipampools/wide.yaml",
            "public pool `wide` (203.0.0.0/16) overlaps public pool `public-zone-a` (203.0.113.0/25)",
        ),
    ]);
}

// --- the layout --------------------------------------------------------------------------

#[test]
fn files_in_places_the_layout_does_not_have_are_warnings() {
    let state = State::new("check-clean");
    let stray = pool("x", Some("acme/other"), "10.44.0.0/16", "private");
    state
        .write("cluster/foo.txt", "stray\n")
        .write("cluster/old/public-zone-a.yaml", &stray)
        .write("namespaces/acme/other/x.yaml", &stray)
        .write("namespaces/Acme/ipampools/p.yaml", &stray)
        .write("namespaces/ipampools/p.yaml", &stray)
        .write("cluster/ipampools/README.md", "notes\n")
        .write("cluster/ipampools/notes.yml", &stray)
        .write(&format!("{ACME_ALLOCS}/sub/x.yaml"), &stray)
        // Outside `cluster/` and `namespaces/` the root belongs to the repository.
        .write("README.md", "# our state\n")
        .write("ci/check.sh", "ipamctl check\n");
    state.expect(&[
        ("warning", "cluster/foo.txt", "not part of the state directory layout; ipamctl ignores it"),
        (
            "warning",
            "cluster/ipampools/README.md",
            "not a manifest: ipamctl reads only `<name>.yaml` files here and ignores it",
        ),
        (
            "warning",
            "cluster/ipampools/notes.yml",
            "not read: ipamctl reads only `<name>.yaml` manifests, not `.yml`",
        ),
        ("warning", "cluster/old/", "not part of the state directory layout; ipamctl ignores it"),
        (
            "warning",
            "namespaces/Acme/",
            "not a namespace directory: invalid namespace `Acme`: segment `Acme` contains 'A'; only lowercase letters, digits and `-` are allowed (RFC 1123 label); ipamctl ignores it",
        ),
        (
            "warning",
            "namespaces/acme/other/x.yaml",
            "not part of the state directory layout: manifests go in an `ipampools/` or `ipallocations/` directory; ipamctl ignores it",
        ),
        ("warning", "namespaces/acme/prod/ipallocations/sub/", "unexpected directory; ipamctl ignores it"),
        (
            "warning",
            "namespaces/ipampools/",
            "not part of the state directory layout: objects under `namespaces/` go in a namespace directory, e.g. `namespaces/<ns>/ipampools/`; ipamctl ignores it",
        ),
    ]);
}

#[test]
fn unexpected_dot_files_in_object_directories_are_warnings() {
    let state = State::new("check-clean");
    state
        .write("cluster/ipampools/.public-zone-a.yaml.bak", "x")
        .write(&format!("{ACME_ALLOCS}/.backup"), "x")
        .write(&format!("{ACME_ALLOCS}/.index/notes.txt"), "x");
    let dot = "unexpected dot-file: not one of ipamctl's lock, index or temporary files";
    state.expect(&[
        ("warning", "cluster/ipampools/.public-zone-a.yaml.bak", dot),
        ("warning", "namespaces/acme/prod/ipallocations/.backup", dot),
        (
            "warning",
            "namespaces/acme/prod/ipallocations/.index/notes.txt",
            "not one of ipamctl's index files; ipamctl ignores it",
        ),
    ]);
}

#[test]
fn the_tools_own_lock_and_index_files_are_not_findings() {
    let state = State::new("check-clean");
    state.apply(&pool("extra", None, "192.0.2.0/24", "public"));
    for args in [
        &["allocate", "public-zone-a", "--owner", "FloatingIP/fip-2"][..],
        &[
            "allocate",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-03/0",
        ],
        &[
            "allocate",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/web-01/0",
            "--uid",
            WEB01_UID,
        ],
        &["release", "public-zone-a", "203.0.113.4", "--force"],
    ] {
        assert_eq!(state.run(args).code, 0);
    }
    // A look-up records files at least 100 ms old in the pool's index.
    std::thread::sleep(Duration::from_millis(200));
    let listed = state.run(&["list", "-n", "acme/prod", "--uid", WEB01_UID]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    // Locks are byte ranges of the marker: no lock file is left behind.
    assert!(!state.path("cluster/ipampools/.lock").exists());
    assert!(!state.path("cluster/ipampools/.public-zone-a.lock").exists());
    assert!(
        state
            .path(&format!(".index/{ACME_ALLOCS}/vpc-main.idx"))
            .exists()
    );
    assert!(
        state
            .path(&format!(".index/{ACME_ALLOCS}/vpc-main.owners"))
            .is_dir()
    );
    state.expect(&[]);
}

#[test]
fn leftover_temporary_files_are_warnings() {
    let state = State::new("check-clean");
    state
        .write_aged("cluster/ipallocations/.tmp-old", Duration::from_secs(3600))
        .write_aged(&format!("{ACME_POOLS}/.tmp-new"), Duration::ZERO)
        .write_aged(".tmp-root", Duration::from_secs(3600));
    state.expect(&[
        (
            "warning",
            ".tmp-root",
            "leftover temporary file of an interrupted write, older than 5 minutes; `ipamctl check --fix` removes it",
        ),
        (
            "warning",
            "cluster/ipallocations/.tmp-old",
            "leftover temporary file of an interrupted write, older than 5 minutes; `ipamctl check --fix` removes it",
        ),
        (
            "warning",
            "namespaces/acme/prod/ipampools/.tmp-new",
            "temporary file of a write in progress or one interrupted moments ago; `ipamctl check --fix` removes it once it is 5 minutes old",
        ),
    ]);
}

#[test]
fn symlinks_are_errors_and_never_followed() {
    let state = State::new("check-clean");
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(outside.path().join("ipampools")).unwrap();
    fs::write(outside.path().join("ipampools/evil.yaml"), "not: [valid").unwrap();
    let link =
        |target: &Path, rel: &str| std::os::unix::fs::symlink(target, state.path(rel)).unwrap();
    link(outside.path(), "namespaces/evil");
    link(
        &state.path("cluster/ipampools/public-zone-a.yaml"),
        "cluster/ipampools/alias.yaml",
    );
    link(
        Path::new("/etc/passwd"),
        &format!("{ACME_ALLOCS}/vpc-main-10-42-0-9.yaml"),
    );
    let message = "is a symlink; ipamctl never follows symlinks inside the state directory";
    state.expect(&[
        ("error", "cluster/ipampools/alias.yaml", message),
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-9.yaml",
            message,
        ),
        ("error", "namespaces/evil", message),
    ]);
}

/// The pools of an allocation's scope are looked up again to confirm a finding; a pool
/// directory replaced by a symlink to one outside the root is no pool directory then either:
/// the pool outside is never opened (inotify would see it) and its allocations stay without
/// a pool.
#[test]
fn a_pool_behind_a_symlinked_namespace_directory_is_never_opened() {
    let state = State::new("check-clean");
    let outside = state.tmp.path().join("outside");
    fs::rename(state.path(ACME_POOLS), &outside).unwrap();
    symlink(&outside, state.path(ACME_POOLS)).unwrap();
    assert!(outside.join("vpc-main.yaml").is_file());
    let opened = OpenWatch::new(&outside);

    let missing = "pool `vpc-main` does not exist: there is no `namespaces/acme/prod/ipampools/vpc-main.yaml`";
    state.expect(&[
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-2.yaml",
            missing,
        ),
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-3.yaml",
            missing,
        ),
        (
            "error",
            "namespaces/acme/prod/ipallocations/vpc-main-10-42-1-1.yaml",
            missing,
        ),
        (
            "error",
            "namespaces/acme/prod/ipampools",
            "is a symlink; ipamctl never follows symlinks inside the state directory",
        ),
    ]);
    assert_eq!(
        opened.names(),
        Vec::<String>::new(),
        "opened outside the root"
    );
}

/// Every open (`IN_OPEN`) of a directory or of a file in it, as inotify reports them.
struct OpenWatch {
    inotify: std::os::fd::OwnedFd,
}

impl OpenWatch {
    fn new(dir: &Path) -> OpenWatch {
        use rustix::fs::inotify;
        let inotify =
            inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(&inotify, dir, inotify::WatchFlags::OPEN).unwrap();
        OpenWatch { inotify }
    }

    /// The names opened so far (`.` for the directory itself).
    fn names(&self) -> Vec<String> {
        let mut buf = [std::mem::MaybeUninit::uninit(); 4096];
        let mut events = rustix::fs::inotify::Reader::new(&self.inotify, &mut buf);
        let mut names = Vec::new();
        loop {
            match events.next() {
                Ok(event) => names.push(
                    event
                        .file_name()
                        .map_or(".".to_owned(), |n| n.to_string_lossy().into_owned()),
                ),
                Err(rustix::io::Errno::WOULDBLOCK) => return names,
                Err(e) => panic!("reading inotify events: {e}"),
            }
        }
    }
}

#[test]
fn sockets_and_other_special_files_are_warnings() {
    let state = State::new("check-clean");
    let _socket =
        std::os::unix::net::UnixListener::bind(state.path("cluster/ipampools/agent.sock")).unwrap();
    state.expect(&[(
        "warning",
        "cluster/ipampools/agent.sock",
        "not a regular file or directory; ipamctl ignores it",
    )]);
}

#[test]
fn a_gitignore_that_lets_locks_into_git_is_a_warning() {
    let state = State::new("check-clean");
    state.write(".gitignore", ".tmp-*\n.lock\n");
    state.expect(&[(
        "warning",
        ".gitignore",
        "does not ignore `.*.lock`, `.index/`: ipamctl's lock, index and temporary files would be committed",
    )]);
}

// --- read-only, and --fix ----------------------------------------------------------------

/// Every path under `dir` with its kind, length, content and modification time.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, SystemTime)> {
    let mut all = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        let path = entry.path();
        if meta.is_dir() {
            all.push((path.clone(), b"<dir>".to_vec(), meta.modified().unwrap()));
            all.extend(snapshot(&path));
        } else {
            all.push((
                path.clone(),
                fs::read(&path).unwrap(),
                meta.modified().unwrap(),
            ));
        }
    }
    all.sort();
    all
}

#[test]
fn check_writes_nothing() {
    let state = State::new("check-broken");
    assert_eq!(
        state
            .run(&["allocate", "public-zone-b", "--owner", "FloatingIP/z"])
            .code,
        0
    );
    state.write_aged("cluster/ipallocations/.tmp-old", Duration::from_secs(3600));
    let before = snapshot(&state.root());
    for format in ["table", "json", "yaml"] {
        assert_eq!(state.run(&["check", "-o", format]).code, 1);
    }
    assert_eq!(snapshot(&state.root()), before);
}

#[test]
fn fix_removes_only_old_temporary_files() {
    let state = State::new("check-clean");
    state.apply(&pool("public-zone-b", None, "198.51.100.0/24", "public"));
    assert_eq!(
        state
            .run(&["allocate", "public-zone-a", "--owner", "FloatingIP/fip-2"])
            .code,
        0
    );
    let hour = Duration::from_secs(3600);
    state
        .write_aged("cluster/ipallocations/.tmp-a1b2", hour)
        .write_aged(&format!("{ACME_POOLS}/.tmp-c3d4"), hour)
        .write_aged(".tmp-e5f6", hour)
        .write_aged("cluster/ipallocations/.tmp-fresh", Duration::from_secs(60))
        .write_aged("cluster/ipampools/.stray", hour);
    // Aged index files, and lock files an older ipamctl left, must stay too.
    state
        .write_aged("cluster/ipampools/.public-zone-a.lock", hour)
        .write_aged("cluster/ipallocations/.index/journal", hour)
        .write_aged("cluster/ipallocations/.index/public-zone-a.idx", hour);
    for rel in [
        "cluster/ipampools/.public-zone-a.lock",
        "cluster/ipallocations/.index/public-zone-a.idx",
        "cluster/ipallocations/.index/journal",
    ] {
        File::options()
            .write(true)
            .open(state.path(rel))
            .unwrap()
            .set_modified(SystemTime::now() - hour)
            .unwrap();
    }
    let before = snapshot(&state.root());

    let run = state.run(&["check", "--fix", "-o", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "removed .tmp-e5f6\n\
         removed cluster/ipallocations/.tmp-a1b2\n\
         removed namespaces/acme/prod/ipampools/.tmp-c3d4\n\
         ok: no errors, 2 warnings in state (4 pools, 7 allocations checked)\n"
    );
    let remaining: Vec<Finding> = serde_json::from_value(list_items(&run.stdout).into()).unwrap();
    let paths: Vec<&str> = remaining.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "cluster/ipallocations/.tmp-fresh",
            "cluster/ipampools/.stray"
        ]
    );

    let removed: Vec<PathBuf> = [
        ".tmp-e5f6",
        "cluster/ipallocations/.tmp-a1b2",
        "namespaces/acme/prod/ipampools/.tmp-c3d4",
    ]
    .iter()
    .map(|rel| state.path(rel))
    .collect();
    let expected: Vec<_> = before
        .into_iter()
        .filter(|(path, _, _)| !removed.contains(path))
        .collect();
    // Only the three files went; everything else is byte-for-byte and time-for-time the
    // same, except the mtimes of the three directories that lost an entry.
    let after = snapshot(&state.root());
    let strip = |v: &[(PathBuf, Vec<u8>, SystemTime)]| -> Vec<(PathBuf, Vec<u8>)> {
        v.iter().map(|(p, c, _)| (p.clone(), c.clone())).collect()
    };
    assert_eq!(strip(&after), strip(&expected));
    for (path, _, mtime) in after.iter().filter(|(p, _, _)| p.is_file()) {
        let was = expected.iter().find(|(p, _, _)| p == path).unwrap().2;
        assert_eq!(*mtime, was, "{}", path.display());
    }

    // A second run has nothing left to remove.
    let again = state.run(&["check", "--fix"]);
    assert!(!again.stderr.contains("removed"), "{}", again.stderr);
}

#[test]
fn fix_on_a_broken_state_still_exits_1_for_its_errors() {
    let state = State::new("check-broken");
    state.write_aged("cluster/ipallocations/.tmp-old", Duration::from_secs(3600));
    let run = state.run(&["check", "--fix"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with("removed cluster/ipallocations/.tmp-old\nerror: 31 errors, 10 warnings"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains(".tmp-old"));
    // No manifest went, broken or not.
    assert!(state.path("cluster/ipampools/garbled.yaml").exists());
    assert!(state.path("cluster/ipampools/empty.yaml").exists());
}

/// `--fix` finds each leftover again from the root's handle when it removes it, minutes
/// after the walk perhaps: a directory of the walk replaced since by a symlink to a directory
/// outside the root leads nowhere, and the file there stays. The swap is made while `--fix`
/// is held between its two removals: its stderr is a pipe filled to the brim, so the
/// `removed` line after the first removal blocks until the test drains the pipe.
#[test]
fn fix_never_unlinks_through_a_directory_swapped_for_a_symlink() {
    let state = State::new("check-clean");
    let hour = Duration::from_secs(3600);
    // The walk meets `.tmp-first` (at the root) before `cluster/`.
    state
        .write_aged(".tmp-first", hour)
        .write_aged("cluster/ipallocations/.tmp-x", hour);
    let outside = state.tmp.path().join("outside");

    let (mut stderr, filled) = std::io::pipe().unwrap();
    let filler = fill(&filled);
    let mut child = Command::new(BIN)
        .current_dir(state.tmp.path())
        .env_remove("IPAMCTL_STATE_DIR")
        .args(["-d", "state", "check", "--fix"])
        .stdout(Stdio::null())
        .stderr(filled)
        .spawn()
        .expect("run ipamctl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while state.path(".tmp-first").exists() {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("`check --fix` did not remove `.tmp-first` and block on stderr");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // `--fix` is now blocked writing `removed .tmp-first`, before its second removal.
    fs::rename(state.path("cluster/ipallocations"), &outside).unwrap();
    symlink(&outside, state.path("cluster/ipallocations")).unwrap();
    let drained = std::thread::spawn(move || {
        let mut all = Vec::new();
        stderr.read_to_end(&mut all).unwrap();
        all
    });
    let status = child.wait().unwrap();
    let all = drained.join().unwrap();
    let printed = String::from_utf8_lossy(&all[filler..]);
    assert!(status.success(), "{printed}");
    assert!(
        outside.join(".tmp-x").exists(),
        "`--fix` removed a file outside the state directory: {printed}"
    );
    assert!(printed.starts_with("removed .tmp-first\n"), "{printed}");
    assert!(!printed.contains("removed cluster"), "{printed}");
}

/// Writes into the pipe `writer` until it is full, so that the next write blocks. Returns
/// how many bytes it wrote.
fn fill(writer: &std::io::PipeWriter) -> usize {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    let flags = fcntl_getfl(writer).unwrap();
    fcntl_setfl(writer, flags | OFlags::NONBLOCK).unwrap();
    let mut written = 0;
    // Big writes, then single bytes into what the last page has left.
    for chunk in [&[b'.'; 4096][..], &b"."[..]] {
        loop {
            match (&*writer).write(chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("filling the pipe: {e}"),
            }
        }
    }
    // The child inherits the open file description: it must block, not fail.
    fcntl_setfl(writer, flags).unwrap();
    written
}

// --- scale -------------------------------------------------------------------------------

/// Every manifest is read once and cross-checked through hash maps: 50,000 allocations of
/// one pool take about a second on two cores with a warm cache. Run with
/// `cargo test --release --test cli_check -- --ignored` (a debug build is ~20x slower).
#[test]
#[ignore = "timing: meaningful with --release only"]
fn fifty_thousand_allocations_are_checked_in_under_3_seconds() {
    if cfg!(debug_assertions) {
        eprintln!("skipped: run with --release");
        return;
    }
    let state = State::new("check-clean");
    state.write(
        "cluster/ipampools/big.yaml",
        pool("big", None, "10.0.0.0/8", "public"),
    );
    let base = u32::from(std::net::Ipv4Addr::new(10, 0, 0, 1));
    for i in 0..50_000u32 {
        let address = std::net::Ipv4Addr::from(base + i).to_string();
        let owner = format!("VirtualMachine/vm-{i}/0");
        let name = format!("big-{}", address.replace('.', "-"));
        fs::write(
            state.path(&format!("cluster/ipallocations/{name}.yaml")),
            allocation(
                None,
                "big",
                &address,
                &owner,
                Some(&format!("00000000-0000-4000-8000-{i:012x}")),
            ),
        )
        .unwrap();
    }
    let started = std::time::Instant::now();
    let run = state.run(&["check"]);
    let took = started.elapsed();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("50006 allocations"), "{}", run.stderr);
    assert!(took < Duration::from_secs(3), "check took {took:?}");
}

/// The items of the kubectl `List` that `check -o json` prints.
fn list_items(json: &str) -> Vec<serde_json::Value> {
    let value: serde_json::Value = serde_json::from_str(json).expect("check -o json is JSON");
    assert_eq!(
        (&value["apiVersion"], &value["kind"]),
        (&"v1".into(), &"List".into())
    );
    value["items"].as_array().expect("a List has items").clone()
}

// --- uids written by older versions --------------------------------------------------------

#[test]
fn a_stored_uid_that_is_no_uuid_is_a_warning_and_its_allocation_still_reads_and_releases() {
    let state = State::new("check-clean");
    state.write(
        "cluster/ipallocations/public-zone-a-203-0-113-6.yaml",
        allocation(
            None,
            "public-zone-a",
            "203.0.113.6",
            "FloatingIP/old",
            Some("0"),
        ),
    );
    state.expect(&[(
        "warning",
        "cluster/ipallocations/public-zone-a-203-0-113-6.yaml",
        "owner `FloatingIP/old` has uid `0`, which is not a lowercase UUID; ipamctl now takes only UUIDs as uids: release it and allocate again with the owner's real uuid",
    )]);
    assert_eq!(
        state.run(&["check"]).code,
        0,
        "a warning does not fail check"
    );
    let listed = state.run(&["list", "--owner", "FloatingIP/old"]);
    assert!(listed.stdout.contains("203.0.113.6"), "{}", listed.stdout);
    // The filter is strict (`--uid 0` is exit 2), the release by owner and address is not.
    assert_eq!(state.run(&["release", "--uid", "0"]).code, 2);
    let released = state.run(&[
        "release",
        "public-zone-a",
        "203.0.113.6",
        "--owner",
        "FloatingIP/old",
    ]);
    assert_eq!(released.code, 0, "{}", released.stderr);
    state.expect(&[]);
}

// --- git merge-conflict markers ------------------------------------------------------------

/// Two branches' claims of one address, as `git merge` leaves the file (add/add conflict).
fn conflicted(a_uid: &str, b_uid: &str) -> String {
    let ours = allocation(
        None,
        "public-zone-a",
        "203.0.113.6",
        "FloatingIP/fip-a",
        Some(a_uid),
    );
    let (head, ours_tail) = ours.split_once("    kind: FloatingIP\n").unwrap();
    let theirs = allocation(
        None,
        "public-zone-a",
        "203.0.113.6",
        "FloatingIP/fip-b",
        Some(b_uid),
    );
    let theirs_tail = theirs.split_once("    kind: FloatingIP\n").unwrap().1;
    format!(
        "{head}    kind: FloatingIP\n<<<<<<< HEAD\n{ours_tail}=======\n{theirs_tail}>>>>>>> feature\n"
    )
}

#[test]
fn a_file_with_conflict_markers_is_reported_with_both_owners_and_the_commands_keeping_uids() {
    const A: &str = "0b6f3c3e-1111-4c1e-8d2a-00000000000a";
    const B: &str = "0b6f3c3e-1111-4c1e-8d2a-00000000000b";
    let state = State::new("check-clean");
    let path = "cluster/ipallocations/public-zone-a-203-0-113-6.yaml";
    state.write(path, conflicted(A, B));
    let message = format!(
        "unresolved merge conflict: ours holds the address for `FloatingIP/fip-a (uid {A})`, theirs for `FloatingIP/fip-b (uid {B})`; it stays taken until resolved. \
         Keep ours: `git checkout --ours -- {path} && git add {path} && ipamctl allocate public-zone-a --owner FloatingIP/fip-b --uid {B}`; \
         or keep theirs: `git checkout --theirs -- {path} && git add {path} && ipamctl allocate public-zone-a --owner FloatingIP/fip-a --uid {A}`"
    );
    state.expect(&[("error", path, &message)]);
    // Every reader recognises it, and the address stays taken.
    let listed = state.run(&["list"]);
    assert!(
        listed.stderr.contains(
            "unresolved merge conflict (git conflict markers): ours holds it for `FloatingIP/fip-a"
        ),
        "{}",
        listed.stderr
    );
    let next = state.run(&[
        "allocate",
        "public-zone-a",
        "--owner",
        "FloatingIP/fip-c",
        "--dry-run",
    ]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_ne!(next.stdout, "203.0.113.6\n");
}
