//! `ipamctl diff` and `ipamctl history` on a real git repository with two branches: a claim
//! on each, a release, a pool change, an in-place edit, a claim of one address on both
//! branches, an owner claiming on both, an allocation a pool change strands; the working
//! tree with an untracked claim; the upstream default; exit codes 0, 1 and 4.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::code;

struct Repo {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

fn command(dir: &Path, program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .env("PATH", common::path_with_bin())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Ada")
        .env("GIT_AUTHOR_EMAIL", "ada@example.org")
        .env("GIT_COMMITTER_NAME", "Ada")
        .env("GIT_COMMITTER_EMAIL", "ada@example.org")
        .env("NO_COLOR", "1")
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .stdin(std::process::Stdio::null());
    cmd
}

impl Repo {
    /// A repository whose `state/` subdirectory is a state directory with the demo pools,
    /// committed on `main`.
    fn new() -> Repo {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let repo = Repo {
            dir: tmp.path().join("repo"),
            _tmp: tmp,
        };
        std::fs::create_dir_all(&repo.dir).expect("create the repository");
        repo.git(&["init", "-q", "-b", "main"]);
        repo.ok(&["init", "state"]);
        let pools = common::demo_pools();
        repo.ok(&["apply", "-f", pools.to_str().expect("UTF-8")]);
        repo.commit_all("Pools");
        repo
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut full = vec!["-d", "state"];
        full.extend_from_slice(args);
        command(&self.dir, common::BIN, &full)
            .output()
            .expect("run ipamctl")
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "ipamctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8")
    }

    #[track_caller]
    fn git(&self, args: &[&str]) -> String {
        let out = command(&self.dir, "git", args).output().expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8")
    }

    fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join("state").join(rel)
    }

    /// `diff ARGS`: (status, stdout, stderr).
    fn diff(&self, args: &[&str]) -> (i32, String, String) {
        let mut full = vec!["diff"];
        full.extend_from_slice(args);
        let out = self.run(&full);
        (
            out.status.code().expect("exited"),
            String::from_utf8(out.stdout).expect("UTF-8"),
            String::from_utf8(out.stderr).expect("UTF-8"),
        )
    }
}

const FIP: &str = "cluster/ipallocations/public-zone-a-203-0-113-4.yaml";

#[test]
fn a_branch_is_reviewed_as_claims_releases_and_pool_changes_with_its_conflicts() {
    let repo = Repo::new();
    // On main before the fork: two claims.
    repo.ok(&["allocate", "public-zone-a", "--owner", "FloatingIP/old"]);
    repo.ok(&[
        "allocate",
        "vpc-main",
        "-n",
        "acme/prod",
        "--owner",
        "VirtualMachine/web-01/0",
    ]);
    repo.commit_all("Claims before the fork");
    assert_eq!(repo.diff(&["HEAD"]).0, code::OK, "nothing changed yet");

    repo.git(&["checkout", "-q", "-b", "feature"]);
    // The branch: a claim, a release, a pool change, an in-place edit of an allocation,
    // and a claim for an owner main also claims for.
    assert_eq!(
        repo.ok(&["allocate", "public-zone-a", "--owner", "FloatingIP/ours"]),
        "203.0.113.5\n"
    );
    repo.ok(&[
        "release",
        "vpc-main",
        "10.42.0.1",
        "-n",
        "acme/prod",
        "--owner",
        "VirtualMachine/web-01/0",
    ]);
    repo.ok(&[
        "allocate",
        "vpc-main",
        "-n",
        "acme/prod",
        "--owner",
        "Node/twice",
    ]);
    let edited = std::fs::read_to_string(repo.path(FIP))
        .expect("read")
        .replace("name: old", "name: hijacked # by hand");
    std::fs::write(repo.path(FIP), edited).expect("edit in place");
    // By hand, as an operator might: exclude an address that is held (apply refuses this).
    let pool = repo.path("cluster/ipampools/public-zone-a.yaml");
    let text = std::fs::read_to_string(&pool).expect("read the pool");
    std::fs::write(
        &pool,
        text.replace("- \"203.0.113.3\"", "- \"203.0.113.3\"\n  - 203.0.113.5/32"),
    )
    .expect("edit the pool");
    repo.commit_all("The branch");

    // Main moves on: the same address for another owner, and the same owner elsewhere.
    repo.git(&["checkout", "-q", "main"]);
    assert_eq!(
        repo.ok(&["allocate", "public-zone-a", "--owner", "FloatingIP/theirs"]),
        "203.0.113.5\n"
    );
    repo.ok(&[
        "allocate",
        "vpc-main",
        "-n",
        "acme/prod",
        "--address",
        "10.42.0.9",
        "--owner",
        "Node/twice",
    ]);
    repo.commit_all("Main moves on");

    let (status, stdout, stderr) = repo.diff(&["main", "feature", "-o", "json"]);
    assert_eq!(status, code::CONFLICT, "{stderr}");
    common::assert_one_error(&stderr);
    let d: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    let changes: Vec<(String, String)> = d["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["change"].as_str().expect("a change").to_owned(),
                c["object"].as_str().expect("an object").to_owned(),
            )
        })
        .collect();
    let expect = |change: &str, object: &str| {
        assert!(
            changes.contains(&(change.to_owned(), object.to_owned())),
            "no {change} {object} in {changes:?}"
        );
    };
    expect("claimed", "ipallocation/public-zone-a-203-0-113-5");
    expect("released", "ipallocation/vpc-main-10-42-0-1");
    expect("claimed", "ipallocation/vpc-main-10-42-0-1");
    expect("owner-changed", "ipallocation/public-zone-a-203-0-113-4");
    expect("pool-changed", "ipampool/public-zone-a");
    // Main's own claims are not the branch's changes.
    assert_eq!(changes.len(), 5, "{changes:?}");
    let conflicts: Vec<String> = d["conflicts"]
        .as_array()
        .expect("conflicts")
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["conflict"].as_str().unwrap(),
                c["object"].as_str().unwrap()
            )
        })
        .collect();
    for expected in [
        "claimed-on-both-sides ipallocation/public-zone-a-203-0-113-5",
        "owner-claimed-twice ipallocation/vpc-main-10-42-0-1",
        "edited-in-place ipallocation/public-zone-a-203-0-113-4",
        "outside-pool ipallocation/public-zone-a-203-0-113-5",
    ] {
        assert!(
            conflicts.iter().any(|c| c == expected),
            "no {expected} in {conflicts:?}"
        );
    }

    // The same as a pull-request comment, and as names.
    let (_, md, _) = repo.diff(&["main", "feature", "-o", "markdown"]);
    assert!(md.starts_with("### ipamctl diff `"), "{md}");
    assert!(
        md.contains("| claimed | `ipallocation/public-zone-a-203-0-113-5` |"),
        "{md}"
    );
    assert!(md.contains("#### Conflicts with the invariants"), "{md}");
    let (_, names, _) = repo.diff(&["main", "feature", "-o", "name"]);
    assert_eq!(names.lines().count(), 5, "{names}");
    // The table names the old owner of the allocation edited in place.
    let (_, table, _) = repo.diff(&["main", "feature"]);
    assert!(
        table.contains("owner-changed") && table.contains("FloatingIP/old"),
        "{table}"
    );

    // History of the edited address, on the branch: claimed by old, then rewritten.
    repo.git(&["checkout", "-q", "feature"]);
    let history = repo.ok(&["history", "203.0.113.4", "-o", "json"]);
    let items = common::list_items(&history);
    let seen: Vec<(String, String)> = items
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["owner"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("edited".to_owned(), "FloatingIP/hijacked".to_owned()),
            ("claimed".to_owned(), "FloatingIP/old".to_owned()),
        ]
    );
    assert!(items.iter().all(|e| e["author"] == "Ada <ada@example.org>"));
    // An owner followed across a release: web-01/0 claimed, then released.
    let owner = repo.ok(&[
        "history",
        "--owner",
        "VirtualMachine/web-01/",
        "-n",
        "acme/prod",
        "-o",
        "json",
    ]);
    let actions: Vec<String> = common::list_items(&owner)
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["action"].as_str().unwrap(),
                e["address"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(actions, ["released 10.42.0.1", "claimed 10.42.0.1"]);
    let subjects = repo.ok(&["history", "10.42.0.1", "-o", "wide"]);
    assert!(
        subjects.contains("Claims before the fork") && subjects.contains("The branch"),
        "{subjects}"
    );
}

#[test]
fn the_working_tree_is_compared_with_untracked_claims_and_the_upstream_by_default() {
    let repo = Repo::new();
    // No upstream: against HEAD. Nothing changed: exit 0, "No changes." on stderr.
    assert_eq!(
        repo.diff(&[]),
        (code::OK, String::new(), "No changes.\n".to_owned())
    );
    // A fresh claim is an untracked file.
    repo.ok(&["allocate", "public-zone-a", "--owner", "FloatingIP/new"]);
    let (status, stdout, _) = repo.diff(&["-o", "name"]);
    assert_eq!(
        (status, stdout.as_str()),
        (code::FAILURE, "ipallocation/public-zone-a-203-0-113-4\n")
    );

    // A branch tracking main: the default base is the fork point with its upstream.
    repo.commit_all("A claim on main");
    repo.git(&["checkout", "-q", "-b", "topic", "--track", "main"]);
    repo.ok(&["allocate", "public-zone-a", "--owner", "FloatingIP/topic"]);
    repo.commit_all("A claim on topic");
    repo.ok(&["release", "public-zone-a", "203.0.113.4", "--force"]);
    let (status, stdout, _) = repo.diff(&["-o", "name"]);
    assert_eq!(status, code::FAILURE);
    assert_eq!(
        stdout,
        "ipallocation/public-zone-a-203-0-113-4\nipallocation/public-zone-a-203-0-113-5\n"
    );
}

#[test]
fn diff_and_history_refuse_what_they_cannot_read() {
    // Not a git working tree: exit 3.
    common::Test::new("populated")
        .args(["diff"])
        .fails(code::NOT_FOUND)
        .run();
    common::Test::new("populated")
        .args(["history", "203.0.113.4"])
        .fails(code::NOT_FOUND)
        .run();
    let repo = Repo::new();
    for args in [
        &["diff", "no-such-branch"][..],
        &["diff", "--", "--output=x"][..],
    ] {
        let out = repo.run(args);
        assert_eq!(out.status.code(), Some(code::INVALID), "{args:?}");
        common::assert_one_error(&String::from_utf8_lossy(&out.stderr));
    }
    assert!(!repo.dir.join("x").exists(), "an option smuggled into git");
    // History needs a subject.
    assert_eq!(repo.run(&["history"]).status.code(), Some(code::INVALID));
    // `-o markdown` is only for diff.
    assert_eq!(
        repo.run(&["list", "-o", "markdown"]).status.code(),
        Some(code::INVALID)
    );
}

use common::pg;

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn history_on_a_database_reads_its_events() {
    let db = pg::Db::new();
    let pools = common::demo_pools();
    let run = |args: &[&str]| {
        let out = db.run(args);
        assert!(out.status.success(), "{args:?}: {}", pg::stderr(&out));
        pg::stdout(&out)
    };
    run(&["apply", "-f", pools.to_str().expect("UTF-8")]);
    run(&[
        "allocate",
        "public-zone-a",
        "--owner",
        "FloatingIP/a",
        "--uid",
        "00000000-0000-4000-8000-00000000000a",
    ]);
    run(&["release", "public-zone-a", "203.0.113.4", "--force"]);
    run(&["allocate", "public-zone-a", "--owner", "FloatingIP/b"]);
    let items = common::list_items(&run(&["history", "203.0.113.4", "-o", "json"]));
    let seen: Vec<String> = items
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["action"].as_str().unwrap(),
                e["owner"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            "claimed FloatingIP/b",
            "released FloatingIP/a",
            "claimed FloatingIP/a"
        ]
    );
    assert!(
        items
            .iter()
            .all(|e| e["author"].as_str().is_some_and(|a| a.contains('@')))
    );
    let by_uid = common::list_items(&run(&[
        "history",
        "--uid",
        "00000000-0000-4000-8000-00000000000a",
        "-o",
        "json",
    ]));
    assert_eq!(by_uid.len(), 2);

    // Prefix claims of a supernet are events too: claimed, released, claimed again.
    let dir = tempfile::tempdir().unwrap();
    let supernet = dir.path().join("supernet.yaml");
    std::fs::write(
        &supernet,
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: provider-v6\nspec:\n  cidr: 2001:db8::/48\n  kind: supernet\n",
    )
    .unwrap();
    run(&["apply", "-f", supernet.to_str().expect("UTF-8")]);
    let claim = |owner: &str| {
        run(&[
            "allocate",
            "provider-v6",
            "--prefix-length",
            "56",
            "--owner",
            owner,
        ])
    };
    assert_eq!(claim("FloatingIP/a"), "2001:db8::/56\n");
    run(&[
        "release",
        "provider-v6",
        "2001:db8::/56",
        "--owner",
        "FloatingIP/a",
    ]);
    assert_eq!(claim("FloatingIP/b"), "2001:db8::/56\n");
    let of_prefix = run(&["history", "2001:db8::/56", "-o", "json"]);
    let told: Vec<String> = common::list_items(&of_prefix)
        .iter()
        .map(|e| format!("{} {} {}", e["action"], e["owner"], e["prefix"]))
        .collect();
    assert_eq!(
        told,
        [
            r#""claimed" "FloatingIP/b" "2001:db8::/56""#,
            r#""released" "FloatingIP/a" "2001:db8::/56""#,
            r#""claimed" "FloatingIP/a" "2001:db8::/56""#,
        ],
        "{of_prefix}"
    );
    let of_owner = run(&["history", "--owner", "FloatingIP/a"]);
    assert!(
        of_owner.contains("203.0.113.4") && of_owner.contains("2001:db8::/56"),
        "{of_owner}"
    );
    // `diff` needs git: on a database it is a usage error.
    assert_eq!(db.run(["diff"]).status.code(), Some(code::INVALID));
}

/// An IPv6 pool with `reuseAfter`, in its own file for `apply -f`.
const V6_POOL: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: edge-v6
spec:
  cidr: fd00:103::/48
  kind: public
  reuseAfter: 1h
";

#[test]
fn history_finds_an_ipv6_address_and_diff_shows_subnets_and_cooldown_records() {
    let repo = Repo::new();
    let pool = repo.dir.join("edge-v6.yaml");
    std::fs::write(&pool, V6_POOL).expect("write the pool");
    repo.ok(&["apply", "-f", pool.to_str().expect("UTF-8")]);
    repo.commit_all("An IPv6 pool");

    // A branch that only adds a subnet is a change to review, not "No changes.".
    repo.git(&["checkout", "-q", "-b", "topic", "--track", "main"]);
    repo.ok(&[
        "subnet",
        "create",
        "web6",
        "--pool",
        "edge-v6",
        "--cidr",
        "fd00:103:0:1::/64",
    ]);
    let (status, stdout, _) = repo.diff(&["-o", "json"]);
    assert_eq!(status, code::FAILURE, "{stdout}");
    let found: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(found["changes"][0]["change"], "subnet-created", "{stdout}");
    assert_eq!(found["changes"][0]["object"], "subnet/web6", "{stdout}");
    assert_eq!(found["changes"][0]["pool"], "edge-v6", "{stdout}");
    repo.commit_all("A subnet");

    // Claimed and released: the release writes a cooldown record, which diff shows.
    let addr = repo.ok(&[
        "allocate",
        "edge-v6",
        "--subnet",
        "web6",
        "--owner",
        "FloatingIP/fip-7",
    ]);
    assert_eq!(addr, "fd00:103:0:1::2\n");
    repo.commit_all("A claim");
    repo.ok(&[
        "release",
        "edge-v6",
        "fd00:103:0:1::2",
        "--owner",
        "FloatingIP/fip-7",
    ]);
    let (_, stdout, _) = repo.diff(&["HEAD", "-o", "name"]);
    assert_eq!(
        stdout,
        "cooldownrecord/edge-v6-fd00-0103-0000-0001-0000-0000-0000-0002\n\
         ipallocation/edge-v6-fd00-0103-0000-0001-0000-0000-0000-0002\n"
    );
    let (_, md, _) = repo.diff(&["HEAD", "-o", "markdown"]);
    assert!(
        md.contains(
            "| cooldown-started | `cooldownrecord/edge-v6-fd00-0103-0000-0001-0000-0000-0000-0002`"
        ) && md.contains("cooldown changes: 1"),
        "{md}"
    );
    repo.commit_all("A release");

    // Deleting the subnet is shown too.
    repo.ok(&["subnet", "delete", "web6"]);
    let (_, stdout, _) = repo.diff(&["HEAD", "-o", "name"]);
    assert_eq!(stdout, "subnet/web6\n");
}

#[test]
fn history_of_an_ipv6_address_finds_it_without_naming_its_pool() {
    let repo = Repo::new();
    let pool = repo.dir.join("edge-v6.yaml");
    std::fs::write(&pool, V6_POOL).expect("write the pool");
    repo.ok(&["apply", "-f", pool.to_str().expect("UTF-8")]);
    let addr = repo.ok(&["allocate", "edge-v6", "--owner", "FloatingIP/fip-7"]);
    assert_eq!(addr, "fd00:103::1\n");
    repo.commit_all("A claim");
    repo.ok(&[
        "release",
        "edge-v6",
        "fd00:103::1",
        "--owner",
        "FloatingIP/fip-7",
    ]);
    repo.commit_all("A release");
    for query in [
        &["history", "fd00:103::1"][..],
        &["history", "fd00:103::1", "--pool", "edge-v6"],
    ] {
        let mut args = query.to_vec();
        args.extend(["-o", "json"]);
        let history = repo.ok(&args);
        let actions: Vec<String> = common::list_items(&history)
            .iter()
            .map(|i| i["action"].as_str().unwrap_or("?").to_owned())
            .collect();
        assert_eq!(actions, ["released", "claimed"], "{query:?}: {history}");
    }
}

/// A supernet without bounds on the lengths it hands out.
const SUPERNET: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: provider-v6
spec:
  cidr: 2001:db8::/48
  kind: supernet
";

/// `diff` knows prefix claims: a claim and a release show with their prefix, and a branch's
/// claim that overlaps one made on the base branch since the fork is a conflict (the two
/// were decided in two clones, so no lock kept them apart).
#[test]
fn diff_shows_prefix_claims_and_a_branch_claim_overlapping_the_base_branch() {
    let repo = Repo::new();
    let pool = repo.dir.join("supernet.yaml");
    std::fs::write(&pool, SUPERNET).expect("write the pool");
    repo.ok(&["apply", "-f", pool.to_str().expect("UTF-8")]);
    repo.ok(&[
        "allocate",
        "provider-v6",
        "--prefix-length",
        "56",
        "--owner",
        "FloatingIP/old",
    ]);
    repo.commit_all("A supernet and a claim");

    repo.git(&["checkout", "-q", "-b", "topic", "--track", "main"]);
    let got = repo.ok(&[
        "allocate",
        "provider-v6",
        "--prefix",
        "2001:db8:0:1000::/52",
        "--owner",
        "FloatingIP/a",
    ]);
    assert_eq!(got, "2001:db8:0:1000::/52\n");
    repo.ok(&[
        "release",
        "provider-v6",
        "2001:db8::/56",
        "--owner",
        "FloatingIP/old",
    ]);
    let (_, stdout, _) = repo.diff(&["-o", "json"]);
    let found: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let changes = found["changes"].as_array().expect("changes");
    let kinds: Vec<(&str, &str)> = changes
        .iter()
        .map(|c| (c["change"].as_str().unwrap(), c["prefix"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("prefix-released", "2001:db8::/56"),
            ("prefix-claimed", "2001:db8:0:1000::/52")
        ],
        "{stdout}"
    );
    assert_eq!(found["conflicts"], serde_json::json!([]), "{stdout}");
    repo.commit_all("topic: a /52");

    // Meanwhile main hands a /56 inside that /52 to someone else.
    repo.git(&["checkout", "-q", "main"]);
    repo.ok(&[
        "allocate",
        "provider-v6",
        "--prefix",
        "2001:db8:0:1100::/56",
        "--owner",
        "FloatingIP/b",
    ]);
    repo.commit_all("main: a /56");
    repo.git(&["checkout", "-q", "topic"]);
    let (status, table, _) = repo.diff(&[]);
    assert_eq!(status, code::CONFLICT, "{table}");
    assert!(
        table.contains("prefix-overlap")
            && table.contains(
                "2001:db8:0:1000::/52 of `FloatingIP/a` overlaps 2001:db8:0:1100::/56 of `FloatingIP/b` in pool `provider-v6`, claimed on the base branch since the fork"
            )
            && table.contains("prefix-claimed"),
        "{table}"
    );
    let (_, md, _) = repo.diff(&["-o", "markdown"]);
    assert!(md.contains("prefix claims: 2"), "{md}");

    // `history` of a prefix: who held it, and when; of an owner: its prefix claims too.
    let of_prefix = repo.ok(&["history", "2001:db8::/56", "-o", "json"]);
    let entries = common::list_items(&of_prefix);
    let told: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["owner"].as_str().unwrap()))
        .collect();
    assert_eq!(
        told,
        [
            ("released", "FloatingIP/old"),
            ("claimed", "FloatingIP/old")
        ],
        "{of_prefix}"
    );
    assert_eq!(entries[0]["prefix"], "2001:db8::/56", "{of_prefix}");
    let of_owner = repo.ok(&["history", "--owner", "FloatingIP/a"]);
    assert!(
        of_owner.contains("claimed") && of_owner.contains("2001:db8:0:1000::/52"),
        "{of_owner}"
    );
}

/// `diff` and `history` name a VPC's range and its router's uplink by the VPC (`VPC
/// acme/dev/blue`) while the VPC's pools carry its uid; a claim of any other owner reads as
/// itself (issue 33).
#[test]
fn diff_and_history_name_a_vpcs_range_and_uplink_by_the_vpc() {
    let repo = Repo::new();
    let pool = repo.dir.join("supernet.yaml");
    std::fs::write(&pool, SUPERNET).expect("write the pool");
    repo.ok(&["apply", "-f", pool.to_str().expect("UTF-8")]);
    repo.commit_all("A supernet");
    repo.git(&["checkout", "-q", "-b", "topic", "--track", "main"]);
    let uid = repo.ok(&[
        "vpc",
        "create",
        "blue",
        "-n",
        "acme/dev",
        "--from-pool",
        "provider-v6",
        "--prefix-length",
        "56",
    ]);
    let uid = uid.trim();
    let uplink = repo.ok(&[
        "allocate",
        "public-zone-a",
        "--owner",
        "VPC/router",
        "--uid",
        uid,
    ]);
    let uplink = uplink.trim();
    repo.ok(&["allocate", "public-zone-a", "--owner", "FloatingIP/fip-7"]);
    let (_, table, _) = repo.diff(&[]);
    let row = |needle: &str| -> String {
        table
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no row with {needle}:\n{table}"))
            .to_owned()
    };
    assert!(
        row("prefix-claimed").contains("VPC acme/dev/blue"),
        "{table}"
    );
    assert!(
        row(&format!(" {uplink} ")).contains("VPC acme/dev/blue"),
        "{table}"
    );
    assert!(row("FloatingIP/fip-7").contains("claimed"), "{table}");
    assert!(!table.contains("VPC/router"), "{table}");
    repo.commit_all("topic: VPC blue, its uplink and a floating IP");
    let history = repo.ok(&["history", uplink]);
    assert!(
        history.contains("VPC acme/dev/blue") && !history.contains("VPC/router"),
        "{history}"
    );
}
