//! 64 clients claiming at once through `ipamctl serve` alongside 8 `ipamctl allocate`
//! processes on the same store (issue 42): no address held twice, no owner with two, an
//! owner asking again (through either) answers the same, `check` clean. On PostgreSQL
//! with `IPAMCTL_TEST_STORE=postgres`.

mod common;
mod serve_common;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use serve_common::{Server, Store, curl, token};

const ALLOCATE: &str =
    "mutation($input: AllocateInput!) { allocate(input: $input) { owner addresses } }";

/// One claim through the server: the address.
fn claim(url: &str, owner: &str) -> String {
    let body = json!({"query": ALLOCATE, "variables": {"input": {"pool": "public-zone-a", "owner": owner}}}).to_string();
    let auth = format!("Authorization: Bearer {token}", token = token());
    let (status, text) = curl(
        url,
        "/graphql",
        &["-H", &auth, "-H", "Content-Type: application/json"],
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["data"]["allocate"]["addresses"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{owner}: {text}"))
        .to_owned()
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn sixty_four_clients_and_eight_processes_never_share_an_address() {
    let store = Store::fixture("seed");
    let server = Server::start(&store, &[]);
    let url = server.url.clone();
    let (by_server, by_cli) = std::thread::scope(|s| {
        let clients: Vec<_> = (0..64)
            .map(|i| {
                let url = url.clone();
                s.spawn(move || {
                    let mut got = Vec::new();
                    for owner in [format!("FloatingIP/web-{i}"), format!("FloatingIP/db-{i}")] {
                        let first = claim(&url, &owner);
                        assert_eq!(claim(&url, &owner), first, "{owner} asked again");
                        got.push((owner, first));
                    }
                    got
                })
            })
            .collect();
        // Each process claims for owners of its own and for one the clients also ask for.
        let processes: Vec<_> = (0..8)
            .map(|p| {
                let store = &store;
                s.spawn(move || {
                    let mut got = Vec::new();
                    for owner in [
                        format!("FloatingIP/cli-{p}-a"),
                        format!("FloatingIP/web-{p}"),
                        format!("FloatingIP/cli-{p}-b"),
                    ] {
                        let out = store
                            .ipamctl(["allocate", "public-zone-a", "--owner", &owner])
                            .output()
                            .unwrap();
                        assert!(
                            out.status.success(),
                            "{}",
                            String::from_utf8_lossy(&out.stderr)
                        );
                        let address = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                        got.push((owner, address));
                    }
                    got
                })
            })
            .collect();
        let server: Vec<_> = clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        let cli: Vec<_> = processes
            .into_iter()
            .flat_map(|p| p.join().unwrap())
            .collect();
        (server, cli)
    });
    let mut answered: BTreeMap<String, String> = BTreeMap::new();
    for (owner, address) in by_server.iter().chain(&by_cli) {
        if let Some(before) = answered.insert(owner.clone(), address.clone()) {
            assert_eq!(&before, address, "{owner} was answered two addresses");
        }
    }
    let addresses: BTreeSet<_> = answered.values().collect();
    assert_eq!(
        addresses.len(),
        answered.len(),
        "an address went to two owners"
    );
    assert_eq!(answered.len(), 64 * 2 + 8 * 2);
    // What the store holds is what was answered, each once.
    let out = store.ipamctl(["list", "-o", "json"]).output().unwrap();
    let listed = common::list_items(&String::from_utf8_lossy(&out.stdout));
    let mut held: BTreeMap<String, String> = BTreeMap::new();
    for item in listed {
        let owner = format!(
            "{}/{}",
            item["spec"]["owner"]["kind"].as_str().unwrap(),
            item["spec"]["owner"]["name"].as_str().unwrap()
        );
        let address = item["spec"]["address"].as_str().unwrap().to_owned();
        assert!(
            held.insert(owner.clone(), address).is_none(),
            "{owner} holds two"
        );
    }
    assert_eq!(held, answered);
    store.assert_check_clean();
}
