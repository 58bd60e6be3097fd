//! `ipamctl serve` against clients nobody here wrote (issue 42): npm's `graphql-http`
//! audit suite (every audit, MUST, SHOULD and MAY, passes) and Python's `gql`, which
//! fetches the schema and claims, asks again, lists and releases, on either store
//! (`IPAMCTL_TEST_STORE=postgres` for the database).

mod common;
mod serve_common;

use std::process::Command;

use serde_json::json;
use serve_common::{Server, Store, token};

/// Runs `cmd`, bounded by `timeout SECS`: its stdout (the test fails on a non-zero exit).
fn run_bounded(secs: u32, program: &str, args: &[&str], dir: &std::path::Path) -> String {
    let out = Command::new("timeout")
        .arg(secs.to_string())
        .arg(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[cfg_attr(
    not(has_node),
    ignore = "needs node and npm: apt-get install nodejs npm"
)]
fn serve_passes_the_graphql_over_http_audit_suite() {
    let store = Store::fixture("seed");
    let server = Server::start(&store, &[]);
    let dir = store.root().join("audit");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/serve/audit.mjs"),
        dir.join("audit.mjs"),
    )
    .unwrap();
    std::fs::write(
        dir.join("package.json"),
        "{\"type\": \"module\", \"private\": true}\n",
    )
    .unwrap();
    run_bounded(
        300,
        "npm",
        &[
            "install",
            "--silent",
            "--no-audit",
            "--no-fund",
            "graphql-http@1.23.1",
            "graphql@16.15.0",
        ],
        &dir,
    );
    let url = format!("{}/graphql", server.url);
    let out = run_bounded(120, "node", &["audit.mjs", &url, token()], &dir);
    let audits: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON line per audit"))
        .collect();
    assert!(
        audits.len() >= 50,
        "only {} audits ran:\n{out}",
        audits.len()
    );
    let failed: Vec<_> = audits.iter().filter(|a| a["status"] != "ok").collect();
    assert!(failed.is_empty(), "audits that do not pass: {failed:#?}");
    assert!(
        audits
            .iter()
            .any(|a| a["name"].as_str().unwrap().starts_with("MUST"))
    );
}

#[test]
#[cfg_attr(
    not(all(has_python3, has_gql)),
    ignore = "needs python3 and its gql: pip install 'gql[requests]'"
)]
fn serve_answers_pythons_gql_client() {
    let store = Store::fixture("populated");
    let server = Server::start(&store, &[]);
    let url = format!("{}/graphql", server.url);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/serve/gql_client.py");
    let out = run_bounded(120, "python3", &[script, &url, token()], &store.root());
    let steps: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let step = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("no step {name}: {out}"))
            .clone()
    };
    let mutations = step("schema")["mutations"].clone();
    for m in ["allocate", "allocateMany", "release"] {
        assert!(
            mutations.as_array().unwrap().iter().any(|x| x == m),
            "{mutations}"
        );
    }
    let first = step("allocate")["allocate"].clone();
    assert_eq!(first["action"], "CREATED");
    let again = step("again")["allocate"].clone();
    assert_eq!(again["addresses"], first["addresses"]);
    assert_eq!(again["action"], "EXISTING");
    let many = step("many")["allocateMany"].clone();
    assert_eq!(many[0]["index"], 0);
    assert!(many[0]["claim"]["addresses"][0].is_string(), "{many}");
    assert_eq!(many[1]["claim"], json!(null));
    assert_eq!(many[1]["error"]["code"], "NOT_FOUND");
    assert_eq!(many[1]["error"]["exit"], 3);
    // The failed input did not stop the one after it.
    assert!(many[2]["claim"]["addresses"][0].is_string(), "{many}");
    assert_ne!(many[0]["claim"]["addresses"], many[2]["claim"]["addresses"]);
    let listed = step("list");
    let held: Vec<_> = listed["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["owner"] == "VirtualMachine/api-07/0")
        .collect();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0]["address"], first["addresses"][0]);
    assert_eq!(step("release")["release"], 1);
    store.assert_check_clean();
}
