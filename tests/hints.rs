//! Every hint is a command that works (issue 46, finding 6). The check itself is a hook of
//! the harness (`tests/common/hints.rs`): every command any suite runs through
//! [`Test::run`] has each `ipamctl …` command of its advice run on a copy of its state, and
//! one that exits 2 fails the test that provoked it. This suite checks what the hook takes
//! for a command, reproduces the finding (the hinted release is run and frees the address),
//! and provokes the hints no other suite does.

mod common;

use common::hints::{Hinted, commands_in, hints_of};
use common::{Test, code, uid};

/// `commands_in` of `hint`, as (command, run or not).
fn found(hint: &str) -> Vec<(String, bool)> {
    commands_in(hint)
        .into_iter()
        .map(|Hinted { command, skipped }| (command, skipped.is_none()))
        .collect()
}

#[test]
fn the_hook_takes_each_command_a_hint_spells_and_runs_no_template() {
    let run = |c: &str| (c.to_owned(), true);
    let not = |c: &str| (c.to_owned(), false);
    assert_eq!(
        found("release it first: ipamctl release q 10.1.0.1 -n acme --owner VirtualMachine/a/0"),
        [run(
            "ipamctl release q 10.1.0.1 -n acme --owner VirtualMachine/a/0"
        )]
    );
    assert_eq!(
        found("`ipamctl pool list -A` and `ipamctl subnet list -A` show them"),
        [run("ipamctl pool list -A"), run("ipamctl subnet list -A")]
    );
    assert_eq!(
        found("release it (ipamctl release p 10.0.0.1 --owner FloatingIP/f) and allocate again"),
        [run("ipamctl release p 10.0.0.1 --owner FloatingIP/f")]
    );
    assert_eq!(
        found("drop `-o`: ipamctl completions bash > ipamctl.bash"),
        [run("ipamctl completions bash > ipamctl.bash")]
    );
    assert_eq!(
        found("ipamctl report -o html > ipam.html"),
        [run("ipamctl report -o html > ipam.html")]
    );
    assert_eq!(
        found("run `ipamctl check` to see why; ipamctl reads only `<name>.yaml` files"),
        [run("ipamctl check")]
    );
    // Templates, pipelines and commands for a database are prose.
    assert_eq!(
        found("ipamctl pool show POOL --map -o svg > pool.svg"),
        [not("ipamctl pool show POOL --map -o svg > pool.svg")]
    );
    assert_eq!(
        found("give each its own with `ipamctl mac set p ADDRESS --owner KIND/NAME --mac NEW`"),
        [not("ipamctl mac set p ADDRESS --owner KIND/NAME --mac NEW")]
    );
    assert_eq!(
        found("ipamctl --store postgresql://… import DIR"),
        [not("ipamctl --store postgresql://… import DIR")]
    );
    assert_eq!(
        found("to read from a pipe, give `-f -` and the pipe on stdin (`cmd | ipamctl … -f -`)"),
        [not("cmd | ipamctl … -f -")]
    );
    assert_eq!(
        found("run `ipamctl --store 'host=/x' init`"),
        [not("ipamctl --store 'host=/x' init")]
    );
    // Prose that names the tool is no command.
    assert_eq!(
        found("not read: ipamctl reads only `<name>.yaml` manifests"),
        []
    );
}

#[test]
fn the_hook_reads_hint_lines_findings_and_a_batch_results_hints() {
    let stderr = "error: it failed\nhint: run `ipamctl check`\n";
    let stdout = "{\"index\":0,\"error\":{\"exit\":4,\"message\":\"m\",\"hint\":\"ipamctl list\"}}\n\
                  SEVERITY  PATH  MESSAGE\n\
                  error     a/b   fix it with `ipamctl mac set p 10.0.0.1 --owner X/y --mac auto`\n";
    assert_eq!(
        hints_of(stdout, stderr),
        [
            "run `ipamctl check`",
            "ipamctl list",
            "a/b   fix it with `ipamctl mac set p 10.0.0.1 --owner X/y --mac auto`",
        ]
    );
}

/// Two subnets of `acme/prod/vpc-main`: `web` (10.42.1.0/24) and `db` (10.42.2.0/24).
fn two_subnets() -> Test {
    let mut t = Test::new("seed");
    for (name, cidr) in [("web", "10.42.1.0/24"), ("db", "10.42.2.0/24")] {
        t = t
            .args([
                "subnet",
                "create",
                name,
                "--pool",
                "vpc-main",
                "-n",
                "acme/prod",
            ])
            .args(["--cidr", cidr])
            .run()
            .then();
    }
    t
}

/// The finding: an owner holding an address in one subnet asks for one in another; the
/// hint named `ipamctl release vpc-web 10.20.0.3 -n acme/prod`, which exits 2 (it names no
/// owner). The hook fails that; here the hinted command is also run by hand, and frees the
/// address, after which the same request succeeds.
#[test]
fn the_hint_for_an_address_outside_the_asked_subnet_releases_it() {
    let owner = ["--owner", "VirtualMachine/web-01/0", "--uid", uid::WEB01];
    let ran = two_subnets()
        .args(["allocate", "vpc-main", "-n", "acme/prod", "--subnet", "web"])
        .args(owner)
        .run();
    let held = ran.stdout.trim().to_owned();
    let ran = ran
        .then()
        .args(["allocate", "vpc-main", "-n", "acme/prod", "--subnet", "db"])
        .args(owner)
        .fails(code::CONFLICT)
        .run();
    let hint = ran
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("hint: release it first: "))
        .unwrap_or_else(|| panic!("no release hint:\n{}", ran.stderr))
        .to_owned();
    assert!(hint.contains(&held), "{hint}");
    let args: Vec<&str> = hint.split_whitespace().skip(1).collect();
    let ran = ran
        .then()
        .args(&args)
        .stdout(&format!(
            "ipallocation/vpc-main-{} released\n",
            held.replace('.', "-")
        ))
        .run();
    let ran = ran
        .then()
        .args(["allocate", "vpc-main", "-n", "acme/prod", "--subnet", "db"])
        .args(owner)
        .run();
    assert!(ran.stdout.starts_with("10.42.2."), "{}", ran.stdout);
}

/// The same for each flag the held address can break: `--address`, `--within`,
/// `--reserved`, for an owner with a uid and one without.
#[test]
fn the_hint_for_a_held_address_that_breaks_a_flag_is_a_guarded_release() {
    for (owner, uid) in [
        ("VirtualMachine/web-01/0", Some(uid::WEB01)),
        ("FloatingIP/f", None),
    ] {
        let mut who = vec!["--owner", owner];
        who.extend(uid.iter().flat_map(|u| ["--uid", *u]));
        let t = Test::new("seed")
            .args(["allocate", "vpc-main", "-n", "acme/prod"])
            .args(&who)
            .stdout("10.42.0.1\n")
            .run()
            .then();
        let mut t = t;
        for broken in [
            vec!["--address", "10.42.0.9"],
            vec!["--within", "10.42.7.0/24"],
            vec!["--reserved", "10.42.0.1"],
        ] {
            let ran = t
                .args(["allocate", "vpc-main", "-n", "acme/prod"])
                .args(&who)
                .args(&broken)
                .fails(code::CONFLICT)
                .run();
            assert!(
                ran.stderr
                    .contains("hint: release it first: ipamctl release"),
                "{}",
                ran.stderr
            );
            t = ran.then();
        }
    }
}

/// The commands `ran`'s advice names that the hook runs (not templates), asserting there
/// is one: a hint that turns into prose or a template would otherwise go unchecked.
#[track_caller]
fn runnable(ran: &common::Ran) -> Vec<String> {
    let commands: Vec<String> = hints_of(&ran.stdout, &ran.stderr)
        .iter()
        .flat_map(|h| commands_in(h))
        .filter(|h| h.skipped.is_none())
        .map(|h| h.command)
        .collect();
    assert!(
        !commands.is_empty(),
        "no command to run in:\n{}{}",
        ran.stdout,
        ran.stderr
    );
    commands
}

/// Errors whose hint is a command, each provoked once (most suites provoke them too): the
/// hook runs each hint; those that name an object are run here too and must succeed.
#[test]
fn each_hint_of_an_output_format_a_command_lacks_works() {
    // `--map -o json` of a pool in a namespace: the hint named the pool without its
    // namespace (`ipamctl pool show vpc-main`), which exits 3.
    let ran = Test::new("seed")
        .args([
            "pool",
            "show",
            "vpc-main",
            "-n",
            "acme/prod",
            "--map",
            "-o",
            "json",
        ])
        .fails(code::INVALID)
        .run();
    let hinted = runnable(&ran);
    assert_eq!(hinted, ["ipamctl pool show vpc-main -n acme/prod"]);
    let args: Vec<&str> = hinted[0].split_whitespace().skip(1).collect();
    let mut t = ran.then().args(&args).run().then();
    // A format only another command has: the hint is that command (`report`, `diff`,
    // `completions` with a redirection; the hook runs them in a shell).
    for (args, hint) in [
        (
            vec!["completions", "bash", "-o", "json"],
            "ipamctl completions bash > ipamctl.bash",
        ),
        (
            vec!["pool", "list", "-o", "html"],
            "ipamctl report -o html > ipam.html",
        ),
        (
            vec!["pool", "list", "-o", "markdown"],
            "ipamctl diff -o markdown > comment.md",
        ),
    ] {
        let ran = t.args(&args).fails(code::INVALID).run();
        assert_eq!(runnable(&ran), [hint]);
        t = ran.then();
    }
}

/// A pool left marked as being deleted (an interrupted `pool delete`, here by hand)
/// refuses claims; its hint is the delete that finishes it, named in full (it said
/// "`ipamctl vpc delete` (or `pool delete`) again", which exits 2), and it does.
#[test]
fn the_hint_of_a_pool_being_deleted_finishes_the_delete() {
    let t = Test::new("seed");
    let pool = "cluster/ipampools/public-zone-a.yaml";
    let marked = t.read(pool).replacen(
        "metadata:\n",
        "metadata:\n  deletionTimestamp: \"2026-01-01T00:00:00Z\"\n",
        1,
    );
    t.write(pool, &marked);
    let ran = t
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/fip-9"])
        .fails(code::CONFLICT)
        .run();
    let hinted = runnable(&ran);
    assert_eq!(hinted, ["ipamctl pool delete public-zone-a"]);
    let ran = ran.then().args(["pool", "delete", "public-zone-a"]).run();
    assert!(!ran.exists(pool), "the delete did not finish");
}

/// `vpc delete` that cannot release an allocation file (it does not parse) keeps the pool;
/// the hint names the VPC to delete again (it said `ipamctl vpc delete`, which exits 2).
#[test]
fn the_hint_of_a_vpc_delete_that_keeps_its_pool_names_the_vpc() {
    // A file that does not parse: the database cannot hold one.
    let t = Test::new("empty")
        .file_store_only()
        .args([
            "vpc",
            "create",
            "blue",
            "-n",
            "acme",
            "--cidr",
            "10.60.0.0/24",
        ])
        .run()
        .then();
    t.write(
        "namespaces/acme/ipallocations/vpc-blue-10-60-0-7.yaml",
        "not: [a manifest\n",
    );
    let ran = t
        .args(["vpc", "delete", "blue", "-n", "acme"])
        .status(code::CONFLICT)
        .run();
    let hinted = runnable(&ran);
    assert!(
        hinted
            .iter()
            .any(|c| c == "ipamctl vpc delete blue -n acme"),
        "{hinted:?}"
    );
}
