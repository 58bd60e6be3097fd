//! A tenant's floating IPs on the command line (issue 42): `allocate --tenant NS` claims
//! `FloatingIP/<name>` for a namespace from the cluster's public pools (of a zone, or one
//! pool), held as `FloatingIP/NS/<name>` with the label `pivirt.hu/tenant`; `list` and
//! `release` select by `--tenant`, the batch takes a `tenant` field, and `check` reports a
//! hand edit that breaks the rule. Two tenants who name a floating IP alike never share it,
//! and neither is refused because of the other. `vpc create --uplink-zone` claims the VPC
//! router's uplink, and `vpc delete` releases it. Under `IPAMCTL_TEST_STORE=postgres` every
//! command runs on PostgreSQL with the same assertions (`.ci/run`).

mod common;

use common::{Test, code, list_items, pg};

/// `pub-a` (192.0.2.0/29) and `pub-b` (198.51.100.0/29) public in zone `eu`, `pub-c`
/// (203.0.113.0/29) public without a zone, and `web`, a private pool of `acme`.
const POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: pub-a
spec:
  cidr: 192.0.2.0/29
  kind: public
  zone: eu
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: pub-b
spec:
  cidr: 198.51.100.0/29
  kind: public
  zone: eu
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: pub-c
spec:
  cidr: 203.0.113.0/29
  kind: public
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: web
  namespace: acme
spec:
  cidr: 10.1.0.0/24
  kind: private
";

/// `allocate --zone eu --tenant TENANT --owner FloatingIP/fip-web`.
fn fip_web(tenant: &str) -> [&str; 7] {
    [
        "allocate",
        "--zone",
        "eu",
        "--tenant",
        tenant,
        "--owner",
        "FloatingIP/fip-web",
    ]
}

/// [`pools`] after tenants `acme` and `beta` each claimed `FloatingIP/fip-web`: 192.0.2.1
/// and 192.0.2.2.
fn two_fip_webs() -> Test {
    pools()
        .args(fip_web("acme"))
        .stdout("192.0.2.1\n")
        .run()
        .then()
        // Tenant B's `fip-web`: its own address, neither waiting on nor refused because of
        // A's (an owner's name is one identity per pool: A's name is `acme/fip-web`).
        .args(fip_web("beta"))
        .stdout("192.0.2.2\n")
        .run()
        .then()
}

fn pools() -> Test {
    Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(POOLS)
        .run()
        .then()
}

/// `(owner, address, tenant label)` of every allocation `list -o json` prints.
fn held(json: &str) -> Vec<(String, String, String)> {
    list_items(json)
        .iter()
        .map(|item| {
            (
                item["spec"]["owner"]["name"].as_str().unwrap().to_owned(),
                item["spec"]["address"].as_str().unwrap().to_owned(),
                item["metadata"]["labels"]["pivirt.hu/tenant"]
                    .as_str()
                    .unwrap_or("-")
                    .to_owned(),
            )
        })
        .collect()
}

#[test]
fn two_tenants_who_name_a_floating_ip_alike_never_share_it_and_a_re_ask_answers_the_same() {
    let ran = two_fip_webs()
        .args(fip_web("acme"))
        .stdout("192.0.2.1\n")
        .run()
        .then()
        .args([
            "allocate",
            "--zone",
            "eu",
            "--tenant",
            "beta",
            "--owner",
            "FloatingIP/fip-web",
            "-o",
            "json",
        ])
        .run();
    let json: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["spec"]["address"], "192.0.2.2", "{}", ran.stdout);
    assert_eq!(json["metadata"]["labels"]["pivirt.hu/tenant"], "beta");
    let ran = ran.then().args(["list", "-o", "json"]).run();
    assert_eq!(
        held(&ran.stdout),
        [
            ("acme/fip-web".into(), "192.0.2.1".into(), "acme".into()),
            ("beta/fip-web".into(), "192.0.2.2".into(), "beta".into()),
        ]
    );
    // Each tenant lists only its own, by `--tenant` or by the label.
    let ran = ran
        .then()
        .args(["list", "--tenant", "beta", "-o", "json"])
        .run();
    assert_eq!(
        held(&ran.stdout),
        [("beta/fip-web".into(), "192.0.2.2".into(), "beta".into())]
    );
    let ran = ran
        .then()
        .args(["list", "-l", "pivirt.hu/tenant=acme", "-o", "json"])
        .run();
    assert_eq!(
        held(&ran.stdout),
        [("acme/fip-web".into(), "192.0.2.1".into(), "acme".into())]
    );
    ran.then().args(["check"]).run();
}

#[test]
fn a_tenant_releases_only_its_own_floating_ip() {
    let test = pools()
        .args(fip_web("acme"))
        .stdout("192.0.2.1\n")
        .run()
        .then();
    // Another tenant asking to release `fip-web` selects its own, which it does not hold:
    // not found, and A's is left as it was.
    let test = test
        .args([
            "release",
            "--tenant",
            "beta",
            "--owner",
            "FloatingIP/fip-web",
        ])
        .fails(code::NOT_FOUND)
        .run()
        .then()
        .args([
            "release",
            "--tenant",
            "beta",
            "--owner",
            "FloatingIP/fip-web",
            "--ignore-not-found",
        ])
        .unchanged()
        .run()
        .then();
    // A subtree's tenant is another tenant: `acme/prod` selects nothing of `acme`'s.
    let test = test
        .args(["list", "--tenant", "acme/prod", "-o", "json"])
        .run()
        .then()
        .args(["release", "--tenant", "acme/prod"])
        .fails(code::NOT_FOUND)
        .run()
        .then();
    let ran = test
        .args([
            "release",
            "--tenant",
            "acme",
            "--owner",
            "FloatingIP/fip-web",
        ])
        .stdout("ipallocation/pub-a-192-0-2-1 released\n")
        .run();
    let ran = ran.then().args(["list", "-o", "json"]).run();
    assert_eq!(held(&ran.stdout), []);
}

#[test]
fn a_tenant_claims_from_a_public_pool_only_and_a_bad_request_changes_nothing() {
    let test = pools()
        .args([
            "allocate",
            "pub-c",
            "--tenant",
            "acme",
            "--owner",
            "FloatingIP/fip-db",
        ])
        .stdout("203.0.113.1\n")
        .run()
        .then()
        .args([
            "allocate",
            "web",
            "-n",
            "acme",
            "--tenant",
            "acme",
            "--owner",
            "FloatingIP/x",
        ])
        .fails(code::INVALID)
        .run()
        .then();
    // A private pool named from the cluster scope does not exist there.
    let ran = test
        .args([
            "allocate",
            "--tenant",
            "acme",
            "--owner",
            "VirtualMachine/vm-1/0",
            "--zone",
            "eu",
        ])
        .fails(code::INVALID)
        .run();
    assert!(
        ran.stderr.contains("`--tenant` claims a floating IP"),
        "{}",
        ran.stderr
    );
    let ran = ran
        .then()
        .args([
            "allocate",
            "--zone",
            "eu",
            "--tenant",
            "Acme",
            "--owner",
            "FloatingIP/x",
        ])
        .fails(code::INVALID)
        .run();
    assert!(
        ran.stderr
            .starts_with("error: --tenant: invalid namespace `Acme`"),
        "{}",
        ran.stderr
    );
    // The owner spelled whole is the same claim as `--tenant`.
    ran.then()
        .args(["allocate", "pub-c", "--owner", "FloatingIP/acme/fip-db"])
        .stdout("203.0.113.1\n")
        .run();
}

#[test]
fn the_batch_takes_the_tenant_field() {
    let ran = pools()
        .args(fip_web("acme"))
        .stdout("192.0.2.1\n")
        .run()
        .then()
        .args(["allocate", "-f", "-", "-o", "json"])
        .stdin(
            "{\"zone\": \"eu\", \"tenant\": \"beta\", \"owner\": \"FloatingIP/fip-web\"}\n\
             {\"zone\": \"eu\", \"tenant\": \"acme\", \"owner\": \"FloatingIP/fip-web\"}\n\
             {\"pool\": \"pub-c\", \"tenant\": \"beta\", \"owner\": \"FloatingIP/fip-db\"}\n",
        )
        .run();
    let results: Vec<serde_json::Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(&str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["address"].as_str().unwrap(),
                r["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("192.0.2.2", "created"),
            ("192.0.2.1", "existing"),
            ("203.0.113.1", "created")
        ],
        "{}",
        ran.stdout
    );
    let ran = ran
        .then()
        .args(["release", "-f", "-"])
        .stdin("{\"tenant\": \"beta\", \"owner\": \"FloatingIP/fip-web\"}\n")
        .run();
    let ran = ran
        .then()
        .args(["list", "--tenant", "beta", "-o", "json"])
        .run();
    assert_eq!(
        held(&ran.stdout),
        [("beta/fip-db".into(), "203.0.113.1".into(), "beta".into())]
    );
}

/// A `release -f` line's `labels` is `release -l`: a tenant's floating IPs selected by
/// their tenant label, the same rules (not next to an ADDRESS, a selector that does not
/// parse is exit 2), and a teardown run again finds nothing to release. Beta's is left.
#[test]
fn release_batch_lines_select_by_label() {
    let test = two_fip_webs();
    let lines = test.input(
        "labels.jsonl",
        concat!(
            r#"{"labels":"pivirt.hu/tenant=acme"}"#,
            "\n",
            r#"{"pool":"pub-a","address":"192.0.2.2","labels":"pivirt.hu/tenant=beta"}"#,
            "\n",
            r#"{"labels":"a b=c"}"#,
            "\n",
            r#"{"labels":"pivirt.hu/tenant=acme"}"#,
            "\n",
        ),
    );
    let ran = test
        .args(["release", "-f", &lines])
        .status(code::FAILURE)
        .run();
    let rows: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(rows.len(), 5, "{}", ran.stdout);
    assert!(
        rows[1].contains(" 192.0.2.1 ") && rows[1].ends_with(" released"),
        "{}",
        ran.stdout
    );
    assert!(
        rows[2].ends_with("error (exit 2): `--within` and `-l` select allocations; next to an ADDRESS only `--owner`, `--uid` and `--kind` guard it"),
        "{}",
        ran.stdout
    );
    assert!(
        rows[3].ends_with("error (exit 2): --selector: `a b=c`: `a b` is not a label key (e.g. `tier` or `pivirt.hu/managed-by`)"),
        "{}",
        ran.stdout
    );
    assert!(
        rows[4].ends_with("error (exit 3): no allocation matches the selectors; nothing released"),
        "{}",
        ran.stdout
    );
    assert_eq!(ran.stderr, "error: 3 of 4 requests failed (exit 1)\n");
    let ran = ran.then().args(["list", "-o", "json"]).run();
    assert_eq!(
        held(&ran.stdout),
        [("beta/fip-web".into(), "192.0.2.2".into(), "beta".into())]
    );
}

#[test]
fn check_reports_a_floating_ip_whose_label_and_tenant_disagree() {
    let test = pools()
        .args(fip_web("acme"))
        .stdout("192.0.2.1\n")
        .run()
        .then()
        .args(["allocate", "--zone", "eu", "--owner", "FloatingIP/plain"])
        .stdout("192.0.2.2\n")
        .run()
        .then()
        .file_store_only();
    let tenant = "cluster/ipallocations/pub-a-192-0-2-1.yaml";
    let plain = "cluster/ipallocations/pub-a-192-0-2-2.yaml";
    let text = test.read(tenant);
    assert!(text.contains("    pivirt.hu/tenant: acme\n"), "{text}");
    test.write(tenant, &text.replace("    pivirt.hu/tenant: acme\n", ""));
    let text = test.read(plain);
    test.write(
        plain,
        &text.replace(
            "    pivirt.hu/managed-by: director\n",
            "    pivirt.hu/managed-by: director\n    pivirt.hu/tenant: beta\n",
        ),
    );
    let ran = test.args(["check"]).status(code::FAILURE).run();
    for (file, message) in [
        (
            tenant,
            "owner `FloatingIP/acme/fip-web` is tenant `acme`'s floating IP, but its label `pivirt.hu/tenant` is missing: was the file edited by hand? add the label `pivirt.hu/tenant: acme`",
        ),
        (
            plain,
            "label `pivirt.hu/tenant` says tenant `beta`, but owner `FloatingIP/plain` names no tenant (a tenant's floating IP is `FloatingIP/<tenant>/<name>`, claimed with `--tenant`): was the file edited by hand? remove the label",
        ),
    ] {
        assert!(
            ran.stdout
                .lines()
                .any(|l| l.starts_with(&format!("error     {file} ")) && l.ends_with(message)),
            "{}",
            ran.stdout
        );
    }
}

#[test]
fn vpc_create_claims_its_routers_uplink_from_a_zone_and_vpc_delete_releases_it() {
    let ran = pools()
        .args([
            "vpc",
            "create",
            "main",
            "-n",
            "acme",
            "--cidr",
            "10.9.0.0/24",
            "--uplink-zone",
            "eu",
            "--uid",
            "7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10",
        ])
        .stdout("7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10\n")
        .run();
    assert!(
        ran.stderr
            .contains("ipallocation/pub-a-192-0-2-1 created (uplink 192.0.2.1 in pool `pub-a`)"),
        "{}",
        ran.stderr
    );
    // The same VPC again: the same uplink.
    let ran = ran
        .then()
        .args([
            "vpc",
            "create",
            "main",
            "-n",
            "acme",
            "--cidr",
            "10.9.0.0/24",
            "--uplink-zone",
            "eu",
        ])
        .stdout("7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10\n")
        .run();
    assert!(
        ran.stderr
            .contains("ipallocation/pub-a-192-0-2-1 existing (uplink 192.0.2.1 in pool `pub-a`)"),
        "{}",
        ran.stderr
    );
    let ran = ran
        .then()
        .args(["list", "--kind", "VPC", "-o", "json"])
        .run();
    assert_eq!(
        held(&ran.stdout),
        [("router".into(), "192.0.2.1".into(), "-".into())]
    );
    let ran = ran
        .then()
        .args(["vpc", "delete", "main", "-n", "acme"])
        .run();
    assert!(
        ran.stdout.contains("ipallocation/pub-a-192-0-2-1 released"),
        "{}",
        ran.stdout
    );
    ran.then()
        .args(["list", "--kind", "VPC"])
        .stderr("No allocations found.\n")
        .run();
}

/// On PostgreSQL, a hand edit of a row's manifest (another writer's `UPDATE`, which the
/// row trigger lets through: the label is no column) is what `check` reports there.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn check_on_postgres_reports_a_tenant_label_edited_away() {
    let db = pg::Db::new();
    let dir = tempfile::tempdir().unwrap();
    db.apply(dir.path(), POOLS);
    for tenant in ["acme", "beta"] {
        let out = db.run([
            "allocate",
            "--zone",
            "eu",
            "--tenant",
            tenant,
            "--owner",
            "FloatingIP/fip-web",
        ]);
        assert!(out.status.success(), "{}", pg::stderr(&out));
    }
    db.assert_check_clean();
    db.sql()
        .batch_execute(
            "UPDATE ipamctl.allocations
             SET manifest = convert_to(replace(convert_from(manifest, 'UTF8'),
                            '    pivirt.hu/tenant: beta\n', '    pivirt.hu/tenant: acme\n'), 'UTF8')
             WHERE owner_name = 'beta/fip-web'",
        )
        .unwrap();
    let out = db.run(["check"]);
    assert_eq!(
        out.status.code(),
        Some(code::FAILURE),
        "{}",
        pg::stderr(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "owner `FloatingIP/beta/fip-web` is tenant `beta`'s floating IP, but its label `pivirt.hu/tenant` is `acme`, not `beta`: was the file edited by hand? set the label back to `beta`"
        ),
        "{stdout}"
    );
    // The label does not make it A's: tenant A lists and releases only its own.
    let out = db.run(["list", "--tenant", "acme", "-o", "name"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ipallocation/pub-a-192-0-2-1\n",
        "{}",
        pg::stderr(&out)
    );
}

/// `pool create` (the API's `createPublicPool`): a public pool, `unchanged` when asked
/// again as it stands; another spec under its name, an overlap or `-n` refused, nothing
/// written; a tenant then claims from it.
#[test]
fn pool_create_makes_a_public_pool_once_and_a_tenant_claims_from_it() {
    pools()
        .args(["pool", "create", "edge", "--cidr", "100.64.0.0/29", "--gateway", "100.64.0.1", "--exclude", "100.64.0.2", "--zone", "west"])
        .stdout("ipampool/edge created\n")
        .run()
        .then()
        .args(["pool", "create", "edge", "--cidr", "100.64.0.0/29", "--gateway", "100.64.0.1", "--exclude", "100.64.0.2", "--zone", "west"])
        .stdout("ipampool/edge unchanged\n")
        .run()
        .then()
        .args(["pool", "create", "edge", "--cidr", "100.64.0.0/28"])
        .fails(code::CONFLICT)
        .stderr("error: pool `edge` exists with another spec (public pool 100.64.0.0/29); a create does not change a pool\nhint: `ipamctl pool show edge` shows it; `apply` of its manifest changes it, checking what it holds\n")
        .run()
        .then()
        .args(["pool", "create", "edge2", "--cidr", "192.0.2.0/30"])
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(["pool", "create", "edge2", "--cidr", "100.65.0.0/30", "-n", "acme"])
        .fails(code::INVALID)
        .run()
        .then()
        .args(["pool", "create", "edge2", "--cidr", "100.65.0.0/30", "--gateway", "10.0.0.1"])
        .fails(code::INVALID)
        .run()
        .then()
        .args(["allocate", "--zone", "west", "--tenant", "acme", "--owner", "FloatingIP/fip-web"])
        .stdout("100.64.0.3\n")
        .run();
}

/// `release POOL ADDRESS --tenant T --owner FloatingIP/NAME` frees T's floating IP there
/// and nobody else's: a sub-namespace's of the same name is another owner.
#[test]
fn a_release_by_address_is_guarded_by_the_tenants_owner() {
    pools()
        .args(fip_web("acme/prod"))
        .stdout("192.0.2.1\n")
        .run()
        .then()
        .args([
            "release",
            "pub-a",
            "192.0.2.1",
            "--tenant",
            "acme",
            "--owner",
            "FloatingIP/fip-web",
        ])
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(["release", "pub-a", "192.0.2.1", "--tenant", "acme"])
        .fails(code::INVALID)
        .run()
        .then()
        .args([
            "release",
            "pub-a",
            "192.0.2.1",
            "--tenant",
            "acme/prod",
            "--owner",
            "FloatingIP/fip-web",
        ])
        .stdout("ipallocation/pub-a-192-0-2-1 released\n")
        .run();
}

/// Real processes at once: 4 tenants × 3 processes each claim `fip-web` in the same zone
/// (on PostgreSQL under `IPAMCTL_TEST_STORE=postgres`). Each tenant ends with one address,
/// every process of a tenant answered it, no two tenants share one, nobody was refused, and
/// `check` is clean. Bounded: 12 processes, each waited for.
#[test]
fn tenants_racing_for_one_name_each_get_their_own_address() {
    let test = pools();
    let db = common::on_postgres().then(|| {
        let db = pg::Db::new();
        let dir = tempfile::tempdir().unwrap();
        db.apply(dir.path(), POOLS);
        db
    });
    let tenants = ["t1", "t2", "t3", "t4"];
    let children: Vec<(&str, std::process::Child)> = tenants
        .iter()
        .flat_map(|t| [*t; 3])
        .map(|tenant| {
            let args = fip_web(tenant);
            let cmd = match &db {
                Some(db) => db.cmd(args),
                None => test.command(args),
            };
            (tenant, common::spawn_piped(cmd))
        })
        .collect();
    let mut answered: std::collections::BTreeMap<&str, std::collections::BTreeSet<String>> =
        Default::default();
    for (tenant, child) in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{tenant}: {out:?}");
        answered
            .entry(tenant)
            .or_default()
            .insert(String::from_utf8(out.stdout).unwrap());
    }
    let addresses: std::collections::BTreeSet<&String> =
        answered.values().flat_map(|a| a.iter()).collect();
    assert!(
        answered.values().all(|a| a.len() == 1) && addresses.len() == tenants.len(),
        "each tenant one address of its own: {answered:?}"
    );
    match &db {
        Some(db) => db.assert_check_clean(),
        None => {
            test.args(["check"]).run();
        }
    }
}
