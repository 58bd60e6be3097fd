//! `ipamctl init` and finding the state directory: `--state-dir`, `IPAMCTL_STATE_DIR`,
//! upward discovery as git does it, and global options on either side of the subcommand.

mod common;

use common::{Test, code};

#[test]
fn init_creates_marker_and_gitignore() {
    let ran = Test::without_state()
        .args(["init", "state"])
        .no_state_flag()
        .stdout("statedirectory/state created\n")
        .stderr("")
        .run();
    assert!(ran.read(".ipamctl").contains("layout: 1\n"));
    insta::assert_snapshot!(ran.read(".gitignore"));
    // Nothing but the two dot-files: no manifest, no directory a reviewer would see.
    assert_eq!(ran.files(), Vec::<String>::new());
}

#[test]
fn init_is_idempotent() {
    let test = Test::new("empty");
    let marker = test.read(".ipamctl");
    let ran = test
        .args(["init", "state"])
        .no_state_flag()
        .stdout("statedirectory/state unchanged\n")
        .run();
    assert_eq!(ran.read(".ipamctl"), marker);
}

#[test]
fn init_keeps_existing_manifests() {
    Test::new("populated")
        .file_store_only()
        .args(["init"])
        .stdout("statedirectory/state unchanged\n")
        .unchanged()
        .run();
}

#[test]
fn init_defaults_to_the_state_dir_option() {
    let ran = Test::without_state()
        .args(["init"])
        .stdout("statedirectory/state created\n")
        .run();
    assert!(ran.exists(".ipamctl"));
}

#[test]
fn init_defaults_to_the_current_directory() {
    let test = Test::without_state();
    std::fs::create_dir(test.state()).expect("create the directory");
    let ran = test
        .current_dir("state")
        .args(["init"])
        .stdout("statedirectory/. created\n")
        .run();
    assert!(ran.exists(".ipamctl"));
    assert!(ran.exists(".gitignore"));
}

#[test]
fn init_then_commands_work_on_the_new_directory() {
    Test::without_state()
        .args(["init"])
        .run()
        .then()
        .args(["list"])
        .stdout("")
        .stderr("No allocations found.\n")
        .run();
}

#[test]
fn missing_state_dir_option_target_exits_3_with_init_hint() {
    let ran = Test::without_state()
        .args(["list"])
        .fails(code::NOT_FOUND)
        .run();
    assert!(ran.stderr.contains("ipamctl init"), "{}", ran.stderr);
    assert!(!ran.stderr.contains("--state-dir"), "{}", ran.stderr);
    insta::assert_snapshot!(ran.stderr);
}

#[test]
fn state_dir_option_naming_a_plain_directory_exits_3() {
    let test = Test::without_state();
    std::fs::create_dir(test.state()).expect("create the directory");
    let ran = test.args(["pool", "list"]).fails(code::NOT_FOUND).run();
    // It was named: no advice to name a directory, but how to make this one a state
    // directory, or use a database.
    assert!(!ran.stderr.contains("--state-dir"), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("`ipamctl init state`"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("IPAMCTL_STORE"), "{}", ran.stderr);
}

#[test]
fn no_state_dir_found_upward_exits_3_with_init_hint() {
    let ran = Test::without_state()
        .no_state_flag()
        .args(["list"])
        .fails(code::NOT_FOUND)
        .run();
    // The three ways to name a store, the database's environment variable included.
    for way in [
        "ipamctl init",
        "-d DIR",
        "IPAMCTL_STATE_DIR",
        "IPAMCTL_STORE",
    ] {
        assert!(ran.stderr.contains(way), "{way}: {}", ran.stderr);
    }
    insta::assert_snapshot!(ran.stderr);
}

#[test]
fn state_dir_is_discovered_upward_from_a_subdirectory() {
    let expected = Test::new("populated")
        .args(["list", "-n", "acme/prod"])
        .run()
        .stdout;
    let ran = Test::new("populated")
        .current_dir("state/namespaces/acme/prod/ipallocations")
        .args(["list", "-n", "acme/prod"])
        .stdout(&expected)
        .run();
    assert!(ran.stdout.contains("10.42.0.9"), "{}", ran.stdout);
}

#[test]
fn state_dir_is_discovered_in_the_current_directory() {
    Test::new("seed")
        .current_dir("state")
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-1"])
        .stdout("203.0.113.4\n")
        .run();
}

#[test]
fn state_dir_from_environment_variable() {
    let ran = Test::new("seed")
        .no_state_flag()
        .env("IPAMCTL_STATE_DIR", "state")
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-1"])
        .stdout("203.0.113.4\n")
        .run();
    assert!(ran.exists("cluster/ipallocations/public-zone-a-203-0-113-4.yaml"));
}

#[test]
fn state_dir_option_wins_over_environment_variable() {
    Test::new("seed")
        .file_store_only()
        .env("IPAMCTL_STATE_DIR", "does-not-exist")
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-1"])
        .stdout("203.0.113.4\n")
        .run();
}

#[test]
fn environment_variable_naming_no_state_dir_exits_3() {
    Test::new("seed")
        .no_state_flag()
        .env("IPAMCTL_STATE_DIR", "does-not-exist")
        .args(["list"])
        .fails(code::NOT_FOUND)
        .run();
}

#[test]
fn global_options_work_after_the_subcommand() {
    let before = Test::new("populated")
        .no_state_flag()
        .args(["-d", "state", "-o", "json", "-n", "acme/dev", "list"])
        .run()
        .stdout;
    let ran = Test::new("populated")
        .no_state_flag()
        .args(["list", "-o", "json", "-n", "acme/dev", "-d", "state"])
        .stdout(&before)
        .run();
    assert!(ran.stdout.contains("vpc-dev-10-50-0-2"), "{}", ran.stdout);
    assert!(!ran.stdout.contains("vpc-main"), "{}", ran.stdout);
}

#[test]
fn global_options_work_after_nested_subcommands_and_arguments() {
    Test::new("seed")
        .no_state_flag()
        .args([
            "allocate",
            "vpc-main",
            "--owner",
            "VPC/router",
            "--state-dir",
            "state",
            "--namespace",
            "acme/prod",
        ])
        .stdout("10.42.0.1\n")
        .run()
        .then()
        .no_state_flag()
        .args(["pool", "show", "vpc-main", "-n", "acme/prod", "-d", "state"])
        .run();
}

#[test]
fn unsupported_layout_version_is_exit_1() {
    let test = Test::new("empty").file_store_only();
    test.write(".ipamctl", "layout: 99\n");
    let ran = test.args(["list"]).fails(code::FAILURE).run();
    insta::assert_snapshot!(ran.stderr);
}
