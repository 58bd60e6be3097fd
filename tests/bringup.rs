//! The director's bring-up ("A director's bring-up" (`docs/src/batch.md`), `bench/bringup` at full size),
//! small, on both stores: supernets, 3 tenants with 2 VPCs each drawn from them, dual-stack
//! VMs claimed in one `allocate -f`; every VM holds one address per family inside its VPC's
//! ranges, the retry answers `existing` with the same addresses, and on PostgreSQL the
//! database exported, imported into another and exported again is the same tree.

mod common;

use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const SUPERNETS: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: region-v4}
spec: {cidr: 10.0.0.0/8, kind: supernet, prefixLengths: {min: 16, max: 24}}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: region-v6}
spec: {cidr: \"2001:db8::/32\", kind: supernet, prefixLengths: {min: 48, max: 64}}
";

const VMS: usize = 3;

fn vpcs() -> Vec<(String, String)> {
    (1..=3)
        .flat_map(|t| ["a", "b"].map(|v| (format!("tenant-{t}/prod"), format!("{v}{t}"))))
        .collect()
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `address` inside `cidr`?
fn inside(address: &str, cidr: &str) -> bool {
    let (net, len) = cidr.split_once('/').expect("a CIDR");
    let len: u32 = len.parse().expect("a prefix length");
    match (address.parse::<IpAddr>(), net.parse::<IpAddr>()) {
        (Ok(IpAddr::V4(a)), Ok(IpAddr::V4(n))) => {
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            u32::from(a) & mask == u32::from(n)
        }
        (Ok(IpAddr::V6(a)), Ok(IpAddr::V6(n))) => {
            let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            u128::from(a) & mask == u128::from(n)
        }
        _ => false,
    }
}

/// Runs the bring-up with `ipamctl` as `run` gives it (a state directory or a database) and
/// checks what it promises; returns the batch's stdout.
fn bring_up(run: &dyn Fn(&[&str]) -> Output, scratch: &Path) -> String {
    let supernets = scratch.join("supernets.yaml");
    std::fs::write(&supernets, SUPERNETS).unwrap();
    ok(&run(&["apply", "-f", supernets.to_str().unwrap()]), "apply");
    let mut lines = String::new();
    for (ns, vpc) in vpcs() {
        ok(
            &run(&[
                "vpc",
                "create",
                &vpc,
                "-n",
                &ns,
                "--from-pool",
                "region-v4",
                "--prefix-length",
                "16",
                "--from-pool",
                "region-v6",
                "--prefix-length",
                "48",
            ]),
            "vpc create",
        );
        for i in 1..=VMS {
            lines.push_str(&format!(
                "{{\"namespace\": \"{ns}\", \"pools\": [\"vpc-{vpc}\", \"vpc-{vpc}-v6\"], \"owner\": \"VirtualMachine/{vpc}-vm-{i}/0\"}}\n"
            ));
        }
    }
    let file = scratch.join("vms.jsonl");
    std::fs::write(&file, &lines).unwrap();
    let batch = ["allocate", "-f", file.to_str().unwrap(), "-o", "json"];
    let first = ok(&run(&batch), "the batch");
    let again = ok(&run(&batch), "its retry");

    // The pools' ranges, from `pool list`.
    let pools: Value = serde_json::from_str(&ok(
        &run(&["pool", "list", "-A", "-o", "json"]),
        "pool list",
    ))
    .unwrap();
    let cidr = |ns: &str, pool: &str| -> String {
        pools["items"]
            .as_array()
            .expect("a List")
            .iter()
            .find(|p| p["metadata"]["namespace"] == ns && p["metadata"]["name"] == pool)
            .unwrap_or_else(|| panic!("no pool {ns}/{pool} in {pools}"))["spec"]["cidr"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first_results: Vec<Value> = first
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let again_results: Vec<Value> = again
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(first_results.len(), 6 * VMS, "{first}");
    let mut seen = std::collections::BTreeSet::new();
    for (i, (r, (ns, vpc))) in first_results
        .iter()
        .zip(vpcs().into_iter().flat_map(|v| std::iter::repeat_n(v, VMS)))
        .enumerate()
    {
        assert_eq!(r["action"], "created", "{r}");
        assert_eq!(r["index"], i, "{r}");
        let addresses: Vec<&str> = r["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(addresses.len(), 2, "{r}");
        assert!(
            inside(addresses[0], &cidr(&ns, &format!("vpc-{vpc}"))),
            "{r}"
        );
        assert!(
            inside(addresses[1], &cidr(&ns, &format!("vpc-{vpc}-v6"))),
            "{r}"
        );
        for a in addresses {
            assert!(seen.insert(a.to_owned()), "{a} twice");
        }
    }
    for (a, b) in first_results.iter().zip(&again_results) {
        assert_eq!(b["action"], "existing", "{b}");
        assert_eq!(a["addresses"], b["addresses"], "{a} / {b}");
    }
    // Each VM holds exactly one address per family: two, in all (beside the VPCs' prefix
    // claims, which `list` shows too).
    let all: Value =
        serde_json::from_str(&ok(&run(&["list", "-A", "-o", "json"]), "list")).unwrap();
    let mut per_owner = std::collections::BTreeMap::<String, usize>::new();
    for item in all["items"].as_array().unwrap() {
        if item["kind"] == "IPAllocation" {
            *per_owner
                .entry(item["spec"]["owner"]["name"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    assert_eq!(per_owner.len(), 6 * VMS, "{per_owner:?}");
    assert!(per_owner.values().all(|&n| n == 2), "{per_owner:?}");
    first
}

#[test]
fn a_bring_up_in_one_batch_on_the_file_store() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let init = Command::new(env!("CARGO_BIN_EXE_ipamctl"))
        .args(["init", state.to_str().unwrap()])
        .output()
        .unwrap();
    ok(&init, "init");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ipamctl"))
            .arg("-d")
            .arg(&state)
            .args(args)
            .env_remove("IPAMCTL_STORE")
            .output()
            .unwrap()
    };
    bring_up(&run, dir.path());
    let check = run(&["check"]);
    ok(&check, "check");
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_bring_up_in_one_batch_on_postgres_exports_imports_and_exports_the_same() {
    let db = common::pg::Db::new();
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| db.run(args);
    bring_up(&run, dir.path());
    let one = dir.path().join("one");
    ok(&db.run(["export", one.to_str().unwrap()]), "export");
    let other = common::pg::Db::new();
    ok(&other.run(["import", one.to_str().unwrap()]), "import");
    let two = dir.path().join("two");
    ok(
        &other.run(["export", two.to_str().unwrap()]),
        "export again",
    );
    assert_eq!(common::snapshot_of(&one), common::snapshot_of(&two));
    assert!(common::files_of(&one).len() > 2 * 6 * VMS);
}
