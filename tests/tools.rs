//! `cargo test` passes on a machine with only Rust and git: every test that needs an optional
//! tool (PostgreSQL, PgBouncer, strace, pv, rsync, Chromium, pre-commit, fonts, Kea,
//! dnsmasq, named-checkzone, named-checkconf, busybox's udhcpc, ISC dhclient, promtool, root) says so with
//! `#[cfg_attr(not(has_TOOL), ignore = "needs …")]`, which `build.rs` turns into "ignored,
//! needs TOOL: how to install it" where the tool is missing (and into a run under
//! `CI=true`, where a missing tool then fails the test).
//!
//! This reads the test sources and finds every program a test runs, however it runs it:
//! `Command::new("X")`, a helper given the program (a parameter named `program`), an argv
//! array, an `sh -c`/`bash -c` string, a script the test writes (`#!/bin/sh …`), a
//! `tests/**/*.sh` script it names; through every function it calls, in its own file and
//! in the modules it includes (`tests/torture`, `tests/common`, `tests/pg`, …). It fails on:
//! - a program it does not know (neither in [`BASELINE`] nor in [`TOOLS`]);
//! - a test that reaches an optional tool without the attribute for it;
//! - a test that runs a tool inside a shell string without `require("TOOL")` on its way:
//!   a missing program there only makes the shell exit 127, which a loop that ignores its
//!   writer's status never sees (so even `CI=true` would pass, or hang, without it).
//!
//! A function may decide at run time instead (`if !cfg!(has_TOOL) { return }`, or
//! `on_postgres()`, which asks for PostgreSQL only when the run asks for it): what it
//! reaches is then not asked of the tests that call it.

mod book;
mod scan;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use scan::krate::{Crate, arrays, call_args};
use scan::{Ref, Source, shell};

/// Programs on every machine that builds the crate (Debian's essential packages, git, and
/// the shells' builtins), and the binary under test.
const BASELINE: [&str; 74] = [
    "sh",
    "getent",
    "bash",
    "git",
    "cargo",
    "ipamctl",
    "cp",
    "mv",
    "rm",
    "ln",
    "mkdir",
    "rmdir",
    "touch",
    "chmod",
    "chown",
    "ls",
    "find",
    "xargs",
    "cat",
    "head",
    "tail",
    "wc",
    "sort",
    "uniq",
    "cut",
    "tr",
    "sed",
    "grep",
    "echo",
    "printf",
    "test",
    "[",
    "true",
    "false",
    "sleep",
    "kill",
    "timeout",
    "id",
    "flock",
    "mkfifo",
    "mknod",
    "truncate",
    "dd",
    "stat",
    "date",
    "env",
    "realpath",
    "mktemp",
    "tee",
    "diff",
    "cmp",
    "readlink",
    "basename",
    "dirname",
    "seq",
    "setpriv",
    "cd",
    "set",
    "export",
    "exit",
    "trap",
    "wait",
    "command",
    "local",
    "return",
    "shift",
    "read",
    "mapfile",
    "eval",
    "unset",
    "pushd",
    "popd",
    "paste",
    "sha256sum",
];

/// The optional programs: (the program, the `cfg` that `build.rs` sets where it is).
const TOOLS: [(&str, &str); 28] = [
    ("openssl", "has_openssl"),
    ("curl", "has_curl"),
    ("pv", "has_pv"),
    ("python3", "has_python3"),
    ("rsync", "has_rsync"),
    ("strace", "has_strace"),
    ("chromium", "has_chromium"),
    ("pre-commit", "has_pre_commit"),
    ("promtool", "has_promtool"),
    ("kea-dhcp4", "has_kea"),
    ("kea-dhcp6", "has_kea"),
    ("dnsmasq", "has_dnsmasq"),
    ("named-checkzone", "has_named_checkzone"),
    ("named-checkconf", "has_named_checkconf"),
    ("busybox", "has_udhcpc"),
    ("dhclient", "has_dhclient"),
    ("pgbouncer", "has_pgbouncer"),
    ("node", "has_node"),
    ("npm", "has_node"),
    ("cargo-deb", "has_cargo_deb"),
    ("dpkg", "has_cargo_deb"),
    ("dpkg-deb", "has_cargo_deb"),
    ("man", "has_cargo_deb"),
    ("systemd-analyze", "has_cargo_deb"),
    // Present on most machines, but they need root: mounts, loop devices, network
    // namespaces.
    ("mount", "has_root"),
    ("umount", "has_root"),
    ("mkfs.ext4", "has_root"),
    ("ip", "has_root"),
];

/// What a function needs that is no program it runs: (a mark in its code or in one of its
/// string literals, the `cfg`).
const MARKS: [(&str, &str); 2] = [
    // Every throwaway PostgreSQL cluster is started by this script.
    ("/.ci/pg-cluster", "has_postgres"),
    ("load_system_fonts", "has_fonts"),
];

/// Marks of a function that decides at run time whether it needs a `cfg` (besides
/// `cfg!(has_TOOL)`): (the mark, the `cfg`).
const GATES: [(&str, &str); 1] = [("on_postgres()", "has_postgres")];

/// Calls that fail loudly when a tool is missing, besides `require("TOOL")`.
const REQUIRES: [(&str, &str); 1] = [("require_strace()", "strace")];

fn cfg_of(program: &str) -> Option<&'static str> {
    TOOLS.iter().find(|(p, _)| *p == program).map(|(_, c)| *c)
}

/// The README, whose `sh` blocks `tests/readme.rs` runs as one `bash -c` script.
const README: &str = "README.md";

/// What one function does by itself.
#[derive(Default, Clone)]
struct Facts {
    /// `cfg`s it needs.
    needs: BTreeSet<&'static str>,
    /// Tools it runs inside a shell string or script.
    in_shell: BTreeSet<String>,
    /// Tools it fails loudly without.
    requires: BTreeSet<String>,
    /// `cfg`s it decides about at run time.
    gates: BTreeSet<&'static str>,
    /// For a need or a shell tool it has from a callee: that callee.
    via: BTreeMap<String, usize>,
    /// It runs `sh -c`/`bash -c` with a script made at run time.
    dynamic_shell: bool,
    /// It names `README.md`, whose `sh` blocks such a script may be.
    readme: bool,
}

impl Facts {
    /// Notes that this function runs `program` (in a shell string if `in_shell`); an error
    /// saying so when the program is unknown.
    fn runs(&mut self, program: &str, in_shell: bool) -> Result<(), String> {
        let program = program.rsplit('/').next().unwrap_or(program);
        if let Some(cfg) = cfg_of(program) {
            self.needs.insert(cfg);
            if in_shell {
                self.in_shell.insert(program.to_owned());
            }
        } else if !BASELINE.contains(&program)
            && !program.contains(['{', '$', ' '])
            && !program.is_empty()
        {
            return Err(format!(
                "runs `{program}`, which tests/tools.rs does not know: add it to BASELINE \
                 (every machine that builds the crate has it) or to TOOLS (with its cfg, \
                 detected in build.rs)"
            ));
        }
        Ok(())
    }
}

/// What each function does by itself; the unknown programs, as messages.
fn facts(krate: &Crate, scripts: &BTreeMap<String, Vec<String>>) -> (Vec<Facts>, Vec<String>) {
    let runners = krate.runners();
    let mut unknown = Vec::new();
    let mut all = Vec::new();
    for f in &krate.funcs {
        let src = krate.source(f);
        let body = &src.masked[f.body.clone()];
        let mut facts = Facts::default();
        // (program, whether a shell runs it), found and to be known.
        let mut programs: Vec<(String, bool)> = Vec::new();
        for at in body.match_indices("Command::new(").map(|(i, _)| i) {
            let at = f.body.start + at + "Command::new(".len();
            if let Some(lit) = src.lit_after(at) {
                programs.push((lit.value.clone(), false));
                if lit.value == "sh" || lit.value == "bash" {
                    match krate.shell_string(src, at) {
                        Some(runs) => programs.extend(runs.into_iter().map(|p| (p, true))),
                        None => facts.dynamic_shell = true,
                    }
                }
            }
        }
        for (name, index, method) in &runners {
            for arg in call_args(src, &f.body, name, *method, *index) {
                programs.push((arg, false));
            }
        }
        for lit in src.lits_in(&f.body) {
            let v = &lit.value;
            if v.starts_with("#!/bin/sh") || v.starts_with("#!/bin/bash") {
                programs.extend(shell::programs(v).into_iter().map(|p| (p, true)));
            }
            for (script, runs) in scripts {
                if v.contains(script.as_str()) {
                    if script == README {
                        facts.readme = true;
                    } else {
                        programs.extend(runs.iter().map(|p| (p.clone(), true)));
                    }
                }
            }
            for (mark, cfg) in MARKS {
                if v.contains(mark) {
                    facts.needs.insert(cfg);
                }
            }
        }
        // Argv arrays (`&["busybox", "udhcpc", …]`): only the tools count, since most
        // arrays are ipamctl's arguments.
        for words in arrays(src, &f.body) {
            for p in shell::programs(&words.join(" ")) {
                if let Some(cfg) = cfg_of(&p) {
                    facts.needs.insert(cfg);
                }
            }
        }
        for (program, in_shell) in programs {
            if let Err(e) = facts.runs(&program, in_shell) {
                unknown.push(format!("{}: `{}` {e}", src.path.display(), f.name));
            }
        }
        for (mark, cfg) in MARKS {
            if body.contains(mark) {
                facts.needs.insert(cfg);
            }
        }
        for (mark, cfg) in GATES {
            if body.contains(mark) {
                facts.gates.insert(cfg);
            }
        }
        for (_, cfg) in TOOLS.iter().chain(&MARKS) {
            if body.contains(&format!("cfg!({cfg})")) {
                facts.gates.insert(cfg);
            }
        }
        for at in body.match_indices("require(").map(|(i, _)| i) {
            if let Some(lit) = src.lit_after(f.body.start + at + "require(".len()) {
                facts.requires.insert(lit.value.clone());
            }
        }
        for (mark, tool) in REQUIRES {
            if body.contains(mark) {
                facts.requires.insert(tool.to_owned());
            }
        }
        all.push(facts);
    }
    (all, unknown)
}

/// What each function reaches, through everything it calls.
fn reach(krate: &Crate, facts: &[Facts]) -> Vec<Facts> {
    let callees: Vec<Vec<usize>> = krate.funcs.iter().map(|f| krate.callees(f)).collect();
    let mut reach = facts.to_vec();
    loop {
        let mut changed = false;
        for i in 0..reach.len() {
            for &j in &callees[i] {
                if i == j {
                    continue;
                }
                // What the callee decides at run time stays with it.
                let from = reach[j].clone();
                let r = &mut reach[i];
                let before = (r.needs.len(), r.in_shell.len(), r.requires.len());
                for cfg in from.needs.difference(&from.gates) {
                    if r.needs.insert(cfg) {
                        r.via.insert(cfg.to_string(), j);
                    }
                }
                for tool in &from.in_shell {
                    if cfg_of(tool).is_none_or(|c| !from.gates.contains(c))
                        && r.in_shell.insert(tool.clone())
                    {
                        r.via.insert(tool.clone(), j);
                    }
                }
                r.requires.extend(from.requires);
                let flags = (r.dynamic_shell, r.readme);
                r.dynamic_shell |= from.dynamic_shell;
                r.readme |= from.readme;
                changed |= before != (r.needs.len(), r.in_shell.len(), r.requires.len())
                    || flags != (r.dynamic_shell, r.readme);
            }
        }
        if !changed {
            return reach;
        }
    }
}

/// How `f` comes to need `what`: ` (via a → b → c)`, or nothing when it does itkrate.
fn path(krate: &Crate, reach: &[Facts], mut f: usize, what: &str) -> String {
    let mut names = Vec::new();
    while let Some(&next) = reach[f].via.get(what) {
        if names.len() > 20 {
            break;
        }
        let g = &krate.funcs[next];
        names.push(match &g.owner {
            Some(owner) => format!("{owner}::{}", g.name),
            None => g.name.clone(),
        });
        f = next;
    }
    if names.is_empty() {
        String::new()
    } else {
        format!(" (via {})", names.join(" → "))
    }
}

/// Every `*.sh` under `tests/`, by file name, with the programs it runs; and the `sh` blocks
/// of the README and the book (which `tests/readme.rs` runs), as `README.md`.
fn scripts(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut found = BTreeMap::new();
    let mut blocks = String::new();
    for page in book::pages() {
        for block in book::blocks(&page.path, &page.text) {
            if block.info == "sh" {
                blocks.push_str(&block.text);
            }
        }
    }
    found.insert(README.to_owned(), shell::programs(&blocks));
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)
            .expect("read a test directory")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "sh") {
                let text = std::fs::read_to_string(&path).expect("read a script");
                let name = path
                    .file_name()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned();
                found.insert(name, shell::programs(&text));
            }
        }
    }
    found
}

/// Does `attrs` ignore the test without `cfg`? `not(has_x)`, or `has_x` inside
/// `not(all(has_x, has_y))`.
fn guarded(attrs: &str, cfg: &str) -> bool {
    // Ignored everywhere (a measurement run by hand), or where the tool is missing.
    attrs.contains("#[ignore")
        || attrs.contains("cfg_attr")
            && [
                format!("not({cfg})"),
                format!("{cfg},"),
                format!(" {cfg})"),
                format!("({cfg},"),
            ]
            .iter()
            .any(|g| attrs.contains(g.as_str()))
}

/// The problems of one test binary, and how many of its tests are guarded for a tool.
fn problems(root: &Path, scripts: &BTreeMap<String, Vec<String>>) -> (Vec<String>, usize) {
    let krate = Crate::load(root);
    let (facts, mut problems) = facts(&krate, scripts);
    let reach = reach(&krate, &facts);
    let mut guarded_tests = 0;
    let file = root.file_name().unwrap_or_default().to_string_lossy();
    for (i, (f, r)) in krate.funcs.iter().zip(&reach).enumerate() {
        if !f.is_test() || f.file != 0 {
            continue;
        }
        let mut r = r.clone();
        if r.dynamic_shell && r.readme {
            for program in &scripts[README] {
                if let Err(e) = r.runs(program, true) {
                    problems.push(format!("{file}: `{}` (the README's sh blocks) {e}", f.name));
                }
            }
        }
        // Where two tools are missing, a second `ignore` is an unused attribute (a warning).
        if scan::words(&f.attrs, "ignore").len() > 1 {
            problems.push(format!(
                "{file}: `{}` has two `ignore`s: give it one, `any(not(has_a), not(has_b))`",
                f.name
            ));
        }
        let needs: BTreeSet<_> = r.needs.difference(&r.gates).collect();
        if !needs.is_empty() {
            guarded_tests += 1;
        }
        for cfg in needs {
            if !guarded(&f.attrs, cfg) {
                problems.push(format!(
                    "{file}: `{}` needs `{cfg}`{} but has no `#[cfg_attr(not({cfg}), ignore = \"needs …\")]`",
                    f.name,
                    path(&krate, &reach, i, cfg)
                ));
            }
        }
        for tool in r.in_shell.difference(&r.requires) {
            problems.push(format!(
                "{file}: `{}` runs `{tool}` in a shell string{} without `require(\"{tool}\")`: \
                 where it is missing the shell exits 127 and nothing fails",
                f.name,
                path(&krate, &reach, i, tool)
            ));
        }
    }
    problems.sort();
    problems.dedup();
    (problems, guarded_tests)
}

fn test_roots(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read tests/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        // This file's own tables name the tools on purpose.
        .filter(|p| !p.ends_with("tools.rs"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_test_that_needs_a_tool_is_ignored_without_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let scripts = scripts(&dir);
    let roots = test_roots(&dir);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let results: Vec<(Vec<String>, usize)> = std::thread::scope(|s| {
        let chunks: Vec<_> = roots
            .chunks(roots.len().div_ceil(threads))
            .map(|chunk| {
                let scripts = &scripts;
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|r| problems(r, scripts))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        chunks
            .into_iter()
            .flat_map(|c| c.join().expect("a checker thread panicked"))
            .collect()
    });
    let mut all: Vec<String> = results.iter().flat_map(|(p, _)| p.clone()).collect();
    let guarded: usize = results.iter().map(|(_, n)| n).sum();
    all.sort();
    all.dedup();
    assert!(all.is_empty(), "{}", all.join("\n"));
    // The check itself reads something: the PostgreSQL, strace and browser tests are there.
    eprintln!("{guarded} tests need a tool, each guarded");
    assert!(guarded > 40, "only {guarded} guarded tests found");
}

#[test]
fn every_cfg_the_tests_ask_for_is_set_by_build_rs() {
    let build = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("build.rs"))
        .expect("read build.rs");
    for (_, cfg) in TOOLS.iter().chain(&MARKS) {
        assert!(
            build.contains(&format!("\"{cfg}\"")),
            "build.rs never sets `{cfg}`"
        );
    }
}

/// Writes `files` (name, text) into a new `tests/`-like directory and checks its first.
fn planted(files: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    problems(&dir.path().join(files[0].0), &scripts(dir.path())).0
}

#[test]
fn a_tool_in_a_shell_string_of_a_module_is_found_through_the_calls_that_reach_it() {
    let world = "pub struct World;\nimpl World {\n    pub fn start() -> World {\n        \
                 let loops: [(&str, fn()); 1] = [(\"slow\", slow_loop)];\n        World\n    }\n}\n\
                 fn slow_loop() {\n    let _ = Command::new(\"sh\")\n        .arg(\"-c\")\n        \
                 .arg(\"pv -qL 600 \\\"$1\\\" > \\\"$2\\\"\")\n        .status();\n}\n";
    let test = |attrs: &str, body: &str| {
        format!("mod torture;\nfn storm() {{ {body} }}\n#[test]\n{attrs}fn t() {{ storm(); }}\n")
    };
    let bare = planted(&[
        ("kill.rs", &test("", "World::start();")),
        ("torture/mod.rs", "pub mod outside;\n"),
        ("torture/outside.rs", world),
    ]);
    assert!(
        bare.iter().any(|p| p.contains("`t` needs `has_pv`")),
        "{bare:?}"
    );
    assert!(
        bare.iter()
            .any(|p| p.contains("`t` runs `pv` in a shell string")),
        "{bare:?}"
    );
    let fixed = planted(&[
        (
            "kill.rs",
            &test(
                "#[cfg_attr(not(has_pv), ignore = \"needs pv\")]\n",
                "require(\"pv\"); World::start();",
            ),
        ),
        ("torture/mod.rs", "pub mod outside;\n"),
        ("torture/outside.rs", world),
    ]);
    assert!(fixed.is_empty(), "{fixed:?}");
}

#[test]
fn unknown_programs_helpers_argv_arrays_and_scripts_are_all_read() {
    let found = planted(&[
        (
            "x.rs",
            "fn sh(program: &str, args: &[&str]) { Command::new(program).args(args); }\n\
             #[test]\nfn a() { Command::new(\"socat\").status(); }\n\
             #[test]\nfn b() { sh(\"rsync\", &[\"-a\"]); }\n\
             #[test]\nfn c() { exec(&[\"timeout\", \"20\", \"busybox\", \"udhcpc\"]); }\n\
             #[test]\nfn d() { run(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/tests/s/go.sh\")); }\n\
             #[test]\nfn e() { let _ = std::process::Command::new(\"bash\").args([\"-c\", \"nc -l 1\"]); }\n\
             #[test]\nfn f() { if !cfg!(has_rsync) { return; } sh(\"rsync\", &[]); }\n\
             #[test]\nfn g() { run(&[\"dhcp\", \"export\", \"--format\", \"dnsmasq\"]); }\n",
        ),
        ("s/go.sh", "#!/bin/bash\nset -e\nstrace -f true\n"),
    ]);
    let expected = [
        "`a` runs `socat`",
        "`b` needs `has_rsync`",
        "`c` needs `has_udhcpc`",
        "`d` needs `has_strace`",
        "`d` runs `strace` in a shell string",
        "`e` runs `nc`",
    ];
    for e in expected {
        assert!(found.iter().any(|p| p.contains(e)), "{e} not in {found:#?}");
    }
    assert_eq!(found.len(), expected.len(), "{found:#?}");
}

#[test]
fn a_test_with_two_ignores_is_reported() {
    let attr = "#[cfg_attr(not(has_fonts), ignore = \"needs a font\")]\n";
    let found = planted(&[(
        "x.rs",
        &format!("#[test]\n{attr}{attr}fn drawn() {{}}\n#[test]\n{attr}fn once() {{}}\n"),
    )]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("`drawn` has two `ignore`s"), "{found:?}");
}

// ---- The readers themselves ------------------------------------------------------------

#[test]
fn the_shell_reader_finds_the_programs_of_commands_lists_pipes_and_substitutions() {
    assert_eq!(shell::programs("pv -qL 600 \"$1\" > \"$2\""), ["pv"]);
    assert_eq!(
        shell::programs("find \"$1\" -exec touch -h -d \"$2\" {} +"),
        ["find", "touch"]
    );
    assert_eq!(
        shell::programs("set -o pipefail; \"$0\" list | head -1 && x=$(rsync -a a b) || echo no"),
        ["rsync", "set", "head", "echo"]
    );
    assert_eq!(
        shell::programs("case \"$ip\" in 10.1.1.1|*.0) fail x;; a|b) nc -l;;\nesac\nfalse"),
        ["fail", "nc", "false"]
    );
    assert_eq!(
        shell::programs(
            "f() { socat a b; }\nif [ -s x ]; then f; fi\n[[ -f a && -d b ]] && cat <<'E'\nnot a command\nE\n"
        ),
        ["socat", "[", "cat"]
    );
    assert_eq!(
        shell::programs("timeout 20 busybox udhcpc -f"),
        ["timeout", "busybox"]
    );
    assert_eq!(
        shell::programs("cmp <(ipamctl x) out.conf # same"),
        ["ipamctl", "cmp"]
    );
    assert_eq!(
        shell::programs("A=1 B=2 /usr/bin/strace -f x # pv here is a comment"),
        ["strace"]
    );
}

#[test]
fn the_rust_reader_masks_comments_and_literals_and_finds_functions_and_refs() {
    let text = "// fn no() {}\nimpl World {\n    pub fn start(x: &str) -> World {\n        let c = '{';\n        Command::new(\"sh\").arg(\"-c\").arg(\"pv -qL 600 \\\"$1\\\"\");\n        run(slow_loop, r#\"}\"#);\n        self.go();\n    }\n}\n#[test]\n#[cfg_attr(not(has_pv), ignore = \"needs pv\")]\nfn t() { World::start(\"x\"); }\n";
    let (masked, lits) = scan::mask(text);
    assert_eq!(masked.len(), text.len());
    assert!(!masked.contains("no()") && !masked.contains("pv -qL"));
    let values: Vec<&str> = lits.iter().map(|l| l.value.as_str()).collect();
    assert_eq!(
        values,
        ["sh", "-c", "pv -qL 600 \"$1\"", "}", "needs pv", "x"]
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.rs");
    std::fs::write(&path, text).unwrap();
    let source = Source::read(&path);
    let fns = source.functions(0);
    assert_eq!(fns.len(), 2);
    assert_eq!(fns[0].name, "start");
    assert_eq!(fns[0].owner.as_deref(), Some("World"));
    assert!(!fns[0].has_self && !fns[0].is_test());
    assert!(fns[1].is_test() && fns[1].attrs.contains("not(has_pv)"));
    let refs = source.refs(&fns[0].body);
    assert!(refs.contains(&Ref::Value("slow_loop".into())));
    assert!(refs.contains(&Ref::Bare("run".into())));
    assert!(refs.contains(&Ref::Method("go".into())));
    assert!(refs.contains(&Ref::Path("Command".into(), "new".into())));
    let c = source.lits.iter().find(|l| l.value == "-c").unwrap();
    assert_eq!(
        source.lit_after(c.at + 4).unwrap().value,
        "pv -qL 600 \"$1\""
    );
    assert!(
        source
            .refs(&fns[1].body)
            .contains(&Ref::Path("World".into(), "start".into()))
    );
}
