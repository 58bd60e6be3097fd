//! The command line as a client of `ipamctl serve` (`--server URL`, issue 43 §4): each
//! command a script uses (`allocate`, `release` (with `-l`), `list`, `pool
//! list|show|create|delete` (`show --map` too), `vpc
//! create|get|list|delete`, `subnet create|list|show|delete`, `mac set`, `metrics`, `quota
//! list`), run through a real server on loopback, prints what the same
//! command prints locally on an identical copy of the fixture, with the same exit code, and
//! leaves the same state; the connection's failures (a port nobody listens on, a wrong
//! token, a read-only token claiming, TLS with a CA made by openssl, an answer lost after
//! the request was sent) each have their own `error:` line and exit code, and change
//! nothing; commands that need a local state are exit 2 before anything is sent.

mod common;
mod serve_common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serve_common::{Server, Store, token};

const BIN: &str = env!("CARGO_BIN_EXE_ipamctl");

/// `ipamctl` with `args` and nothing from the environment that picks a store or a token.
fn ipamctl(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    for var in [
        "IPAMCTL_STATE_DIR",
        "IPAMCTL_STORE",
        "IPAMCTL_SERVER",
        "IPAMCTL_TOKEN",
    ] {
        cmd.env_remove(var);
    }
    cmd.args(args);
    cmd
}

/// `ipamctl --server url` with `args`, the bearer `bearer` in `IPAMCTL_TOKEN`.
fn remote(url: &str, bearer: &str, args: &[&str]) -> Output {
    ipamctl(&["--server", url])
        .args(args)
        .env("IPAMCTL_TOKEN", bearer)
        .output()
        .expect("run ipamctl --server")
}

/// `ipamctl -d dir` with `args`.
fn local(dir: &Path, args: &[&str]) -> Output {
    ipamctl(&["-d", dir.to_str().unwrap()])
        .args(args)
        .output()
        .expect("run ipamctl -d")
}

/// Text with each `creationTimestamp` and `deletionTimestamp` value blanked (two processes
/// claiming, or deleting a VPC's pool, a second apart stamp different seconds), and a
/// not-found failure's hint left out of a batch's JSON and YAML results (see [`told`]);
/// nothing else may differ.
fn stamped(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with("hint:"))
        .map(|l| {
            let stamp = ["creationTimestamp", "deletionTimestamp"]
                .into_iter()
                .filter_map(|key| l.find(key).map(|at| (at, key)))
                .min();
            match stamp {
                Some((at, key)) => format!("{}{key} …", &l[..at]),
                None => without_hint(l),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A JSON line without its `"hint":"…"` member.
fn without_hint(line: &str) -> String {
    let Some(at) = line.find(",\"hint\":\"") else {
        return line.to_owned();
    };
    let rest = &line[at + 9..];
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return format!("{}{}", &line[..at], &rest[i + 1..]),
            _ => escaped = false,
        }
    }
    line.to_owned()
}

/// stderr without its `hint:` lines: a server does not hint at what a token's caller might
/// not see (a not-found error's hint names other pools and namespaces, `Scope::scrub`).
fn told(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| !l.trim_start().starts_with("hint:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A fixture twice: one copy behind a server, one run locally.
struct Pair {
    served: Store,
    server: Server,
    here: common::Test,
}

impl Pair {
    fn new(case: &str) -> Pair {
        let served = Store::fixture(case);
        // On a database the server's executor runs a connection per worker, and a batch's
        // workers hand addresses out apart (`src/store/pg/siblings.rs`); the local batch
        // runs on one (`--jobs 1`). One worker each, so that both pick the same addresses.
        let server = Server::start(&served, &["--workers", "1"]);
        Pair {
            served,
            server,
            here: common::Test::new(case),
        }
    }

    /// Runs `args` through the server and locally: same stdout (timestamps aside), same
    /// exit code, same stderr (hints aside). The exit code.
    #[track_caller]
    fn same(&self, args: &[&str]) -> i32 {
        let there = remote(&self.server.url, token(), args);
        let here = local(&self.here.state(), args);
        let what = format!(
            "ipamctl {}\n--- through the server:\n{}{}\n--- locally:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&there.stdout),
            String::from_utf8_lossy(&there.stderr),
            String::from_utf8_lossy(&here.stdout),
            String::from_utf8_lossy(&here.stderr),
        );
        assert_eq!(there.status.code(), here.status.code(), "{what}");
        assert_eq!(stamped(&there.stdout), stamped(&here.stdout), "{what}");
        assert_eq!(told(&there.stderr), told(&here.stderr), "{what}");
        here.status.code().unwrap()
    }

    /// Both states, as `list`, `pool list`, `subnet list` and `vpc list -o yaml` read each
    /// locally, are the same.
    #[track_caller]
    fn states_agree(&self) {
        for command in ["list", "pool list", "subnet list", "vpc list"] {
            let mut args: Vec<&str> = command.split(' ').collect();
            args.extend(["-o", "yaml"]);
            let served = self.served.ipamctl(&args).output().unwrap();
            let here = local(&self.here.state(), &args);
            assert!(
                served.status.success() && here.status.success(),
                "{command}"
            );
            assert_eq!(stamped(&served.stdout), stamped(&here.stdout), "{command}");
            assert!(!served.stdout.is_empty(), "{command}");
        }
    }
}

#[test]
fn reading_commands_print_what_they_print_locally() {
    for case in ["populated", "subnets", "dual-stack"] {
        let pair = Pair::new(case);
        for format in [None, Some("wide"), Some("json"), Some("yaml"), Some("name")] {
            let with = |args: &[&str]| -> Vec<String> {
                let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
                if let Some(f) = format {
                    v.extend(["-o".to_owned(), f.to_owned()]);
                }
                v
            };
            let pools = ["pool", "list"];
            let run = |args: &[&str]| {
                pair.same(&with(args).iter().map(String::as_str).collect::<Vec<_>>())
            };
            assert_eq!(run(&pools), 0);
            assert_eq!(run(&["list"]), 0);
            run(&["list", "-n", "acme/prod"]);
            run(&[
                "list",
                "--pool",
                "vpc-main",
                "-n",
                "acme/prod",
                "--kind",
                "VirtualMachine",
            ]);
            run(&["list", "--owner", "VirtualMachine/web-01/0"]);
            run(&["list", "--within", "10.42.0.0/28", "-n", "acme/prod"]);
            run(&["pool", "show", "vpc-main", "-n", "acme/prod"]);
            run(&["pool", "show", "public-zone-a"]);
            run(&["vpc", "list"]);
            run(&["vpc", "list", "-n", "acme/prod"]);
            run(&["vpc", "get", "main", "-n", "acme/prod"]);
            run(&["subnet", "list"]);
            run(&["subnet", "list", "-n", "acme/prod", "--pool", "vpc-main"]);
        }
        // Not found, and bad input, are the same codes.
        assert_eq!(pair.same(&["list", "-n", "acme/nowhere"]), 3);
        assert_eq!(
            pair.same(&["pool", "show", "nowhere", "-n", "acme/prod"]),
            3
        );
        // A pool that does not exist is that, before a `--within` that does not parse.
        for pool in ["nowhere", "vpc-main"] {
            let code = pair.same(&["pool", "show", pool, "-n", "acme/prod", "--within", "x"]);
            assert_eq!(code, if pool == "nowhere" { 3 } else { 2 }, "{pool}");
        }
        assert_eq!(pair.same(&["list", "--owner", "no-slash"]), 2);
        assert_eq!(pair.same(&["vpc", "get", "nowhere", "-n", "acme/prod"]), 3);
        assert_eq!(pair.same(&["vpc", "get", "main"]), 2);
        assert_eq!(pair.same(&["subnet", "list", "-n", "acme/nowhere"]), 3);
        assert_eq!(
            pair.same(&[
                "pool",
                "show",
                "vpc-main",
                "-n",
                "acme/prod",
                "--within",
                "192.0.2.0/24"
            ]),
            2
        );
        pair.states_agree();
    }
}

/// The uid of both copies' VPC `acme/dev/blue`.
const BLUE: &str = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";

#[test]
fn supernets_and_prefix_claims_print_what_they_print_locally() {
    let pair = Pair::new("seed");
    let file = pair.here.root().join("provider.yaml");
    std::fs::write(&file, common::PROVIDER_V6).unwrap();
    let file = file.to_str().unwrap();
    let applied = pair.served.ipamctl(["apply", "-f", file]).output().unwrap();
    assert!(applied.status.success(), "{applied:?}");
    assert!(
        local(&pair.here.state(), &["apply", "-f", file])
            .status
            .success()
    );
    // A VPC's range (shown as the VPC), its router's uplink, and a prefix of another owner.
    for args in [
        &[
            "vpc",
            "create",
            "blue",
            "-n",
            "acme/dev",
            "--from-pool",
            "provider-v6",
            "--prefix-length",
            "56",
            "--uid",
            BLUE,
        ][..],
        &[
            "allocate",
            "public-zone-a",
            "--owner",
            "VPC/router",
            "--uid",
            BLUE,
        ],
        &["allocate", "provider-v6", "--owner", "FloatingIP/fip-9"],
        &[
            "allocate",
            "provider-v6",
            "--owner",
            "FloatingIP/fip-9",
            "--prefix-length",
            "64",
        ],
    ] {
        pair.same(args);
    }
    for format in [None, Some("wide"), Some("json"), Some("yaml"), Some("name")] {
        for args in [
            &["pool", "list"][..],
            &["pool", "show", "provider-v6"],
            &["pool", "show", "provider-v6", "--within", "2001:db8::/56"],
            &["list"],
            &["list", "-A"],
            &["list", "-n", "acme/dev"],
            &["list", "--pool", "provider-v6"],
            &["list", "--owner", "VPC/router"],
            &["list", "--kind", "FloatingIP"],
            &["list", "--within", "2001:db8::/32"],
            &[
                "list",
                "--pool",
                "provider-v6",
                "--owner",
                "FloatingIP/none",
            ],
        ] {
            let mut args = args.to_vec();
            if let Some(f) = format {
                args.extend(["-o", f]);
            }
            assert_eq!(pair.same(&args), 0, "{args:?}");
        }
    }
    assert_eq!(
        pair.same(&["pool", "show", "provider-v6", "-n", "acme/dev"]),
        3
    );
    // Maps: the supernet by its claims, the public pool with the uplink named by its VPC.
    assert_eq!(same_map(&pair, &["pool", "show", "provider-v6"]), 0);
    assert_eq!(same_map(&pair, &["pool", "show", "public-zone-a"]), 0);
    assert_eq!(
        pair.same(&["pool", "show", "provider-v6", "--map", "-o", "json"]),
        2
    );
    pair.states_agree();
}

/// A cluster pool too large to draw whole (a /10): its map needs `--within` a /12 at most,
/// drawn one cell per /24.
const CGNAT: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: cgnat
spec:
  cidr: 100.64.0.0/10
  kind: public
  exclude:
  - 100.64.9.0/24
";

/// Runs `args` through `pair` as text, as text in colour, and as `-o svg`: each the same
/// output and exit code as locally; the exit code.
#[track_caller]
fn same_map(pair: &Pair, args: &[&str]) -> i32 {
    let mut code = None;
    for more in [&[][..], &["--color", "always"], &["-o", "svg"]] {
        let mut v = args.to_vec();
        v.push("--map");
        v.extend(more);
        let got = pair.same(&v);
        assert_eq!(*code.get_or_insert(got), got, "{v:?}");
    }
    code.unwrap()
}

#[test]
fn pool_maps_draw_what_they_draw_locally() {
    // IPv4: a small pool address by address, a /16 with a stored subnet one cell per /24 (or
    // address by address within a /24), a /10 within a /12 one cell per /24.
    let pair = Pair::new("subnets");
    let file = pair.here.root().join("cgnat.yaml");
    std::fs::write(&file, CGNAT).unwrap();
    let file = file.to_str().unwrap();
    let applied = pair.served.ipamctl(["apply", "-f", file]).output().unwrap();
    assert!(applied.status.success(), "{applied:?}");
    assert!(
        local(&pair.here.state(), &["apply", "-f", file])
            .status
            .success()
    );
    let prod = ["-n", "acme/prod"];
    for (pool, ns, owner, address) in [
        ("public-zone-a", None, "FloatingIP/f-1", None),
        (
            "public-zone-a",
            None,
            "FloatingIP/f-2",
            Some("203.0.113.77"),
        ),
        ("vpc-main", Some(prod), "VirtualMachine/a/0", None),
        (
            "vpc-main",
            Some(prod),
            "VirtualMachine/b/0",
            Some("10.42.1.20"),
        ),
        (
            "vpc-main",
            Some(prod),
            "VirtualMachine/c/0",
            Some("10.42.7.9"),
        ),
        ("cgnat", None, "FloatingIP/g-1", None),
        ("cgnat", None, "FloatingIP/g-2", Some("100.64.3.7")),
        ("cgnat", None, "FloatingIP/g-3", Some("100.79.255.254")),
    ] {
        let mut args = vec!["allocate", pool, "--owner", owner];
        args.extend(ns.into_iter().flatten());
        if let Some(a) = address {
            args.extend(["--address", a]);
        }
        assert_eq!(pair.same(&args), 0, "{args:?}");
    }
    let vpc_main = ["pool", "show", "vpc-main", "-n", "acme/prod"];
    let within = |w: &'static str| {
        let mut v = vpc_main.to_vec();
        v.extend(["--within", w]);
        v
    };
    for args in [
        &["pool", "show", "public-zone-a"][..],
        &vpc_main,
        &within("10.42.1.0/24"),
        &within("10.42.0.0/20"),
        &within("10.42.1.0/28"),
        &["pool", "show", "cgnat", "--within", "100.64.0.0/12"],
        &["pool", "show", "cgnat", "--within", "100.64.0.0/22"],
    ] {
        assert_eq!(same_map(&pair, args), 0, "{args:?}");
    }
    // Refused alike: a format the map does not draw, a range outside the pool or too large
    // to draw, one that does not parse, a pool that is not there (even with a bad format).
    for (args, code) in [
        (&["pool", "show", "public-zone-a", "-o", "json"][..], 2),
        (&["pool", "show", "public-zone-a", "-o", "yaml"], 2),
        (&["pool", "show", "public-zone-a", "-o", "name"], 2),
        (&["pool", "show", "public-zone-a", "-o", "wide"], 0),
        (&within("192.0.2.0/24"), 2),
        (&within("not-a-prefix"), 2),
        (&["pool", "show", "cgnat"], 2),
        (&["pool", "show", "cgnat", "--within", "100.64.0.0/11"], 2),
        (&["pool", "show", "nowhere"], 3),
        (&["pool", "show", "nowhere", "-o", "json"], 3),
        (&["pool", "show", "vpc-main", "-n", "acme/nowhere"], 3),
    ] {
        let mut v = args.to_vec();
        v.push("--map");
        assert_eq!(pair.same(&v), code, "{v:?}");
    }
    pair.states_agree();

    // IPv6: a /120 address by address, a /64 as its few /120s in use (zoomed) and then as
    // more /120s than that, a /48 one cell per region.
    let pair = Pair::new("dual-stack");
    let mut claims = vec![
        vec!["allocate", "v6-120", "--owner", "FloatingIP/f-1"],
        vec!["allocate", "public-v6", "--owner", "FloatingIP/f-1"],
        vec![
            "allocate",
            "vpc-main-v6",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/p/0",
        ],
        vec![
            "allocate",
            "vpc-main-v6",
            "-n",
            "acme/prod",
            "--owner",
            "VirtualMachine/q/0",
            "--address",
            "fd00:42:0:7::9",
        ],
    ];
    claims.push(vec![
        "allocate",
        "public-v6",
        "--owner",
        "FloatingIP/f-2",
        "--address",
        "2001:db8:0:1:ffff::9",
    ]);
    for args in &claims {
        assert_eq!(pair.same(args), 0, "{args:?}");
    }
    let v6_shows: [&[&str]; 5] = [
        &["pool", "show", "v6-120"],
        &["pool", "show", "public-v6"],
        &[
            "pool",
            "show",
            "public-v6",
            "--within",
            "2001:db8:0:1::/120",
        ],
        &["pool", "show", "vpc-main-v6", "-n", "acme/prod"],
        &["pool", "show", "vpc-main", "-n", "acme/prod"],
    ];
    for args in v6_shows {
        assert_eq!(same_map(&pair, args), 0, "{args:?}");
    }
    for (i, at) in ["2:0:0:9", "3:0:0:9", "4:0:0:9", "5:0:0:9"]
        .iter()
        .enumerate()
    {
        let owner = format!("FloatingIP/m-{i}");
        let address = format!("2001:db8:0:1:{at}");
        let args = [
            "allocate",
            "public-v6",
            "--owner",
            &owner,
            "--address",
            &address,
        ];
        assert_eq!(pair.same(&args), 0, "{args:?}");
    }
    for args in v6_shows {
        assert_eq!(same_map(&pair, args), 0, "{args:?}");
    }
    pair.states_agree();
}

#[test]
fn claims_and_releases_print_what_they_print_locally_and_leave_the_same_state() {
    let pair = Pair::new("populated");
    let prod = ["-n", "acme/prod"];
    let claim = |owner: &str, more: &[&str]| {
        let mut v = vec!["allocate", "vpc-main", "--owner", owner];
        v.extend(prod);
        v.extend(more);
        pair.same(&v)
    };
    assert_eq!(claim("VirtualMachine/c1/0", &[]), 0);
    assert_eq!(claim("VirtualMachine/c1/0", &["-o", "json"]), 0);
    assert_eq!(claim("VirtualMachine/c2/0", &["-o", "yaml"]), 0);
    assert_eq!(
        claim(
            "VirtualMachine/c3/0",
            &["-o", "name", "--within", "10.42.3.0/24"]
        ),
        0
    );
    assert_eq!(
        claim("VirtualMachine/c4/0", &["--dry-run", "-o", "yaml"]),
        0
    );
    assert_eq!(claim("VirtualMachine/c5/0", &["--address", "10.42.0.9"]), 4);
    assert_eq!(claim("not-an-owner", &[]), 2);
    assert_eq!(
        pair.same(&[
            "allocate",
            "nowhere",
            "--owner",
            "VirtualMachine/c1/0",
            "-n",
            "acme/prod"
        ]),
        3
    );
    assert_eq!(
        pair.same(&[
            "allocate",
            "public-zone-a",
            "--owner",
            "FloatingIP/f9",
            "-o",
            "wide"
        ]),
        0
    );
    let release = |more: &[&str]| {
        let mut v = vec!["release", "vpc-main"];
        v.extend(prod);
        v.extend(more);
        pair.same(&v)
    };
    assert_eq!(release(&["--owner", "VirtualMachine/c1/0", "--dry-run"]), 0);
    assert_eq!(
        release(&["--owner", "VirtualMachine/c1/0", "-o", "json"]),
        0
    );
    assert_eq!(release(&["--owner", "VirtualMachine/c1/0"]), 3);
    assert_eq!(
        release(&["--owner", "VirtualMachine/c1/0", "--ignore-not-found"]),
        0
    );
    assert_eq!(
        release(&["10.42.0.9", "--owner", "VirtualMachine/someone/0"]),
        4
    );
    // A NIC's new MAC.
    let nic = "VirtualMachine/m1/0";
    assert_eq!(
        claim(
            nic,
            &["--address", "10.42.0.50", "--mac", "02:54:00:00:00:aa"]
        ),
        0
    );
    let mac_set = |more: &[&str]| {
        let mut v = vec!["mac", "set", "vpc-main", "10.42.0.50"];
        v.extend(prod);
        v.extend(more);
        pair.same(&v)
    };
    assert_eq!(mac_set(&["--owner", nic, "--mac", "02:54:00:00:00:bb"]), 0);
    assert_eq!(
        mac_set(&["--owner", nic, "--mac", "02:54:00:00:00:bb", "-o", "yaml"]),
        0
    );
    assert_eq!(
        mac_set(&[
            "--owner",
            "VirtualMachine/other/0",
            "--mac",
            "02:54:00:00:00:cc"
        ]),
        4
    );
    assert_eq!(mac_set(&["--owner", nic, "--mac", "not-a-mac"]), 2);
    pair.states_agree();
}

#[test]
fn batches_print_each_result_as_locally_with_the_same_exit_code() {
    let pair = Pair::new("populated");
    let claims = "{\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/b1/0\"}\n\
        {\"pool\":\"vpc-main\",\"owner\":\"bad\"}\n\
        {\"pool\":\"nowhere\",\"owner\":\"VirtualMachine/b2/0\"}\n\
        not json\n\
        {\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/b3/0\",\"dryRun\":true}\n\
        {\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/b1/0\",\"unknown\":1}\n\
        {\"pools\":[\"vpc-main\"],\"owner\":\"VirtualMachine/b4/0\",\"within\":\"10.42.7.0/24\"}\n";
    let good = "{\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/g1/0\"}\n\
        - not a line of JSON\n";
    let releases = "{\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/b1/0\"}\n\
        {\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/zz/0\",\"ignoreNotFound\":true}\n\
        {\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/zz/0\"}\n\
        {\"pool\":\"vpc-main\",\"address\":\"10.42.0.9\",\"owner\":\"VirtualMachine/web-02/0\",\"dryRun\":true}\n";
    let dir = pair.here.root().to_path_buf();
    for (name, text) in [("claims", claims), ("good", good), ("releases", releases)] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let file = |name: &str| dir.join(name).display().to_string();
    for format in ["table", "json", "yaml", "name"] {
        let code = pair.same(&[
            "allocate",
            "-f",
            &file("claims"),
            "-n",
            "acme/prod",
            "-o",
            format,
        ]);
        assert_eq!(code, 1, "failures of different codes are exit 1");
    }
    assert_eq!(
        pair.same(&["allocate", "-f", &file("good"), "-n", "acme/prod"]),
        2
    );
    for format in ["table", "json"] {
        pair.same(&[
            "release",
            "-f",
            &file("releases"),
            "-n",
            "acme/prod",
            "-o",
            format,
        ]);
    }
    pair.states_agree();
}

/// A command line's words, as split on spaces.
fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// The formats a command prints in: its default and every `-o`.
const FORMATS: [&str; 5] = ["", " -o wide", " -o json", " -o yaml", " -o name"];

#[test]
fn vpc_create_and_delete_print_what_they_print_locally_and_leave_the_same_state() {
    let pair = Pair::new("populated");
    let same = |line: &str| pair.same(&words(line));
    // A VPC's uid is random unless given: both sides are given the same.
    let uid = "--uid 0b6f1d4e-2c3a-4b5d-8e9f-0a1b2c3d4e";
    let blue = format!("vpc create blue -n acme/dev --cidr 10.60.0.0/16 {uid}01");
    assert_eq!(same(&format!("{blue} -o wide")), 0);
    for format in FORMATS {
        assert_eq!(same(&format!("{blue}{format}")), 0, "the same VPC again");
    }
    let other = format!("vpc create blue -n acme/dev --cidr 10.61.0.0/16 {uid}01");
    assert_eq!(same(&other), 4, "another range under its name");
    let green = format!("vpc create green -n acme/dev --cidr 10.62.0.0/24 {uid}02");
    assert_eq!(same(&format!("{green} --uplink-zone zone-a")), 0);
    assert_eq!(same(&format!("{green} --uplink-zone zone-a -o json")), 0);
    let red = format!("vpc create red -n acme/dev --cidr 10.63.0.0/24 {uid}03 --dry-run");
    assert_eq!(same(&red), 0);
    assert_eq!(same(&format!("{red} -o yaml")), 0);
    for bad in [
        "vpc create blue -n acme/dev -o yaml",
        "vpc create bad_name -n acme/dev --cidr 10.64.0.0/24",
        "vpc create a-v6 -n acme/dev --cidr 10.64.0.0/24",
        "vpc create nons --cidr 10.64.0.0/24",
        "vpc create x -n acme/dev --cidr not-a-cidr",
        "vpc create x -n acme/dev --from-pool p --prefix-length 24 --prefix-length 25",
        "vpc delete nons",
    ] {
        assert_eq!(same(bad), 2, "{bad}");
    }
    let delete = |more: &str| same(&format!("vpc delete green -n acme/dev{more}"));
    assert_eq!(delete(" --dry-run"), 0);
    assert_eq!(delete(" --dry-run -o json"), 0);
    assert_eq!(delete(" -o yaml"), 0);
    assert_eq!(delete(""), 3);
    assert_eq!(delete(" --ignore-not-found"), 0);
    assert_eq!(same("vpc delete blue -n acme/dev -o name"), 0);
    // A VPC with allocations and the uplink the fixture gave it.
    assert_eq!(same("vpc delete main -n acme/prod"), 0);
    pair.states_agree();
}

#[test]
fn pool_create_and_delete_print_what_they_print_locally_and_leave_the_same_state() {
    let pair = Pair::new("populated");
    let same = |line: &str| pair.same(&words(line));
    let edge = "pool create edge --cidr 198.51.100.0/24 --gateway 198.51.100.1 --exclude 198.51.100.2 --exclude 198.51.100.8/30 --zone zone-b";
    assert_eq!(same(edge), 0, "created");
    for format in FORMATS {
        assert_eq!(same(&format!("{edge}{format}")), 0, "unchanged");
    }
    assert_eq!(
        same("pool create edge --cidr 198.51.101.0/24"),
        4,
        "another spec"
    );
    assert_eq!(
        same("pool create half --cidr 203.0.113.128/25"),
        4,
        "an overlap with public-zone-a"
    );
    let dry = "pool create dry --cidr 192.0.2.0/24 --zone zone-c --dry-run";
    for format in FORMATS {
        assert_eq!(same(&format!("{dry}{format}")), 0);
    }
    assert_eq!(
        same(&format!("{edge} --dry-run -o json")),
        0,
        "dry, unchanged"
    );
    for bad in [
        "pool create Bad_Name --cidr 192.0.2.0/24",
        "pool create x --cidr not-a-cidr",
        "pool create x --cidr 192.0.2.1/24",
        "pool create x --cidr 192.0.2.0/24 --gateway 10.0.0.1",
        "pool create x -n acme/prod --cidr 192.0.2.0/24",
        "pool delete Bad_Name",
        "pool delete x -n Bad/Name/x",
    ] {
        assert_eq!(same(bad), 2, "{bad}");
    }
    // A pool that holds allocations stays, whatever its scope.
    assert_eq!(same("pool delete public-zone-a"), 4);
    assert_eq!(same("pool delete public-zone-a --dry-run"), 4);
    assert_eq!(same("pool delete vpc-main -n acme/prod -o json"), 4);
    for format in FORMATS {
        assert_eq!(same(&format!("pool delete edge --dry-run{format}")), 0);
    }
    assert_eq!(same("pool delete edge -o json"), 0);
    assert_eq!(same("pool delete edge"), 3, "not found");
    assert_eq!(same("pool delete nowhere -n acme/prod"), 3);
    assert_eq!(same("pool delete vpc-main"), 3, "not cluster-scoped");
    // A namespace's pool, once emptied (by label: every allocation carries the director's).
    assert_eq!(
        same("release -n acme/dev -l pivirt.hu/managed-by=director -o name"),
        0
    );
    assert_eq!(same("pool delete vpc-dev -n acme/dev -o yaml"), 0);
    pair.states_agree();
}

#[test]
fn list_by_subnet_host_name_and_expired_prints_what_it_prints_locally() {
    let pair = Pair::new("subnets");
    let same = |line: &str| pair.same(&words(line));
    for format in FORMATS {
        assert_eq!(same(&format!("list -n acme/prod --subnet web{format}")), 0);
        assert_eq!(same(&format!("list --expired{format}")), 0);
        assert_eq!(same(&format!("list --host-name web-01{format}")), 0);
    }
    assert_eq!(same("list -n acme/prod --subnet nowhere"), 3);
    assert_eq!(same("list --host-name Bad_Host!"), 2);
}

#[test]
fn release_by_label_selector_prints_what_it_prints_locally_and_leaves_the_same_state() {
    let pair = Pair::new("populated");
    let same = |line: &str| pair.same(&words(line));
    let director = "-l pivirt.hu/managed-by=director";
    let prod = format!("release -n acme/prod {director}");
    for format in FORMATS {
        assert_eq!(same(&format!("{prod} --dry-run{format}")), 0, "several");
    }
    assert_eq!(
        same(&format!(
            "{prod} --kind VirtualMachine --within 10.42.0.0/24 --dry-run"
        )),
        0
    );
    let nobody = "release -n acme/prod --selector pivirt.hu/managed-by=nobody";
    assert_eq!(same(nobody), 3, "matching none");
    assert_eq!(same(&format!("{nobody} --ignore-not-found")), 0);
    assert_eq!(same(&format!("{nobody} --ignore-not-found -o json")), 0);
    assert_eq!(same("release -n acme/prod -l tier=web,!gone"), 3);
    assert_eq!(
        same("release -n acme/prod -l bad_key!!=x"),
        2,
        "not a selector"
    );
    // With a pool, an owner, a kind and a prefix beside it.
    assert_eq!(
        same(&format!(
            "release vpc-main -n acme/prod {director} --owner VirtualMachine/web-01/0 -o json"
        )),
        0
    );
    assert_eq!(
        same(&format!(
            "{prod} --kind VirtualMachine --within 10.42.0.0/24 -o yaml"
        )),
        0
    );
    assert_eq!(same(&format!("{prod} --kind VirtualMachine")), 3, "gone");
    // Without `-n`: every scope the selectors reach. A batch line's `labels` is `-l`,
    // locally and through a server: one line releases, one selects nothing (its exit 3).
    let file = pair.here.root().join("by-label.jsonl");
    std::fs::write(
        &file,
        "{\"labels\": \"pivirt.hu/managed-by=director\", \"owner\": \"FloatingIP/fip-1\"}\n\
         {\"labels\": \"tier=web\"}\n",
    )
    .unwrap();
    let batch = format!("release -f {}", file.display());
    assert_eq!(same(&batch), 3);
    assert_eq!(
        same(&format!("release {director} --owner FloatingIP/fip-1")),
        3,
        "released by the batch"
    );
    assert_eq!(same(&format!("release {director} -o wide")), 0);
    assert_eq!(same(&format!("release {director}")), 3);
    pair.states_agree();
}

#[test]
fn subnet_create_show_and_delete_print_what_they_print_locally_and_leave_the_same_state() {
    let pair = Pair::new("subnets");
    let same = |line: &str| pair.same(&words(line));
    let create = |name: &str, more: &str| {
        same(&format!(
            "subnet create {name} -n acme/prod --pool vpc-main{more}"
        ))
    };
    assert_eq!(create("db", " --cidr 10.42.9.0/24"), 0);
    assert_eq!(create("db", " --cidr 10.42.9.0/24 -o yaml"), 0);
    assert_eq!(create("db", " --cidr 10.42.8.0/24"), 4, "another spec");
    assert_eq!(create("half", " --cidr 10.42.9.128/25"), 4, "an overlap");
    for (i, format) in FORMATS.iter().enumerate() {
        assert_eq!(
            create(
                &format!("carved{i}"),
                &format!(" --prefix-length 26{format}")
            ),
            0
        );
    }
    let dry = " --cidr 10.42.10.0/24 --gateway 10.42.10.254 --reserved 10.42.10.5 --dry-run";
    assert_eq!(create("dry", dry), 0);
    assert_eq!(create("dry", " --cidr 10.42.10.0/24 --dry-run -o json"), 0);
    assert_eq!(create("Bad_Name", " --cidr 10.42.11.0/24"), 2);
    assert_eq!(
        create("neither", ""),
        2,
        "neither --cidr nor --prefix-length"
    );
    let nowhere = "subnet create x -n acme/prod --pool nowhere --cidr 10.1.0.0/24";
    assert_eq!(same(nowhere), 3);
    // A cluster-scoped pool's subnet: no `-n`.
    let edge = "subnet create edge --pool public-zone-a --cidr 203.0.113.128/25";
    assert_eq!(same(edge), 0);
    for format in FORMATS {
        assert_eq!(same(&format!("subnet show web -n acme/prod{format}")), 0);
        assert_eq!(same(&format!("subnet show edge{format}")), 0);
    }
    assert_eq!(same("subnet show nowhere -n acme/prod"), 3);
    assert_eq!(same("subnet show web"), 3, "not cluster-scoped");
    assert_eq!(same("subnet show Bad_Name -n acme/prod"), 2);
    // A subnet an allocation holds an address of stays.
    let claim = "allocate vpc-main -n acme/prod --subnet db --owner VirtualMachine/s1/0";
    assert_eq!(same(claim), 0);
    let delete = |name: &str, more: &str| same(&format!("subnet delete {name} -n acme/prod{more}"));
    assert_eq!(delete("db", ""), 4);
    assert_eq!(delete("web", " --dry-run"), 0);
    assert_eq!(delete("web", " --dry-run -o yaml"), 0);
    assert_eq!(delete("web", " -o json"), 0);
    assert_eq!(delete("web", ""), 3);
    assert_eq!(delete("web", " --ignore-not-found"), 0);
    assert_eq!(delete("Bad_Name", ""), 2);
    assert_eq!(same("subnet delete edge"), 0);
    pair.states_agree();
}

#[test]
fn metrics_and_quota_list_print_what_they_print_locally() {
    let pair = Pair::new("quota");
    let same = |line: &str| pair.same(&words(line));
    for ok in [
        "metrics",
        "metrics -n acme/prod",
        "metrics --check",
        "metrics -o table",
    ] {
        assert_eq!(same(ok), 0, "{ok}");
    }
    assert_eq!(same("metrics -o json"), 2);
    assert_eq!(same("metrics -n Bad_Name"), 2);
    assert_eq!(same("metrics -n acme/nowhere"), 3);
    // `--out`: the same file, nothing on stdout.
    let dir = pair.here.root().to_path_buf();
    let (there, here) = (dir.join("there.prom"), dir.join("here.prom"));
    let out = remote(
        &pair.server.url,
        token(),
        &["metrics", "--out", there.to_str().unwrap()],
    );
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let out = local(
        &pair.here.state(),
        &["metrics", "--out", here.to_str().unwrap()],
    );
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let text = std::fs::read_to_string(&there).unwrap();
    assert!(text.contains("ipamctl_quota_limit"), "{text}");
    assert!(
        !text.contains("ipamctl_server_"),
        "the server's own figures: {text}"
    );
    assert_eq!(text, std::fs::read_to_string(&here).unwrap());
    // The lease files are this machine's: exit 2 before anything is sent.
    let leases = dir.join("kea.csv");
    std::fs::write(&leases, "").unwrap();
    let flag = format!("--dhcp-leases=kea4={}", leases.display());
    let nobody = format!("http://127.0.0.1:{}", closed_port());
    let out = remote(&nobody, token(), &["metrics", &flag]);
    fails(&out, 2, "the lease files are read here", token());
    for format in FORMATS {
        assert_eq!(same(&format!("quota list{format}")), 0);
        assert_eq!(same(&format!("quota list -n acme/prod{format}")), 0);
    }
    assert_eq!(same("quota list -n acme/dev"), 0, "none");
    assert_eq!(same("quota list -n acme/nowhere"), 3);
    assert_eq!(same("quota list -n Bad_Name"), 2);
    pair.states_agree();
}

/// `allocate --explain` and `release --within` through a server, in every format: the
/// explanation on stderr (of a dry run, of a claim, of an exhausted `--within`), the release
/// by selectors, and a batch's `within` lines, as locally.
#[test]
fn explanations_and_releases_within_print_what_they_print_locally() {
    let pair = Pair::new("populated");
    let same = |line: &str| pair.same(&words(line));
    let claim = "allocate vpc-main -n acme/prod --owner";
    for (i, format) in FORMATS.iter().enumerate() {
        assert_eq!(
            same(&format!("{claim} VirtualMachine/e{i}/0 --explain{format}")),
            0
        );
        // The owner's own again: it gets its address back, and says so.
        for dry in ["", " --dry-run"] {
            let again = format!("{claim} VirtualMachine/e{i}/0 --explain{dry}{format}");
            assert_eq!(same(&again), 0);
        }
    }
    // A new owner's dry run, once: on PostgreSQL a server's dry run notes its address as
    // handed out (`src/store/pg/siblings.rs`), so a second one answers the next address,
    // where a local one answers the same again.
    let dry = format!("{claim} VirtualMachine/d/0 --dry-run --explain -o yaml");
    assert_eq!(same(&dry), 0);
    // Both of 10.42.0.8/30's candidates are taken: explained, then exit 5.
    let exhausted = format!("{claim} VirtualMachine/x/0 --within 10.42.0.8/30 --explain");
    assert_eq!(same(&exhausted), 5);
    assert_eq!(same(&format!("{exhausted} --dry-run -o json")), 5);
    assert_eq!(
        same("allocate vpc-main public-zone-a --owner VirtualMachine/x/0 --explain"),
        2
    );
    let within = "release --kind VirtualMachine --within 10.42.0.8/29 -n acme/prod";
    for format in FORMATS {
        assert_eq!(same(&format!("{within} --dry-run{format}")), 0);
    }
    assert_eq!(same(&format!("{within} -o yaml")), 0);
    assert_eq!(same(within), 3);
    assert_eq!(same(&format!("{within} --ignore-not-found")), 0);
    assert_eq!(
        same("release vpc-main 10.42.0.2 -n acme/prod --within 10.42.0.0/29"),
        2
    );
    let lines = "{\"kind\":\"VirtualMachine\",\"within\":\"10.42.0.0/29\"}\n\
        {\"pool\":\"vpc-main\",\"address\":\"10.42.1.7\",\"within\":\"10.42.1.0/24\"}\n\
        {\"kind\":\"VirtualMachine\",\"within\":\"10.42.0.300/29\"}\n\
        {\"kind\":\"VirtualMachine\",\"within\":\"10.42.0.0/29\"}\n";
    let file = pair.here.root().join("within.jsonl");
    std::fs::write(&file, lines).unwrap();
    let file = file.display().to_string();
    for format in ["table", "json"] {
        let batch = format!("release -f {file} -n acme/prod -o {format}");
        assert_eq!(same(&batch), 1, "failures of different codes are exit 1");
    }
    pair.states_agree();
}

/// `token create NAME --tokens FILE` with `flags`, in `store`'s root: its secret.
fn token_in(store: &Store, file: &str, name: &str, flags: &str) -> String {
    let made = ipamctl(&["token", "create", name, "--tokens"])
        .arg(store.root().join(file))
        .args(words(flags))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    String::from_utf8(made.stdout).unwrap().trim().to_owned()
}

/// A server on `store` that knows only the tokens made for it, each `(name, flags)`, and
/// their secrets, in that order.
fn serve_tokens<const N: usize>(
    store: &Store,
    tokens: &[(&str, &str); N],
) -> (Server, [String; N]) {
    let secrets = tokens.map(|(name, flags)| token_in(store, "t.yaml", name, flags));
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0", "--tokens"]);
    cmd.arg(store.root().join("t.yaml"));
    (Server::spawn_as_is(cmd), secrets)
}

#[test]
fn a_token_without_the_verb_or_the_scope_is_denied_writes_metrics_and_quotas() {
    let store = Store::fixture("quota");
    let (server, secrets) = serve_tokens(
        &store,
        &[
            ("reader", "--namespace * --verbs read --cluster"),
            ("tenant", "--namespace acme/prod --verbs read,admin"),
        ],
    );
    let [reader, tenant] = secrets;
    let before = listed(&store);
    let run = |bearer: &str, line: &str| remote(&server.url, bearer, &words(line));
    for line in [
        "vpc create blue -n acme/dev --cidr 10.60.0.0/16",
        "vpc delete main -n acme/prod",
        "subnet create db -n acme/prod --pool vpc-main --cidr 10.42.9.0/24",
        "subnet delete web -n acme/prod --ignore-not-found",
    ] {
        fails(&run(&reader, line), 8, "may not admin", &reader);
    }
    // Outside a tenant's namespace, as if nothing were there; /metrics needs the cluster.
    fails(
        &run(&tenant, "vpc delete dev -n acme/dev"),
        3,
        "not found",
        &tenant,
    );
    fails(
        &run(&tenant, "quota list -n acme/dev"),
        3,
        "not found",
        &tenant,
    );
    for line in ["metrics", "metrics -n acme/prod"] {
        fails(&run(&tenant, line), 8, "cluster scope", &tenant);
    }
    let wrong = "ipamctl_not-a-token-at-all";
    for line in [
        "metrics",
        "quota list",
        "subnet show web -n acme/prod",
        "subnet create db -n acme/prod --pool vpc-main --prefix-length 26",
        "vpc create blue -n acme/dev --cidr 10.60.0.0/16",
    ] {
        fails(&run(wrong, line), 8, "not valid", wrong);
    }
    // What they may do, they do.
    for line in ["quota list", "metrics"] {
        let out = run(&reader, line);
        assert!(out.status.success(), "{out:?}");
    }
    assert_eq!(listed(&store), before);
    let log = server.log();
    for secret in [&reader, &tenant] {
        assert!(!log.contains(secret.as_str()), "the server logged a token");
    }
}

/// An explanation and a release by `--within` are scoped as the claim and the release:
/// another namespace's pool or allocations are not found (exit 3), with no explanation; an
/// explanation names who holds the pool's addresses, so it needs `read` there too (a
/// claim-only token, and a tenant's floating IP from a public pool without the cluster
/// scope, are exit 8); nothing changes.
#[test]
fn an_explanation_or_a_release_within_outside_the_tokens_scope_is_refused() {
    let store = Store::fixture("populated");
    let (server, secrets) = serve_tokens(
        &store,
        &[
            ("tenant", "--namespace acme/dev --verbs read,claim"),
            ("claimer", "--namespace acme/prod --verbs claim"),
        ],
    );
    let [tenant, claimer] = secrets;
    let before = listed(&store);
    let run = |bearer: &str, line: &str| remote(&server.url, bearer, &words(line));
    let explained = |out: &Output| String::from_utf8_lossy(&out.stderr).contains("explain:");
    for line in [
        "allocate vpc-main -n acme/prod --owner VirtualMachine/x/0 --explain",
        "allocate vpc-main -n acme/prod --owner VirtualMachine/x/0 --explain --dry-run",
        "allocate vpc-main -n acme/prod --owner VirtualMachine/x/0 --within 10.42.0.8/30 --explain",
        "allocate public-zone-a --owner FloatingIP/f1 --explain --dry-run",
        "release --kind VirtualMachine --within 10.42.0.8/29 -n acme/prod",
        "release --kind VirtualMachine --within 10.42.0.8/29 -n acme/prod --dry-run",
        // Without `-n`: the namespaces the token may claim in, where nothing matches.
        "release --kind VirtualMachine --within 10.42.0.0/16",
        "release --owner FloatingIP/fip-1 --within 203.0.113.0/24",
    ] {
        let out = run(&tenant, line);
        fails(&out, 3, "", &tenant);
        assert!(!explained(&out), "{line}: {out:?}");
    }
    for (bearer, line) in [
        (
            &claimer,
            "allocate vpc-main -n acme/prod --owner VirtualMachine/x/0 --explain",
        ),
        (
            &tenant,
            "allocate public-zone-a --tenant acme/dev --owner FloatingIP/f1 --explain",
        ),
    ] {
        let out = run(bearer, line);
        fails(&out, 8, "may not read", bearer);
        assert!(!explained(&out), "{line}: {out:?}");
    }
    assert_eq!(listed(&store), before);
    // What they may do, they do: without `--explain`, and in the token's own namespace.
    let out = run(
        &claimer,
        "allocate vpc-main -n acme/prod --owner VirtualMachine/x/0 --dry-run",
    );
    assert!(out.status.success(), "{out:?}");
    let out = run(
        &tenant,
        "allocate vpc-dev -n acme/dev --owner VirtualMachine/y/0 --dry-run --explain",
    );
    assert!(out.status.success() && explained(&out), "{out:?}");
    let out = run(
        &tenant,
        "release --kind VirtualMachine --within 10.50.0.0/24 -n acme/dev --dry-run -o name",
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ipallocation/vpc-dev-10-50-0-2\n"
    );
    assert_eq!(listed(&store), before);
    let log = server.log();
    for secret in [&tenant, &claimer] {
        assert!(!log.contains(secret.as_str()), "the server logged a token");
    }
}

/// A claim in the `populated` fixture.
const CLAIM: [&str; 6] = [
    "allocate",
    "vpc-main",
    "-n",
    "acme/prod",
    "--owner",
    "VirtualMachine/x/0",
];

/// What `store` holds, as `list -o yaml` prints it locally.
fn listed(store: &Store) -> Vec<u8> {
    let out = store.ipamctl(["list", "-o", "yaml"]).output().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// A port nothing listens on: bound, then closed.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Asserts `out` failed with `code` and one `error:` line naming `says`, and never shows
/// the token `secret`.
#[track_caller]
fn fails(out: &Output, code: i32, says: &str, secret: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(out.stdout.is_empty(), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains(says), "{stderr}");
    assert!(!stderr.contains(secret), "the token was printed: {stderr}");
}

#[test]
fn an_unreachable_server_a_wrong_token_and_a_lost_answer_have_their_own_codes() {
    let store = Store::fixture("populated");
    let before = listed(&store);
    let claim = CLAIM;
    // Nothing listens: 9.
    let url = format!("http://127.0.0.1:{}", closed_port());
    fails(
        &remote(&url, token(), &claim),
        9,
        "cannot reach the server",
        token(),
    );
    fails(
        &remote(&url, token(), &["list"]),
        9,
        "cannot reach the server",
        token(),
    );
    let server = Server::start(&store, &[]);
    // A wrong token, and none: 8.
    let wrong = "ipamctl_not-a-token-at-all";
    fails(&remote(&server.url, wrong, &claim), 8, "not valid", wrong);
    fails(
        &remote(&server.url, wrong, &["pool", "list"]),
        8,
        "not valid",
        wrong,
    );
    let none = ipamctl(&["--server", &server.url])
        .args(claim)
        .output()
        .unwrap();
    fails(&none, 8, "no bearer token", token());
    // The token from a file works as the variable does, and is not printed either.
    let file = store.root().join("token");
    std::fs::write(&file, format!("{}\n", token())).unwrap();
    let out = ipamctl(&[
        "--server",
        &server.url,
        "--token-file",
        file.to_str().unwrap(),
    ])
    .args(["pool", "list"])
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&file, format!("{wrong}\n")).unwrap();
    let out = ipamctl(&[
        "--server",
        &server.url,
        "--token-file",
        file.to_str().unwrap(),
    ])
    .args(claim)
    .output()
    .unwrap();
    fails(&out, 8, "not valid", wrong);
    drop(server);
    assert_eq!(listed(&store), before);
    // A server that reads the request and hangs up: a claim's outcome is unknown (6), a
    // query's answer simply did not come (9).
    let hang_up = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", hang_up.local_addr().unwrap());
    let accepted = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut conn, _) = hang_up.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut seen = Vec::new();
            let mut buf = [0; 4096];
            // The headers and the body: a request is sent whole before the line drops.
            while !String::from_utf8_lossy(&seen).contains("}}") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = conn.flush();
        }
    });
    fails(
        &remote(&url, token(), &claim),
        6,
        "may or may not have been done",
        token(),
    );
    fails(
        &remote(&url, token(), &["list"]),
        9,
        "did not answer",
        token(),
    );
    accepted.join().unwrap();
}

#[test]
fn a_read_only_token_is_denied_a_claim_and_nothing_changes() {
    let store = Store::fixture("populated");
    let tokens = store.root().join("tokens.yaml");
    let made = ipamctl(&["token", "create", "reader", "--tokens"])
        .arg(&tokens)
        .args(["--namespace", "*", "--verbs", "read", "--cluster"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let reader = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    let mut cmd = store.ipamctl(["serve", "--listen", "127.0.0.1:0", "--tokens"]);
    cmd.arg(&tokens);
    let server = Server::spawn_as_is(cmd);
    let before = listed(&store);
    let claim = CLAIM;
    fails(&remote(&server.url, &reader, &claim), 8, "claim", &reader);
    let release = [
        "release",
        "vpc-main",
        "10.42.0.9",
        "-n",
        "acme/prod",
        "--owner",
        "VirtualMachine/web-02/0",
    ];
    fails(&remote(&server.url, &reader, &release), 8, "claim", &reader);
    // It reads.
    let read = remote(&server.url, &reader, &["list", "-n", "acme/prod"]);
    assert!(read.status.success());
    assert!(String::from_utf8_lossy(&read.stdout).contains("10.42.0.9"));
    assert_eq!(listed(&store), before);
    assert!(
        !server.log().contains(&reader),
        "the server logged the token"
    );
}

#[test]
#[cfg_attr(not(has_openssl), ignore = "needs openssl: apt-get install openssl")]
fn tls_is_verified_against_cacert_and_an_untrusted_server_is_exit_10() {
    let store = Store::fixture("populated");
    let dir = store.root();
    let (cert, key, ca) = serve_common::tls_files(&dir);
    let server = Server::start(&store, &["--tls-cert", &cert, "--tls-key", &key]);
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let claim = [
        "allocate",
        "vpc-main",
        "-n",
        "acme/prod",
        "--owner",
        "VirtualMachine/tls/0",
    ];
    let before = listed(&store);
    // Not trusted by the system's roots, nor by a CA that did not sign it.
    fails(&remote(&server.url, token(), &claim), 10, "TLS", token());
    let other = dir.join("other");
    std::fs::create_dir(&other).unwrap();
    let (_, _, wrong_ca) = serve_common::tls_files(&other);
    let out = ipamctl(&["--server", &server.url, "--cacert", &wrong_ca])
        .args(claim)
        .env("IPAMCTL_TOKEN", token())
        .output()
        .unwrap();
    fails(&out, 10, "TLS", token());
    // Plain HTTP to a TLS port gets no answer; TLS to a plain port no handshake.
    let plain = Server::start(&store, &[]);
    let tls_to_plain = plain.url.replace("http://", "https://");
    fails(&remote(&tls_to_plain, token(), &claim), 10, "TLS", token());
    drop(plain);
    assert_eq!(listed(&store), before);
    // Trusted with --cacert, it claims.
    let out = ipamctl(&["--server", &server.url, "--cacert", &ca])
        .args(claim)
        .env("IPAMCTL_TOKEN", token())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "10.42.0.1");
}

#[test]
fn commands_that_need_a_local_state_are_exit_2_before_anything_is_sent() {
    // Nothing listens: a command that tried to connect would be exit 9.
    let url = format!("http://127.0.0.1:{}", closed_port());
    let test = common::Test::new("populated");
    let state = test.state().display().to_string();
    for (args, why) in [
        (vec!["diff"], "git history"),
        (
            vec!["history", "--owner", "VirtualMachine/web-01/0"],
            "history",
        ),
        (vec!["check", "--fix"], "repairs"),
        (vec!["check"], "the store itself"),
        (vec!["import", &state], "between two stores"),
        (vec!["export", &state], "between two stores"),
        (vec!["init"], "creates a store"),
        (vec!["apply", "-f", "x.yaml"], "manifests"),
        (vec!["report"], "the store itself"),
    ] {
        let out = remote(&url, token(), &args);
        fails(&out, 2, why, token());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("does not run through a server"),
            "{args:?}"
        );
    }
    // With a store named on the line as well: which one is meant?
    let out = ipamctl(&["--server", &url, "-d", &state, "list"])
        .output()
        .unwrap();
    fails(&out, 2, "not with --store or --state-dir", token());
}
