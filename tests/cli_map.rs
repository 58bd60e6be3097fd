//! `ipamctl pool show --map`: the address map as text (glyphs, labels, legend, usage, colour
//! only when asked for) and as SVG (parsed as XML, cells counted by class), on state
//! directories built with `init`, `apply` and `allocate`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use common::code;

/// Two pools: public `lab`, 192.0.2.0/26 with gateway .1, excluding .2 and .48/30, holding
/// .3, .4, .5 and .40; private `acme/prod/big`, 10.42.0.0/16 with gateway 10.42.0.1,
/// holding 10.42.0.2 and 10.42.1.1-3.
const POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: lab
spec:
  cidr: 192.0.2.0/26
  kind: public
  gateway: 192.0.2.1
  exclude: [192.0.2.2, 192.0.2.48/30]
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: big
  namespace: acme/prod
spec:
  cidr: 10.42.0.0/16
  kind: private
  gateway: 10.42.0.1
";

struct State {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl State {
    fn new() -> State {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = tmp.path().join("state");
        let state = State { _tmp: tmp, dir };
        state.ok(&["init", state.dir.to_str().expect("UTF-8 temp path")]);
        let pools = state.dir.parent().expect("a parent").join("pools.yaml");
        std::fs::write(&pools, POOLS).expect("write pools.yaml");
        state.run_ok(&["apply", "-f"], &pools);
        for vm in ["a", "b", "c"] {
            state.ok(&[
                "allocate",
                "lab",
                "--owner",
                &format!("VirtualMachine/{vm}/0"),
            ]);
        }
        let ok = |args: &[&str]| state.ok(args);
        ok(&[
            "allocate",
            "lab",
            "--owner",
            "FloatingIP/f",
            "--address",
            "192.0.2.40",
        ]);
        ok(&["allocate", "big", "-n", "acme/prod", "--owner", "Node/n0"]);
        for node in ["n1", "n2", "n3"] {
            ok(&[
                "allocate",
                "big",
                "-n",
                "acme/prod",
                "--owner",
                &format!("Node/{node}"),
                "--within",
                "10.42.1.0/24",
                "--reserved",
                "10.42.1.0",
            ]);
        }
        state
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ipamctl"));
        cmd.env_remove("NO_COLOR")
            .env_remove("IPAMCTL_STATE_DIR")
            .arg("-d")
            .arg(&self.dir)
            .args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run ipamctl")
    }

    fn run_ok(&self, args: &[&str], path: &Path) {
        self.cmd(args).arg(path).assert().success();
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "ipamctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    /// Runs a command that must fail with `code`; returns its stderr.
    fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        assert_eq!(out.status.code(), Some(code), "ipamctl {args:?}");
        assert!(out.stdout.is_empty(), "nothing on stdout for {args:?}");
        String::from_utf8(out.stderr).expect("UTF-8 output")
    }
}

/// The cells of an SVG map by class (`allocated`, `free`, …), from parsing it as XML.
fn cells_by_class(svg: &str) -> BTreeMap<String, usize> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(
        doc.root_element().tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let mut counts = BTreeMap::new();
    for node in doc.descendants().filter(|n| n.has_tag_name("rect")) {
        let classes: Vec<&str> = node.attribute("class").unwrap_or("").split(' ').collect();
        if let ["cell", kind] = classes[..] {
            *counts.entry(kind.to_owned()).or_default() += 1;
        }
    }
    counts
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|&(k, n)| (k.to_owned(), n)).collect()
}

#[test]
fn map_of_a_slash_26_shows_every_address_with_legend_and_usage() {
    let state = State::new();
    let text = state.ok(&["pool", "show", "lab", "--map", "--color", "never"]);
    insta::assert_snapshot!(text);
    assert!(!text.contains('\x1b'));
    // The usage figures match `pool show`'s.
    let show = state.ok(&["pool", "show", "lab"]);
    assert!(show.contains("Candidates:  56"));
    assert!(text.contains("56 candidates, 4 allocated, 52 free (7.1% used)"));
}

#[test]
fn colour_only_when_asked_for_or_on_a_terminal() {
    let state = State::new();
    let map = |args: &[&str], no_color: Option<&str>| {
        let mut cmd = state.cmd(&["pool", "show", "lab", "--map"]);
        cmd.args(args);
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let out = cmd.output().expect("run ipamctl");
        assert!(out.status.success());
        String::from_utf8(out.stdout).expect("UTF-8 output")
    };
    let coloured = map(&["--color", "always"], None);
    assert!(coloured.contains("\x1b[1;31m###\x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[1;34mG\x1b[0m"));
    // Stripped of its escape codes, it is the plain map.
    let plain = map(&["--color", "never"], None);
    assert_eq!(strip_ansi(&coloured), plain);
    // stdout is a pipe here: `auto` does not colour, NO_COLOR or not.
    assert_eq!(map(&[], None), plain);
    assert_eq!(map(&["--color", "auto"], Some("1")), plain);
    assert_eq!(map(&[], Some("1")), plain);
    // An explicit `--color always` wins over NO_COLOR, as no-color.org asks.
    assert_eq!(map(&["--color", "always"], Some("1")), coloured);
}

fn strip_ansi(text: &str) -> String {
    let mut plain = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('\x1b') {
        plain.push_str(&rest[..at]);
        let end = rest[at..].find('m').expect("an SGR sequence ends with m");
        rest = &rest[at + end + 1..];
    }
    plain.push_str(rest);
    plain
}

#[test]
fn map_of_a_slash_16_has_one_cell_per_slash_24() {
    let state = State::new();
    let text = state.ok(&[
        "pool",
        "show",
        "big",
        "-n",
        "acme/prod",
        "--map",
        "--color",
        "never",
    ]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "acme/prod/big 10.42.0.0/16: one cell per /24");
    // 256 cells, 32 to a row: 8 rows, each labelled with its first /24.
    let rows: Vec<&str> = lines[1..9].to_vec();
    let labels: Vec<&str> = rows.iter().map(|r| r.split(' ').next().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "10.42.0.0",
            "10.42.32.0",
            "10.42.64.0",
            "10.42.96.0",
            "10.42.128.0",
            "10.42.160.0",
            "10.42.192.0",
            "10.42.224.0"
        ]
    );
    assert_eq!(rows[0], "10.42.0.0    ::...... ........ ........ ........");
    assert_eq!(rows[7], "10.42.224.0  ........ ........ ........ ........");
    assert_eq!(lines[9], "");
    assert_eq!(
        lines[10],
        ". empty (254)  : under 5% used (2)  + 5% to under 20% used (0)  \
         * 20% to under 80% used (0)  % 80% or more used (0)  # full (0)  x no candidates (0)"
    );
    assert_eq!(
        lines[11],
        "shade: share of a cell's candidates allocated (steps at 5%, 20%, 80%)"
    );
    assert_eq!(
        lines[12],
        "pool 10.42.0.0/16: 65533 candidates, 4 allocated, 65529 free (0.0% used)"
    );
}

#[test]
fn within_narrows_the_map_to_a_subnet() {
    let state = State::new();
    let args = [
        "pool",
        "show",
        "big",
        "-n",
        "acme/prod",
        "--map",
        "--color",
        "never",
    ];
    let mut narrow = args.to_vec();
    narrow.extend(["--within", "10.42.1.0/28"]);
    insta::assert_snapshot!(state.ok(&narrow), @r"
    acme/prod/big 10.42.0.0/16, within 10.42.1.0/28: one cell per address
    10.42.1.0  -###.... .......-

    # allocated (3)  . free (11)  G gateway (0)  r reserved by a subnet (0)  x excluded (0)  - network/broadcast (2)
    pool 10.42.0.0/16: 65533 candidates, 4 allocated, 65529 free (0.0% used)
    within 10.42.1.0/28: 14 candidates, 3 allocated, 11 free (21.4% used)
    ");
    // A /20 is still larger than a /22: one cell per /24, 16 of them.
    let mut wide = args.to_vec();
    wide.extend(["--within", "10.42.0.0/20"]);
    let text = state.ok(&wide);
    assert!(text.contains("10.42.0.0/20: one cell per /24\n10.42.0.0  ::...... ........\n"));
}

#[test]
fn within_outside_the_pool_is_invalid() {
    let state = State::new();
    let stderr = state.fails(
        &["pool", "show", "lab", "--map", "--within", "192.0.2.64/28"],
        code::INVALID,
    );
    assert_eq!(
        stderr,
        "error: --within: `192.0.2.64/28` does not lie inside pool `lab` (192.0.2.0/26)\n"
    );
    state.fails(
        &["pool", "show", "lab", "--map", "--within", "10.0.0.1/24"],
        code::INVALID,
    );
    // Without `--map`, `--within` gives that prefix's usage (issue 12), checked the same way.
    state.fails(
        &["pool", "show", "lab", "--within", "192.0.2.64/28"],
        code::INVALID,
    );
    assert!(
        state
            .ok(&["pool", "show", "lab", "--within", "192.0.2.0/28"])
            .contains("Within:      192.0.2.0/28")
    );
}

#[test]
fn svg_holds_one_cell_per_address_with_a_class_per_state() {
    let state = State::new();
    let svg = state.ok(&["pool", "show", "lab", "--map", "-o", "svg"]);
    assert!(!svg.contains('\x1b'));
    assert_eq!(
        cells_by_class(&svg),
        counts(&[
            ("allocated", 4),
            ("free", 52),
            ("gateway", 1),
            ("excluded", 5),
            ("network-broadcast", 2),
        ])
    );
    // The legend and the usage figures are in it.
    let doc = roxmltree::Document::parse(&svg).expect("well-formed");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    assert!(texts.contains(&"# allocated (4)"));
    assert!(texts.contains(&"- network/broadcast (2)"));
    assert!(texts.contains(&"pool 192.0.2.0/26: 56 candidates, 4 allocated, 52 free (7.1% used)"));
    assert!(texts.contains(&"192.0.2.32"));
    let swatches = doc
        .descendants()
        .filter(|n| {
            n.attribute("class")
                .is_some_and(|c| c.starts_with("swatch "))
        })
        .count();
    assert_eq!(swatches, 6);
}

#[test]
fn svg_of_a_slash_16_shades_slash_24s_and_within_narrows_it() {
    let state = State::new();
    let base = [
        "pool",
        "show",
        "big",
        "-n",
        "acme/prod",
        "--map",
        "-o",
        "svg",
    ];
    let svg = state.ok(&base);
    assert_eq!(
        cells_by_class(&svg),
        counts(&[("empty", 254), ("shade-1", 2)])
    );
    let mut narrow = base.to_vec();
    narrow.extend(["--within", "10.42.1.0/24"]);
    assert_eq!(
        cells_by_class(&state.ok(&narrow)),
        counts(&[("allocated", 3), ("free", 251), ("network-broadcast", 2)])
    );
}

#[test]
fn svg_is_only_for_the_map() {
    let state = State::new();
    let stderr = state.fails(&["list", "-o", "svg"], code::INVALID);
    assert_eq!(
        stderr,
        "error: `-o svg` is only for the address map of `pool show --map`\n\
         hint: ipamctl pool show POOL --map -o svg > pool.svg\n"
    );
    state.fails(&["pool", "show", "lab", "-o", "svg"], code::INVALID);
    state.fails(&["pool", "list", "-o", "svg"], code::INVALID);
    // And the map is not data: json and yaml are `pool show` without `--map`.
    state.fails(
        &["pool", "show", "lab", "--map", "-o", "json"],
        code::INVALID,
    );
}

#[test]
fn the_too_large_hint_can_be_pasted_as_it_is() {
    let manifest = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: huge\n  namespace: t/big\nspec:\n  cidr: 10.0.0.0/8\n  kind: private\n";
    let test = common::Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(manifest)
        .run()
        .then();
    let ran = test
        .args(["pool", "show", "huge", "-n", "t/big", "--map"])
        .fails(code::INVALID)
        .run();
    let hint = ran
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("hint: narrow it: "))
        .expect("a hint with the command to run")
        .to_owned();
    assert_eq!(
        hint,
        "ipamctl pool show huge -n t/big --map --within 10.0.0.0/16"
    );
    let words: Vec<String> = hint.split(' ').skip(1).map(str::to_owned).collect();
    ran.then().args(words).run();
}

#[test]
fn a_subnets_gateway_and_reserved_addresses_are_drawn_as_such_in_the_text_map() {
    let state = State::new();
    state.ok(&[
        "subnet",
        "create",
        "web",
        "-n",
        "acme/prod",
        "--pool",
        "big",
        "--cidr",
        "10.42.2.0/28",
        "--reserved",
        "10.42.2.2",
    ]);
    let text = state.ok(&[
        "pool",
        "show",
        "big",
        "-n",
        "acme/prod",
        "--map",
        "--within",
        "10.42.2.0/27",
    ]);
    insta::assert_snapshot!(text, @r"
    acme/prod/big 10.42.0.0/16, within 10.42.2.0/27: one cell per address
    10.42.2.0  -Gr..... .......- ........ .......-

    # allocated (0)  . free (27)  G gateway (1)  r reserved by a subnet (1)  x excluded (0)  - network/broadcast (3)
    subnet web 10.42.2.0/28: 0 of 12 candidates allocated
    pool 10.42.0.0/16: 65529 candidates, 4 allocated, 65525 free (0.0% used)
    within 10.42.2.0/27: 27 candidates, 0 allocated, 27 free (0.0% used)
    ");
}

#[test]
fn an_ipv6_map_has_a_line_per_subnet_and_per_slash_64_in_use_with_its_count() {
    let state = State::new();
    state.ok(&[
        "vpc",
        "create",
        "six",
        "-n",
        "acme/v6",
        "--cidr",
        "fd00:103::/48",
    ]);
    state.ok(&[
        "subnet",
        "create",
        "web6",
        "-n",
        "acme/v6",
        "--pool",
        "vpc-six-v6",
        "--cidr",
        "fd00:103:0:1::/64",
    ]);
    for vm in ["a", "b"] {
        state.ok(&[
            "allocate",
            "vpc-six-v6",
            "-n",
            "acme/v6",
            "--owner",
            &format!("VirtualMachine/{vm}/0"),
            "--subnet",
            "web6",
        ]);
    }
    state.ok(&[
        "allocate",
        "vpc-six-v6",
        "-n",
        "acme/v6",
        "--owner",
        "Node/edge",
        "--address",
        "fd00:103:0:7::9",
    ]);
    let text = state.ok(&["pool", "show", "vpc-six-v6", "-n", "acme/v6", "--map"]);
    insta::assert_snapshot!(text, @r"
    acme/v6/vpc-six-v6 (VPC acme/v6/six) fd00:103::/48: one cell per subnet, and per /64 in use outside the subnets
    fd00:103:0:1::/64  :  subnet web6: 2 of 2^64 - 2 candidates allocated
    fd00:103:0:7::/64  :  1 of 2^64 candidates allocated

    . empty (0)  : 1 to 9 allocated (2)  + 10 to 99 allocated (0)  * 100 to 999 allocated (0)  % 1,000 or more allocated (0)  # full (0)  x no candidates (0)
    shade: allocations a cell holds, log scale (steps at 1, 10, 100, 1,000), not its share
    pool fd00:103::/48: 2^80 - 3 candidates, 3 allocated, 2^80 - 6 free (0.0% used)
    ");
}

/// A supernet hands out prefixes, so `pool show --map` draws it by them: a bar of shares of
/// the pool, then each claimed prefix with its holder and each free block, in address order.
#[test]
fn a_supernet_map_shows_its_claimed_prefixes_and_free_blocks() {
    let t = common::Test::new("seed");
    let file = t.input(
        "sn.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: sn}\nspec: {cidr: 10.80.0.0/16, kind: supernet}\n",
    );
    let t = t
        .args(["apply", "-f", &file])
        .run()
        .then()
        .args([
            "allocate",
            "sn",
            "--prefix-length",
            "20",
            "--owner",
            "FloatingIP/a",
        ])
        .stdout("10.80.0.0/20\n")
        .run()
        .then()
        .args([
            "allocate",
            "sn",
            "--prefix-length",
            "24",
            "--owner",
            "FloatingIP/b",
        ])
        .stdout("10.80.16.0/24\n")
        .run()
        .then()
        .args(["pool", "show", "sn", "--map"])
        .unchanged()
        .run();
    let lines: Vec<&str> = t.stdout.lines().collect();
    assert_eq!(
        lines[..6],
        [
            "sn 10.80.0.0/16: supernet, 2 claimed prefixes, one cell per /22",
            // The /24 is a quarter of the fifth /22: the step of 20% to under 80%.
            &format!("####*{}", ".".repeat(59)),
            "",
            "10.80.0.0/20    claimed   FloatingIP/a",
            "10.80.16.0/24   claimed   FloatingIP/b",
            "10.80.17.0/24   free      -",
        ],
        "{}",
        t.stdout
    );
    assert!(
        t.stdout.contains("10.80.128.0/17  free      -"),
        "{}",
        t.stdout
    );
}
