//! Every kind of request in one PostgreSQL batch on four connections (`--jobs 4`): claims
//! bound to a subnet (one of them too small for its requests), dual-stack claims bound to a
//! subnet in each family, prefixes from a supernet and plain claims, all interleaved; then
//! `release -f --jobs 4` of all of them. The connections hand out addresses apart
//! (`src/store/pg/siblings.rs`); these checks are that they still keep every rule a single
//! `allocate` keeps: each address in its subnet, no address or prefix twice, prefixes that
//! do not overlap, a subnet's exhaustion exactly at its size, and `check` clean.

mod pg;

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use pg::{Db, json_lines, stderr, stdout};
use serde_json::Value;

const NS: &str = "acme/prod";

const MANIFESTS: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: v4, namespace: acme/prod}
spec: {cidr: 10.74.0.0/22, kind: private}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: v6, namespace: acme/prod}
spec: {cidr: 'fd00:74::/64', kind: private}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: sup, namespace: acme/prod}
spec: {cidr: 10.80.0.0/16, kind: supernet, prefixLengths: {min: 24, max: 28}}
---
apiVersion: pivirt.hu/v1
kind: Subnet
metadata: {name: web, namespace: acme/prod}
spec: {pool: v4, cidr: 10.74.1.0/25, gateway: 10.74.1.1}
---
apiVersion: pivirt.hu/v1
kind: Subnet
metadata: {name: web6, namespace: acme/prod}
spec: {pool: v6, cidr: 'fd00:74::100/120', gateway: 'fd00:74::101'}
---
apiVersion: pivirt.hu/v1
kind: Subnet
metadata: {name: small, namespace: acme/prod}
spec: {pool: v4, cidr: 10.74.2.0/28}
";

/// How many requests of each kind the batch holds.
const EACH: usize = 40;

/// Request `i`: by `i % 4`, a dual-stack claim in `web` and `web6`, a claim in `small` (which
/// holds fewer than [`EACH`]), a /26 from `sup`, or a plain claim in `v4`.
fn request(i: usize) -> String {
    match i % 4 {
        0 => format!(
            r#"{{"pools":["v4","v6"],"subnets":["web","web6"],"owner":"VirtualMachine/s-{i}/0"}}"#
        ),
        1 => format!(r#"{{"pool":"v4","subnet":"small","owner":"VirtualMachine/m-{i}/0"}}"#),
        2 => format!(r#"{{"pool":"sup","prefixLength":26,"owner":"FloatingIP/p-{i}"}}"#),
        _ => format!(r#"{{"pool":"v4","owner":"VirtualMachine/v-{i}/0"}}"#),
    }
}

/// What result `r` holds: its addresses, or its prefix.
fn held_by(r: &Value) -> Vec<String> {
    match (&r["address"], &r["addresses"], &r["prefix"]) {
        (Value::String(a), _, _) | (_, _, Value::String(a)) => vec![a.clone()],
        (_, Value::Array(all), _) => all.iter().map(|a| a.as_str().unwrap().into()).collect(),
        _ => panic!("no address and no prefix: {r}"),
    }
}

fn within(net: &str, address: &str) -> bool {
    let net: IpNet = net.parse().unwrap();
    net.contains(&address.parse::<IpAddr>().unwrap())
}

/// Asserts what the batch's results say of each kind, and returns the addresses and prefixes
/// they hold.
fn assert_each_kind_kept_its_rules(got: &[Value]) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    let mut prefixes: Vec<IpNet> = Vec::new();
    let mut small = 0;
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r["index"], i, "{r}");
        if i % 4 == 1 && !r["error"].is_null() {
            assert_eq!(r["error"]["exit"], 5, "only `small` runs out: {r}");
            continue;
        }
        assert!(r["error"].is_null(), "{r}");
        let held = held_by(r);
        for a in &held {
            assert!(all.insert(a.clone()), "{a} answered twice");
        }
        match i % 4 {
            0 => {
                assert!(within("10.74.1.0/25", &held[0]), "{r}");
                assert!(within("fd00:74::100/120", &held[1]), "{r}");
                assert!(!["10.74.1.1", "fd00:74::101"].contains(&held[0].as_str()));
            }
            1 => {
                small += 1;
                assert!(within("10.74.2.0/28", &held[0]), "{r}");
                assert_ne!(held[0], "10.74.2.1", "the subnet's gateway: {r}");
            }
            2 => {
                let net: IpNet = held[0].parse().unwrap();
                assert_eq!(net.prefix_len(), 26, "{r}");
                assert!(within("10.80.0.0/16", &net.addr().to_string()), "{r}");
                for other in &prefixes {
                    assert!(
                        !other.contains(&net) && !net.contains(other),
                        "{net} overlaps {other}"
                    );
                }
                prefixes.push(net);
            }
            _ => {
                assert!(within("10.74.0.0/22", &held[0]), "{r}");
                assert!(
                    !within("10.74.1.0/25", &held[0]),
                    "a plain claim in `web`: {r}"
                );
                assert!(
                    !within("10.74.2.0/28", &held[0]),
                    "a plain claim in `small`: {r}"
                );
            }
        }
    }
    // `small` (a /28 whose gateway defaults to its first address) ran out at its 13
    // candidates, not before: which of its 40 requests got them is a race among the
    // connections, as among processes, but every one they could hold is held.
    assert_eq!(small, 13, "{got:?}");
    all
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn subnets_dual_stack_and_prefixes_on_four_connections_keep_every_rule_and_release_f_frees_them() {
    let db = Db::new();
    let tmp = tempfile::tempdir().unwrap();
    db.apply(tmp.path(), MANIFESTS);
    let file = tmp.path().join("batch.jsonl");
    let lines: Vec<String> = (0..4 * EACH).map(request).collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let file = file.to_str().unwrap();

    let batch = [
        "allocate", "-f", file, "-n", NS, "--jobs", "4", "-o", "json",
    ];
    let out = db.run(batch);
    // Only `small`'s exhaustions failed: exit 5.
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let got = json_lines(&stdout(&out));
    assert_eq!(got.len(), 4 * EACH);
    let answered = assert_each_kind_kept_its_rules(&got);
    let stored: BTreeSet<String> = db
        .sql()
        .query(
            "SELECT host(address) FROM ipamctl.allocations
             UNION ALL SELECT prefix::text FROM ipamctl.objects WHERE prefix IS NOT NULL",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(stored, answered, "what is held is what was answered");
    db.assert_check_clean();

    // Again: `existing` with the same answers, and `small` still full.
    let again = db.run(batch);
    assert_eq!(again.status.code(), Some(5), "{}", stderr(&again));
    for (r, first) in json_lines(&stdout(&again)).iter().zip(&got) {
        if first["error"].is_null() {
            assert_eq!(r["action"], "existing", "{r}");
            assert_eq!(held_by(r), held_by(first), "{r}");
        } else {
            assert_eq!(r["error"]["exit"], 5, "{r}");
        }
    }

    // Every owner's release, on four connections (`--ignore-not-found`: those `small` turned
    // away hold nothing); then the same file again is `unchanged` for each.
    let releases: Vec<String> = got
        .iter()
        .map(|r| format!(r#"{{"owner":"{}"}}"#, r["owner"].as_str().unwrap()))
        .collect();
    let release_file = tmp.path().join("release.jsonl");
    std::fs::write(&release_file, releases.join("\n") + "\n").unwrap();
    let release_file = release_file.to_str().unwrap();
    let release = [
        "release",
        "-f",
        release_file,
        "-n",
        NS,
        "--ignore-not-found",
        "--jobs",
        "4",
        "-o",
        "json",
    ];
    let out = db.run(release);
    assert!(out.status.success(), "{}", stderr(&out));
    let released = json_lines(&stdout(&out));
    assert_eq!(released.len(), 4 * EACH);
    for (r, claimed) in released.iter().zip(&got) {
        let want = if claimed["error"].is_null() {
            "released"
        } else {
            "unchanged"
        };
        assert_eq!(r["action"], want, "{r}");
    }
    assert_eq!(db.count("SELECT count(*) FROM ipamctl.allocations"), 0);
    assert_eq!(
        db.count("SELECT count(*) FROM ipamctl.objects WHERE prefix IS NOT NULL"),
        0
    );
    db.assert_check_clean();
    let out = db.run(release);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        json_lines(&stdout(&out))
            .iter()
            .all(|r| r["action"] == "unchanged"),
        "{}",
        stdout(&out)
    );
}
