//! Supernet pools and child prefixes, driving the real binary: best fit, the exit codes,
//! release, and races of real processes (a storm of mixed lengths until the pool is full, a
//! same-owner storm, SIGKILLs during claims). The storms spawn processes on the state
//! directory itself, so they run on the file store.

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::{Test, code, list_items};
use ipnet::IpNet;

const SUPERNET: &str = r#"apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: provider-v6
spec:
  cidr: "2001:db8:100::/56"
  kind: supernet
  prefixLengths: {min: 60, max: 64}
"#;

/// An empty state directory holding the /56 supernet `provider-v6` (lengths /60 to /64).
fn supernet() -> Test {
    let test = Test::new("empty");
    let file = test.input("pool.yaml", SUPERNET);
    test.args(["apply", "-f", &file]).run().then()
}

/// Where a storm runs: the state directory, or a database of its own.
enum Target {
    Files(Test),
    Database(common::pg::Db),
}

impl Target {
    fn files() -> Target {
        Target::Files(supernet())
    }

    /// A fresh database holding the same supernet.
    fn database() -> Target {
        let db = common::pg::Db::new();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pool.yaml");
        std::fs::write(&file, SUPERNET).unwrap();
        let out = db.run([
            std::ffi::OsStr::new("apply"),
            "-f".as_ref(),
            file.as_os_str(),
        ]);
        assert!(out.status.success(), "{out:?}");
        Target::Database(db)
    }

    fn command<I, S>(&self, args: I) -> std::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        match self {
            Target::Files(test) => test.command(args),
            Target::Database(db) => db.cmd(args),
        }
    }
}

fn spawn(test: &Target, args: &[&str]) -> Child {
    test.command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ipamctl")
}

fn wait(child: Child) -> (Option<i32>, String, String) {
    let out = child.wait_with_output().expect("wait for ipamctl");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every claimed prefix, from `list -o json`.
fn claimed(test: &Target) -> Vec<IpNet> {
    let out = test
        .command(["list", "-o", "json"])
        .output()
        .expect("run ipamctl list");
    assert!(out.status.success(), "{out:?}");
    list_items(&String::from_utf8_lossy(&out.stdout))
        .iter()
        .filter(|i| i["kind"] == "IPPrefixClaim")
        .map(|i| i["spec"]["prefix"].as_str().unwrap().parse().unwrap())
        .collect()
}

#[track_caller]
fn assert_disjoint(prefixes: &[IpNet]) {
    let mut sorted = prefixes.to_vec();
    sorted.sort();
    for pair in sorted.windows(2) {
        assert!(
            !pair[0].contains(&pair[1].network()),
            "{} and {} overlap",
            pair[0],
            pair[1]
        );
    }
}

/// Addresses of a /56 counted in /64 units.
fn units(prefixes: &[IpNet]) -> u32 {
    prefixes.iter().map(|p| 1u32 << (64 - p.prefix_len())).sum()
}

#[test]
fn supernet_claims_follow_best_fit_and_the_documented_exit_codes() {
    let test = supernet();
    let t = test
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "64",
            "--owner",
            "FloatingIP/a",
        ])
        .stdout("2001:db8:100::/64\n")
        .run()
        .then();
    // The /62 fills the hole beside the /64's buddies, not a fresh /60.
    let t = t
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "62",
            "--owner",
            "FloatingIP/b",
        ])
        .stdout("2001:db8:100:4::/62\n")
        .run()
        .then();
    // The same owner again: the same prefix, nothing written.
    let t = t
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "62",
            "--owner",
            "FloatingIP/b",
        ])
        .stdout("2001:db8:100:4::/62\n")
        .unchanged()
        .run()
        .then();
    let t = t
        .args(["allocate", "provider-v6", "--prefix-length", "56", "--owner", "FloatingIP/c"])
        .fails(code::INVALID)
        .stderr("error: pool `provider-v6` (2001:db8:100::/56) hands out prefixes of /60 to /64, not /56\n")
        .run()
        .then();
    let t = t
        .args(["allocate", "provider-v6", "--owner", "FloatingIP/c"])
        .fails(code::INVALID)
        .stderr("error: pool `provider-v6` is a supernet and hands out prefixes: use --prefix-length N (or --prefix PREFIX)\n")
        .run()
        .then();
    let t = t
        .args(["allocate", "provider-v6", "--prefix", "2001:db8:100::/62", "--owner", "FloatingIP/c"])
        .fails(code::CONFLICT)
        .stderr("error: 2001:db8:100::/62 overlaps 2001:db8:100::/64 in pool `provider-v6`, held by `FloatingIP/a`\n")
        .run()
        .then();
    let t = t
        .args([
            "allocate",
            "provider-v6",
            "--prefix",
            "2001:db8:100:10::/60",
            "--owner",
            "VPC/router",
            "--uid",
            "3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5c",
        ])
        .stdout("2001:db8:100:10::/60\n")
        .run()
        .then();
    // Unguarded release names the holder; guarded, it frees the prefix.
    let t = t
        .args(["release", "provider-v6", "2001:db8:100::/64"])
        .fails(code::INVALID)
        .run()
        .then();
    let t = t
        .args([
            "release",
            "provider-v6",
            "2001:db8:100::/64",
            "--owner",
            "FloatingIP/b",
        ])
        .fails(code::CONFLICT)
        .run()
        .then();
    let t = t
        .args([
            "release",
            "provider-v6",
            "2001:db8:100::/64",
            "--owner",
            "FloatingIP/a",
        ])
        .stdout("ipprefixclaim/provider-v6-2001-0db8-0100-0000-0000-0000-0000-0000-64 released\n")
        .run()
        .then();
    let t = t
        .args(["release", "--kind", "VPC"])
        .stdout("ipprefixclaim/provider-v6-2001-0db8-0100-0010-0000-0000-0000-0000-60 released\n")
        .run()
        .then();
    let t = t
        .args(["list"])
        .stdout("NAMESPACE  POOL         PREFIX               OWNER         UID\n-          provider-v6  2001:db8:100:4::/62  FloatingIP/b  -\n")
        .run()
        .then();
    t.args(["check"]).run();
}

#[test]
fn a_supernet_with_a_gateway_or_bad_bounds_is_refused() {
    let test = Test::new("empty");
    let gw = test.input(
        "gw.yaml",
        &format!("{SUPERNET}  gateway: \"2001:db8:100::1\"\n"),
    );
    let ran = test.args(["apply", "-f", &gw]).fails(code::INVALID).run();
    assert!(
        ran.stderr
            .contains("spec.gateway: a supernet hands out prefixes and has no gateway"),
        "{}",
        ran.stderr
    );
    let inverted = SUPERNET.replace("{min: 60, max: 64}", "{min: 64, max: 60}");
    let file = ran.then().input("inverted.yaml", &inverted);
    let test = Test::new("empty");
    let file = test.input(&file, &inverted);
    let ran = test.args(["apply", "-f", &file]).fails(code::INVALID).run();
    assert!(ran.stderr.contains("spec.prefixLengths"), "{}", ran.stderr);
}

fn sixty_four_processes_of_mixed_lengths_fill_a_slash_56_exactly(test: Target) {
    let lengths = ["60", "62", "64"];
    let children: Vec<(usize, Child)> = (0..64)
        .map(|i| {
            let owner = format!("FloatingIP/f-{i}");
            let len = lengths[i % 3];
            (
                i,
                spawn(
                    &test,
                    &[
                        "allocate",
                        "provider-v6",
                        "--prefix-length",
                        len,
                        "--owner",
                        &owner,
                    ],
                ),
            )
        })
        .collect();
    let mut won = Vec::new();
    for (i, child) in children {
        let (status, stdout, stderr) = wait(child);
        match status {
            Some(0) => {
                let p: IpNet = stdout.trim().parse().unwrap();
                assert_eq!(p.prefix_len().to_string(), lengths[i % 3], "{stdout}");
                won.push(p);
            }
            Some(5) => assert!(
                stderr.starts_with(
                    "error: supernet pool `provider-v6` (2001:db8:100::/56) has no free /"
                ),
                "{stderr}"
            ),
            other => panic!("exit {other:?}: {stderr}"),
        }
    }
    assert_disjoint(&won);
    assert_eq!(claimed(&test).len(), won.len());
    // 22 /60s alone would need 352 /64s of the 256: the pool filled up, losers exist.
    assert!(won.len() < 64, "{}", won.len());
    // Every free /64 that `pool show` reports is real: claim them all, then the pool is full.
    let show = test
        .command(["pool", "show", "provider-v6", "-o", "json"])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let free64: u32 = status["status"]["freeBlocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["length"] == 64)
        .map(|b| u32::try_from(b["count"].as_u64().unwrap()).unwrap())
        .unwrap();
    assert_eq!(free64, 256 - units(&won));
    for i in 0..free64 {
        let owner = format!("FloatingIP/rest-{i}");
        let out = test
            .command([
                "allocate",
                "provider-v6",
                "--prefix-length",
                "64",
                "--owner",
                &owner,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let all = claimed(&test);
    assert_disjoint(&all);
    assert_eq!(units(&all), 256, "the /56 is used exactly");
    let out = test
        .command([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "64",
            "--owner",
            "FloatingIP/late",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(code::EXHAUSTED));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("it is full"),
        "{out:?}"
    );
    let check = test.command(["check"]).output().unwrap();
    assert!(check.status.success(), "{check:?}");
}

fn thirty_two_processes_of_one_owner_get_one_prefix(test: Target) {
    let children: Vec<Child> = (0..32)
        .map(|_| {
            spawn(
                &test,
                &[
                    "allocate",
                    "provider-v6",
                    "--prefix-length",
                    "62",
                    "--owner",
                    "FloatingIP/same",
                ],
            )
        })
        .collect();
    let answers: std::collections::BTreeSet<String> = children
        .into_iter()
        .map(|c| {
            let (status, stdout, stderr) = wait(c);
            assert_eq!(status, Some(0), "{stderr}");
            stdout
        })
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(claimed(&test).len(), 1);
}

fn sigkill_during_claims_leaves_no_overlap_and_nothing_that_blocks_a_retry(test: Target) {
    for round in 0..4u64 {
        let children: Vec<(String, Child)> = (0..12)
            .map(|i| {
                let owner = format!("FloatingIP/k-{i}");
                let len = ["60", "62", "64"][i % 3];
                let child = spawn(
                    &test,
                    &[
                        "allocate",
                        "provider-v6",
                        "--prefix-length",
                        len,
                        "--owner",
                        &owner,
                    ],
                );
                (owner, child)
            })
            .collect();
        for (i, (_, child)) in children.iter().enumerate() {
            std::thread::sleep(Duration::from_micros(300 * (i as u64 + round)));
            let _ = child_kill(child);
        }
        for (owner, child) in children {
            let _ = wait(child);
            // The owner asks again, unkilled: it gets a prefix (the one it held, or a new
            // one), or the pool is full; never a lock or a half-made file in its way.
            let out = test
                .command([
                    "allocate",
                    "provider-v6",
                    "--prefix-length",
                    "64",
                    "--owner",
                    &owner,
                ])
                .output()
                .unwrap();
            let status = out.status.code();
            assert!(matches!(status, Some(0) | Some(5)), "{out:?}");
        }
        assert_disjoint(&claimed(&test));
        let check = test.command(["check"]).output().unwrap();
        assert!(check.status.success(), "{check:?}");
        let out = test
            .command(["release", "--kind", "FloatingIP"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
}

/// SIGKILL without taking the child (it is waited for afterwards).
fn child_kill(child: &Child) -> std::io::Result<()> {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .stderr(Stdio::null())
        .status()?;
    let _ = status;
    Ok(())
}

macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod files {
            $(#[test]
            fn $name() {
                super::$name(super::Target::files());
            })*
        }
        mod postgres {
            $(#[test]
            #[cfg_attr(
                not(has_postgres),
                ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
            )]
            fn $name() {
                super::$name(super::Target::database());
            })*
        }
    };
}

on_both_stores!(
    sixty_four_processes_of_mixed_lengths_fill_a_slash_56_exactly,
    thirty_two_processes_of_one_owner_get_one_prefix,
    sigkill_during_claims_leaves_no_overlap_and_nothing_that_blocks_a_retry,
);

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn the_database_refuses_an_overlapping_claim_row_whoever_writes_it() {
    let target = Target::database();
    let out = target
        .command([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "60",
            "--owner",
            "FloatingIP/a",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let Target::Database(db) = &target else {
        unreachable!()
    };
    // A writer that bypasses ipamctl: a /64 inside the claimed /60, of another name (its
    // manifest agrees with its columns, else the row trigger of migration 10 refuses it
    // first).
    let manifest = "apiVersion: pivirt.hu/v1\nkind: IPPrefixClaim\nmetadata:\n  name: x\nspec:\n  \
                    pool: provider-v6\n  prefix: 2001:db8:100:1::/64\n  owner:\n    kind: FloatingIP\n    \
                    name: x\n";
    let err = db
        .sql()
        .execute(
            "INSERT INTO ipamctl.objects (kind, namespace, name, pool, manifest, prefix)
             VALUES ('IPPrefixClaim', '', 'x', 'provider-v6', $1, '2001:db8:100:1::/64')",
            &[&manifest.as_bytes()],
        )
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("23P01"), "{err}");
}

/// The database's owner look-up reads the rows its owner-name index names, and every row
/// whose owner lines it cannot tell (migration 8): a claim row written by hand with its
/// owner's name quoted (not ipamctl's canonical form), and one without a prefix column,
/// are still their owners' claims, and a new owner's claim passes over both prefixes.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_hand_written_claim_row_is_its_owners_claim_on_the_database() {
    let target = Target::database();
    let Target::Database(db) = &target else {
        unreachable!()
    };
    let row = |prefix: &str, owner: &str, column: bool| {
        let net: IpNet = prefix.parse().unwrap();
        let pool = ipamctl::model::PoolName::new("provider-v6").unwrap();
        let name = ipamctl::model::prefix_claim::prefix_claim_name(&pool, net);
        let manifest = format!(
            "apiVersion: pivirt.hu/v1\nkind: IPPrefixClaim\nmetadata:\n  name: {name}\nspec:\n  \
             pool: provider-v6\n  prefix: {prefix}\n  owner:\n    kind: FloatingIP\n    \
             name: \"{owner}\"\n"
        );
        let prefix = column.then(|| prefix.to_owned());
        // A row without its prefix column disagrees with its manifest: one made before
        // migration 10, whose trigger now refuses it (switched off here, as then).
        let trigger = if column { "ENABLE" } else { "DISABLE" };
        let mut sql = db.sql();
        let mut tx = sql.transaction().unwrap();
        tx.batch_execute(&format!(
            "ALTER TABLE ipamctl.objects {trigger} TRIGGER objects_prefix_claims_agree"
        ))
        .unwrap();
        tx.execute(
            "INSERT INTO ipamctl.objects (kind, namespace, name, pool, manifest, prefix)
             VALUES ('IPPrefixClaim', '', $1, 'provider-v6', $2, $3::text::inet)",
            &[&name, &manifest.as_bytes(), &prefix],
        )
        .unwrap();
        tx.batch_execute("ALTER TABLE ipamctl.objects ENABLE TRIGGER objects_prefix_claims_agree")
            .unwrap();
        tx.commit().unwrap();
    };
    row("2001:db8:100::/64", "quoted", true);
    row("2001:db8:100:1::/64", "bare", false);
    let claim = |owner: &str| {
        let out = target
            .command([
                "allocate",
                "provider-v6",
                "--prefix-length",
                "64",
                "--owner",
                owner,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(claim("FloatingIP/quoted"), "2001:db8:100::/64\n");
    assert_eq!(claim("FloatingIP/bare"), "2001:db8:100:1::/64\n");
    assert_eq!(claim("FloatingIP/new"), "2001:db8:100:2::/64\n");
}

/// `--dry-run` says what a claim would answer, the owner's prefix or the best fit, and
/// writes nothing; the claim then made answers the same.
#[test]
fn a_dry_run_prefix_claim_predicts_the_claim_and_writes_nothing() {
    let ran = supernet()
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "62",
            "--owner",
            "FloatingIP/a",
            "--dry-run",
        ])
        .stdout("2001:db8:100::/62\n")
        .unchanged()
        .run();
    assert!(
        ran.stderr
            .contains("dry run: `FloatingIP/a` would hold 2001:db8:100::/62"),
        "{}",
        ran.stderr
    );
    ran.then()
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "62",
            "--owner",
            "FloatingIP/a",
        ])
        .stdout("2001:db8:100::/62\n")
        .run()
        .then()
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "62",
            "--owner",
            "FloatingIP/a",
            "--dry-run",
        ])
        .stdout("2001:db8:100::/62\n")
        .unchanged()
        .run();
}

/// `pool list -o json` gives a supernet its prefixes' status (claimed, largest free block,
/// free blocks per length), not an address pool's usage.
#[test]
fn pool_list_json_gives_a_supernet_its_prefix_status() {
    let ran = supernet()
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "60",
            "--owner",
            "FloatingIP/a",
        ])
        .stdout("2001:db8:100::/60\n")
        .run()
        .then()
        .args(["pool", "list", "-o", "json"])
        .run();
    let items = list_items(&ran.stdout);
    let status = &items[0]["status"];
    assert_eq!(
        status["claimed"],
        serde_json::json!(["2001:db8:100::/60"]),
        "{}",
        ran.stdout
    );
    assert_eq!(
        status["largestFree"], "2001:db8:100:80::/57",
        "{}",
        ran.stdout
    );
    assert!(status.get("candidates").is_none(), "{}", ran.stdout);
}

/// `apply` never strands a prefix claim: an exclude over a claimed prefix, a prefix that no
/// longer holds it, or a pool that is no longer a supernet is exit 4 naming the claim, and
/// nothing is applied (as for allocations).
#[test]
fn apply_refuses_a_pool_change_that_would_strand_a_claimed_prefix() {
    let mut t = supernet()
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "60",
            "--owner",
            "FloatingIP/a",
        ])
        .stdout("2001:db8:100::/60\n")
        .run()
        .then();
    for (what, changed) in [
        (
            "an exclude",
            SUPERNET.replace(
                "  kind: supernet\n",
                "  kind: supernet\n  exclude: [\"2001:db8:100::/64\"]\n",
            ),
        ),
        (
            "a prefix",
            SUPERNET.replace("2001:db8:100::/56", "2001:db8:200::/56"),
        ),
        (
            "a kind",
            SUPERNET.replace(
                "  kind: supernet\n  prefixLengths: {min: 60, max: 64}\n",
                "  kind: public\n",
            ),
        ),
    ] {
        let file = t.input("changed.yaml", &changed);
        assert_ne!(changed, SUPERNET, "{what}: nothing changed");
        let why = if what == "a kind" {
            "break 1 prefix claim it holds by changing its kind from supernet to public (a pool keeps its kind while it holds anything)"
        } else {
            "leave 1 prefix claim outside its candidates"
        };
        t = t
            .args(["apply", "-f", &file])
            .fails(code::CONFLICT)
            .stderr(&format!(
                "error: updating pool `provider-v6` would {why}: \
                 provider-v6-2001-0db8-0100-0000-0000-0000-0000-0000-60 (2001:db8:100::/60); nothing applied\n\
                 hint: release those prefixes first (`ipamctl release provider-v6 PREFIX --owner KIND/NAME`, each with its owner), or keep them in the pool\n",
            ))
            .unchanged()
            .run()
            .then();
    }
}

/// `reuseAfter` applies to prefixes as to addresses: a released prefix is kept from other
/// owners for the window (a best-fit claim passes over it, an exact claim of it or of a
/// prefix overlapping it is exit 4), its owner gets it back, and once the window has passed
/// anyone may have it and its record goes.
#[test]
fn a_released_prefix_cools_for_reuse_after_and_its_owner_gets_it_back() {
    let t = Test::new("empty");
    let pool = t.input(
        "cool.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\nspec:\n  cidr: 10.0.0.0/16\n  kind: supernet\n  reuseAfter: 3s\n",
    );
    let claim = |owner: &'static str| ["allocate", "sn", "--prefix-length", "24", "--owner", owner];
    let release = |owner: &'static str| ["release", "sn", "10.0.0.0/24", "--owner", owner];
    let t = t
        .args(["apply", "-f", &pool])
        .run()
        .then()
        .args(claim("FloatingIP/a"))
        .stdout("10.0.0.0/24\n")
        .run()
        .then()
        .args(release("FloatingIP/a"))
        .run()
        .then()
        .args(claim("FloatingIP/b"))
        .stdout("10.0.1.0/24\n")
        .run()
        .then()
        .args(["allocate", "sn", "--prefix", "10.0.0.0/25", "--owner", "FloatingIP/c"])
        .fails(code::CONFLICT)
        .stderr(
            "error: 10.0.0.0/25 overlaps 10.0.0.0/24, released less than pool `sn`'s reuseAfter ago: \
             only the owner that released it may have it until then\n",
        )
        .unchanged()
        .run()
        .then()
        .args(claim("FloatingIP/a"))
        .stdout("10.0.0.0/24\n")
        .run()
        .then()
        .args(["check"])
        .run()
        .then()
        .args(release("FloatingIP/a"))
        .run();
    std::thread::sleep(Duration::from_millis(3200));
    let checked = t
        .then()
        .args(claim("FloatingIP/c"))
        .stdout("10.0.0.0/24\n")
        .run()
        .then()
        .args(["check"])
        .run();
    // The expired record went with the claim: nothing is left to warn about.
    assert!(
        checked.stderr.starts_with("ok: no problems found"),
        "{}",
        checked.stderr
    );
}

/// `pool delete` of a supernet is refused while a prefix of it is claimed (exit 4, as for an
/// address pool with allocations), and takes its prefixes' cooldown records with it.
#[test]
fn pool_delete_refuses_a_supernet_with_claims_and_takes_its_records() {
    let t = Test::new("empty");
    let pool = t.input(
        "cool.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\nspec:\n  cidr: 10.0.0.0/16\n  kind: supernet\n  reuseAfter: 1h\n",
    );
    let checked = t
        .args(["apply", "-f", &pool])
        .run()
        .then()
        .args(["allocate", "sn", "--prefix-length", "24", "--owner", "FloatingIP/a"])
        .stdout("10.0.0.0/24\n")
        .run()
        .then()
        .args(["pool", "delete", "sn"])
        .fails(code::CONFLICT)
        .stderr("error: pool `sn` still has 1 claimed prefix\nhint: release them first: ipamctl list --pool sn\n")
        .unchanged()
        .run()
        .then()
        .args(["release", "sn", "10.0.0.0/24", "--owner", "FloatingIP/a"])
        .run()
        .then()
        .args(["pool", "delete", "sn"])
        .stdout("ipampool/sn deleted\n")
        .run()
        .then()
        .args(["check"])
        .run();
    // No record is left behind to warn about (the summary names the store it checked).
    assert!(
        checked.stderr.starts_with("ok: no problems found in ")
            && checked
                .stderr
                .ends_with(" (0 pools, 0 allocations checked)\n"),
        "{}",
        checked.stderr
    );
}

/// The file of the claim of `prefix` in `provider-v6`, relative to the state directory.
fn claim_file(prefix: &str) -> String {
    let pool = ipamctl::model::PoolName::new("provider-v6").expect("valid");
    let name = ipamctl::model::prefix_claim::prefix_claim_name(&pool, prefix.parse().unwrap());
    format!("cluster/ipprefixclaims/{name}.yaml")
}

/// A new owner's claim finds the owner's claim by the supernet's owner index, which vouches
/// for a file only while its status is the recorded one: an outside `cp` over a recorded
/// claim (a `git checkout` that gives the prefix to another owner), an `rm` and a copied-in
/// claim between two claims are each read again, so the look-up is never wrong. (An index
/// believed without its files' status would give `d` a second prefix, and tell `b` it still
/// holds the removed one.)
#[test]
fn an_outside_rm_or_cp_between_prefix_claims_never_fools_the_owner_look_up() {
    let test = supernet().file_store_only();
    let claim = |test: Test, owner: &str, want: &str| {
        test.args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "64",
            "--owner",
            owner,
        ])
        .stdout(&format!("{want}\n"))
        .run()
        .then()
    };
    let test = claim(test, "FloatingIP/a", "2001:db8:100::/64");
    let test = claim(test, "FloatingIP/b", "2001:db8:100:1::/64");
    // Old enough to be recorded by the next claim's look-up.
    std::thread::sleep(Duration::from_millis(250));
    let test = claim(test, "FloatingIP/c", "2001:db8:100:2::/64");
    let index = test.read(".index/cluster/ipprefixclaims/provider-v6.idx");
    assert!(
        index.contains("\n2001:db8:100::/64 ") && index.contains(" FloatingIP a -\n"),
        "{index}"
    );

    // `cp` over a's file (in place: same inode): the prefix is d's now, a holds none.
    let a = claim_file("2001:db8:100::/64");
    let rewritten = test.read(&a).replace("name: a\n", "name: d\n");
    std::fs::write(test.path(&a), rewritten).unwrap();
    let test = claim(test, "FloatingIP/d", "2001:db8:100::/64");
    let test = claim(test, "FloatingIP/a", "2001:db8:100:3::/64");

    // `rm` of b's file: b holds nothing, and gets the freed prefix again.
    test.remove(&claim_file("2001:db8:100:1::/64"));
    let test = claim(test, "FloatingIP/b", "2001:db8:100:1::/64");

    // A claim copied in under a new name (another clone's, as `git pull` brings it).
    let copied = test
        .read(&claim_file("2001:db8:100:2::/64"))
        .replace("2001-0db8-0100-0002-", "2001-0db8-0100-0004-")
        .replace("2001:db8:100:2::/64", "2001:db8:100:4::/64")
        .replace("name: c\n", "name: e\n");
    test.write(&claim_file("2001:db8:100:4::/64"), &copied);
    let test = claim(test, "FloatingIP/e", "2001:db8:100:4::/64");
    let test = claim(test, "FloatingIP/c", "2001:db8:100:2::/64");
    test.args(["check"]).run();
}

/// A prefix claim owned by a tenant's floating IP is only ever a hand edit (every claim
/// refuses a tenant a prefix): `check` names it, on the file store and on a database alike.
#[test]
fn check_reports_a_prefix_claim_handed_to_a_tenants_floating_ip() {
    tenant_prefix_reported(Target::files());
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn check_on_postgres_reports_a_prefix_claim_handed_to_a_tenants_floating_ip() {
    tenant_prefix_reported(Target::database());
}

/// Claims a /64 for `FloatingIP/solo`, edits its owner into tenant `acme/prod`'s, and
/// expects `check` to name it.
fn tenant_prefix_reported(target: Target) {
    let out = target
        .command(["allocate", "provider-v6", "--prefix-length", "64"])
        .args(["--owner", "FloatingIP/solo"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let checked = target.command(["check"]).output().unwrap();
    assert!(checked.status.success(), "{checked:?}");
    let file = claim_file("2001:db8:100::/64");
    match &target {
        Target::Files(test) => {
            let text = test.read(&file);
            assert!(text.contains("name: solo\n"), "{text}");
            test.write(
                &file,
                &text.replace("name: solo\n", "name: acme/prod/solo\n"),
            );
        }
        Target::Database(db) => {
            let edited = db
                .sql()
                .execute(
                    "UPDATE ipamctl.objects SET manifest = convert_to(replace(
                         convert_from(manifest, 'UTF8'), 'name: solo\n',
                         'name: acme/prod/solo\n'), 'UTF8')
                     WHERE kind = 'IPPrefixClaim'",
                    &[],
                )
                .unwrap();
            assert_eq!(edited, 1);
        }
    }
    let checked = target.command(["check"]).output().unwrap();
    assert_eq!(checked.status.code(), Some(code::FAILURE), "{checked:?}");
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("error ")
            && l.ends_with(
                "owner `FloatingIP/acme/prod/solo` is tenant `acme/prod`'s floating IP, which holds one address from the cluster's public pools, never a prefix: was the file edited by hand? release 2001:db8:100::/64 and claim it for its real owner"
            )),
        "{stdout}"
    );
}
