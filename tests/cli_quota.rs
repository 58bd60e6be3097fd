//! Quotas (issue 45): a `Quota` manifest caps what a namespace holds; a claim at the
//! ceiling is exit 7 and claims nothing, whichever writer makes it, and 64 processes racing
//! for a ceiling of 10 leave exactly 10. Real processes, on the file store and (with
//! `IPAMCTL_TEST_STORE=postgres`) on PostgreSQL for the commands run through the harness;
//! `tests/pg_quota.rs` races processes on a real database.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Test, code};

/// An IPv4 and an IPv6 pool of namespace `acme`, a public pool of zone `a`, a cluster
/// supernet, and `acme`'s quota with `hard` (YAML lines under `hard:`).
fn state(hard: &str) -> Test {
    let manifests = format!(
        "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: web
  namespace: acme
spec:
  kind: private
  cidr: 10.0.0.0/24
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: web-v6
  namespace: acme
spec:
  kind: private
  cidr: 2001:db8:7::/64
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: public-a
spec:
  kind: public
  zone: a
  cidr: 192.0.2.0/26
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: provider
spec:
  kind: supernet
  cidr: 10.128.0.0/9
  prefixLengths:
    min: 16
    max: 24
---
apiVersion: pivirt.hu/v1
kind: Quota
metadata:
  name: compute
  namespace: acme
spec:
  hard:
{hard}"
    );
    Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(&manifests)
        .stdout("ipampool/web created\nipampool/web-v6 created\nipampool/public-a created\nipampool/provider created\nquota/compute created\n")
        .run()
        .then()
}

/// `vpc create NAME -n acme` with `more`.
fn vpc_create(name: &str, more: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["vpc", "create", name, "-n", "acme"]
        .map(String::from)
        .to_vec();
    args.extend(more.iter().map(|a| a.to_string()));
    args
}

fn vm(i: usize) -> String {
    format!("VirtualMachine/vm-{i}/0")
}

/// The addresses namespace `acme` holds in `web`.
fn held(test: &Test) -> Vec<serde_json::Value> {
    let out = test
        .command(["list", "-n", "acme", "--pool", "web", "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    common::list_items(&String::from_utf8_lossy(&out.stdout))
}

#[test]
fn a_claim_at_the_ceiling_is_exit_7_naming_the_quota_and_a_holder_asking_again_is_answered() {
    let mut test = state("    addresses: 2\n");
    for i in 0..2 {
        test = test
            .args(["allocate", "web", "-n", "acme", "--owner", &vm(i)])
            .stdout(&format!("10.0.0.{}\n", i + 1))
            .run()
            .then();
    }
    test.args(["allocate", "web", "-n", "acme", "--owner", &vm(2)])
        .fails(code::QUOTA)
        .stderr(
            "error: quota `compute` of namespace `acme` allows 2 addresses and 2 are held; nothing was claimed\n\
             hint: release what the namespace no longer needs, or raise the quota (`ipamctl quota list` shows what is held)\n",
        )
        .unchanged()
        .run()
        .then()
        // A holder at the ceiling is never counted twice.
        .args(["allocate", "web", "-n", "acme", "--owner", &vm(1)])
        .stdout("10.0.0.2\n")
        .run()
        .then()
        // Room again once one is released.
        .args(["release", "web", "10.0.0.1", "-n", "acme", "--owner", &vm(0)])
        .run()
        .then()
        .args(["allocate", "web", "-n", "acme", "--owner", &vm(2)])
        .stdout("10.0.0.1\n")
        .run();
}

#[test]
fn every_writer_is_refused_at_the_ceiling() {
    let test = state("    addresses: 3\n    floatingIPs: 1\n    prefixes: 1\n");
    // The batch: the line over the ceiling fails alone, the holder's line is `existing`.
    let batch = "{\"pool\":\"web\",\"namespace\":\"acme\",\"owner\":\"VirtualMachine/b-1/0\"}\n\
                 {\"pool\":\"web\",\"namespace\":\"acme\",\"owner\":\"VirtualMachine/b-2/0\"}\n";
    let test = test
        .args(["allocate", "-f", "-"])
        .stdin(batch)
        .run()
        .then()
        .args(["allocate", "-f", "-", "-o", "json"])
        .stdin(
            "{\"pool\":\"web\",\"namespace\":\"acme\",\"owner\":\"VirtualMachine/b-3/0\"}\n\
             {\"pool\":\"web\",\"namespace\":\"acme\",\"owner\":\"VirtualMachine/b-4/0\"}\n\
             {\"pool\":\"web\",\"namespace\":\"acme\",\"owner\":\"VirtualMachine/b-1/0\"}\n",
        )
        .status(code::QUOTA)
        .run()
        .then();
    assert_eq!(held(&test).len(), 3, "the batch's second line was refused");
    // Dual stack: one address per family; at the ceiling the IPv4 claim is undone too.
    let test = test
        .args(["allocate", "web", "web-v6", "-n", "acme", "--owner", &vm(9)])
        .fails(code::QUOTA)
        .unchanged()
        .run()
        .then();
    // A tenant's floating IP: `floatingIPs`, not `addresses`.
    let test = test
        .args([
            "allocate",
            "--zone",
            "a",
            "--tenant",
            "acme",
            "--owner",
            "FloatingIP/fip-1",
        ])
        .stdout("192.0.2.1\n")
        .run()
        .then()
        .args([
            "allocate",
            "--zone",
            "a",
            "--tenant",
            "acme",
            "--owner",
            "FloatingIP/fip-2",
        ])
        .fails(code::QUOTA)
        .unchanged()
        .run()
        .then()
        // Another tenant's floating IPs are not acme's.
        .args([
            "allocate",
            "--zone",
            "a",
            "--tenant",
            "zeta",
            "--owner",
            "FloatingIP/fip-2",
        ])
        .stdout("192.0.2.2\n")
        .run()
        .then();
    // A VPC's range from a cluster supernet: `prefixes` of the VPC's namespace.
    let vpc = |name: &str| vpc_create(name, &["--from-pool", "provider", "--prefix-length", "24"]);
    test.args(vpc("blue"))
        .run()
        .then()
        .args(vpc("green"))
        .fails(code::QUOTA)
        .run()
        .then()
        .args(["check"])
        .run();
}

#[test]
fn lowering_a_quota_below_what_is_held_warns_and_check_reports_a_hand_edit() {
    let mut test = state("    addresses: 5\n");
    for i in 0..3 {
        test = test
            .args(["allocate", "web", "-n", "acme", "--owner", &vm(i)])
            .run()
            .then();
    }
    let lowered = "apiVersion: pivirt.hu/v1\nkind: Quota\nmetadata:\n  name: compute\n  namespace: acme\nspec:\n  hard:\n    addresses: 2\n";
    let test = test
        .args(["apply", "-f", "-"])
        .stdin(lowered)
        .stdout("quota/compute configured\n")
        .stderr("warning: quota `compute` of namespace `acme` allows 2 addresses but 3 are held; claims charged to it are refused until the namespace is back under\n")
        .run()
        .then()
        .args(["allocate", "web", "-n", "acme", "--owner", &vm(7)])
        .fails(code::QUOTA)
        .unchanged()
        .run()
        .then();
    let out = test.command(["check"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("quotas/compute.yaml")
            && text.contains("namespace `acme` holds 3 addresses but this quota allows 2"),
        "{text}"
    );
}

#[test]
fn check_reports_a_namespace_a_hand_edit_took_over_its_quota() {
    let test = state("    addresses: 1\n")
        .file_store_only()
        .args(["allocate", "web", "-n", "acme", "--owner", &vm(0)])
        .run()
        .then();
    let clean = test.command(["check"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&clean.stdout).contains("quotas/"),
        "{clean:?}"
    );
    // A hand edit (or a merge) adds a second allocation, which no claim would have made.
    let file = "namespaces/acme/ipallocations/web-10-0-0-1.yaml";
    let copy = test
        .read(file)
        .replace("10.0.0.1", "10.0.0.9")
        .replace("web-10-0-0-1", "web-10-0-0-9")
        .replace("vm-0", "vm-5");
    test.write("namespaces/acme/ipallocations/web-10-0-0-9.yaml", &copy);
    let out = test.command(["check"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("namespaces/acme/quotas/compute.yaml")
            && text.contains("holds 2 addresses but this quota allows 1"),
        "{text}"
    );
}

/// 64 processes at once, 64 owners, a ceiling of 10: exactly 10 claimed, 54 exit 7, and
/// no more than 10 held afterwards. The quota lock serialises the count and the claim.
#[test]
fn sixty_four_processes_racing_for_a_ceiling_of_ten_leave_exactly_ten() {
    let test = state("    addresses: 10\n").file_store_only();
    let deadline = Instant::now() + Duration::from_secs(120);
    let children: Vec<_> = (0..64)
        .map(|i| {
            let mut cmd: Command =
                test.command(["allocate", "web", "-n", "acme", "--owner", &vm(i)]);
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut codes = Vec::new();
    for child in children {
        assert!(Instant::now() < deadline, "the storm took over two minutes");
        let out = child.wait_with_output().unwrap();
        codes.push(out.status.code());
    }
    let ok = codes.iter().filter(|c| **c == Some(code::OK)).count();
    let over = codes.iter().filter(|c| **c == Some(code::QUOTA)).count();
    assert_eq!((ok, over), (10, 54), "exit codes: {codes:?}");
    assert_eq!(held(&test).len(), 10);
}

#[test]
fn a_renewed_lease_is_one_renewed_line_in_diff_not_a_conflict() {
    let test = state("    addresses: 5\n").file_store_only();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.email=t@example.org", "-c", "user.name=t"])
            .args(args)
            .current_dir(test.root())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "."]);
    let ok = |args: &[&str]| {
        let out = test.command(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    ok(&[
        "allocate",
        "web",
        "-n",
        "acme",
        "--owner",
        &vm(0),
        "--ttl",
        "1h",
    ]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "claim"]);
    std::thread::sleep(Duration::from_millis(1100));
    ok(&[
        "renew",
        "web",
        "-n",
        "acme",
        "--owner",
        &vm(0),
        "--ttl",
        "2h",
    ]);
    git(&["commit", "-qam", "renew"]);
    let out = test
        .command(["diff", "HEAD~1", "HEAD", "-o", "json"])
        .output()
        .unwrap();
    // Exit 1: something changed, nothing conflicts (it was 4, `edited-in-place`).
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let diff: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes = diff["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{diff}");
    assert_eq!(changes[0]["change"], "renewed");
    assert!(changes[0]["was"].as_str().unwrap().starts_with("expires "));
    assert_eq!(diff["conflicts"].as_array().unwrap().len(), 0, "{diff}");
    let md = test
        .command(["diff", "HEAD~1", "HEAD", "-o", "markdown"])
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("1 lease renewed (not listed)."), "{md}");
    assert!(!md.contains("| renewed |"), "{md}");
}

/// A tenant whose only objects are its quota: its floating IPs live in the cluster's
/// public pools, yet `quota list`, `check` and the claims see its quota.
#[test]
fn a_tenant_that_holds_nothing_but_its_quota_is_listed_and_kept() {
    let zeta = "apiVersion: pivirt.hu/v1\nkind: Quota\nmetadata:\n  name: fips\n  namespace: zeta\nspec:\n  hard:\n    floatingIPs: 1\n";
    let test = state("    addresses: 5\n")
        .args(["apply", "-f", "-"])
        .stdin(zeta)
        .stdout("quota/fips created\n")
        .run()
        .then()
        .args([
            "allocate",
            "--zone",
            "a",
            "--tenant",
            "zeta",
            "--owner",
            "FloatingIP/f-1",
        ])
        .stdout("192.0.2.1\n")
        .run()
        .then()
        .args([
            "allocate",
            "--zone",
            "a",
            "--tenant",
            "zeta",
            "--owner",
            "FloatingIP/f-2",
        ])
        .fails(code::QUOTA)
        .unchanged()
        .run()
        .then();
    let out = test
        .command(["quota", "list", "-n", "zeta", "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let quota = &list["items"][0];
    assert_eq!(quota["metadata"]["name"], "fips", "{list}");
    assert_eq!(quota["status"]["used"]["floatingIPs"], 1, "{list}");
}

/// A VPC router's uplink is one of the namespace's public addresses: charged to its
/// `floatingIPs`, with the tenant's floating IPs, so that VPCs with uplinks cannot drain a
/// public pool either.
#[test]
fn a_vpc_uplink_counts_against_the_namespaces_floating_ips() {
    let vpc = |name: &str, cidr: &str| vpc_create(name, &["--cidr", cidr, "--uplink-zone", "a"]);
    let test = state("    floatingIPs: 2\n")
        .args(vpc("blue", "10.60.0.0/24"))
        .run()
        .then()
        .args([
            "allocate",
            "--zone",
            "a",
            "--tenant",
            "acme",
            "--owner",
            "FloatingIP/fip-1",
        ])
        .run()
        .then()
        // Two public addresses held (an uplink and a floating IP): a second uplink is over.
        .args(vpc("green", "10.61.0.0/24"))
        .fails(code::QUOTA)
        .run()
        .then()
        .args([
            "allocate",
            "--zone",
            "a",
            "--tenant",
            "acme",
            "--owner",
            "FloatingIP/fip-2",
        ])
        .fails(code::QUOTA)
        .unchanged()
        .run()
        .then();
    let out = test
        .command(["quota", "list", "-n", "acme", "-o", "json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        list["items"][0]["status"]["used"]["floatingIPs"], 2,
        "{list}"
    );
}

/// A symlink planted at a quota's path, or at the quotas directory, is never followed:
/// the claims charged to the namespace fail closed (exit 1, naming the path), nothing is
/// claimed, the file behind it is untouched, and `check` reports the symlink.
#[test]
fn a_symlink_planted_at_a_quota_is_never_followed() {
    for planted in [
        "namespaces/acme/quotas/compute.yaml",
        "namespaces/acme/quotas",
    ] {
        let test = state("    addresses: 5\n").file_store_only();
        let outside = test.root().join("outside.yaml");
        std::fs::write(&outside, "not a quota\n").unwrap();
        let target = if planted.ends_with(".yaml") {
            outside.clone()
        } else {
            let dir = test.root().join("outside-dir");
            std::fs::create_dir(&dir).unwrap();
            std::fs::copy(&outside, dir.join("compute.yaml")).unwrap();
            dir
        };
        let path = test.path(planted);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let out = test
            .command(["allocate", "web", "-n", "acme", "--owner", &vm(0)])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code::FAILURE), "{planted}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        common::assert_one_error(&stderr);
        assert!(stderr.contains("symlink"), "{planted}: {stderr}");
        assert!(held(&test).is_empty(), "{planted}: nothing claimed");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "not a quota\n");
        let check = test.command(["check"]).output().unwrap();
        assert!(
            String::from_utf8_lossy(&check.stdout).contains("symlink"),
            "{planted}: {check:?}"
        );
    }
}
