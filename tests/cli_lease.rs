//! Leases (issue 45): `allocate --ttl` claims an address that lapses unless renewed,
//! `renew` and the owner's `allocate --ttl` renew it, `reconcile --expired` releases what
//! lapsed (through the pool's cooldown), and a renewal racing the release is never undone.
//! Real processes, on the file store and (with `IPAMCTL_TEST_STORE=postgres`) on
//! PostgreSQL, whose server's clock decides there.

mod common;

use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use common::{Test, code};

const POOL: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: ci
spec:
  cidr: 192.0.2.0/26
  kind: public
";

fn pool(extra: &str) -> Test {
    Test::new("empty")
        .file_store_only()
        .args(["apply", "-f", "-"])
        .stdin(&format!("{POOL}{extra}"))
        .run()
        .then()
}

/// `expiresAt` of the allocation `ipamctl list -o json` shows for `owner`, in seconds
/// since the epoch (`None`: no lease, or no allocation).
fn expires(test: &Test, owner: &str) -> Option<u64> {
    let out = test
        .command(["list", "--pool", "ci", "--owner", owner, "-o", "json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let at = list["items"].get(0)?["spec"]["expiresAt"]
        .as_str()?
        .to_owned();
    Some(
        humantime::parse_rfc3339(&at)
            .unwrap()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Runs `args` on `test`'s state directory; exit `status` asserted; its stdout.
fn exits(test: &Test, args: &[&str], status: i32) -> String {
    let out = test.command(args).output().unwrap();
    assert_eq!(out.status.code(), Some(status), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`exits`] 0.
fn ok(test: &Test, args: &[&str]) -> String {
    exits(test, args, code::OK)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_lease_is_claimed_renewed_by_its_owner_and_kept_by_a_plain_reask() {
    let test = pool("");
    let first = test
        .command(["allocate", "ci", "--owner", "Node/job-1", "--ttl", "1h"])
        .output()
        .unwrap();
    assert!(first.status.success(), "{first:?}");
    let at = expires(&test, "Node/job-1").expect("a lease");
    assert!(at.abs_diff(now() + 3600) <= 5, "{at}");
    // The owner asking again with a TTL renews: the same address, a later expiry.
    let again = test
        .command(["allocate", "ci", "--owner", "Node/job-1", "--ttl", "2h"])
        .output()
        .unwrap();
    assert_eq!(stdout(&again), stdout(&first));
    let renewed = expires(&test, "Node/job-1").unwrap();
    assert!(renewed.abs_diff(now() + 7200) <= 5, "{renewed}");
    // Without a TTL, asking again leaves the lease as it is.
    let plain = test
        .command(["allocate", "ci", "--owner", "Node/job-1"])
        .output()
        .unwrap();
    assert_eq!(stdout(&plain), stdout(&first));
    assert_eq!(expires(&test, "Node/job-1"), Some(renewed));
    // `renew` by address, as JSON: the allocation with `status.action: renewed`.
    let by_address = test
        .command(["renew", "ci", &stdout(&first), "--ttl", "30m", "-o", "json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&by_address.stdout).unwrap();
    assert_eq!(json["status"]["action"], "renewed", "{json}");
    assert!(expires(&test, "Node/job-1").unwrap().abs_diff(now() + 1800) <= 5);
    // A batch line's `ttl` claims a lease too.
    let mut batch = test
        .command(["allocate", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut batch.stdin.take().unwrap(),
        b"{\"pool\": \"ci\", \"owner\": \"Node/job-2\", \"ttl\": \"10m\"}\n",
    )
    .unwrap();
    assert!(batch.wait().unwrap().success());
    let batch = expires(&test, "Node/job-2").expect("a batch line's lease");
    assert!(batch.abs_diff(now() + 600) <= 5);
    // `list --expired` selects none yet; `-o wide` shows EXPIRES.
    let wide = ok(&test, &["list", "-o", "wide"]);
    assert!(wide.contains("EXPIRES"), "{}", wide);
    let expired = ok(&test, &["list", "--expired", "-o", "name"]);
    assert_eq!(expired, "");
}

#[test]
fn renew_only_renews_and_bad_input_changes_nothing() {
    let test = pool("");
    ok(&test, &["allocate", "ci", "--owner", "Node/perm"]);
    let before = ok(&test, &["list", "-o", "json"]);
    for (args, status, says) in [
        (
            &["renew", "ci", "--owner", "Node/ghost", "--ttl", "1h"][..],
            code::NOT_FOUND,
            "no lease of Node/ghost in pool `ci`",
        ),
        (
            &["renew", "ci", "--owner", "Node/perm", "--ttl", "1h"],
            code::CONFLICT,
            "without a lease",
        ),
        (
            &["renew", "ci", "--owner", "Node/perm", "--ttl", "soon"],
            code::INVALID,
            "--ttl",
        ),
        (
            &["allocate", "ci", "--owner", "Node/x", "--ttl", "0s"],
            code::INVALID,
            "outside 1s to 10 years",
        ),
        (
            &["reconcile", "--expired", "--grace", "later"],
            code::INVALID,
            "--grace",
        ),
    ] {
        let out = test.command(args).output().unwrap();
        assert_eq!(out.status.code(), Some(status), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        common::assert_one_error(&stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert_eq!(ok(&test, &["list", "-o", "json"]), before);
}

/// A CI job killed after its claim leaves a lease; once it lapsed, `reconcile --expired
/// --apply` releases it, through the pool's cooldown: another owner gets another address
/// until `reuseAfter` has passed, then the released one.
#[test]
fn a_killed_jobs_lease_is_released_once_lapsed_and_its_address_cools_down() {
    let test = pool("  reuseAfter: 3s\n");
    let state = ["-d".to_owned(), test.state().display().to_string()];
    let mut job = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "\"$0\" {} allocate ci --owner Node/ci-job --ttl 1s && sleep 60",
            state.join(" ")
        ))
        .arg(env!("CARGO_BIN_EXE_ipamctl"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while expires(&test, "Node/ci-job").is_none() {
        assert!(Instant::now() < deadline, "the job never claimed");
        std::thread::sleep(Duration::from_millis(50));
    }
    job.kill().unwrap();
    job.wait().unwrap();
    let held = ok(&test, &["list", "--owner", "Node/ci-job", "-o", "name"]);
    assert!(!held.is_empty());
    // Not lapsed past its grace yet: nothing to release.
    let early = ok(&test, &["reconcile", "--expired", "--apply"]);
    assert_eq!(early, "");
    std::thread::sleep(Duration::from_millis(2100));
    let report = exits(
        &test,
        &["reconcile", "--expired", "--grace", "0s"],
        code::FAILURE,
    );
    assert!(report.contains("lapsed"), "{}", report);
    let applied = ok(
        &test,
        &["reconcile", "--expired", "--grace", "0s", "--apply"],
    );
    assert!(applied.contains("released"), "{}", applied);
    assert_eq!(expires(&test, "Node/ci-job"), None);
    // The address cools down: another owner is given the next one now.
    let next = test
        .command(["allocate", "ci", "--owner", "Node/other"])
        .output()
        .unwrap();
    assert_eq!(stdout(&next), "192.0.2.2");
    std::thread::sleep(Duration::from_millis(3100));
    let after = test
        .command(["allocate", "ci", "--owner", "Node/third"])
        .output()
        .unwrap();
    assert_eq!(stdout(&after), "192.0.2.1");
    // Its renewal now is exit 3, never a new claim.
    let renew = test
        .command(["renew", "ci", "--owner", "Node/ci-job", "--ttl", "1h"])
        .output()
        .unwrap();
    assert_eq!(renew.status.code(), Some(code::NOT_FOUND), "{renew:?}");
    ok(&test, &["check"]);
}

/// An owner's last acknowledged renewal: its address and `expiresAt` (seconds).
type Acked = Option<(String, u64)>;

/// 32 owners renewing (`renew --ttl 2s`) while `reconcile --expired --grace 0s --apply`
/// runs in a loop; some owners stop renewing, and their leases lapse and are released
/// during the run. Afterwards, every owner whose last acknowledged renewal has not lapsed
/// still holds the address it renewed; an owner whose lease was released is told so
/// (exit 3); no address is held twice.
#[test]
fn renewals_racing_the_reaper_are_never_undone() {
    renewals_race_the_reaper(&pool(""), &|| {});
}

/// [`renewals_racing_the_reaper_are_never_undone`] with `git pull` alongside: the state
/// directory is a clone whose upstream another host keeps committing its own claims to
/// (another pool), and this checkout fast-forwards to them in a loop while its leases are
/// renewed and reaped (git rewrites the pulled files in the working tree beside them).
#[test]
fn renewals_racing_the_reaper_with_git_pull_alongside_are_never_undone() {
    let test = pool(
        "---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: far\nspec:\n  cidr: 198.51.100.0/24\n  kind: public\n",
    );
    let root = test.root().to_path_buf();
    let git = |dir: &std::path::Path, args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.email=t@example.org", "-c", "user.name=t"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    let state = test.state();
    git(&root, &["init", "-q", "--bare", "upstream.git"]);
    git(&state, &["init", "-q", "-b", "main", "."]);
    git(&state, &["add", "-A"]);
    git(&state, &["commit", "-qm", "pools"]);
    git(&state, &["remote", "add", "origin", "../upstream.git"]);
    git(&state, &["push", "-q", "-u", "origin", "main"]);
    git(&root, &["clone", "-q", "-b", "main", "upstream.git", "far"]);
    let far = root.join("far");
    let claims = std::sync::atomic::AtomicUsize::new(0);
    renewals_race_the_reaper(&test, &|| {
        // The other host claims in its pool and pushes; this checkout pulls.
        let k = claims.fetch_add(1, Ordering::Relaxed);
        let owner = format!("Node/far-{k}");
        let out = Command::new(env!("CARGO_BIN_EXE_ipamctl"))
            .arg("-d")
            .arg(&far)
            .args(["allocate", "far", "--owner", &owner])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        git(&far, &["add", "-A"]);
        git(&far, &["commit", "-qm", &owner]);
        git(&far, &["push", "-q", "origin", "main"]);
        git(&state, &["pull", "-q", "--ff-only", "origin", "main"]);
    });
    assert!(claims.load(Ordering::Relaxed) >= 3, "git pulled alongside");
}

/// The storm of [`renewals_racing_the_reaper_are_never_undone`] on `test`, with
/// `alongside` run in a loop by one more thread while it lasts.
fn renewals_race_the_reaper(test: &Test, alongside: &(dyn Fn() + Sync)) {
    let flags = ["-d".to_owned(), test.state().display().to_string()];
    let owners: Vec<String> = (0..32).map(|i| format!("Node/n{i}")).collect();
    for owner in &owners {
        ok(test, &["allocate", "ci", "--owner", owner, "--ttl", "2s"]);
    }
    let bin = env!("CARGO_BIN_EXE_ipamctl");
    let run = |args: &[&str]| Command::new(bin).args(&flags).args(args).output().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Per owner: (address, expiresAt) of its last acknowledged renewal, and whether a
    // renewal was answered exit 3.
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::new(Mutex::new(vec![None; 32]));
    let told_gone = Arc::new(Mutex::new(vec![false; 32]));
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                alongside();
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let out = run(&["reconcile", "--expired", "--grace", "0s", "--apply"]);
                assert!(out.status.success(), "{out:?}");
            }
        });
        for (i, owner) in owners.iter().enumerate() {
            let (stop, acked, told_gone, run) = (&stop, &acked, &told_gone, &run);
            s.spawn(move || {
                // Every fourth owner stops renewing after a while: its lease lapses.
                let quits = Instant::now() + Duration::from_millis(1500 + 200 * (i as u64 % 4));
                while !stop.load(Ordering::Relaxed) {
                    if i % 4 == 0 && Instant::now() > quits {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                    let out = run(&["renew", "ci", "--owner", owner, "--ttl", "2s", "-o", "json"]);
                    match out.status.code() {
                        Some(0) => {
                            let json: serde_json::Value =
                                serde_json::from_slice(&out.stdout).unwrap();
                            let at = json["spec"]["expiresAt"].as_str().unwrap();
                            let at = humantime::parse_rfc3339(at)
                                .unwrap()
                                .duration_since(SystemTime::UNIX_EPOCH)
                                .unwrap()
                                .as_secs();
                            let address = json["spec"]["address"].as_str().unwrap().to_owned();
                            acked.lock().unwrap()[i] = Some((address, at));
                        }
                        Some(3) => {
                            told_gone.lock().unwrap()[i] = true;
                            return;
                        }
                        _ => panic!("renew {owner}: {out:?}"),
                    }
                    std::thread::sleep(Duration::from_millis(300));
                }
            });
        }
        std::thread::sleep(Duration::from_secs(8));
        stop.store(true, Ordering::Relaxed);
    });
    // The reaper has stopped: what lapses from now on stays held.
    let checked_at = now();
    let listed = ok(test, &["list", "--pool", "ci", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let items = list["items"].as_array().unwrap();
    let holder = |owner: &str| {
        items
            .iter()
            .find(|m| m["spec"]["owner"]["name"] == owner.trim_start_matches("Node/"))
            .map(|m| m["spec"]["address"].as_str().unwrap().to_owned())
    };
    let mut kept = 0;
    let mut released = 0;
    for (i, owner) in owners.iter().enumerate() {
        if let Some((address, at)) = &acked.lock().unwrap()[i]
            && *at > checked_at
        {
            assert_eq!(
                holder(owner).as_ref(),
                Some(address),
                "{owner}'s acknowledged renewal (until {at}, checked at {checked_at}) was undone"
            );
            kept += 1;
        }
        if told_gone.lock().unwrap()[i] {
            assert_eq!(holder(owner), None, "{owner} was told its lease is gone");
        }
        if holder(owner).is_none() {
            released += 1;
        }
    }
    eprintln!("{kept} renewals kept, {released} leases released");
    assert!(kept >= 16, "most owners kept renewing: {kept}");
    assert!(released >= 1, "some leases lapsed during the run");
    ok(test, &["check"]);
}

/// A renewal acknowledged while `reconcile --expired --apply` is between judging the lease
/// lapsed and releasing it (held there by a fail point) keeps the lease: the release judges
/// it again and skips it. Needs `cargo test --features failpoints --test cli_lease`.
#[cfg(feature = "failpoints")]
#[test]
fn a_renewal_between_the_reapers_judgement_and_its_release_keeps_the_lease() {
    let test = pool("");
    let address = ok(
        &test,
        &["allocate", "ci", "--owner", "Node/late", "--ttl", "1s"],
    );
    std::thread::sleep(Duration::from_millis(2100));
    let reaper = test
        .command(["reconcile", "--expired", "--grace", "0s", "--apply"])
        .env("FAILPOINTS", "reap-before-release=sleep(2000)")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let renewed = ok(
        &test,
        &["renew", "ci", "--owner", "Node/late", "--ttl", "1h"],
    );
    assert_eq!(renewed, address);
    let reaped = reaper.wait_with_output().unwrap();
    assert!(reaped.status.success(), "{reaped:?}");
    assert!(stdout(&reaped).contains("skipped"), "{reaped:?}");
    assert!(expires(&test, "Node/late").unwrap().abs_diff(now() + 3600) <= 5);
}

/// `check` warns of a lease lapsed past its grace and still held, and `metrics` counts
/// leases and lapsed leases per pool (checked by `promtool check metrics`).
#[test]
#[cfg_attr(
    not(has_promtool),
    ignore = "needs promtool, which checks the metrics (apt-get install prometheus)"
)]
fn check_warns_of_a_lease_lapsed_past_its_grace_and_metrics_count_them() {
    common::needs::require("promtool");
    let test = pool("");
    ok(
        &test,
        &["allocate", "ci", "--owner", "Node/old", "--ttl", "1h"],
    );
    ok(
        &test,
        &["allocate", "ci", "--owner", "Node/fresh", "--ttl", "1h"],
    );
    ok(&test, &["allocate", "ci", "--owner", "Node/perm"]);
    // The first lease, as a clone that was not renewed for a day would hold it.
    let file = "cluster/ipallocations/ci-192-0-2-1.yaml";
    let text = test.read(file);
    let lapsed = regex_lite_replace(&text, "  expiresAt: ", "\"2026-01-01T00:00:00Z\"");
    test.write(file, &lapsed);
    let checked = ok(&test, &["check"]);
    assert!(
        checked.contains("the lease of `Node/old` lapsed at 2026-01-01T00:00:00Z"),
        "{checked}"
    );
    let metrics = ok(&test, &["metrics"]);
    assert!(
        metrics.contains(
            "ipamctl_pool_leases{namespace=\"\",pool=\"ci\",family=\"ipv4\",zone=\"\"} 2"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "ipamctl_pool_lapsed_leases{namespace=\"\",pool=\"ci\",family=\"ipv4\",zone=\"\"} 1"
        ),
        "{metrics}"
    );
    common::promtool(&["check", "metrics"], &metrics);
    // Released by the reaper, the warning is gone.
    ok(&test, &["reconcile", "--expired", "--apply"]);
    assert!(!ok(&test, &["check"]).contains("lapsed"));
}

/// `text` with the value of the line starting with `key` replaced by `value`.
fn regex_lite_replace(text: &str, key: &str, value: &str) -> String {
    text.lines()
        .map(|line| match line.strip_prefix(key) {
            Some(_) => format!("{key}{value}"),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}
