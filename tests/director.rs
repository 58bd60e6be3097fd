//! The end-to-end director scenario (`tests/director/scenario.sh`): a bash script drives the
//! real binary as a director's automation would, from an empty state directory through
//! claims, deletions, a VPC delete and a reconcile to `check` clean with the expected counts.

mod common;

use std::process::Command;

#[test]
fn a_directors_bash_automation_ends_with_check_clean_and_the_expected_counts() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/director/scenario.sh");
    let out = Command::new("bash")
        .arg(script)
        .current_dir(tmp.path())
        .env("PATH", common::path_with_bin())
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .output()
        .expect("run bash");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.ends_with("director scenario: ok (52 allocations, check clean)\n"),
        "{stdout}{stderr}"
    );
}
