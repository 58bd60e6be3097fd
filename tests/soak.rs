//! `bench/soak` (issue 43, section 5), short: the debug binary served under mixed load and
//! SIGKILLed every few seconds, on the file store and on PostgreSQL. The script's own
//! checks pass (every acknowledged claim held, nothing held twice, `check` clean), and
//! they can fail: with `BENCH_SOAK_CORRUPT=1` the script deletes one acknowledged claim
//! behind the store's back before its final check, and must say so and exit 1.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `bench/soak` on `store` (`file` or `pg`) for `secs`, killing the server every
/// `kill_every` seconds, writing into `out`; its output, bounded.
fn soak(
    store: &str,
    secs: u32,
    kill_every: u32,
    out: &Path,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut cmd = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/soak"));
    cmd.env("BENCH_BIN", common::BIN)
        .env("BENCH_SOAK_STORES", store)
        .env("BENCH_SOAK_SECS", secs.to_string())
        .env("BENCH_SOAK_KILL_EVERY", kill_every.to_string())
        .env("BENCH_SOAK_CLIENTS", "4")
        .env("BENCH_OUT", out)
        .env_remove("BENCH_SOAK_CORRUPT")
        .env_remove("BENCH_SOAK_PG")
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("run bench/soak");
    common::pg::wait_or_kill(child, u64::from(secs) + 120, "bench/soak")
}

/// The row of `kind` in the summary's table of requests: (sent, acknowledged).
fn row(summary: &str, kind: &str) -> (u64, u64) {
    let line = summary
        .lines()
        .find(|l| l.starts_with(&format!("| {kind} |")))
        .unwrap_or_else(|| panic!("no row for {kind}:\n{summary}"));
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    (cells[2].parse().unwrap(), cells[3].parse().unwrap())
}

/// A clean soak on `store`, then one that corrupts an acknowledged claim and must fail.
fn soak_passes_and_its_checker_fails_on_a_lost_claim(
    store: &str,
    env: &[(&str, &str)],
    corrupt_env: &[(&str, &str)],
) {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean");
    let out = soak(store, 24, 8, &clean, env);
    let summary = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{summary}\n{stderr}");
    assert!(summary.contains("**0 violations**"), "{summary}");
    // The server was killed mid-load and came back, and every kind of request was answered.
    let kills: u32 = summary
        .split(" kills (SIGKILL")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no kill count:\n{summary}"));
    assert!(kills >= 2, "{summary}");
    let mut kinds = vec![
        "allocate",
        "re-ask",
        "release",
        "allocateMany",
        "createVpc",
        "createSubnet",
        "allocations",
        "pools",
        "cli allocate",
    ];
    if store == "file" {
        kinds.extend(["git: claim, push, pull", "cp: claim, copy in"]);
    }
    for kind in kinds {
        let (sent, acked) = row(&summary, kind);
        assert!(
            acked > 0 && acked <= sent,
            "{kind}: {acked} of {sent}\n{summary}"
        );
    }
    // RSS sampled in more than one life, plotted.
    let csv = std::fs::read_to_string(clean.join(format!("rss-{store}.csv"))).unwrap();
    let lives: std::collections::BTreeSet<&str> = csv
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(1))
        .collect();
    assert!(lives.len() >= 2, "{csv}");
    let svg = std::fs::read_to_string(clean.join(format!("rss-{store}.svg"))).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("<polyline"),
        "{svg}"
    );
    assert_eq!(
        std::fs::read_to_string(clean.join("summary.md"))
            .unwrap()
            .trim(),
        summary.trim()
    );

    // The checker fails: one acknowledged claim removed behind the store's back.
    let corrupt = dir.path().join("corrupt");
    let mut env = corrupt_env.to_vec();
    env.push(("BENCH_SOAK_CORRUPT", "1"));
    let out = soak(store, 8, 4, &corrupt, &env);
    let summary = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{summary}\n{stderr}");
    assert!(summary.contains("**1 violations**"), "{summary}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: 1 violations; the first: ")
            && last.contains(" was acknowledged 10.")
            && last.ends_with("the store holds nothing"),
        "{stderr}"
    );
}

#[test]
#[cfg_attr(not(has_python3), ignore = "needs python3: apt-get install python3")]
fn soak_on_the_file_store_loses_nothing_acknowledged_and_its_checker_can_fail() {
    soak_passes_and_its_checker_fails_on_a_lost_claim("file", &[], &[]);
}

#[test]
#[cfg_attr(
    not(all(has_python3, has_postgres)),
    ignore = "needs python3 and PostgreSQL (apt-get install python3 postgresql, or IPAMCTL_TEST_PG=URL)"
)]
fn soak_on_postgres_loses_nothing_acknowledged_and_its_checker_can_fail() {
    let clean = common::pg::Db::empty();
    let corrupt = common::pg::Db::empty();
    soak_passes_and_its_checker_fails_on_a_lost_claim(
        "pg",
        &[("BENCH_SOAK_PG", &clean.url)],
        &[("BENCH_SOAK_PG", &corrupt.url)],
    );
}
