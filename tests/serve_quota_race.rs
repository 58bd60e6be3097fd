//! A quota raced from both front ends at once (issue 45): 64 `ipamctl allocate` processes
//! and 64 API clients against a ceiling of 10 more addresses leave exactly 10 more held;
//! every other claim is exit 7 or `QUOTA_EXCEEDED` (with `exit` 7). File store, and
//! PostgreSQL with `IPAMCTL_TEST_STORE=postgres`: the server and the processes serialise on
//! the same quota lock (the state directory's lock file, or the database's row).

mod common;
mod serve_common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use serve_common::{Server, Store};

fn held(store: &Store) -> usize {
    let out = store
        .ipamctl(["list", "-n", "acme/prod", "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    common::list_items(&String::from_utf8_lossy(&out.stdout)).len()
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn sixty_four_processes_and_sixty_four_api_clients_leave_exactly_the_ceiling() {
    let store = Store::fixture("demo");
    let before = held(&store);
    let quota = store.root().join("quota.yaml");
    std::fs::write(
        &quota,
        format!(
            "apiVersion: pivirt.hu/v1\nkind: Quota\nmetadata:\n  name: tenant\n  namespace: acme/prod\nspec:\n  hard:\n    addresses: {}\n",
            before + 10
        ),
    )
    .unwrap();
    let applied = store
        .ipamctl(["apply", "-f", quota.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(applied.status.success(), "{applied:?}");
    let server = Server::start(&store, &[]);
    let deadline = Instant::now() + Duration::from_secs(180);
    let processes: Vec<_> = (0..64)
        .map(|i| {
            let owner = format!("Node/cli-{i}");
            let mut cmd = store.ipamctl([
                "allocate",
                "vpc-main",
                "-n",
                "acme/prod",
                "--owner",
                owner.as_str(),
            ]);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let answers: Vec<serde_json::Value> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..64)
            .map(|i| {
                let server = &server;
                s.spawn(move || {
                    server
                        .post(
                            "mutation($o: String!) { allocate(input: {namespace: \"acme/prod\", pool: \"vpc-main\", owner: $o}) { addresses } }",
                            json!({"o": format!("Node/api-{i}")}),
                        )
                        .1
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let mut codes = Vec::new();
    for child in processes {
        assert!(
            Instant::now() < deadline,
            "the storm took over three minutes"
        );
        codes.push(child.wait_with_output().unwrap().status.code());
    }
    let cli_ok = codes.iter().filter(|c| **c == Some(0)).count();
    let cli_over = codes.iter().filter(|c| **c == Some(7)).count();
    assert_eq!(cli_ok + cli_over, 64, "exit codes: {codes:?}");
    let api_ok = answers.iter().filter(|a| a.get("errors").is_none()).count();
    for refused in answers.iter().filter(|a| a.get("errors").is_some()) {
        let ext = &refused["errors"][0]["extensions"];
        assert_eq!(ext["code"], "QUOTA_EXCEEDED", "{refused}");
        assert_eq!(ext["exit"], 7, "{refused}");
    }
    assert_eq!(
        cli_ok + api_ok,
        10,
        "{cli_ok} processes and {api_ok} API clients claimed"
    );
    assert_eq!(held(&store), before + 10);
    store.assert_check_clean();
}
