//! `ipamctl allocate --dry-run --explain`: the address alone on stdout, and on stderr each
//! lower address with the reason it was skipped, capped, with the holders of taken ones.

mod common;

use common::{Test, code, uid};

#[test]
fn explain_names_gateway_excludes_and_the_holder_of_each_lower_taken_address() {
    Test::new("populated")
        .args([
            "allocate",
            "public-zone-a",
            "--owner",
            "FloatingIP/fip-9",
            "--dry-run",
            "--explain",
        ])
        .stdout("203.0.113.5\n")
        .stderr(&format!(
            "\
explain: pool `public-zone-a` (203.0.113.0/24), lowest address first:
  203.0.113.0  the pool's network address
  203.0.113.1  the pool's gateway
  203.0.113.2  excluded by the pool (`203.0.113.2`)
  203.0.113.3  excluded by the pool (`203.0.113.3`)
  203.0.113.4  taken by `FloatingIP/fip-1` (uid {})
  -> 203.0.113.5: the lowest free candidate
dry run: `FloatingIP/fip-9` would claim 203.0.113.5; nothing written
",
            uid::FIP1
        ))
        .unchanged()
        .run();
}

#[test]
fn explain_with_within_and_reserved_names_the_subnet_edges_and_the_outside() {
    Test::new("populated")
        .args([
            "allocate",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "Node/web",
            "--within",
            "10.42.1.0/24",
            "--reserved",
            "10.42.1.1",
            "--dry-run",
            "--explain",
        ])
        .stdout("10.42.1.2\n")
        .stderr(
            "\
explain: pool `acme/prod/vpc-main` (10.42.0.0/16, within 10.42.1.0/24), lowest address first:
  10.42.0.0              the pool's network address
  10.42.0.1-10.42.0.255  outside `--within 10.42.1.0/24`
  10.42.1.0              the network address of `--within 10.42.1.0/24`
  10.42.1.1              reserved by `--reserved`
  -> 10.42.1.2: the lowest free candidate
dry run: `Node/web` would claim 10.42.1.2; nothing written
",
        )
        .unchanged()
        .run();
}

#[test]
fn explain_caps_the_lines_and_counts_the_rest() {
    let mut test = Test::new("race");
    for i in 0..25 {
        test = test
            .args(["allocate", "race", "--owner", &format!("FloatingIP/f-{i}")])
            .run()
            .then();
    }
    let ran = test
        .args([
            "allocate",
            "race",
            "--owner",
            "FloatingIP/late",
            "--dry-run",
            "--explain",
        ])
        .stdout("10.7.0.26\n")
        .run();
    let lines: Vec<&str> = ran.stderr.lines().collect();
    // Header, 20 lines (network address, then 19 taken), the count, the choice, the dry run.
    assert_eq!(lines.len(), 24, "{}", ran.stderr);
    assert_eq!(lines[2], "  10.7.0.1   taken by `FloatingIP/f-0`");
    assert_eq!(lines[21], "  ... and 6 more skipped addresses not shown");
    assert_eq!(lines[22], "  -> 10.7.0.26: the lowest free candidate");
}

#[test]
fn explain_when_the_owner_already_holds_an_address_says_so() {
    Test::new("populated")
        .args([
            "allocate",
            "public-zone-a",
            "--owner",
            "FloatingIP/fip-1",
            "--uid",
            uid::FIP1,
            "--dry-run",
            "--explain",
        ])
        .stdout("203.0.113.4\n")
        .stderr(
            "\
explain: `FloatingIP/fip-1` already holds 203.0.113.4 in pool `public-zone-a`; an owner gets its address back, so no candidate is considered
dry run: `FloatingIP/fip-1` already holds 203.0.113.4; nothing written
",
        )
        .run();
}

#[test]
fn explain_of_an_exhausted_pool_explains_every_address_then_fails() {
    let ran = Test::new("small-pools")
        .args(["allocate", "p30", "--owner", "FloatingIP/a"])
        .stdout("198.51.100.6\n")
        .run()
        .then()
        .args([
            "allocate",
            "p30",
            "--owner",
            "FloatingIP/b",
            "--dry-run",
            "--explain",
        ])
        .status(code::EXHAUSTED)
        .stdout("")
        .run();
    let lines: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(
        lines[1..6],
        [
            "  198.51.100.4  the pool's network address",
            "  198.51.100.5  the pool's gateway",
            "  198.51.100.6  taken by `FloatingIP/a`",
            "  198.51.100.7  the pool's broadcast address",
            "  -> no free candidate left",
        ]
    );
    assert!(lines[6].starts_with("error: "), "{}", ran.stderr);
}

#[test]
fn explain_without_dry_run_explains_the_claim_it_makes() {
    let ran = Test::new("seed")
        .args([
            "allocate",
            "public-zone-a",
            "--owner",
            "FloatingIP/fip-1",
            "--explain",
        ])
        .stdout("203.0.113.4\n")
        .run();
    assert_eq!(
        ran.stderr,
        "explain: pool `public-zone-a` (203.0.113.0/24), lowest address first:\n\
        \x20 203.0.113.0  the pool's network address\n\
        \x20 203.0.113.1  the pool's gateway\n\
        \x20 203.0.113.2  excluded by the pool (`203.0.113.2`)\n\
        \x20 203.0.113.3  excluded by the pool (`203.0.113.3`)\n\
        \x20 -> 203.0.113.4: the lowest free candidate\n"
    );
    assert!(ran.exists("cluster/ipallocations/public-zone-a-203-0-113-4.yaml"));
}
