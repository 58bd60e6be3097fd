//! The end-to-end director scenario (`tests/director/scenario.sh`): a bash script drives the
//! real binary as a director's automation would, from an empty state directory through
//! claims, deletions, a VPC delete and a reconcile to `check` clean with the expected counts.

mod common;

use std::process::Command;

/// Runs `tests/director/SCRIPT` in an empty directory with the binary on PATH: (stdout,
/// stderr), after asserting it succeeded. The scripts parse JSON with python3, as a
/// director's automation would.
fn run_script(script: &str) -> (String, String) {
    common::needs::require("python3");
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let script = format!("{}/tests/director/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(&script)
        .current_dir(tmp.path())
        .env("PATH", common::path_with_bin())
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .output()
        .expect("run bash");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{script}: {stdout}{stderr}");
    (stdout, stderr)
}

#[test]
#[cfg_attr(
    not(has_python3),
    ignore = "needs python3, which the script parses JSON with (apt-get install python3)"
)]
fn a_dual_stack_director_claims_each_nic_in_its_subnets_in_one_request() {
    let (stdout, stderr) = run_script("dual_stack.sh");
    assert!(
        stdout.ends_with("director dual-stack scenario: ok (588 allocations, check clean)\n"),
        "{stdout}{stderr}"
    );
}

#[test]
#[cfg_attr(
    not(has_python3),
    ignore = "needs python3, which the script parses JSON with (apt-get install python3)"
)]
fn a_directors_bash_automation_ends_with_check_clean_and_the_expected_counts() {
    let (stdout, stderr) = run_script("scenario.sh");
    assert!(
        stdout.ends_with("director scenario: ok (52 allocations, check clean)\n"),
        "{stdout}{stderr}"
    );
}
