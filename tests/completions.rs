//! Dynamic shell completion, through a real bash: the script `ipamctl completions bash`
//! prints is sourced, its completion function is called as bash calls it on TAB, and the
//! candidates it leaves in COMPREPLY are pool, namespace and subnet names read from the
//! state directory, as well as commands and options.

mod common;

use std::process::Command;

use common::Test;

/// What bash would offer for the words of `line` (the last one being completed), with the
/// state directory `test` as the current directory.
fn complete(test: &Test, line: &[&str]) -> Vec<String> {
    let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        r#"set -u
source <(ipamctl completions bash)
COMP_WORDS=({words})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_TYPE=9
COMPREPLY=()
_clap_complete_ipamctl ipamctl "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        words = words.join(" ")
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(test.state())
        .env("PATH", common::path_with_bin())
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "{line:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_pool_namespace_and_subnet_names_from_the_state_directory() {
    let test = Test::new("populated");
    assert_eq!(
        complete(&test, &["ipamctl", "pool", "show", "vpc-"]),
        ["vpc-dev", "vpc-main"]
    );
    assert_eq!(
        complete(&test, &["ipamctl", "list", "-n", "acme/"]),
        ["acme/dev", "acme/prod"]
    );
    // The pools' prefixes and the subnets Node owners are named after.
    assert_eq!(
        complete(&test, &["ipamctl", "list", "--within", "10.4"]),
        ["10.42.0.0/16", "10.42.1.0/24"]
    );
    assert_eq!(
        complete(&test, &["ipamctl", "release", "pub"]),
        ["public-zone-a"]
    );
    // Commands and options still come from the command line's definition.
    assert_eq!(complete(&test, &["ipamctl", "po"]), ["pool"]);
    assert!(complete(&test, &["ipamctl", "list", "--sel"]).contains(&"--selector".to_owned()));
    // A Node owner named after its subnet is offered as a subnet.
    let test = test
        .args([
            "allocate",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "Node/10.42.7.0/24",
            "--within",
            "10.42.7.0/24",
        ])
        .run()
        .then();
    assert_eq!(
        complete(
            &test,
            &["ipamctl", "allocate", "vpc-main", "--within", "10.42.7"]
        ),
        ["10.42.7.0/24"]
    );
}

#[test]
fn completion_outside_a_state_directory_offers_no_names_and_no_error() {
    let test = Test::without_state();
    std::fs::create_dir_all(test.state()).expect("an empty directory");
    let offered = complete(&test, &["ipamctl", "pool", "show", ""]);
    assert!(offered.contains(&"--map".to_owned()), "{offered:?}");
    assert!(offered.iter().all(|o| o.starts_with('-')), "{offered:?}");
}

#[test]
fn vpc_get_and_delete_complete_the_names_of_vpcs() {
    let test = Test::new("populated")
        .args([
            "vpc",
            "create",
            "blue",
            "-n",
            "acme/dev",
            "--cidr",
            "10.50.0.0/16",
        ])
        .run()
        .then()
        // Dual stack: `vpc-green` and `vpc-green-v6`, one VPC.
        .args([
            "vpc",
            "create",
            "green",
            "-n",
            "acme/prod",
            "--cidr",
            "10.51.0.0/16",
            "--cidr",
            "fd00:51::/48",
        ])
        .run()
        .then()
        // IPv6 alone: its pool is `vpc-violet-v6`, the VPC `violet`.
        .args([
            "vpc",
            "create",
            "violet",
            "-n",
            "acme/prod",
            "--cidr",
            "fd00:52::/48",
        ])
        .run()
        .then();
    // `vpc-main` is VPC main's pool (its ownerRefs say so); `vpc-dev` is a private pool no
    // VPC owns: not offered.
    let offered = complete(&test, &["ipamctl", "vpc", "get", ""]);
    let names: Vec<&str> = offered
        .iter()
        .map(String::as_str)
        .filter(|o| !o.starts_with('-'))
        .collect();
    assert_eq!(names, ["blue", "green", "main", "violet"]);
    assert_eq!(
        complete(&test, &["ipamctl", "vpc", "delete", "g"]),
        ["green"]
    );
}
