//! Quotas through the real server: the `quotas` query shows a tenant its own quotas' usage
//! and nothing of another tenant's (not found, as a namespace that does not exist), and a
//! claim over a ceiling through the `allocate` mutation is `QUOTA_EXCEEDED` with `exit` 7
//! and claims nothing. File store, and PostgreSQL with `IPAMCTL_TEST_STORE=postgres`.

mod common;
mod serve_common;

use serde_json::{Value, json};
use serve_common::{Server, Store, curl};

/// Tenant B's quota, in `acme/dev` (which holds one address of `vpc-dev`).
const DEV_QUOTA: &str = "\
apiVersion: pivirt.hu/v1
kind: Quota
metadata:
  name: dev
  namespace: acme/dev
spec:
  hard:
    addresses: 5
";

const QUOTAS: &str = "{ quotas { namespace quota resource used limit } }";

/// A token of `ns` with `read,claim`, made in `tokens`.
fn token(store: &Store, tokens: &std::path::Path, name: &str, ns: &str) -> String {
    let out = store
        .ipamctl(["token", "create", name, "--tokens"])
        .arg(tokens)
        .args(["--namespace", ns, "--verbs", "read,claim"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// POSTs `query` with `bearer`: the body, after a 200.
fn ask(server: &Server, bearer: &str, query: &str) -> Value {
    let body = json!({ "query": query }).to_string();
    let auth = format!("Authorization: Bearer {bearer}");
    let args = ["-H", "Content-Type: application/json", "-H", auth.as_str()];
    let (status, text) = curl(&server.url, "/graphql", &args, body.as_bytes());
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Every allocation, as `ipamctl list -o json` prints them.
fn held(store: &Store) -> String {
    let out = store.ipamctl(["list", "-o", "json"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn a_tenant_sees_its_own_quotas_alone_and_a_claim_over_the_ceiling_is_quota_exceeded() {
    // `quota`: `acme/prod` holds 4 addresses against a quota `default` of 4 addresses and
    // 1 prefix.
    let store = Store::fixture("quota");
    let file = store.root().join("dev-quota.yaml");
    std::fs::write(&file, DEV_QUOTA).unwrap();
    let applied = store.ipamctl(["apply", "-f"]).arg(&file).output().unwrap();
    assert!(applied.status.success(), "{applied:?}");
    let tokens = store.root().join("quota-tokens.yaml");
    let a = token(&store, &tokens, "a", "acme/prod");
    let b = token(&store, &tokens, "b", "acme/dev");
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0", "--tokens"]);
    cmd.arg(&tokens);
    let server = Server::spawn_as_is(cmd);

    let row = |ns: &str, quota: &str, resource: &str, used: u64, limit: u64| json!({"namespace": ns, "quota": quota, "resource": resource, "used": used, "limit": limit});
    let a_rows = json!([
        row("acme/prod", "default", "addresses", 4, 4),
        row("acme/prod", "default", "prefixes", 0, 1),
    ]);
    assert_eq!(
        ask(&server, &a, QUOTAS),
        json!({"data": {"quotas": a_rows}})
    );
    // B: its own quota, never A's, whether it asks for everything or names A's namespace.
    let b_rows = json!([row("acme/dev", "dev", "addresses", 1, 5)]);
    assert_eq!(
        ask(&server, &b, QUOTAS),
        json!({"data": {"quotas": b_rows}})
    );
    let named = ask(
        &server,
        &b,
        r#"{ quotas(namespace: "acme/prod") { namespace quota used limit } }"#,
    );
    assert_eq!(
        named["errors"][0]["extensions"]["code"], "NOT_FOUND",
        "{named}"
    );
    assert!(named["data"].is_null(), "{named}");
    // The same answer as for a namespace nobody holds: no oracle of what A has.
    let nobody = ask(
        &server,
        &b,
        r#"{ quotas(namespace: "zzz/none") { quota } }"#,
    );
    assert_eq!(nobody["errors"][0]["extensions"]["code"], "NOT_FOUND");
    let message = |v: &Value| {
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .replace("acme/prod", "NS")
            .replace("zzz/none", "NS")
    };
    assert_eq!(message(&named), message(&nobody));

    // A at its ceiling: the claim is refused with exit 7's code, and nothing is claimed.
    let before = held(&store);
    let claim = r#"mutation { allocate(input: {namespace: "acme/prod", pool: "vpc-main", owner: "VirtualMachine/web-09/0"}) { addresses } }"#;
    let refused = ask(&server, &a, claim);
    let error = &refused["errors"][0];
    assert_eq!(error["extensions"]["code"], "QUOTA_EXCEEDED", "{refused}");
    assert_eq!(error["extensions"]["exit"], 7, "{refused}");
    let text = error["message"].as_str().unwrap();
    assert!(
        text.contains("`default`") && text.contains("allows 4 addresses and 4 are held"),
        "{text}"
    );
    assert_eq!(held(&store), before, "a refused claim claimed");
    assert_eq!(
        ask(&server, &a, QUOTAS),
        json!({"data": {"quotas": a_rows}})
    );
    // B, under its own ceiling, still claims: one namespace's quota is not another's.
    let claimed = ask(
        &server,
        &b,
        r#"mutation { allocate(input: {namespace: "acme/dev", pool: "vpc-dev", owner: "VirtualMachine/dev-02/0"}) { addresses } }"#,
    );
    assert!(claimed.get("errors").is_none(), "{claimed}");
    let b_rows = json!([row("acme/dev", "dev", "addresses", 2, 5)]);
    assert_eq!(
        ask(&server, &b, QUOTAS),
        json!({"data": {"quotas": b_rows}})
    );
    store.assert_check_clean();
}
