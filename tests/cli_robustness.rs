//! What must never go wrong: damaged files in the state directory, a closed stdout pipe,
//! I/O failures (exit 1); plus the commands that need no state (completions, help).

mod common;

use std::process::Stdio;

use common::{Test, code};

const BROKEN: &str = "cluster/ipallocations/tiny-192-0-2-2.yaml";

// --- a damaged allocation file ------------------------------------------------------

#[test]
fn broken_allocation_file_warns_and_its_address_is_never_handed_out() {
    // tiny is 192.0.2.0/29 with gateway .1; the file of .2 does not parse.
    let mut test = Test::new("broken-allocation").file_store_only();
    for (i, expected) in ["192.0.2.3", "192.0.2.4", "192.0.2.5", "192.0.2.6"]
        .into_iter()
        .enumerate()
    {
        let ran = test
            .args([
                "allocate",
                "tiny",
                "--owner",
                &format!("FloatingIP/fip-{i}"),
            ])
            .stdout(&format!("{expected}\n"))
            .run();
        assert!(
            ran.stderr.starts_with(&format!("warning: {BROKEN}: ")),
            "{}",
            ran.stderr
        );
        assert!(
            ran.stderr.contains("its address stays taken"),
            "{}",
            ran.stderr
        );
        test = ran.then();
    }
    let ran = test
        .args(["allocate", "tiny", "--owner", "FloatingIP/fip-9"])
        .status(code::EXHAUSTED)
        .run();
    assert!(
        ran.stderr.contains("error: pool `tiny` is exhausted"),
        "{}",
        ran.stderr
    );
    // The damaged file is left exactly as it was.
    assert_eq!(
        ran.read(BROKEN),
        Test::new("broken-allocation").read(BROKEN)
    );
}

#[test]
fn broken_allocation_file_is_never_handed_out_even_when_asked_for() {
    let ran = Test::new("broken-allocation")
        .file_store_only()
        .args([
            "allocate",
            "tiny",
            "--owner",
            "FloatingIP/fip-1",
            "--address",
            "192.0.2.2",
        ])
        .status(code::CONFLICT)
        .run();
    assert!(
        ran.stderr
            .contains("error: 192.0.2.2 in pool `tiny` is held"),
        "{}",
        ran.stderr
    );
}

#[test]
fn broken_allocation_file_is_named_in_a_warning_by_list() {
    let ran = Test::new("broken-allocation")
        .file_store_only()
        .args(["list"])
        .stdout("")
        .run();
    insta::assert_snapshot!(ran.stderr);
}

#[test]
fn broken_allocation_file_counts_as_taken_in_pool_show() {
    let ran = Test::new("broken-allocation")
        .file_store_only()
        .args(["pool", "show", "tiny"])
        .run();
    assert!(ran.stdout.contains("Allocated:   1\n"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("Free ranges: 192.0.2.3-192.0.2.6\n"),
        "{}",
        ran.stdout
    );
}

#[test]
fn broken_allocation_file_keeps_pool_delete_refused() {
    Test::new("broken-allocation")
        .file_store_only()
        .args(["pool", "delete", "tiny"])
        .fails(code::CONFLICT)
        .run();
}

#[test]
fn broken_pool_file_is_an_error_naming_it_not_a_crash() {
    let test = Test::new("seed").file_store_only();
    test.write(
        "cluster/ipampools/public-zone-a.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: public-zone-a}\nspec: {cidr: 203.0.113.0/24, kind: public, gatway: 203.0.113.1}\n",
    );
    let ran = test
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-1"])
        .fails(code::INVALID)
        .run();
    assert!(
        ran.stderr
            .starts_with("error: cluster/ipampools/public-zone-a.yaml: "),
        "{}",
        ran.stderr
    );
    // `pool list` skips it with a warning and lists the others.
    let ran = ran.then().args(["pool", "list"]).run();
    assert!(ran.stderr.starts_with("warning: "), "{}", ran.stderr);
    assert!(ran.stdout.contains("vpc-main"), "{}", ran.stdout);
}

// --- I/O failures: exit 1 -----------------------------------------------------------

#[test]
fn apply_of_a_directory_is_invalid_input() {
    let test = Test::new("seed");
    std::fs::create_dir(test.root().join("pools.d")).expect("create a directory");
    let ran = test
        .args(["apply", "-f", "pools.d"])
        .fails(code::INVALID)
        .run();
    assert_eq!(
        ran.stderr,
        "error: pools.d: is a directory, not a regular file\n"
    );
}

#[test]
fn symlink_inside_the_state_directory_is_refused() {
    let test = Test::new("seed").file_store_only();
    let outside = test.root().join("outside");
    std::fs::create_dir(&outside).expect("create a directory");
    std::os::unix::fs::symlink(&outside, test.path("cluster/ipallocations"))
        .expect("create a symlink");
    let ran = test
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-1"])
        .status(code::FAILURE)
        .run();
    common::assert_one_error(&ran.stderr);
    assert!(ran.stderr.contains("is a symlink"), "{}", ran.stderr);
    assert_eq!(
        std::fs::read_dir(&outside)
            .expect("read the directory")
            .count(),
        0,
        "nothing was written through the symlink"
    );
}

// --- a closed stdout pipe -----------------------------------------------------------

/// Runs `args` on a copy of `case` with stdout a pipe whose reading end is closed before
/// ipamctl starts, so that its first write fails with EPIPE; that must be a silent success.
fn assert_closed_pipe_is_success(case: &str, args: &[&str]) {
    let test = Test::new(case);
    let (reader, writer) = std::io::pipe().expect("create a pipe");
    drop(reader);
    let output = test
        .command(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run ipamctl");
    assert_eq!(output.status.code(), Some(code::OK), "{args:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "", "{args:?}");
}

#[test]
fn list_into_a_closed_pipe_is_success() {
    assert_closed_pipe_is_success("populated", &["list"]);
    assert_closed_pipe_is_success("populated", &["list", "-o", "json"]);
    assert_closed_pipe_is_success("populated", &["pool", "list"]);
}

#[test]
fn completions_into_a_closed_pipe_is_success() {
    assert_closed_pipe_is_success("empty", &["completions", "bash"]);
}

#[test]
fn list_piped_to_head_succeeds_under_pipefail() {
    let test = Test::new("populated");
    let output = std::process::Command::new("bash")
        .args([
            "-c",
            r#"set -o pipefail; "$0" -d "$1" list | head -1; "$0" -d "$1" completions bash | head -1"#,
        ])
        .arg(common::BIN)
        .arg(test.state())
        .env_remove("IPAMCTL_STATE_DIR")
        .output()
        .expect("run bash");
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("NAMESPACE  POOL "), "{stdout}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

// --- commands that need no state ----------------------------------------------------

#[test]
fn completions_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "-F _clap_complete_ipamctl ipamctl"),
        ("zsh", "#compdef ipamctl"),
        (
            "fish",
            "complete --keep-order --exclusive --command ipamctl",
        ),
    ] {
        // No state directory is needed: run where there is none.
        let ran = Test::without_state()
            .no_state_flag()
            .args(["completions", shell])
            .stderr("")
            .run();
        assert!(ran.stdout.contains(marker), "{shell}: {}", ran.stdout);
        // The script asks ipamctl itself for the candidates.
        assert!(
            ran.stdout.contains(&format!("COMPLETE={shell}")) || ran.stdout.contains("COMPLETE"),
            "{shell}"
        );
    }
}

#[test]
fn completions_for_an_unknown_shell_is_a_usage_error() {
    let ran = Test::without_state()
        .no_state_flag()
        .args(["completions", "powershell"])
        .status(code::INVALID)
        .run();
    assert!(ran.stderr.starts_with("error: "), "{}", ran.stderr);
    assert_eq!(ran.stdout, "");
}

#[test]
fn help_documents_the_exit_codes() {
    let ran = Test::without_state().no_state_flag().args(["--help"]).run();
    for line in [
        "0  success",
        "2  invalid usage or input",
        "3  not found",
        "4  conflict",
        "5  pool exhausted",
    ] {
        assert!(
            ran.stdout.contains(line),
            "missing `{line}`:\n{}",
            ran.stdout
        );
    }
}

#[test]
fn errors_never_print_a_backtrace_even_when_asked_to() {
    let ran = Test::new("seed")
        .env("RUST_BACKTRACE", "1")
        .args(["allocate", "nope", "--owner", "FloatingIP/fip-1"])
        .fails(code::NOT_FOUND)
        .run();
    assert!(!ran.stderr.contains("backtrace"), "{}", ran.stderr);
}
