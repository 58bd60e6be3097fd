//! A pool keeps what it holds: `apply` (and `import`) refuse, with exit 4 naming the
//! holders, a change that would break an allocation, a subnet, a prefix claim or a VPC's
//! range claim; `check` reports each of these (and an owner's second prefix in a
//! supernet) on a state made by hand. Runs on PostgreSQL too (`IPAMCTL_TEST_STORE=postgres`).

mod common;

use common::{Test, code};

/// Pool `p`: 10.99.0.0/16, of `kind`, in acme/dev.
fn pool_p(cidr: &str, kind: &str) -> String {
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\n  namespace: acme/dev\nspec:\n  cidr: {cidr}\n  kind: {kind}\n"
    )
}

/// The seed fixture with pool `p` (a private /16) applied.
fn with_p() -> Test {
    let t = Test::new("seed");
    let file = t.input("p.yaml", &pool_p("10.99.0.0/16", "private"));
    t.args(["apply", "-f", &file]).run().then()
}

/// `apply -f` of `yaml` on `t`: exit 4, nothing written, stderr naming every one of `named`.
fn refused(t: Test, yaml: &str, named: &[&str]) -> Test {
    let file = t.input("changed.yaml", yaml);
    let ran = t
        .args(["apply", "-f", &file])
        .fails(code::CONFLICT)
        .unchanged()
        .run();
    for wanted in named {
        assert!(ran.stderr.contains(wanted), "{wanted}\n{}", ran.stderr);
    }
    ran.then()
}

/// A supernet pool holding an allocation would hand out a prefix over the held address.
#[test]
fn apply_refuses_a_kind_change_of_a_pool_that_holds_an_allocation() {
    let t = with_p()
        .args([
            "allocate",
            "p",
            "-n",
            "acme/dev",
            "--owner",
            "VirtualMachine/web/0",
        ])
        .stdout("10.99.0.1\n")
        .run()
        .then();
    refused(
        t,
        &pool_p("10.99.0.0/16", "supernet"),
        &[
            "p-10-99-0-1 (10.99.0.1)",
            "changing its kind from private to supernet",
        ],
    );
}

/// A pool holding a subnet keeps its kind, and a shrink keeps the subnet inside.
#[test]
fn apply_refuses_a_kind_change_or_a_shrink_that_strands_a_subnet() {
    let t = with_p()
        .args([
            "subnet",
            "create",
            "s",
            "-n",
            "acme/dev",
            "--pool",
            "p",
            "--cidr",
            "10.99.200.0/24",
        ])
        .run()
        .then();
    let t = refused(
        t,
        &pool_p("10.99.0.0/16", "supernet"),
        &["s (10.99.200.0/24)", "changing its kind"],
    );
    let t = refused(
        t,
        &pool_p("10.99.0.0/17", "private"),
        &["1 subnet outside", "s (10.99.200.0/24)"],
    );
    // A shrink that keeps the subnet inside is fine.
    let file = t.input("ok.yaml", &pool_p("10.99.128.0/17", "private"));
    t.args(["apply", "-f", &file]).run();
}

/// A supernet `space` (10.64.0.0/14, handing out /16s) and VPCs `a` and `b` drawn from it.
fn two_vpcs() -> Test {
    let t = Test::new("seed");
    let file = t.input(
        "space.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: space\nspec:\n  cidr: 10.64.0.0/14\n  kind: supernet\n  prefixLengths:\n    min: 16\n    max: 16\n",
    );
    let mut t = t.args(["apply", "-f", &file]).run().then();
    for vpc in ["a", "b"] {
        t = t
            .args([
                "vpc",
                "create",
                vpc,
                "-n",
                "acme/dev",
                "--from-pool",
                "space",
                "--prefix-length",
                "16",
            ])
            .run()
            .then();
    }
    t
}

const VPC_A: &str = "namespaces/acme/dev/ipampools/vpc-a.yaml";

/// Growing VPC `a`'s pool from its /16 to a /15 would take VPC `b`'s range too: both would
/// hand out 10.65.0.5.
#[test]
fn apply_refuses_a_vpc_pool_leaving_its_range_claim() {
    let t = two_vpcs();
    let a = t.read(VPC_A);
    assert!(a.contains("cidr: 10.64.0.0/16"), "{a}");
    let t = refused(
        t,
        &a.replace("10.64.0.0/16", "10.64.0.0/15"),
        &[
            "would leave the range its VPC claimed",
            "space-10-64-0-0-16",
        ],
    );
    // Inside its range it may change (a shrink that holds nothing outside).
    let file = t.input("shrink.yaml", &a.replace("10.64.0.0/16", "10.64.0.0/17"));
    t.args(["apply", "-f", &file]).run();
}

/// `check` reports what a hand can still make: a VPC pool outside its range claim, an
/// allocation in a supernet, a subnet of a supernet, and one owner holding two prefixes of
/// a supernet (a claim copied under another name, as merging two clones gives).
#[test]
fn check_reports_holders_a_hand_broke() {
    let t = two_vpcs().file_store_only();
    let a = t.read(VPC_A);
    t.write(VPC_A, &a.replace("10.64.0.0/16", "10.64.0.0/15"));
    let claim = "cluster/ipprefixclaims/space-10-64-0-0-16.yaml";
    let copy = t
        .read(claim)
        .replace("space-10-64-0-0-16", "space-10-66-0-0-16")
        .replace("10.64.0.0/16", "10.66.0.0/16");
    t.write("cluster/ipprefixclaims/space-10-66-0-0-16.yaml", &copy);
    t.write(
        "cluster/ipallocations/space-10-67-0-5.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAllocation\nmetadata:\n  name: space-10-67-0-5\nspec:\n  pool: space\n  address: 10.67.0.5\n  owner:\n    kind: VirtualMachine\n    name: web/0\n",
    );
    let ran = t.args(["check"]).status(code::FAILURE).run();
    for wanted in [
        "VPC pool `vpc-a` (10.64.0.0/15) is outside the range its VPC claimed (10.64.0.0/16, 10.66.0.0/16)",
        "holds 2 prefixes of pool `space` (10.64.0.0/16, 10.66.0.0/16)",
        "address 10.67.0.5 is in pool `space`, a supernet",
    ] {
        assert!(ran.stdout.contains(wanted), "{wanted}\n{}", ran.stdout);
    }
    // Each copy of the owner's claim is named.
    assert_eq!(
        ran.stdout.matches("holds 2 prefixes").count(),
        2,
        "{}",
        ran.stdout
    );
}

/// The prefix claims index (`.index/…/ipprefixclaims/POOL.idx`) of `t`'s pool `space`.
fn claims_index(t: &Test) -> std::path::PathBuf {
    let dir = t.path(".index");
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.ends_with("ipprefixclaims/space.idx") {
                return p;
            }
        }
    }
    panic!("no prefix claims index of `space`");
}

/// The prefix index, like the owner index, never vouches for an owner it has not verified
/// against the file: editing only the owner of a line (owner `a`'s prefix now "b's") makes
/// neither owner's `allocate` answer the other's prefix, nor give either a second one.
#[test]
fn an_edited_prefix_index_line_never_answers_one_owners_prefix_to_another() {
    let t = Test::new("seed").file_store_only();
    let file = t.input(
        "space.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: space\nspec:\n  cidr: 10.64.0.0/14\n  kind: supernet\n",
    );
    let mut t = t.args(["apply", "-f", &file]).run().then();
    let claim = |owner: &str| {
        vec![
            "allocate".to_owned(),
            "space".into(),
            "--prefix-length".into(),
            "24".into(),
            "--owner".into(),
            format!("FloatingIP/{owner}"),
        ]
    };
    for (owner, prefix) in [("a", "10.64.0.0/24\n"), ("b", "10.64.1.0/24\n")] {
        t = t.args(claim(owner)).stdout(prefix).run().then();
    }
    // Look-ups record both files once they are old enough (a whole-second file system
    // needs over two seconds).
    let mut index = String::new();
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        t = t.args(claim("c-probe")).run().then();
        index = std::fs::read_to_string(claims_index(&t)).unwrap_or_default();
        if index.contains("\n10.64.0.0/24 ") && index.contains("\n10.64.1.0/24 ") {
            break;
        }
    }
    let line = index
        .lines()
        .rfind(|l| l.starts_with("10.64.0.0/24 "))
        .unwrap_or_else(|| panic!("no record of a's claim:\n{index}"))
        .to_owned();
    assert!(line.ends_with(" FloatingIP a -"), "{line}");
    let edited = index.replace(&line, &line.replace(" FloatingIP a -", " FloatingIP b -"));
    std::fs::write(claims_index(&t), edited).unwrap();
    let t = t.args(claim("b")).stdout("10.64.1.0/24\n").run().then();
    let t = t.args(claim("a")).stdout("10.64.0.0/24\n").run().then();
    let claims = t
        .files()
        .iter()
        .filter(|f| f.contains("ipprefixclaims/space-"))
        .count();
    assert_eq!(claims, 3, "{:?}", t.files());
}
