//! Hostile input: names that try to leave the state directory, malformed manifests fed to
//! `apply` or planted in the state directory, and symlinks among the layout's directories
//! and files. Each is refused with one `error:` line (exit 2 for input; a warning or a
//! `check` finding for a broken file in the state), never a panic, never a write outside the
//! root, never a change to the existing state.

mod torture;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use torture::{Outcome, State, code, pool_yaml};

/// Every file under `dir` with its bytes (symlinks as their target), dot-files included or
/// not. Follows no symlink.
fn snapshot(dir: &Path, with_dot_files: bool) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, dots: bool, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(read) = fs::read_dir(dir) else {
            return;
        };
        for entry in read.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).expect("under the root").to_owned();
            if !dots && entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type().expect("file type");
            if kind.is_symlink() {
                let target = fs::read_link(&path).expect("read a symlink");
                out.insert(rel, format!("-> {}", target.display()).into_bytes());
            } else if kind.is_dir() {
                out.insert(rel.join(""), Vec::new());
                walk(root, &path, dots, out);
            } else {
                out.insert(rel, fs::read(&path).expect("read a file"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, with_dot_files, &mut out);
    out
}

/// A state directory with a public pool `p` (10.0.0.0/24), a private pool `q` in `t/ns`,
/// and an allocation in each, plus a victim file outside the root.
fn populated() -> State {
    let state = State::new();
    let out = state.apply(&format!(
        "{}---\n{}",
        pool_yaml("p", None, "10.0.0.0/24", &[]),
        pool_yaml("q", Some("t/ns"), "10.1.0.0/24", &[])
    ));
    assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    for args in [
        &["allocate", "p", "--owner", "FloatingIP/keep"][..],
        &["-n", "t/ns", "allocate", "q", "--owner", "FloatingIP/keep"][..],
    ] {
        let out = state.run(args);
        assert_eq!(out.code, Some(code::OK), "{}", out.describe());
    }
    fs::write(state.outside.join("victim"), "precious\n").expect("write the victim file");
    state
}

/// Asserts that `out` was refused with exit `want`, one `error:` line and no panic.
fn assert_refused(what: &str, out: &Outcome, want: i32) {
    assert!(!out.crashed(), "{what}: crashed: {}", out.describe());
    assert_eq!(out.code, Some(want), "{what}: {}", out.describe());
    let errors = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .count();
    assert_eq!(
        errors,
        1,
        "{what}: one `error:` line expected: {}",
        out.describe()
    );
}

/// Runs `f` and asserts that neither the state's manifests nor anything outside the root
/// changed.
fn unchanged<T>(state: &State, f: impl FnOnce() -> T) -> T {
    let inside = snapshot(&state.root, false);
    let outside = snapshot(&state.outside, true);
    let parent: Vec<_> = fs::read_dir(state.root.parent().expect("the root has a parent"))
        .expect("read the temporary directory")
        .map(|e| e.expect("entry").file_name())
        .collect();
    let result = f();
    assert_eq!(snapshot(&state.root, false), inside, "the state changed");
    assert_eq!(
        snapshot(&state.outside, true),
        outside,
        "something was written outside the root"
    );
    let mut after: Vec<_> = fs::read_dir(state.root.parent().expect("the root has a parent"))
        .expect("read the temporary directory")
        .map(|e| e.expect("entry").file_name())
        .collect();
    after.sort();
    let mut parent = parent;
    parent.sort();
    assert_eq!(after, parent, "something was created next to the root");
    result
}

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

// ---- Names that try to leave the root ---------------------------------------------------

#[test]
fn names_that_try_to_leave_the_root_are_refused_on_the_command_line() {
    let state = populated();
    let outside = state.outside.to_str().expect("UTF-8 path").to_owned();
    let escape = format!("{outside}/pwned");
    let long = "a".repeat(300);
    let long_ns = format!("{}a", "a/".repeat(200));
    let namespaces = [
        "..",
        "../..",
        "a/../..",
        "./a",
        "a//b",
        "/",
        outside.as_str(),
        "a/ipallocations",
        "a\\..\\b",
        "ä",
        long.as_str(),
        long_ns.as_str(),
        "",
    ];
    let names = [
        "..",
        ".",
        "../p",
        "a/b",
        escape.as_str(),
        long.as_str(),
        "P",
        "",
        "-p",
    ];
    let owners = [
        "FloatingIP/..",
        "FloatingIP/../../x",
        "VirtualMachine/../0",
        "VirtualMachine/a/../../0",
        "Node/../../etc",
        "Node//etc/passwd",
        "VPC/../router",
        "../FloatingIP/x",
    ];
    let long_owner = format!("FloatingIP/{long}");
    let mut cases: Vec<Vec<String>> = Vec::new();
    for ns in namespaces {
        cases.push(argv(&[
            "-n",
            ns,
            "allocate",
            "q",
            "--owner",
            "FloatingIP/x",
        ]));
        cases.push(argv(&["-n", ns, "list"]));
        cases.push(argv(&["-n", ns, "pool", "delete", "q"]));
    }
    for name in names {
        cases.push(argv(&["allocate", name, "--owner", "FloatingIP/x"]));
        cases.push(argv(&["release", name, "10.0.0.1"]));
        cases.push(argv(&["pool", "show", name]));
        cases.push(argv(&["pool", "delete", name]));
        cases.push(argv(&["list", "--pool", name]));
    }
    for owner in owners.iter().copied().chain([long_owner.as_str()]) {
        cases.push(argv(&["allocate", "p", "--owner", owner]));
        cases.push(argv(&["release", "p", "--owner", owner]));
        cases.push(argv(&["release", "p", "10.0.0.1", "--owner", owner]));
    }
    for uid in ["../x", "a/b", escape.as_str(), long.as_str(), ""] {
        cases.push(argv(&[
            "allocate",
            "p",
            "--owner",
            "FloatingIP/x",
            "--uid",
            uid,
        ]));
        cases.push(argv(&["release", "--uid", uid]));
    }
    unchanged(&state, || {
        for args in &cases {
            let out = state.run(args);
            // clap refuses some of these (an empty value, a leading `-`) before ipamctl does.
            assert_refused(&args.join(" "), &out, code::INVALID);
        }
    });
}

#[test]
fn names_that_try_to_leave_the_root_are_refused_in_manifests() {
    let state = populated();
    let outside = state.outside.to_str().expect("UTF-8 path").to_owned();
    let long = "a".repeat(10_000);
    let pool = |name: &str, ns: Option<&str>| {
        let mut text =
            format!("apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\n");
        if let Some(ns) = ns {
            text.push_str(&format!("  namespace: {ns}\n"));
        }
        let kind = if ns.is_some() { "private" } else { "public" };
        text.push_str(&format!("spec:\n  cidr: 10.9.0.0/24\n  kind: {kind}\n"));
        text.into_bytes()
    };
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for name in [
        "..",
        "'..'",
        "../x",
        "x/../../y",
        "/etc",
        &format!("'{outside}/pwned'"),
        "\"a\\0b\"",
        "\"a\\nb\"",
        &long,
        "''",
    ] {
        inputs.push(pool(name, None));
        inputs.push(pool("x", Some(name)));
    }
    // A raw NUL byte in a name and in a namespace (command lines cannot carry one).
    inputs.push(pool("a\0b", None));
    inputs.push(pool("x", Some("t/\0")));
    let file = state.outside.join("..").join("input.yaml");
    unchanged(&state, || {
        for input in &inputs {
            let out = state.run_stdin(&["apply", "-f", "-"], Some(input));
            assert_refused(&String::from_utf8_lossy(input), &out, code::INVALID);
        }
    });
    // The same through a file (written before the snapshot: it lies next to the root).
    for input in &inputs {
        fs::write(&file, input).expect("write the input file");
        unchanged(&state, || {
            let out = state.run(&["apply", "-f", file.to_str().expect("UTF-8 path")]);
            assert_refused(&String::from_utf8_lossy(input), &out, code::INVALID);
        });
    }
}

// ---- Malformed manifests ----------------------------------------------------------------

const VALID_POOL: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: new\nspec:\n  cidr: 10.2.0.0/24\n  kind: public\n";

/// Manifest texts that must never be accepted, each with what it tries.
fn malformed() -> Vec<(&'static str, Vec<u8>)> {
    let mut laughs = String::from(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n",
    );
    for i in 1..12 {
        let p = i - 1;
        laughs.push_str(&format!(
            "l{i}: &l{i} [*l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}]\n"
        ));
    }
    laughs
        .push_str("metadata: {name: new, labels: *l11}\nspec: {cidr: 10.2.0.0/24, kind: public}\n");
    let mut aliased_spec = String::from("x: &s {cidr: 10.2.0.0/24, kind: public}\n");
    aliased_spec
        .push_str("apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: new}\nspec: *s\n");
    let huge_labels: String = (0..120_000).map(|i| format!("    k{i}: v\n")).collect();
    let huge = format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: new\n  labels:\n{huge_labels}spec:\n  cidr: 10.2.0.0/24\n  kind: public\n"
    );
    let huge_scalar = VALID_POOL.replace("name: new", &format!("name: {}", "n".repeat(2 << 20)));
    let deep_flow = format!(
        "{VALID_POOL}  zone: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep_block: String = (0..20_000)
        .map(|i| format!("{}- \n", " ".repeat(i % 40)))
        .collect();
    let mut binary: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    binary.extend_from_slice(VALID_POOL.as_bytes());
    let replace = |from: &str, to: &str| VALID_POOL.replace(from, to).into_bytes();
    vec![
        ("empty", Vec::new()),
        ("only comments", b"# nothing\n---\n# here\n".to_vec()),
        ("binary", binary),
        (
            "not UTF-8",
            replace("new", "n\u{e9}w")
                .into_iter()
                .map(|b| if b == 0xc3 { 0xff } else { b })
                .collect(),
        ),
        ("huge (> 1 MiB, many nodes)", huge.into_bytes()),
        ("huge (> 1 MiB, one scalar)", huge_scalar.into_bytes()),
        ("over 16 MiB", vec![b'#'; 17 << 20]),
        ("deeply nested (flow)", deep_flow.into_bytes()),
        ("deeply nested (block)", deep_block.into_bytes()),
        (
            "duplicate key",
            format!("{VALID_POOL}kind: IPAMPool\n").into_bytes(),
        ),
        (
            "duplicate nested key",
            replace("  kind: public", "  kind: public\n  cidr: 10.3.0.0/24"),
        ),
        ("billion laughs", laughs.into_bytes()),
        ("aliased spec", aliased_spec.into_bytes()),
        (
            "tagged",
            replace("cidr: 10.2.0.0/24", "cidr: !!binary aGVsbG8="),
        ),
        ("a list", b"- a\n- b\n".to_vec()),
        ("a scalar", b"hello\n".to_vec()),
        (
            "wrong type: metadata",
            replace("metadata:\n  name: new", "metadata: [new]"),
        ),
        (
            "wrong type: cidr",
            replace("cidr: 10.2.0.0/24", "cidr: 167903232"),
        ),
        (
            "wrong type: exclude",
            replace("kind: public", "kind: public\n  exclude: 10.2.0.1"),
        ),
        (
            "wrong type: labels",
            replace("name: new", "name: new\n  labels: [a]"),
        ),
        ("wrong type: name", replace("name: new", "name: [new]")),
        ("null name", replace("name: new", "name: ~")),
        ("numeric name", replace("name: new", "name: 1.5")),
        ("boolean kind", replace("kind: public", "kind: yes")),
        (
            "IPv6 cidr with host bits",
            replace("10.2.0.0/24", "2001:db8::1/64"),
        ),
        ("prefix over 128", replace("10.2.0.0/24", "2001:db8::/129")),
        (
            "IPv6 gateway",
            replace("kind: public", "kind: public\n  gateway: 2001:db8::1"),
        ),
        (
            "IPv4-mapped IPv6 exclude",
            replace(
                "kind: public",
                "kind: public\n  exclude: ['::ffff:10.2.0.1']",
            ),
        ),
        ("octet over 255", replace("10.2.0.0/24", "10.2.0.256/24")),
        ("prefix over 32", replace("10.2.0.0/24", "10.2.0.0/33")),
        ("host bits", replace("10.2.0.0/24", "10.2.0.1/24")),
        ("leading zeros", replace("10.2.0.0/24", "010.2.0.0/24")),
        (
            "leading zeros in the prefix length",
            replace("10.2.0.0/24", "10.2.0.0/024"),
        ),
        ("no prefix length", replace("10.2.0.0/24", "10.2.0.0")),
        (
            "gateway outside",
            replace("kind: public", "kind: public\n  gateway: 10.3.0.1"),
        ),
        (
            "exclude outside",
            replace("kind: public", "kind: public\n  exclude: [10.3.0.0/24]"),
        ),
        (
            "unknown field",
            replace("kind: public", "kind: public\n  excludes: []"),
        ),
        (
            "unknown top-level field",
            format!("{VALID_POOL}status: {{}}\n").into_bytes(),
        ),
        ("wrong apiVersion", replace("pivirt.hu/v1", "pivirt.hu/v2")),
        ("no apiVersion", replace("apiVersion: pivirt.hu/v1\n", "")),
        ("wrong kind", replace("kind: IPAMPool", "kind: Pod")),
        (
            "an allocation",
            replace("kind: IPAMPool", "kind: IPAllocation"),
        ),
        (
            "public pool with a namespace",
            replace("name: new", "name: new\n  namespace: t/ns"),
        ),
        (
            "overlapping public pool",
            replace("10.2.0.0/24", "10.0.0.0/16"),
        ),
        (
            "second document invalid",
            format!(
                "{VALID_POOL}---\n{}",
                VALID_POOL
                    .replace("name: new", "name: other")
                    .replace("10.2.0.0", "10.4.0.0")
                    .replace("public", "nonsense")
            )
            .into_bytes(),
        ),
        (
            "same pool twice",
            format!("{VALID_POOL}---\n{VALID_POOL}").into_bytes(),
        ),
        (
            "update stranding an allocation",
            pool_yaml("p", None, "10.0.0.0/24", &["10.0.0.1"]).into_bytes(),
        ),
    ]
}

#[test]
fn malformed_manifests_are_refused_by_apply_and_change_nothing() {
    let state = populated();
    let file = state.outside.join("..").join("input.yaml");
    for (what, input) in malformed() {
        // Conflicts with the state are exit 4; everything else is invalid input.
        let want = if what.starts_with("overlapping") || what.starts_with("update") {
            code::CONFLICT
        } else {
            code::INVALID
        };
        unchanged(&state, || {
            let out = state.run_stdin(&["apply", "-f", "-"], Some(&input));
            assert_refused(what, &out, want);
        });
        fs::write(&file, &input).expect("write the input file");
        unchanged(&state, || {
            let out = state.run(&["apply", "-f", file.to_str().expect("UTF-8 path")]);
            assert_refused(what, &out, want);
        });
    }
    // The same input, valid, goes through: the refusals above were about the input.
    let out = state.apply(VALID_POOL);
    assert_eq!(out.code, Some(code::OK), "{}", out.describe());
}

// ---- Broken files in the state directory --------------------------------------------------

/// The allocation the planted files pretend to be: the lowest candidate of `p` after the
/// one `populated` handed out.
const PLANTED: &str = "cluster/ipallocations/p-10-0-0-2.yaml";

fn valid_allocation() -> String {
    "apiVersion: pivirt.hu/v1\nkind: IPAllocation\nmetadata:\n  name: p-10-0-0-2\n  labels:\n    pivirt.hu/managed-by: director\nspec:\n  pool: p\n  address: \"10.0.0.2\"\n  owner:\n    kind: FloatingIP\n    name: planted\n".to_owned()
}

/// Allocation file contents that do not make a valid allocation.
fn broken_allocations() -> Vec<(&'static str, Vec<u8>)> {
    let valid = valid_allocation();
    let replace = |from: &str, to: &str| {
        assert!(valid.contains(from), "{from}");
        valid.replace(from, to).into_bytes()
    };
    let mut cases: Vec<(&'static str, Vec<u8>)> = malformed()
        .into_iter()
        .filter(|(what, _)| {
            // These are about pools; as an allocation file they are just "not an allocation".
            !what.starts_with("over 16")
        })
        .collect();
    cases.extend([
        ("two documents", format!("{valid}---\n{valid}").into_bytes()),
        (
            "two documents, second empty-ish",
            format!("{valid}---\nfoo: bar\n").into_bytes(),
        ),
        ("NUL byte", replace("name: planted", "name: plan\0ted")),
        (
            "escaped NUL",
            replace("name: planted", "name: \"plan\\0ted\""),
        ),
        ("IPv6 address", replace("\"10.0.0.2\"", "\"2001:db8::2\"")),
        (
            "malformed address",
            replace("\"10.0.0.2\"", "\"10.0.0.2.5\""),
        ),
        ("address as a number", replace("\"10.0.0.2\"", "167772162")),
        (
            "name disagrees with the address",
            replace("\"10.0.0.2\"", "\"10.0.0.3\""),
        ),
        (
            "owner name breaks its kind's rule",
            replace("name: planted", "name: ../../etc"),
        ),
        (
            "unknown owner kind",
            replace("kind: FloatingIP", "kind: Pod"),
        ),
        (
            "duplicate owner key",
            replace("name: planted", "name: planted\n    name: other"),
        ),
        (
            "wrong kind",
            replace("kind: IPAllocation", "kind: IPAMPool"),
        ),
        ("pool is not a name", replace("pool: p", "pool: ../p")),
    ]);
    cases
}

#[test]
fn broken_allocation_files_are_warned_about_and_their_address_stays_taken() {
    for (what, content) in broken_allocations() {
        let state = populated();
        let planted = state.root.join(PLANTED);
        fs::write(&planted, &content).expect("plant the file");
        let before = snapshot(&state.root, false);
        let outside = snapshot(&state.outside, true);

        let list = state.run(&["list", "-o", "json"]);
        assert!(!list.crashed(), "{what}: {}", list.describe());
        assert_eq!(list.code, Some(code::OK), "{what}: {}", list.describe());
        assert!(
            list.stderr.contains("warning:"),
            "{what}: {}",
            list.describe()
        );
        let listed: serde_json::Value = serde_json::from_str(&list.stdout)
            .unwrap_or_else(|e| panic!("{what}: list printed no JSON ({e}): {}", list.describe()));
        assert_eq!(
            listed["items"].as_array().map(Vec::len),
            Some(2),
            "{what}: {}",
            list.describe()
        );

        let pools = state.run(&["pool", "list", "-o", "json"]);
        assert_eq!(pools.code, Some(code::OK), "{what}: {}", pools.describe());
        assert!(!pools.crashed(), "{what}: {}", pools.describe());
        let pools: serde_json::Value = serde_json::from_str(&pools.stdout).expect("pool list JSON");
        let p = pools["items"]
            .as_array()
            .and_then(|a| a.iter().find(|v| v["metadata"]["name"] == "p"))
            .expect("pool p listed");
        assert_eq!(
            p["status"]["allocated"], 2,
            "{what}: the planted address counts as taken"
        );

        if state.has_check() {
            let check = state.run(&["check", "-o", "json"]);
            assert!(!check.crashed(), "{what}: {}", check.describe());
            assert_eq!(check.code, Some(1), "{what}: {}", check.describe());
            assert!(
                check.stdout.contains(PLANTED),
                "{what}: {}",
                check.describe()
            );
        }
        assert_eq!(
            snapshot(&state.root, false),
            before,
            "{what}: readers changed the state"
        );

        // An empty file changed moments ago may be a rewrite whose writer is stalled between
        // truncating and writing: a claim fails ("try again") rather than overlook its owner,
        // for two seconds after the change (see FsStore::read_whole). Past that it is broken.
        if content.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(2100));
        }
        // A new owner skips the planted address, and says why.
        let new = state.run(&["allocate", "p", "--owner", "FloatingIP/new"]);
        assert!(!new.crashed(), "{what}: {}", new.describe());
        assert_eq!(
            (new.code, new.stdout.as_str()),
            (Some(code::OK), "10.0.0.3\n"),
            "{what}: {}",
            new.describe()
        );
        assert!(
            new.stderr.contains("warning:"),
            "{what}: {}",
            new.describe()
        );
        assert_eq!(
            fs::read(&planted).expect("the planted file"),
            content,
            "{what}"
        );
        let mut after = snapshot(&state.root, false);
        assert!(
            after
                .remove(Path::new("cluster/ipallocations/p-10-0-0-3.yaml"))
                .is_some()
        );
        assert_eq!(
            after, before,
            "{what}: allocate changed more than its own file"
        );

        // Releasing the planted address is refused, not a blind delete.
        let release = state.run(&["release", "p", "10.0.0.2", "--owner", "FloatingIP/planted"]);
        assert!(!release.crashed(), "{what}: {}", release.describe());
        assert_ne!(
            release.code,
            Some(code::OK),
            "{what}: {}",
            release.describe()
        );
        assert_eq!(
            fs::read(&planted).expect("the planted file"),
            content,
            "{what}"
        );
        assert_eq!(snapshot(&state.outside, true), outside, "{what}");
    }
}

/// Pool file contents that do not make a valid pool named `p`.
fn broken_pools() -> Vec<(&'static str, Vec<u8>)> {
    let valid = pool_yaml("p", None, "10.0.0.0/24", &[]);
    let mut cases: Vec<(&'static str, Vec<u8>)> = malformed()
        .into_iter()
        .filter(|(what, _)| {
            // Valid as a pool file, or about the whole input rather than one file.
            !matches!(
                *what,
                "over 16 MiB" | "overlapping public pool" | "update stranding an allocation"
            )
        })
        .collect();
    cases.extend([
        ("two documents", format!("{valid}---\n{valid}").into_bytes()),
        (
            "NUL byte",
            valid.replace("name: p", "name: p\0").into_bytes(),
        ),
    ]);
    cases
}

#[test]
fn broken_pool_files_are_refused_by_writers_and_skipped_by_readers() {
    for (what, content) in broken_pools() {
        let state = populated();
        let planted = state.root.join("cluster/ipampools/p.yaml");
        fs::write(&planted, &content).expect("plant the file");
        unchanged(&state, || {
            for args in [
                &["allocate", "p", "--owner", "FloatingIP/new"][..],
                &["pool", "show", "p"][..],
                &["pool", "delete", "p"][..],
            ] {
                let out = state.run(args);
                // A file over the size bound is refused unread, as damaged (exit 1), before
                // anyone parses it.
                let want = if what.starts_with("huge") {
                    code::FAILURE
                } else {
                    code::INVALID
                };
                assert_refused(what, &out, want);
                assert!(out.stderr.contains("p.yaml"), "{what}: {}", out.describe());
            }
            let out = state.run(&["pool", "list", "-o", "json"]);
            assert_eq!(out.code, Some(code::OK), "{what}: {}", out.describe());
            assert!(
                out.stderr.contains("warning:"),
                "{what}: {}",
                out.describe()
            );
            let pools: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
            assert_eq!(
                pools["items"].as_array().map(Vec::len),
                Some(1),
                "{what}: only q is listed"
            );
            let out = state.run(&["list", "-o", "json"]);
            assert_eq!(out.code, Some(code::OK), "{what}: {}", out.describe());
            if state.has_check() {
                let check = state.run(&["check"]);
                assert_eq!(check.code, Some(1), "{what}: {}", check.describe());
                assert!(!check.crashed(), "{what}: {}", check.describe());
            }
        });
    }
}

#[test]
fn a_directory_where_an_allocation_file_belongs_is_a_broken_allocation() {
    let state = populated();
    fs::create_dir(state.root.join(PLANTED)).expect("plant a directory");
    let list = state.run(&["list", "-o", "json"]);
    assert_eq!(list.code, Some(code::OK), "{}", list.describe());
    assert!(list.stderr.contains("warning:"), "{}", list.describe());
    let new = state.run(&["allocate", "p", "--owner", "FloatingIP/new"]);
    assert_eq!(new.stdout, "10.0.0.3\n", "{}", new.describe());
}

// ---- Symlinks ------------------------------------------------------------------------------

/// Every command, as a writer or a reader would run it, in both scopes.
fn every_command() -> Vec<(Vec<String>, Option<String>)> {
    let mut cases: Vec<(Vec<String>, Option<String>)> = [
        &["allocate", "p", "--owner", "FloatingIP/new"][..],
        &["allocate", "p", "--owner", "FloatingIP/keep"][..],
        &["-n", "t/ns", "allocate", "q", "--owner", "FloatingIP/new"][..],
        &["release", "p", "10.0.0.1", "--owner", "FloatingIP/keep"][..],
        &["-n", "t/ns", "release", "q", "--owner", "FloatingIP/keep"][..],
        &["release", "--uid", "00000000-0000-4000-8000-0000000000bd"][..],
        &["pool", "delete", "p"][..],
        &["-n", "t/ns", "pool", "delete", "q"][..],
        &["list", "-o", "json"][..],
        &["pool", "list", "-o", "json"][..],
        &["pool", "show", "p"][..],
        &["check"][..],
        &["check", "--fix"][..],
    ]
    .iter()
    .map(|a| (argv(a), None))
    .collect();
    cases.push((
        argv(&["apply", "-f", "-"]),
        Some(format!(
            "{}---\n{}",
            pool_yaml("new", None, "10.5.0.0/24", &[]),
            pool_yaml("new", Some("t/ns"), "10.5.0.0/24", &[])
        )),
    ));
    cases
}

/// Replaces `rel` (a directory or file of the layout) by a symlink to a copy of it outside
/// the root, or to `target` if given.
fn symlink_out(state: &State, rel: &str, target: Option<&Path>) {
    let path = state.root.join(rel);
    let dest = match target {
        Some(t) => t.to_owned(),
        None => {
            let dest = state.outside.join(rel.replace('/', "_"));
            if path.is_dir() {
                copy_dir(&path, &dest);
                fs::remove_dir_all(&path).expect("remove the original");
            } else if path.exists() {
                fs::rename(&path, &dest).expect("move the original out");
            }
            dest
        }
    };
    std::os::unix::fs::symlink(&dest, &path).expect("create the symlink");
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create a directory");
    for entry in fs::read_dir(from).expect("read a directory").flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// Plants a symlink at `rel` (to a copy of it outside the root, or to an empty directory
/// there if `to_empty`), then runs each command `line` (split at spaces) as
/// [`assert_confined`] does.
fn plant_and_confine(state: &State, rel: &str, to_empty: bool, lines: &[&str]) {
    plant_link(state, rel, to_empty);
    let commands: Vec<_> = lines
        .iter()
        .map(|line| (argv(&line.split(' ').collect::<Vec<_>>()), None))
        .collect();
    assert_confined(state, rel, &commands);
}

/// Replaces the directory or file `rel` by a symlink to a copy of it outside the root, or
/// (`to_empty`) to an empty directory there.
fn plant_link(state: &State, rel: &str, to_empty: bool) {
    if to_empty {
        let empty = state.outside.join("empty");
        fs::create_dir_all(&empty).unwrap();
        fs::remove_dir_all(state.root.join(rel)).unwrap();
        symlink_out(state, rel, Some(&empty));
    } else {
        symlink_out(state, rel, None);
    }
}

/// Runs `args` on `state` (something planted at `rel`): it must not crash, nor change
/// anything outside the root (`outside`: its snapshot before).
fn run_confined(
    state: &State,
    rel: &str,
    outside: &BTreeMap<PathBuf, Vec<u8>>,
    args: &[&str],
) -> Outcome {
    let out = state.run(args);
    assert!(!out.crashed(), "{rel}: {}", out.describe());
    assert_eq!(
        &snapshot(&state.outside, true),
        outside,
        "{rel}: written outside the root by {}",
        out.describe()
    );
    out
}

/// Runs each command on `state`, whose layout has a symlink planted at `rel`: none may
/// crash, a refusal is one `error:` line, nothing outside the root changes, at least one
/// command notices the symlink, and `check` reports it.
fn assert_confined(state: &State, rel: &str, commands: &[(Vec<String>, Option<String>)]) {
    let outside = snapshot(&state.outside, true);
    let mut failures = 0;
    for (args, stdin) in commands {
        let out = state.run_stdin(args, stdin.as_deref().map(str::as_bytes));
        assert!(!out.crashed(), "{rel}: {}", out.describe());
        if out.code != Some(code::OK) {
            failures += 1;
            let errors = out
                .stderr
                .lines()
                .filter(|l| l.starts_with("error:"))
                .count();
            assert_eq!(errors, 1, "{rel}: {}", out.describe());
        }
        assert_eq!(
            snapshot(&state.outside, true),
            outside,
            "{rel}: written outside the root by {}",
            out.describe()
        );
    }
    assert!(failures > 0, "{rel}: nothing noticed the symlink");
    if state.has_check() {
        let check = state.run(&["check", "-o", "json"]);
        assert_eq!(check.code, Some(1), "{rel}: {}", check.describe());
        assert!(
            check.stdout.contains("symlink"),
            "{rel}: {}",
            check.describe()
        );
    }
}

#[test]
fn symlinks_in_the_layout_are_refused_and_nothing_is_written_outside_the_root() {
    let layout_links = [
        "namespaces",
        "namespaces/t",
        "namespaces/t/ns/ipallocations",
        "namespaces/t/ns/ipampools",
        "cluster",
        "cluster/ipallocations",
        "cluster/ipampools",
        "cluster/ipallocations/p-10-0-0-1.yaml",
        "cluster/ipampools/p.yaml",
    ];
    for rel in layout_links {
        let state = populated();
        symlink_out(&state, rel, None);
        assert_confined(&state, rel, &every_command());
    }
}

/// The derived index is git-ignored, but a repository can still carry it (`git add -f`), and
/// a clone then materialises its symlinks: they must not lead writes out of the root.
#[test]
fn symlinks_in_the_owner_index_lead_no_write_outside_the_root() {
    // The hint file of the owner `every_command` allocates for.
    let new_owner = ipamctl::model::Owner::parse("FloatingIP/new", None).expect("an owner");
    let hint = format!(
        ".index/cluster/ipallocations/p.owners/{:016x}",
        new_owner.key()
    );
    let index_links = [
        (".index", "index", true),
        (".index/cluster", "index", true),
        (".index/cluster/ipallocations", "index", true),
        (".index/cluster/ipallocations/p.idx", "victim", false),
        (".index/cluster/ipallocations/p.owners", "owners", true),
        (hint.as_str(), "victim", false),
        // Where ipamctl 0.1 kept its index and locks.
        ("cluster/ipallocations/.index", "index", true),
        ("cluster/ipallocations/.index/journal", "victim", false),
        ("cluster/ipallocations/.index/p.lock-00", "victim", false),
    ];
    for (rel, target, is_dir) in index_links {
        let state = populated();
        let dest = state.outside.join(target);
        if is_dir {
            fs::create_dir_all(&dest).expect("create the target");
        }
        let path = state.root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create the parent");
        }
        if path.is_dir() {
            fs::remove_dir_all(&path).expect("remove the original");
        } else if path.exists() {
            fs::remove_file(&path).expect("remove the original");
        }
        symlink_out(&state, rel, Some(&dest));
        let outside = snapshot(&state.outside, true);
        for (args, stdin) in every_command() {
            let out = state.run_stdin(&args, stdin.as_deref().map(str::as_bytes));
            assert!(!out.crashed(), "{rel}: {}", out.describe());
            assert_eq!(
                snapshot(&state.outside, true),
                outside,
                "{rel}: written outside the root by {}",
                out.describe()
            );
        }
        // Many owners, so that every lock stripe and hint is touched.
        for i in 0..40 {
            let out = state.run(&["allocate", "p", "--owner", &format!("FloatingIP/o-{i}")]);
            assert!(!out.crashed(), "{rel}: {}", out.describe());
        }
        assert_eq!(
            snapshot(&state.outside, true),
            outside,
            "{rel}: written outside the root"
        );
    }
}

// ---- The marker -----------------------------------------------------------------------------

#[test]
fn a_broken_marker_is_refused_before_anything_is_read_or_written() {
    for content in [
        &b""[..],
        b"layout: 2\n",
        b"layout: x\n",
        b"\xff\xfe\x00garbage",
        &[b'#'; 3 << 20][..],
    ] {
        let state = populated();
        fs::write(state.root.join(".ipamctl"), content).expect("write the marker");
        unchanged(&state, || {
            for (args, stdin) in every_command() {
                let out = state.run_stdin(&args, stdin.as_deref().map(str::as_bytes));
                assert!(!out.crashed(), "{}", out.describe());
                assert_ne!(out.code, Some(code::OK), "{}", out.describe());
                let errors = out
                    .stderr
                    .lines()
                    .filter(|l| l.starts_with("error:"))
                    .count();
                assert_eq!(errors, 1, "{}", out.describe());
            }
        });
    }
}

// ---- What is written -------------------------------------------------------------------------

/// The state is shared by every user and job that runs ipamctl on it: its files get the
/// permissions of any file the user creates (0666 less the umask), not a private 0600.
#[test]
fn manifests_are_readable_by_whoever_may_read_the_state_directory() {
    use std::os::unix::fs::PermissionsExt;
    let state = populated();
    for rel in [
        ".ipamctl",
        ".gitignore",
        "cluster/ipampools/p.yaml",
        "cluster/ipallocations/p-10-0-0-1.yaml",
        "namespaces/t/ns/ipampools/q.yaml",
        "namespaces/t/ns/ipallocations/q-10-1-0-1.yaml",
    ] {
        let mode = fs::metadata(state.root.join(rel))
            .expect("a written file")
            .permissions()
            .mode();
        // Tests run with some umask that leaves the owner read and write; whatever it takes
        // away from group and others, 0600 would take away more unless the umask is 077.
        assert_eq!(mode & 0o600, 0o600, "{rel}: {mode:o}");
        let umask_allows_group_read = fs::metadata(&state.outside)
            .expect("a directory made by the test")
            .permissions()
            .mode()
            & 0o040
            != 0;
        if umask_allows_group_read {
            assert_ne!(mode & 0o040, 0, "{rel}: {mode:o} is private to its owner");
        }
    }
}

/// The directories of the stored subnets and the cooldown records (issue 12) go through the
/// same confined opens as the manifests: a symlink planted at either, to a copy outside the
/// root or to an empty directory there (before ipamctl ever made the directory), leads no
/// read or write out of the root, and whatever meets it says so in one `error:` line.
#[test]
fn symlinks_at_the_subnet_and_cooldown_directories_lead_nothing_outside_the_root() {
    let pool = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: c\n  namespace: t/ns\nspec:\n  cidr: 10.7.0.0/24\n  kind: private\n  reuseAfter: 1h\n";
    // Each a command line, split at spaces.
    let commands = [
        "-n t/ns allocate c --owner FloatingIP/new",
        "-n t/ns release c --owner FloatingIP/keep",
        "-n t/ns allocate c --owner FloatingIP/keep",
        "-n t/ns allocate c --owner FloatingIP/s --subnet web",
        "-n t/ns subnet create db --pool c --cidr 10.7.0.64/28",
        "-n t/ns subnet list",
        "-n t/ns subnet show web",
        "-n t/ns subnet delete web",
        "check",
        "check --fix",
    ];
    for (rel, to_empty) in [
        ("namespaces/t/ns/cooldown", false),
        ("namespaces/t/ns/subnets", false),
        ("namespaces/t/ns/cooldown", true),
        ("namespaces/t/ns/subnets", true),
    ] {
        let state = populated();
        assert_eq!(state.apply(pool).code, Some(code::OK));
        // A cooldown record for .2, and a subnet.
        for line in [
            "-n t/ns allocate c --owner FloatingIP/keep",
            "-n t/ns allocate c --owner FloatingIP/gone",
            "-n t/ns release c --owner FloatingIP/gone",
            "-n t/ns subnet create web --pool c --cidr 10.7.0.16/29",
        ] {
            let out = state.run(&line.split(' ').collect::<Vec<_>>());
            assert_eq!(out.code, Some(code::OK), "{}", out.describe());
        }
        plant_and_confine(&state, rel, to_empty, &commands);
    }
}

/// Prefix claims live in `ipprefixclaims/` of their scope, opened as every manifest is: a
/// symlink planted at that directory (to a copy outside the root, or to an empty directory
/// there) or at a claim's file leads no read or write out of the root, every command that
/// meets it says so in one `error:` line, and `check` reports it.
#[test]
fn symlinks_at_the_prefix_claims_directory_and_files_lead_nothing_outside_the_root() {
    let supernets = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\nspec:\n  cidr: 2001:db8::/48\n  kind: supernet\n---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\n  namespace: t/ns\nspec:\n  cidr: 2001:db9::/48\n  kind: supernet\n";
    let commands = [
        "allocate sn --prefix-length 56 --owner FloatingIP/new",
        "allocate sn --prefix-length 56 --owner FloatingIP/held",
        "allocate sn --prefix 2001:db8:0:100::/56 --owner FloatingIP/exact",
        "-n t/ns allocate sn --prefix-length 60 --owner FloatingIP/new",
        "release sn 2001:db8::/56 --owner FloatingIP/held",
        "release --owner FloatingIP/held -A",
        "list -A --kind IPPrefixClaim",
        "pool list",
        "pool show sn",
        "pool show sn --map",
        "vpc create v --from-pool sn --prefix-length 56",
        "check",
    ];
    for (rel, to_empty) in [
        ("cluster/ipprefixclaims", false),
        ("cluster/ipprefixclaims", true),
        (
            "cluster/ipprefixclaims/sn-2001-0db8-0000-0000-0000-0000-0000-0000-56.yaml",
            false,
        ),
        ("namespaces/t/ns/ipprefixclaims", false),
    ] {
        let state = populated();
        assert_eq!(state.apply(supernets).code, Some(code::OK));
        for line in [
            "allocate sn --prefix-length 56 --owner FloatingIP/held",
            "-n t/ns allocate sn --prefix-length 56 --owner FloatingIP/held",
        ] {
            let out = state.run(&line.split(' ').collect::<Vec<_>>());
            assert_eq!(out.code, Some(code::OK), "{}", out.describe());
        }
        plant_and_confine(&state, rel, to_empty, &commands);
    }
}

/// The prefix claims' owner index (`.index/<scope>/ipprefixclaims/<pool>.idx`) is derived
/// and git-ignored, but a repository can carry it (`git add -f`) and a clone materialises
/// its symlinks: one planted at the index's directory or file, leading to a directory or a
/// file outside the root, leads no write out of the root, crashes nothing, and changes no
/// answer (the owner that holds a prefix gets it back; a new owner's overlaps no claim).
#[test]
fn symlinks_in_the_prefix_owner_index_lead_no_write_outside_the_root() {
    let supernets = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\nspec:\n  cidr: 2001:db8::/48\n  kind: supernet\n---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\n  namespace: t/ns\nspec:\n  cidr: 2001:db9::/48\n  kind: supernet\n";
    let index_links = [
        (".index/cluster/ipprefixclaims", true),
        (".index/cluster/ipprefixclaims/sn.idx", false),
        (".index/namespaces/t/ns/ipprefixclaims", true),
        (".index/namespaces/t/ns/ipprefixclaims/sn.idx", false),
    ];
    for (rel, is_dir) in index_links {
        let state = populated();
        assert_eq!(state.apply(supernets).code, Some(code::OK));
        // Three owners in each scope, asked twice, so that the index is written.
        let mut held = BTreeMap::new();
        for round in 0..2 {
            // The index records only files older than its racy window.
            std::thread::sleep(std::time::Duration::from_millis(1100 * round));
            for o in ["a", "b", "c"] {
                for ns in [None, Some("t/ns")] {
                    let mut args = ns.map_or_else(Vec::new, |n| vec!["-n", n]);
                    let owner = format!("FloatingIP/{o}");
                    args.extend(["allocate", "sn", "--prefix-length", "56", "--owner", &owner]);
                    let out = state.run(&args);
                    assert_eq!(out.code, Some(code::OK), "{}", out.describe());
                    let prefix = out.stdout.trim().to_owned();
                    if round == 1 {
                        assert_eq!(held.get(&(ns, o)), Some(&prefix), "{ns:?} {o}");
                    }
                    held.insert((ns, o), prefix);
                }
            }
        }
        let path = state.root.join(rel);
        assert!(path.exists(), "{rel}: the index was not written");
        let dest = state.outside.join("planted-index");
        if is_dir {
            copy_dir(&path, &dest);
            fs::remove_dir_all(&path).expect("remove the index directory");
        } else {
            fs::rename(&path, &dest).expect("move the index file out");
        }
        symlink_out(&state, rel, Some(&dest));
        let outside = snapshot(&state.outside, true);
        for ns in [None, Some("t/ns")] {
            let scope = ns.map_or_else(Vec::new, |n| vec!["-n", n]);
            let run = |extra: &[&str]| {
                let args: Vec<&str> = scope.iter().copied().chain(extra.iter().copied()).collect();
                run_confined(&state, rel, &outside, &args)
            };
            for o in ["a", "b", "c"] {
                let owner = format!("FloatingIP/{o}");
                let out = run(&["allocate", "sn", "--prefix-length", "56", "--owner", &owner]);
                if out.code == Some(code::OK) {
                    assert_eq!(out.stdout.trim(), held[&(ns, o)], "{rel}: {ns:?} {o}");
                } else {
                    let errors = out.stderr.lines().filter(|l| l.starts_with("error:"));
                    assert_eq!(errors.count(), 1, "{rel}: {}", out.describe());
                }
            }
            let out = run(&[
                "allocate",
                "sn",
                "--prefix-length",
                "56",
                "--owner",
                "FloatingIP/new",
            ]);
            if out.code == Some(code::OK) {
                let new = out.stdout.trim();
                let mine = held.iter().filter(|((n, _), _)| *n == ns);
                assert!(
                    mine.clone().all(|(_, p)| p != new),
                    "{rel}: {new} was already held"
                );
            }
            run(&["release", "sn", "--owner", "FloatingIP/b"]);
            run(&["list", "--kind", "IPPrefixClaim"]);
            run(&["pool", "show", "sn"]);
        }
        let check = state.run(&["check"]);
        assert!(!check.crashed(), "{rel}: {}", check.describe());
        assert_eq!(
            snapshot(&state.outside, true),
            outside,
            "{rel}: written outside"
        );
    }
}

/// MAC records live in `macs/` of their scope (`<pool>-<12 hex digits>`, naming the
/// holder's address). A symlink planted at that directory (to a copy outside the root, or to
/// an empty directory there) or at a record, or a FIFO at a record, leads no read or write
/// out of the root and blocks nothing; every command either succeeds correctly or fails
/// in one `error:` line; a failed claim leaves its owner holding nothing; and no MAC ends up
/// on two allocations of a pool.
#[test]
fn symlinks_and_fifos_at_the_macs_directory_and_records_lead_nothing_outside_the_root() {
    let pools = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: m\nspec:\n  cidr: 10.8.0.0/24\n  kind: public\n  macPrefix: '52:54:00'\n---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: m\n  namespace: t/ns\nspec:\n  cidr: 10.9.0.0/24\n  kind: private\n  macPrefix: '52:54:00'\n";
    // Each a command line, split at spaces: claims that make, find and change records.
    let commands = [
        "allocate m --owner VirtualMachine/new/0 --mac 02:00:00:00:00:0b",
        "allocate m --owner VirtualMachine/keep/0 --mac 02:00:00:00:00:0a",
        "allocate m --owner VirtualMachine/thief/0 --mac 02:00:00:00:00:0a",
        "allocate m --owner VirtualMachine/auto/0 --mac auto",
        "-n t/ns allocate m --owner VirtualMachine/new/0 --mac 02:00:00:00:00:0b",
        "mac set m 10.8.0.1 --owner VirtualMachine/keep/0 --mac 02:00:00:00:00:0c",
        "list -A --mac 02:00:00:00:00:0a",
        "list -A -o wide",
        "release m --owner VirtualMachine/keep/0",
        "check",
    ];
    let record = "cluster/macs/m-02000000000a";
    let planted = [
        ("cluster/macs", Some(false)),
        ("cluster/macs", Some(true)),
        ("namespaces/t/ns/macs", Some(false)),
        (record, Some(false)),
        (record, None),
        ("cluster/macs/m-02000000000b", None),
    ];
    for (rel, link) in planted {
        let state = populated();
        let applied = state.apply(pools);
        assert_eq!(applied.code, Some(code::OK), "{}", applied.describe());
        for line in [
            "allocate m --owner VirtualMachine/keep/0 --mac 02:00:00:00:00:0a",
            "-n t/ns allocate m --owner VirtualMachine/keep/0 --mac 02:00:00:00:00:0a",
        ] {
            let out = state.run(&line.split(' ').collect::<Vec<_>>());
            assert_eq!(out.code, Some(code::OK), "{}", out.describe());
        }
        assert!(state.root.join(record).is_file(), "no record at {record}");
        match link {
            Some(to_empty) => plant_link(&state, rel, to_empty),
            None => {
                let _ = fs::remove_file(state.root.join(rel));
                let made = std::process::Command::new("mkfifo")
                    .arg(state.root.join(rel))
                    .status()
                    .expect("run mkfifo");
                assert!(made.success());
            }
        }
        let outside = snapshot(&state.outside, true);
        let mut failures = 0;
        for line in commands {
            let args: Vec<&str> = line.split(' ').collect();
            let out = run_confined(&state, rel, &outside, &args);
            if out.code == Some(code::OK) {
                continue;
            }
            failures += 1;
            let errors = out.stderr.lines().filter(|l| l.starts_with("error:"));
            assert_eq!(errors.count(), 1, "{rel}: {}", out.describe());
            // A claim that failed holds nothing for a new owner.
            if args.contains(&"allocate") && !line.contains("keep") {
                let owner = args[args.iter().position(|a| *a == "--owner").unwrap() + 1];
                let scope: &[&str] = if args[0] == "-n" {
                    &["-n", "t/ns"]
                } else {
                    &[]
                };
                let list = state.run(&[scope, &["list", "--owner", owner, "-o", "name"]].concat());
                assert_eq!(list.stdout, "", "{rel}: `{line}` failed yet {owner} holds");
            }
        }
        assert!(failures > 0, "{rel}: nothing noticed what was planted");
        // Whatever succeeded: no MAC is on two allocations of a pool.
        let list = state.run(&["list", "-A", "-o", "json"]);
        let items: serde_json::Value = serde_json::from_str(&list.stdout).expect("JSON");
        let mut seen = BTreeMap::new();
        for item in items["items"].as_array().unwrap() {
            let Some(mac) = item["spec"]["mac"].as_str() else {
                continue;
            };
            let key = (
                item["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
                item["spec"]["poolName"].to_string(),
                mac.to_owned(),
            );
            let name = item["metadata"]["name"].to_string();
            if let Some(other) = seen.insert(key, name.clone()) {
                panic!("{rel}: MAC {mac} on {other} and {name}");
            }
        }
    }
}
