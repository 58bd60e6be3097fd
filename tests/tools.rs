//! `cargo test` passes on a machine with only Rust and git: every test that needs an optional
//! tool (PostgreSQL, PgBouncer, strace, pv, rsync, Chromium, pre-commit, fonts, Kea, dnsmasq,
//! named-checkzone, busybox's udhcpc, promtool) says so with
//! `#[cfg_attr(not(has_TOOL), ignore = "needs …")]`, which `build.rs` turns into "ignored,
//! needs TOOL: how to install it" where the tool is missing (and into a run under
//! `CI=true`). This reads the test sources and fails on a test that uses a tool without the
//! attribute, so a new test cannot break a fresh machine's `cargo test` unseen.

use std::path::Path;

/// What a test's body shows it needs: (a mark in its source, the cfg that must guard it).
const NEEDS: [(&str, &str); 18] = [
    ("Db::new(", "has_postgres"),
    ("Db::empty(", "has_postgres"),
    ("pg::server(", "has_postgres"),
    ("under_strace(", "has_strace"),
    ("require_strace(", "has_strace"),
    ("chromium(", "has_chromium"),
    ("(\"pre-commit\", &[", "has_pre_commit"),
    ("load_system_fonts", "has_fonts"),
    ("require(\"pv\")", "has_pv"),
    ("require(\"rsync\")", "has_rsync"),
    ("Bouncer::start()", "has_pgbouncer"),
    ("validates(\"kea-dhcp4\"", "has_kea"),
    ("\"kea-dhcp4\", \"-c\"", "has_kea"),
    ("Path::new(\"--test\")", "has_dnsmasq"),
    ("\"--keep-in-foreground\"", "has_dnsmasq"),
    ("\"named-checkzone\",", "has_named_checkzone"),
    ("\"busybox\", \"udhcpc\"", "has_udhcpc"),
    ("Command::new(\"promtool\")", "has_promtool"),
];

/// The test functions of `source`: (name, the attributes above it, its body), in order.
fn tests_of(source: &str) -> Vec<(String, String, String)> {
    let parts: Vec<&str> = source.split("#[test]").collect();
    let mut found = Vec::new();
    for part in parts.iter().skip(1) {
        let (attrs, rest) = match part.find("fn ") {
            Some(at) => part.split_at(at),
            None => continue,
        };
        let name: String = rest[3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The function alone: up to its closing brace at the start of a line.
        let body = rest.split("\n}\n").next().unwrap_or(rest);
        found.push((name, attrs.to_owned(), body.to_owned()));
    }
    found
}

/// The helper functions a test file defines (outside tests), with their bodies: a test that
/// calls one inherits what it needs, unless the file asks `cfg!(has_TOOL)` itself and skips
/// that part at run time.
fn helpers_needing(source: &str, cfg: &str) -> Vec<String> {
    let mut helpers = Vec::new();
    if source.contains(&format!("cfg!({cfg})")) {
        return helpers;
    }
    for (mark, needed) in NEEDS {
        if needed != cfg {
            continue;
        }
        for chunk in source.split("\nfn ").skip(1) {
            let name: String = chunk
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let body = chunk.split("\n}\n").next().unwrap_or("");
            if body.contains(mark) && !name.is_empty() {
                helpers.push(format!("{name}("));
            }
        }
    }
    helpers
}

#[test]
fn every_test_that_needs_a_tool_is_ignored_without_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut missing = Vec::new();
    let mut guarded = 0;
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("read tests/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        // This file's own planted cases name the tools on purpose.
        .filter(|p| !p.ends_with("tools.rs"))
        .collect();
    files.sort();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read a test file");
        let cfgs: Vec<&str> = {
            let mut c: Vec<&str> = NEEDS.iter().map(|(_, cfg)| *cfg).collect();
            c.dedup();
            c
        };
        for (name, attrs, body) in tests_of(&source) {
            for cfg in &cfgs {
                let marks = NEEDS
                    .iter()
                    .filter(|(_, c)| c == cfg)
                    .map(|(m, _)| m.to_string());
                let mut uses: Vec<String> = marks.collect();
                uses.extend(helpers_needing(&source, cfg));
                if uses.iter().any(|m| body.contains(m.as_str())) {
                    // `not(has_x)`, or `has_x` inside `not(all(has_x, has_y))`.
                    let guards = [format!("not({cfg})"), format!("{cfg},"), format!(" {cfg})")];
                    if guards.iter().any(|g| attrs.contains(g.as_str())) {
                        guarded += 1;
                    } else {
                        missing.push(format!(
                            "{}: `{name}` needs `{cfg}` but has no `#[cfg_attr(not({cfg}), ignore = \"needs …\")]`",
                            file.file_name().unwrap_or_default().to_string_lossy()
                        ));
                    }
                }
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // The check itself reads something: the PostgreSQL, strace and browser tests are there.
    eprintln!("{guarded} tests need a tool, each guarded");
    assert!(guarded > 40, "only {guarded} guarded tests found");
}

#[test]
fn a_test_using_a_tool_without_its_attribute_is_reported() {
    let planted = "#[test]\nfn uses_the_database() {\n    let db = pg::Db::new();\n}\n";
    let tests = tests_of(planted);
    assert_eq!(tests.len(), 1);
    let (name, attrs, body) = &tests[0];
    assert_eq!(name, "uses_the_database");
    assert!(body.contains("Db::new(") && !attrs.contains("not(has_postgres)"));
    let guarded = "#[test]\n#[cfg_attr(not(has_postgres), ignore = \"needs PostgreSQL\")]\nfn x() { pg::Db::new(); }\n";
    assert!(tests_of(guarded)[0].1.contains("not(has_postgres)"));
}
