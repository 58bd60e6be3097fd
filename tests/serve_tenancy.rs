//! Tenancy through the real server (issue 42, "Done means" 4): every operation of the
//! contract, asked by every kind of caller (no token, a wrong one, one revoked while the
//! server runs, `read`, `claim` of another namespace, `claim` of its own, `admin`, and
//! `admin` with the cluster scope), answers the contract's code; a refused operation
//! changes nothing (the state as `ipamctl` lists it is the same before and after); and
//! tenant B never sees, lists, releases or is answered tenant A's floating IP, even under
//! the same name; a tenant neither creates nor deletes a public pool, and its `release -l`
//! reaches its own namespaces only. Runs on the file store, and on PostgreSQL with
//! `IPAMCTL_TEST_STORE=postgres`.

mod common;
mod serve_common;

use serde_json::{Value, json};
use serve_common::{Server, Store, curl};

/// The tenants: `acme/prod` (the one every operation targets) and `beta/prod`.
const ACME: &str = "acme/prod";

/// The state every case starts from: a public pool in zone `z`, a private pool `lan` in
/// each tenant's namespace.
const POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: pub-z
spec:
  cidr: 198.51.100.0/28
  kind: public
  zone: z
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: lan
  namespace: acme/prod
spec:
  cidr: 10.1.0.0/24
  kind: private
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: lan
  namespace: beta/prod
spec:
  cidr: 10.2.0.0/24
  kind: private
";

/// The callers, by name: the tokens made for them (`None`: no header at all).
struct Callers {
    tokens: std::path::PathBuf,
    bearers: Vec<(&'static str, Option<String>)>,
}

impl Callers {
    fn make(store: &Store) -> Callers {
        let tokens = store.root().join("tenancy-tokens.yaml");
        let make = |name: &str, args: &[&str]| token(store, &tokens, name, args);
        let mut bearers = vec![
            ("none", None),
            ("wrong", Some(format!("ipamctl_{}", "0".repeat(64)))),
        ];
        let revoked = make(
            "revoked",
            &[
                "--namespace",
                "*",
                "--verbs",
                "read,claim,admin",
                "--cluster",
            ],
        );
        bearers.push(("revoked", Some(revoked)));
        for (name, args) in [
            ("read", &["--namespace", ACME, "--verbs", "read"][..]),
            (
                "claim-other",
                &["--namespace", "beta/prod", "--verbs", "read,claim"],
            ),
            ("claim-own", &["--namespace", ACME, "--verbs", "read,claim"]),
            (
                "admin",
                &["--namespace", "acme/*", "--verbs", "read,claim,admin"],
            ),
            (
                "cluster-admin",
                &[
                    "--namespace",
                    "*",
                    "--verbs",
                    "read,claim,admin",
                    "--cluster",
                ],
            ),
        ] {
            bearers.push((name, Some(make(name, args))));
        }
        Callers { tokens, bearers }
    }

    /// A further token, `name`'s, made with `args`: its secret.
    fn add(&self, store: &Store, name: &str, args: &[&str]) -> String {
        token(store, &self.tokens, name, args)
    }

    fn bearer(&self, name: &str) -> Option<&str> {
        self.bearers
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, b)| b.as_deref())
    }
}

/// Makes `name`'s token in `tokens` with `args`: its secret.
fn token(store: &Store, tokens: &std::path::Path, name: &str, args: &[&str]) -> String {
    let out = store
        .ipamctl(["token", "create", name, "--tokens"])
        .arg(tokens)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// POSTs `query` with `bearer`: the HTTP status and the body.
fn ask(server: &Server, bearer: Option<&str>, query: &str) -> (u16, Value) {
    let body = json!({ "query": query }).to_string();
    let auth = bearer.map(|b| format!("Authorization: Bearer {b}"));
    let mut args = vec!["-H", "Content-Type: application/json"];
    if let Some(auth) = &auth {
        args.extend(["-H", auth.as_str()]);
    }
    let (status, text) = curl(&server.url, "/graphql", &args, body.as_bytes());
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, json)
}

/// The code of the first error, or "OK".
fn code(body: &Value) -> String {
    match body["errors"].get(0) {
        Some(e) => e["extensions"]["code"].as_str().unwrap_or("?").to_owned(),
        None => "OK".into(),
    }
}

/// What `ipamctl` lists of the whole state: allocations, pools, subnets.
fn snapshot(store: &Store) -> String {
    let mut all = String::new();
    for args in [
        &["list", "-A", "-o", "json"][..],
        &["pool", "list", "-A", "-o", "json"],
        &["subnet", "list", "-A", "-o", "json"],
    ] {
        let out = store.ipamctl(args).output().unwrap();
        all.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    all
}

/// One operation: its document (targeting `acme/prod` or the cluster), and what each
/// authenticated caller gets: (read, claim-other, claim-own, admin, cluster-admin).
struct Op {
    name: &'static str,
    query: &'static str,
    expect: [&'static str; 5],
}

const NF: &str = "NOT_FOUND";
const FB: &str = "FORBIDDEN";

fn ops() -> Vec<Op> {
    vec![
        Op {
            name: "pools",
            query: r#"{ pools(namespace: "acme/prod") { name } }"#,
            expect: ["OK", NF, "OK", "OK", "OK"],
        },
        Op {
            name: "allocations",
            query: r#"{ allocations(namespace: "acme/prod") { address } }"#,
            expect: ["OK", NF, "OK", "OK", "OK"],
        },
        Op {
            name: "prefixClaims",
            query: r#"{ prefixClaims(namespace: "acme/prod") { prefix } }"#,
            expect: ["OK", NF, "OK", "OK", "OK"],
        },
        Op {
            name: "subnets",
            query: r#"{ subnets(namespace: "acme/prod") { name } }"#,
            expect: ["OK", NF, "OK", "OK", "OK"],
        },
        Op {
            name: "vpcs",
            query: r#"{ vpcs(namespace: "acme/prod") { name } }"#,
            expect: ["OK", NF, "OK", "OK", "OK"],
        },
        Op {
            name: "allocate",
            query: r#"mutation { allocate(input: {namespace: "acme/prod", pool: "lan", owner: "Node/n1"}) { addresses } }"#,
            expect: [FB, NF, "OK", "OK", "OK"],
        },
        Op {
            name: "allocateMany",
            query: r#"mutation { allocateMany(inputs: [{namespace: "acme/prod", pool: "lan", owner: "Node/n2"}]) { claim { addresses } error { code } } }"#,
            // Each input's failure is its outcome's error: checked below.
            expect: ["OK", "OK", "OK", "OK", "OK"],
        },
        Op {
            name: "release",
            query: r#"mutation { release(input: {namespace: "acme/prod", pool: "lan", owner: "Node/held", ignoreNotFound: true}) }"#,
            expect: [FB, NF, "OK", "OK", "OK"],
        },
        Op {
            name: "claimFloatingIp",
            query: r#"mutation { claimFloatingIp(input: {namespace: "acme/prod", name: "fip-x", zone: "z"}) { addresses } }"#,
            expect: [FB, NF, "OK", "OK", "OK"],
        },
        Op {
            name: "releaseFloatingIp",
            query: r#"mutation { releaseFloatingIp(namespace: "acme/prod", name: "fip-held", ignoreNotFound: true) }"#,
            expect: [FB, NF, "OK", "OK", "OK"],
        },
        Op {
            name: "createVpc",
            query: r#"mutation { createVpc(input: {name: "web", namespace: "acme/prod", cidrs: ["10.9.0.0/24"]}) { name } }"#,
            expect: [FB, NF, FB, "OK", "OK"],
        },
        Op {
            name: "deleteVpc",
            query: r#"mutation { deleteVpc(name: "web", namespace: "acme/prod", ignoreNotFound: true) }"#,
            expect: [FB, NF, FB, "OK", "OK"],
        },
        Op {
            name: "createSubnet",
            query: r#"mutation { createSubnet(input: {name: "s1", namespace: "acme/prod", pool: "lan", cidr: "10.1.0.128/26"}) { cidr } }"#,
            expect: [FB, NF, FB, "OK", "OK"],
        },
        Op {
            name: "deleteSubnet",
            query: r#"mutation { deleteSubnet(name: "s1", namespace: "acme/prod", ignoreNotFound: true) }"#,
            expect: [FB, NF, FB, "OK", "OK"],
        },
        Op {
            name: "poolShown",
            query: r#"{ poolShown(name: "lan", namespace: "acme/prod") { manifest } }"#,
            // A pool outside the scope is null, as one that does not exist: checked below.
            expect: ["OK", "OK", "OK", "OK", "OK"],
        },
        Op {
            name: "poolMap",
            query: r#"{ poolMap(name: "lan", namespace: "acme/prod", owners: true) { manifest held owners { holder } } }"#,
            // As `poolShown`: a pool outside the scope is null. Checked below.
            expect: ["OK", "OK", "OK", "OK", "OK"],
        },
        Op {
            name: "subnetsShown",
            query: r#"{ subnetsShown(namespace: "acme/prod") { manifest } }"#,
            expect: ["OK", NF, "OK", "OK", "OK"],
        },
        Op {
            name: "releaseHeld",
            query: r#"mutation { releaseHeld(input: {namespace: "acme/prod", pool: "lan", owner: "Node/held", ignoreNotFound: true}) { allocations } }"#,
            expect: [FB, NF, "OK", "OK", "OK"],
        },
        Op {
            name: "setMac",
            query: r#"mutation { setMac(input: {namespace: "acme/prod", pool: "lan", address: "10.1.0.1", owner: "Node/held", mac: "02:00:00:00:00:01"}) { changed } }"#,
            expect: [FB, NF, "OK", "OK", "OK"],
        },
        Op {
            name: "createPublicPool",
            query: r#"mutation { createPublicPool(input: {name: "pub-new", cidr: "192.0.2.0/28", zone: "y"}) { name } }"#,
            // Outside a tenant's scope (the cluster's): not found, as any object there.
            expect: [NF, NF, NF, NF, "OK"],
        },
        Op {
            name: "createPublicPoolDone",
            query: r#"mutation { createPublicPoolDone(input: {name: "pub-new", cidr: "192.0.2.0/28", zone: "y"}, dryRun: true) { action } }"#,
            expect: [NF, NF, NF, NF, "OK"],
        },
        Op {
            name: "deletePool (public)",
            // `pub-z` holds `fip-held`: only the cluster's admin reaches that rule; to the
            // tenants the pool is not found, as if it did not exist.
            query: r#"mutation { deletePool(name: "pub-z") { manifest } }"#,
            expect: [NF, NF, NF, NF, "CONFLICT"],
        },
        Op {
            name: "deletePool (namespaced)",
            // `lan` holds `Node/held`: refused to an admin of the namespace, exit 4.
            query: r#"mutation { deletePool(name: "lan", namespace: "acme/prod") { manifest } }"#,
            expect: [FB, NF, FB, "CONFLICT", "CONFLICT"],
        },
    ]
}

/// The uid of tenant `acme/prod`'s floating IP `fip-held`.
const FIP_HELD_UID: &str = "5f0c6a8e-3b1d-4c2e-9a7f-1d2e3f4a5b6c";

/// A fresh store with the pools, `Node/held` holding an address in `acme/prod`'s `lan`,
/// and tenant `acme/prod`'s floating IP `fip-held` (uid [`FIP_HELD_UID`]).
fn fresh() -> Store {
    let store = Store::fixture("empty");
    let mut apply = store
        .ipamctl(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    apply
        .stdin
        .take()
        .unwrap()
        .write_all(POOLS.as_bytes())
        .unwrap();
    assert!(apply.wait().unwrap().success());
    for args in [
        &["-n", ACME, "allocate", "lan", "--owner", "Node/held"][..],
        &[
            "allocate",
            "--zone",
            "z",
            "--tenant",
            ACME,
            "--owner",
            "FloatingIP/fip-held",
            "--uid",
            FIP_HELD_UID,
        ],
    ] {
        let out = store.ipamctl(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    store
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn every_operation_answers_each_caller_the_contracts_code_and_refusals_change_nothing() {
    let callers_of = ["read", "claim-other", "claim-own", "admin", "cluster-admin"];
    // One store and server per operation; the callers ask in turn, the refused first
    // (each operation is idempotent, or ignores what is not found, once it succeeded).
    for op in ops() {
        let store = fresh();
        let callers = Callers::make(&store);
        let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0"]);
        cmd.arg("--tokens").arg(&callers.tokens);
        let server = Server::spawn_as_is(cmd);
        for (i, caller) in ["none", "wrong", "revoked"]
            .into_iter()
            .chain(callers_of)
            .enumerate()
        {
            if caller == "revoked" {
                let out = store
                    .ipamctl(["token", "revoke", "revoked", "--tokens"])
                    .arg(&callers.tokens)
                    .output()
                    .unwrap();
                assert!(out.status.success());
                // Noticed within 2 s without a restart.
                std::thread::sleep(std::time::Duration::from_millis(2200));
            }
            let before = snapshot(&store);
            let (status, body) = ask(&server, callers.bearer(caller), op.query);
            let got = code(&body);
            let want = if i < 3 {
                "UNAUTHENTICATED"
            } else {
                op.expect[i - 3]
            };
            assert_eq!(got, want, "{} by {caller}: {body}", op.name);
            if want == "UNAUTHENTICATED" {
                assert_eq!(status, 401, "{} by {caller}", op.name);
            }
            if op.name == "allocateMany" && i >= 3 {
                let inner = &body["data"]["allocateMany"][0]["error"]["code"];
                let want = ["FORBIDDEN", "NOT_FOUND"].get(i - 3).copied();
                match want {
                    Some(w) => assert_eq!(inner, w, "allocateMany by {caller}: {body}"),
                    None => assert!(inner.is_null(), "allocateMany by {caller}: {body}"),
                }
            }
            if (op.name == "poolShown" || op.name == "poolMap") && i >= 3 {
                let seen = !body["data"][op.name].is_null();
                assert_eq!(
                    seen,
                    caller != "claim-other",
                    "{} by {caller}: {body}",
                    op.name
                );
                // Nothing of what the pool holds reaches a caller that does not see it.
                let text = body.to_string();
                assert_eq!(
                    text.contains("10.1.0."),
                    seen,
                    "{} by {caller}: {body}",
                    op.name
                );
            }
            let refused = got != "OK"
                || (op.name == "allocateMany"
                    && !body["data"]["allocateMany"][0]["error"].is_null());
            if refused {
                assert_eq!(
                    snapshot(&store),
                    before,
                    "{} by {caller} changed the state",
                    op.name
                );
            }
        }
        // No secret it was sent, good or bad, reaches its log.
        let log = server.log();
        for (caller, bearer) in &callers.bearers {
            if let Some(secret) = bearer {
                assert!(
                    !log.contains(secret.as_str()),
                    "{}: {caller}'s secret is in the log",
                    op.name
                );
            }
        }
    }
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn tenants_naming_a_floating_ip_alike_never_share_or_see_each_others() {
    let store = fresh();
    let callers = Callers::make(&store);
    let beta = callers.add(
        &store,
        "beta",
        &["--namespace", "beta/prod", "--verbs", "read,claim"],
    );
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0"]);
    cmd.arg("--tokens").arg(&callers.tokens);
    let server = Server::spawn_as_is(cmd);
    let acme = callers.bearer("claim-own");
    let claim = |bearer: Option<&str>, ns: &str| {
        let q = format!(
            r#"mutation {{ claimFloatingIp(input: {{namespace: "{ns}", name: "fip-web", zone: "z"}}) {{ owner addresses action }} }}"#
        );
        let (_, body) = ask(&server, bearer, &q);
        assert_eq!(code(&body), "OK", "{body}");
        body["data"]["claimFloatingIp"].clone()
    };
    let a = claim(acme, ACME);
    let b = claim(Some(&beta), "beta/prod");
    assert_ne!(a["addresses"], b["addresses"], "{a} {b}");
    assert_eq!(b["action"], "CREATED");
    // Asked again, each is answered its own.
    assert_eq!(claim(acme, ACME)["addresses"], a["addresses"]);
    assert_eq!(claim(Some(&beta), "beta/prod")["addresses"], b["addresses"]);
    // B lists only its own floating IPs, never A's.
    let (_, listed) = ask(&server, Some(&beta), "{ allocations { address owner } }");
    let text = listed.to_string();
    assert!(text.contains(b["addresses"][0].as_str().unwrap()), "{text}");
    assert!(
        !text.contains(a["addresses"][0].as_str().unwrap()),
        "{text}"
    );
    assert!(!text.contains("acme"), "{text}");
    // B cannot release A's, by A's namespace (not found) or by its own (its own goes).
    let (_, refused) = ask(
        &server,
        Some(&beta),
        r#"mutation { releaseFloatingIp(namespace: "acme/prod", name: "fip-web") }"#,
    );
    assert_eq!(code(&refused), "NOT_FOUND", "{refused}");
    let (_, own) = ask(
        &server,
        Some(&beta),
        r#"mutation { releaseFloatingIp(namespace: "beta/prod", name: "fip-web") }"#,
    );
    assert_eq!(own["data"]["releaseFloatingIp"], true, "{own}");
    // A's is still held by A.
    assert_eq!(claim(acme, ACME)["action"], "EXISTING");
    store.assert_check_clean();
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn a_tenants_scrape_of_metrics_counts_its_own_namespaces_and_the_clusters_only() {
    let store = fresh();
    let callers = Callers::make(&store);
    let tenant = callers.add(
        &store,
        "acme-metrics",
        &["--namespace", "acme/*", "--verbs", "read", "--cluster"],
    );
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0"]);
    cmd.arg("--tokens").arg(&callers.tokens);
    let server = Server::spawn_as_is(cmd);
    let scrape = |bearer: &str, query: &str| {
        let auth = format!("Authorization: Bearer {bearer}");
        curl(
            &server.url,
            &format!("/metrics{query}"),
            &["-H", &auth],
            b"",
        )
    };
    // The tenant's scrape: its namespace's pool and the cluster's public one, never
    // beta/prod's pool, even though both are called `lan`.
    let (status, text) = scrape(&tenant, "");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("namespace=\"acme/prod\""), "{text}");
    assert!(text.contains("pool=\"pub-z\""), "{text}");
    assert!(!text.contains("beta"), "{text}");
    // Asked by name, beta/prod is not found to it, as one that holds nothing.
    let (status, text) = scrape(&tenant, "?namespace=beta/prod");
    assert_eq!(status, 404, "{text}");
    // A caller that sees every namespace still counts beta/prod's.
    let everyone = callers.bearer("cluster-admin").unwrap();
    let (status, text) = scrape(everyone, "");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("namespace=\"beta/prod\""), "{text}");
    // Neither bearer is in the server's log, whatever it answered.
    let log = server.log();
    assert!(log.contains("operation=metrics"), "{log}");
    for secret in [tenant.as_str(), everyone] {
        assert!(!log.contains(secret), "{log}");
    }
}

/// A token given the cluster scope beside one tenant's namespaces (for its metrics, or to
/// run that tenant's uplinks) lists, maps, is explained, is refused and releases in the
/// public pools as if another tenant's floating IP were not there: never its name, never
/// its tenant, never released, by address (guarded or forced) or by selectors. A token of
/// every namespace still sees it.
#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn a_cluster_token_of_one_tenant_never_sees_or_touches_another_tenants_floating_ip() {
    let store = fresh();
    let callers = Callers::make(&store);
    let beta = callers.add(
        &store,
        "beta-ops",
        &[
            "--namespace",
            "beta/*",
            "--verbs",
            "read,claim",
            "--cluster",
        ],
    );
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0"]);
    cmd.arg("--tokens").arg(&callers.tokens);
    let server = Server::spawn_as_is(cmd);
    let ops = callers.bearer("cluster-admin");
    let beta = Some(beta.as_str());
    let ok = |bearer: Option<&str>, q: &str| {
        let (_, body) = ask(&server, bearer, q);
        assert_eq!(code(&body), "OK", "{q}: {body}");
        body
    };
    let (_, acme) = ask(
        &server,
        ops,
        r#"{ allocations(owner: "FloatingIP/acme/prod/fip-held") { address } }"#,
    );
    let acme = acme["data"]["allocations"][0]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("{acme}"))
        .to_owned();
    // Beta's own floating IP and an uplink it runs, both in the public pool.
    ok(
        beta,
        r#"mutation { claimFloatingIp(input: {namespace: "beta/prod", name: "fip-b", zone: "z"}) { addresses } }"#,
    );
    let explained = ok(
        beta,
        r#"mutation { allocate(input: {pool: "pub-z", owner: "Node/uplink"}, explain: true) { addresses notes } }"#,
    );
    let mut told = vec![explained.to_string()];
    for q in [
        "{ allocations { address owner manifest } }".to_owned(),
        r#"{ allocations(pool: "pub-z") { address owner manifest } }"#.to_owned(),
        r#"{ poolMap(name: "pub-z", owners: true) { held owners { address holder } } }"#.to_owned(),
    ] {
        told.push(ok(beta, &q).to_string());
    }
    for q in [
        r#"{ allocations(owner: "FloatingIP/acme/prod/fip-held") { address } }"#.to_owned(),
        format!(
            r#"mutation {{ allocate(input: {{pool: "pub-z", owner: "Node/x", address: "{acme}"}}) {{ addresses }} }}"#
        ),
        format!(
            r#"mutation {{ release(input: {{pool: "pub-z", address: "{acme}", owner: "Node/uplink"}}) }}"#
        ),
        format!(
            r#"mutation {{ setMac(input: {{pool: "pub-z", address: "{acme}", owner: "Node/uplink", mac: "02:00:00:00:00:01"}}) {{ manifest }} }}"#
        ),
    ] {
        told.push(ask(&server, beta, &q).1.to_string());
    }
    // `setMac` is refused (the address is not the uplink's), naming no holder.
    assert!(told[7].contains("\"CONFLICT\""), "{}", told[7]);
    // The acme floating IP's address is shown held on the map, its holder unnamed.
    assert!(told[3].contains("FloatingIP/…"), "{}", told[3]);
    for text in &told {
        assert!(
            !text.contains("acme") && !text.contains("fip-held") && !text.contains(FIP_HELD_UID),
            "{text}"
        );
    }
    assert!(
        told[1].contains("fip-b") && told[1].contains("Node/uplink"),
        "{}",
        told[1]
    );
    // Released by address (unguarded, forced, guarded by kind) or by selectors: never.
    for q in [
        format!(r#"mutation {{ release(input: {{pool: "pub-z", address: "{acme}"}}) }}"#),
        format!(
            r#"mutation {{ release(input: {{pool: "pub-z", address: "{acme}", force: true}}) }}"#
        ),
        format!(
            r#"mutation {{ release(input: {{pool: "pub-z", address: "{acme}", kind: "FloatingIP"}}) }}"#
        ),
    ] {
        assert_eq!(ok(beta, &q)["data"]["release"], 0, "{q}");
    }
    let (_, by_owner) = ask(
        &server,
        beta,
        r#"mutation { release(input: {owner: "FloatingIP/acme/prod/fip-held"}) }"#,
    );
    assert_eq!(code(&by_owner), "NOT_FOUND", "{by_owner}");
    assert!(!by_owner.to_string().contains("acme"), "{by_owner}");
    // Its tenant label selects nothing either (a `release -f` line's `labels` is this).
    let (_, by_label) = ask(
        &server,
        beta,
        r#"mutation { release(input: {labels: "pivirt.hu/tenant=acme.prod"}) }"#,
    );
    assert_eq!(code(&by_label), "NOT_FOUND", "{by_label}");
    assert!(!by_label.to_string().contains("fip-held"), "{by_label}");
    let (_, gone) = ask(
        &server,
        beta,
        r#"mutation { release(input: {kind: "FloatingIP"}) }"#,
    );
    assert_eq!(gone["data"]["release"], 1, "only beta's own: {gone}");
    assert!(owners(&store).contains(&"FloatingIP/acme/prod/fip-held".to_owned()));
    assert!(!owners(&store).contains(&"FloatingIP/beta/prod/fip-b".to_owned()));
    // A token of every namespace sees it, and is told who holds it.
    let seen = ok(
        ops,
        r#"{ poolMap(name: "pub-z", owners: true) { owners { holder } } }"#,
    );
    assert!(
        seen.to_string().contains("FloatingIP/acme/prod/fip-held"),
        "{seen}"
    );
    store.assert_check_clean();
}

/// A supernet in each tenant's namespace and one in the cluster scope, each holding one
/// prefix: `2001:db8:a::/64` in acme/prod's, `2001:db8:b::/64` in beta/prod's,
/// `2001:db8:c::/64` in the cluster's.
const SUPERNETS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: sn
  namespace: acme/prod
spec:
  cidr: 2001:db8:a::/48
  kind: supernet
  prefixLengths: {min: 56, max: 64}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: sn
  namespace: beta/prod
spec:
  cidr: 2001:db8:b::/48
  kind: supernet
  prefixLengths: {min: 56, max: 64}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: provider
spec:
  cidr: 2001:db8:c::/48
  kind: supernet
  prefixLengths: {min: 56, max: 64}
";

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn a_tenant_cannot_draw_another_namespaces_pool_map() {
    let store = fresh();
    let callers = Callers::make(&store);
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0"]);
    cmd.arg("--tokens").arg(&callers.tokens);
    let server = Server::spawn_as_is(cmd);
    let run = |caller: &str, args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ipamctl"))
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("IPAMCTL_STORE")
            .env_remove("IPAMCTL_SERVER")
            .env("IPAMCTL_TOKEN", callers.bearer(caller).unwrap())
            .args(["--server", &server.url, "-n", ACME, "pool", "show", "lan"])
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    // Another namespace's pool is not found, drawn or not, in every format: as `pool show`
    // of a pool that is not there, and nothing it holds is told.
    let (exit, told) = run("claim-other", &[]);
    assert_eq!(exit, Some(3), "{told}");
    for more in [
        &[][..],
        &["-o", "svg"],
        &["--within", "10.1.0.0/28"],
        &["-o", "json"],
    ] {
        let mut args = vec!["--map"];
        args.extend(more);
        let (exit, text) = run("claim-other", &args);
        assert_eq!(exit, Some(3), "{args:?}: {text}");
        assert_eq!(text, told, "{args:?}");
        assert!(!text.contains("10.1.0."), "{args:?}: {text}");
    }
    // The tenant's own token draws it, its holder named.
    let (exit, text) = run("read", &["--map"]);
    assert_eq!(exit, Some(0), "{text}");
    assert!(
        text.starts_with("acme/prod/lan 10.1.0.0/24: one cell per address\n"),
        "{text}"
    );
    let (exit, text) = run("read", &["--map", "-o", "svg"]);
    assert_eq!(exit, Some(0), "{text}");
    assert!(text.contains("Node/held"), "{text}");
    // Asked directly, the map of another namespace's pool is null.
    let query = r#"{ poolMap(name: "lan", namespace: "acme/prod", owners: true) { held owners { holder } } }"#;
    let (status, body) = ask(&server, callers.bearer("claim-other"), query);
    assert_eq!((status, code(&body)), (200, "OK".into()), "{body}");
    assert!(body["data"]["poolMap"].is_null(), "{body}");
    assert_no_secret_logged(&server, &callers);
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn a_tenant_never_sees_another_namespaces_supernet_or_prefix_claims() {
    let store = fresh();
    let file = store.root().join("supernets.yaml");
    std::fs::write(&file, SUPERNETS).unwrap();
    let out = store.ipamctl(["apply", "-f"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    for args in [
        &["-n", ACME, "allocate", "sn", "--owner", "FloatingIP/a"][..],
        &[
            "-n",
            "beta/prod",
            "allocate",
            "sn",
            "--owner",
            "FloatingIP/b",
        ],
        &["allocate", "provider", "--owner", "FloatingIP/c"],
    ] {
        let mut args = args.to_vec();
        args.extend(["--prefix-length", "64"]);
        let out = store.ipamctl(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    let callers = Callers::make(&store);
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0"]);
    cmd.arg("--tokens").arg(&callers.tokens);
    let server = Server::spawn_as_is(cmd);
    let supernet = "supernet { claimed largestFree freeBlocks { length count } }";
    let lists = format!(
        "{{ pools {{ namespace name {supernet} }} prefixClaims {{ namespace prefix owner manifest vpc }} }}"
    );
    // (caller, the prefix it sees, the ones it must not see)
    for (caller, own, others) in [
        (
            "claim-other",
            "2001:db8:b::",
            ["2001:db8:a::", "2001:db8:c::"],
        ),
        ("admin", "2001:db8:a::", ["2001:db8:b::", "2001:db8:c::"]),
    ] {
        let bearer = callers.bearer(caller);
        let (status, body) = ask(&server, bearer, &lists);
        assert_eq!(
            (status, code(&body)),
            (200, "OK".into()),
            "{caller}: {body}"
        );
        let text = body.to_string();
        let claims = body["data"]["prefixClaims"].as_array().unwrap();
        assert_eq!(claims.len(), 1, "{caller}: {body}");
        assert_eq!(claims[0]["prefix"], format!("{own}/64"), "{caller}: {body}");
        let supernets: Vec<&Value> = body["data"]["pools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["supernet"].is_object())
            .collect();
        assert_eq!(supernets.len(), 1, "{caller}: {body}");
        assert_eq!(
            supernets[0]["supernet"]["claimed"],
            json!([format!("{own}/64")]),
            "{caller}: {body}"
        );
        for other in others {
            assert!(!text.contains(other), "{caller} sees {other}: {body}");
        }
        // Asked by name, another namespace's (or the cluster's) supernet is not there.
        for (ns, name) in [
            (
                Some(if caller == "admin" { "beta/prod" } else { ACME }),
                "sn",
            ),
            (None, "provider"),
        ] {
            let at = ns.map_or(String::new(), |ns| format!(", namespace: \"{ns}\""));
            let query = format!(
                "{{ pool(name: \"{name}\"{at}) {{ {supernet} }} poolShown(name: \"{name}\"{at}) {{ {supernet} claims {{ prefix manifest vpc }} }} }}"
            );
            let (status, body) = ask(&server, bearer, &query);
            assert_eq!(status, 200, "{caller}: {body}");
            assert!(body["data"]["pool"].is_null(), "{caller}: {body}");
            assert!(body["data"]["poolShown"].is_null(), "{caller}: {body}");
            if let Some(ns) = ns {
                let query = format!("{{ prefixClaims(namespace: \"{ns}\") {{ prefix }} }}");
                let (_, body) = ask(&server, bearer, &query);
                assert_eq!(code(&body), "NOT_FOUND", "{caller}: {body}");
                assert!(!body.to_string().contains("2001:db8"), "{caller}: {body}");
            }
        }
        // Its own supernet, shown, holds its own claim.
        let own_ns = if caller == "admin" { ACME } else { "beta/prod" };
        let query = format!(
            "{{ poolShown(name: \"sn\", namespace: \"{own_ns}\") {{ {supernet} claims {{ prefix }} }} }}"
        );
        let (_, body) = ask(&server, bearer, &query);
        assert_eq!(
            body["data"]["poolShown"]["claims"],
            json!([{"prefix": format!("{own}/64")}]),
            "{caller}: {body}"
        );
    }
    // A caller that sees every namespace and the cluster sees all three.
    let (_, body) = ask(&server, callers.bearer("cluster-admin"), &lists);
    assert_eq!(
        body["data"]["prefixClaims"].as_array().map(Vec::len),
        Some(3),
        "{body}"
    );
    assert_no_secret_logged(&server, &callers);
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn a_cluster_range_or_uplink_names_its_vpc_only_to_a_caller_that_sees_the_vpcs_namespace() {
    let store = fresh();
    let file = store.root().join("supernets.yaml");
    std::fs::write(&file, SUPERNETS).unwrap();
    let out = store.ipamctl(["apply", "-f"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = store
        .ipamctl([
            "vpc",
            "create",
            "blue",
            "-n",
            "acme/dev",
            "--uplink-zone",
            "z",
        ])
        .args(["--from-pool", "provider", "--prefix-length", "56"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let callers = Callers::make(&store);
    // The cluster scope, and beta's namespaces only.
    let beta = callers.add(
        &store,
        "beta-cluster",
        &["--namespace", "beta/*", "--verbs", "read", "--cluster"],
    );
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0"]);
    cmd.arg("--tokens").arg(&callers.tokens);
    let server = Server::spawn_as_is(cmd);
    // The router's uplink in the cluster's public pool is named by its VPC the same way.
    let query = r#"{ prefixClaims { prefix vpc } poolShown(name: "provider") { claims { prefix vpc } }
        allocations(pool: "pub-z") { owner vpc }
        poolMap(name: "pub-z", owners: true) { owners { holder } } }"#;
    // Nor does a manifest name it, to a caller that does not see the VPC's namespace.
    let manifests = r#"{ prefixClaims { manifest } poolShown(name: "provider") { claims { manifest } }
        allocations(pool: "pub-z") { manifest } }"#;
    let (status, body) = ask(&server, Some(&beta), manifests);
    assert_eq!((status, code(&body)), (200, "OK".into()), "{body}");
    let text = body.to_string();
    assert!(
        !text.contains("acme/dev") && !text.contains("ipamctl.pivirt.hu/vpc"),
        "{body}"
    );
    let (_, body) = ask(&server, callers.bearer("cluster-admin"), manifests);
    assert!(body.to_string().contains("acme/dev/blue"), "{body}");
    for (bearer, vpc) in [
        (beta.as_str(), Value::Null),
        (
            callers.bearer("cluster-admin").unwrap(),
            json!("acme/dev/blue"),
        ),
    ] {
        let (status, body) = ask(&server, Some(bearer), query);
        assert_eq!((status, code(&body)), (200, "OK".into()), "{body}");
        let range = json!([{"prefix": "2001:db8:c::/56", "vpc": vpc}]);
        assert_eq!(body["data"]["prefixClaims"], range, "{body}");
        assert_eq!(body["data"]["poolShown"]["claims"], range, "{body}");
        let uplinks: Vec<&Value> = body["data"]["allocations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["owner"] == "VPC/router")
            .collect();
        assert_eq!(
            uplinks,
            [&json!({"owner": "VPC/router", "vpc": vpc})],
            "{body}"
        );
        // The map's tooltip names the uplink's holder the same way.
        let holders: Vec<&str> = body["data"]["poolMap"]["owners"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|o| o["holder"].as_str())
            .filter(|h| h.starts_with("VPC"))
            .collect();
        assert_eq!(holders.len(), 1, "{body}");
        let named = holders[0].starts_with("VPC acme/dev/blue (uid ");
        assert_eq!(named, !vpc.is_null(), "{body}");
    }
    assert!(
        !server.log().contains(beta.as_str()),
        "beta's secret is in the log"
    );
    assert_no_secret_logged(&server, &callers);
}

/// No secret of `callers` reaches the server's log, whatever it answered.
/// `ipamctl --server` with `bearer`, nothing from the environment.
fn remote(server: &Server, bearer: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ipamctl"));
    for var in [
        "IPAMCTL_STATE_DIR",
        "IPAMCTL_STORE",
        "IPAMCTL_SERVER",
        "IPAMCTL_TOKEN",
    ] {
        cmd.env_remove(var);
    }
    cmd.args(["--server", &server.url])
        .args(args)
        .env("IPAMCTL_TOKEN", bearer)
        .output()
        .unwrap()
}

/// The owners of every allocation, as `list -A -o json` names them.
fn owners(store: &Store) -> Vec<String> {
    let out = store
        .ipamctl(["list", "-A", "-o", "json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut owners: Vec<String> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let o = &a["spec"]["owner"];
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["name"].as_str().unwrap()
            )
        })
        .collect();
    owners.sort();
    owners
}

#[test]
fn a_tenant_creates_and_deletes_no_public_pool_and_releases_by_label_only_its_own() {
    let store = fresh();
    let out = store
        .ipamctl(["-n", "beta/prod", "allocate", "lan", "--owner", "Node/b1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let callers = Callers::make(&store);
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0"]);
    cmd.arg("--tokens").arg(&callers.tokens);
    let server = Server::spawn_as_is(cmd);
    let run = |caller: &str, args: &str| {
        let args: Vec<&str> = args.split(' ').collect();
        remote(&server, callers.bearer(caller).unwrap(), &args)
    };
    let create = "pool create pub-empty --cidr 192.0.2.0/28 --zone y";
    // A tenant's admin: the cluster scope is not its own, so the pool is not found, as any
    // object there, and nothing changes.
    for caller in ["read", "claim-own", "admin"] {
        let before = snapshot(&store);
        for args in [create, "pool delete pub-z", "pool delete pub-z --dry-run"] {
            let out = run(caller, args);
            assert_eq!(out.status.code(), Some(3), "{caller}: {args}: {out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("not found (cluster-scoped)"), "{err}");
        }
        assert_eq!(snapshot(&store), before, "{caller} changed the state");
    }
    let out = run("claim-other", "pool delete lan -n acme/prod");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    // The cluster's admin creates it, and deletes it while it holds nothing.
    let out = run("cluster-admin", create);
    assert!(out.status.success(), "{out:?}");
    let out = run("admin", "pool delete pub-empty");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let out = run("cluster-admin", "pool delete pub-empty");
    assert!(out.status.success(), "{out:?}");
    // A label selector without `-n` reaches the caller's namespaces only: `Node/held` of
    // acme/prod goes; beta's `Node/b1` and the cluster pool's floating IP stay.
    let all = owners(&store);
    assert_eq!(
        all,
        ["FloatingIP/acme/prod/fip-held", "Node/b1", "Node/held"],
        "{all:?}"
    );
    let selector = "release -l pivirt.hu/managed-by=director";
    let out = run("claim-other", &format!("-n acme/prod {selector}"));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let out = run("claim-own", &format!("-n beta/prod {selector}"));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(owners(&store), all);
    let out = run("claim-own", &format!("{selector} -o name"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(owners(&store), ["FloatingIP/acme/prod/fip-held", "Node/b1"]);
    let out = run("claim-own", selector);
    assert_eq!(
        out.status.code(),
        Some(3),
        "nothing of its own left: {out:?}"
    );
    assert_no_secret_logged(&server, &callers);
}

fn assert_no_secret_logged(server: &Server, callers: &Callers) {
    let log = server.log();
    for (caller, bearer) in &callers.bearers {
        if let Some(secret) = bearer {
            assert!(
                !log.contains(secret.as_str()),
                "{caller}'s secret is in the log"
            );
        }
    }
}
