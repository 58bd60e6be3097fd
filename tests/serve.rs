//! `ipamctl serve` driven with curl: a claim, the same claim asked again, a release, the
//! queries, and the errors with the command line's code and exit (issue 42).

mod common;
mod serve_common;

use serde_json::json;
use serve_common::{Server, Store, curl, token};

const ALLOCATE: &str = "mutation($input: AllocateInput!) { allocate(input: $input) { owner addresses prefix action } }";
const RELEASE: &str = "mutation($input: ReleaseInput!) { release(input: $input) }";

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn serve_claims_answers_the_same_again_and_releases() {
    let store = Store::fixture("seed");
    let server = Server::start(&store, &[]);
    let input = json!({"input": {"pool": "public-zone-a", "owner": "FloatingIP/fip-1"}});
    let first = server.ok(ALLOCATE, input.clone());
    assert_eq!(
        first["allocate"],
        json!({"owner": "FloatingIP/fip-1", "addresses": ["203.0.113.4"], "prefix": null, "action": "CREATED"})
    );
    let again = server.ok(ALLOCATE, input);
    assert_eq!(again["allocate"]["addresses"], json!(["203.0.113.4"]));
    assert_eq!(again["allocate"]["action"], "EXISTING");
    // The command line sees the server's claim, and answers the same.
    let out = store
        .ipamctl(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-1"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "203.0.113.4\n");
    let listed = server.ok(
        "{ allocations(pool: \"public-zone-a\") { address owner pool namespace } }",
        json!({}),
    );
    assert_eq!(
        listed["allocations"],
        json!([{"address": "203.0.113.4", "owner": "FloatingIP/fip-1", "pool": "public-zone-a", "namespace": null}])
    );
    let pools = server.ok(
        "{ pool(name: \"public-zone-a\") { cidr allocated free candidates } }",
        json!({}),
    );
    assert_eq!(pools["pool"]["allocated"], "1");
    let released = server.ok(
        RELEASE,
        json!({"input": {"pool": "public-zone-a", "owner": "FloatingIP/fip-1"}}),
    );
    assert_eq!(released["release"], 1);
    let after = server.ok(
        "{ allocations(pool: \"public-zone-a\") { address } }",
        json!({}),
    );
    assert_eq!(after["allocations"], json!([]));
    store.assert_check_clean();
}

/// One error of a response: its extensions' code and exit, and its message.
fn error_of(body: &serde_json::Value) -> (String, i64, String) {
    let e = &body["errors"][0];
    (
        e["extensions"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        e["extensions"]["exit"].as_i64().unwrap_or_default(),
        e["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn serve_errors_carry_the_command_lines_code_exit_and_message() {
    let store = Store::fixture("small-pools");
    let server = Server::start(&store, &[]);
    let cases = [
        (
            json!({"pool": "nope", "owner": "FloatingIP/a"}),
            "NOT_FOUND",
            3,
        ),
        (
            json!({"pool": "p32", "owner": "not-an-owner"}),
            "BAD_REQUEST",
            2,
        ),
        // A batch line's rule, from the batch's own reader.
        (
            json!({"pool": "p32", "pools": ["p31"], "owner": "FloatingIP/a"}),
            "BAD_REQUEST",
            2,
        ),
    ];
    for (input, code, exit) in cases {
        let (status, body) = server.post(ALLOCATE, json!({ "input": input }));
        assert_eq!(status, 200, "{body}");
        let (got, got_exit, message) = error_of(&body);
        assert_eq!((got.as_str(), got_exit), (code, exit), "{input}: {body}");
        // The message is the command line's, word for word.
        if input.get("pools").is_some() {
            assert!(
                message.contains("`pool` and `pools` are one field"),
                "{message}"
            );
            continue;
        }
        let pool = input["pool"].as_str().unwrap();
        let owner = input["owner"].as_str().unwrap();
        let out = store
            .ipamctl(["allocate", pool, "--owner", owner])
            .output()
            .unwrap();
        assert_eq!(out.status.code().map(i64::from), Some(exit));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&message), "CLI: {stderr}\nAPI: {message}");
    }
    // p32 holds one address: the second owner finds it exhausted.
    server.ok(
        ALLOCATE,
        json!({"input": {"pool": "p32", "owner": "FloatingIP/a"}}),
    );
    let (_, body) = server.post(
        ALLOCATE,
        json!({"input": {"pool": "p32", "owner": "FloatingIP/b"}}),
    );
    assert_eq!(error_of(&body).0, "EXHAUSTED", "{body}");
    assert_eq!(error_of(&body).1, 5);
    // No bearer, or a wrong one: 401 UNAUTHENTICATED, nothing claimed.
    let query = json!({"query": ALLOCATE, "variables": {"input": {"pool": "p31", "owner": "FloatingIP/c"}}}).to_string();
    for auth in [None, Some("Bearer wrong"), Some("Basic dGVzdA==")] {
        let mut args = vec!["-H", "Content-Type: application/json"];
        let header = auth.map(|a| format!("Authorization: {a}"));
        if let Some(h) = &header {
            args.extend(["-H", h]);
        }
        let (status, text) = curl(&server.url, "/graphql", &args, query.as_bytes());
        assert_eq!(status, 401, "{text}");
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(error_of(&body).0, "UNAUTHENTICATED");
        assert_eq!(error_of(&body).1, 8);
    }
    let held = server.ok("{ allocations(pool: \"p31\") { address } }", json!({}));
    assert_eq!(held["allocations"], json!([]));
    // The secret never reaches the log.
    assert!(!server.log().contains(token()), "{}", server.log());
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn serve_health_needs_no_token_and_says_nothing_of_the_state() {
    let store = Store::fixture("seed");
    let server = Server::start(&store, &[]);
    assert_eq!(
        curl(&server.url, "/healthz", &[], b""),
        (200, "ok\n".into())
    );
    assert_eq!(
        curl(&server.url, "/readyz", &[], b""),
        (200, "ready\n".into())
    );
    assert_eq!(curl(&server.url, "/nope", &[], b"").0, 404);
}

#[test]
fn serve_refuses_to_start_on_no_store_or_a_bad_address_with_one_error() {
    let bin = env!("CARGO_BIN_EXE_ipamctl");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let tokens = serve_common::tokens_file().to_str().unwrap();
    let cases: [(&[&str], i32, &str); 4] = [
        (
            &["-d", missing.to_str().unwrap(), "serve"],
            2,
            "`ipamctl serve` needs `--tokens FILE`",
        ),
        (
            &[
                "-d",
                missing.to_str().unwrap(),
                "serve",
                "--tokens",
                tokens,
                "--listen",
                "127.0.0.1:0",
            ],
            3,
            "does not exist",
        ),
        (
            &[
                "-d",
                missing.to_str().unwrap(),
                "serve",
                "--listen",
                "nohost",
            ],
            2,
            "--listen: `nohost` is not HOST:PORT",
        ),
        (
            &[
                "-d",
                missing.to_str().unwrap(),
                "--store",
                "postgresql://x/y",
                "serve",
            ],
            2,
            "both name a store",
        ),
    ];
    for (args, code, says) in cases {
        let out = std::process::Command::new(bin)
            .args(args)
            .env_remove("IPAMCTL_STORE")
            .env_remove("IPAMCTL_STATE_DIR")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        common::assert_one_error(&stderr);
        assert!(stderr.contains(says), "{stderr}");
    }
}
