//! What the README must say beside its runnable examples (`tests/readme.rs` runs those): how
//! to put `ipamctl` on PATH, what each optional tool enables for the tests and how to install
//! it, every schema `ipamctl schema` prints, and `Node` owners named the one way the README
//! teaches (after the stored subnet, or the prefix, they are claimed in).

use std::process::Command;

mod book;

/// The README and the book's pages, one after another.
fn readme() -> String {
    book::text()
}

/// The README's section under `heading` (a whole line), up to the next heading of any level.
#[track_caller]
fn section(text: &str, heading: &str) -> String {
    let start = text
        .lines()
        .position(|l| l == heading)
        .unwrap_or_else(|| panic!("the README has no `{heading}` section"));
    text.lines()
        .skip(start + 1)
        .take_while(|l| !l.starts_with('#') || l.starts_with("#!"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_readme_says_how_to_put_ipamctl_on_path() {
    let text = readme();
    assert!(
        text.lines().any(|l| l
            .trim_start()
            .starts_with("cargo install --locked --path .")),
        "no `cargo install --locked --path .` command in the README"
    );
    assert!(
        text.contains("PATH"),
        "the README does not say it goes on PATH"
    );
}

#[test]
fn the_readme_says_what_each_optional_tool_enables_and_how_to_install_it() {
    let tools = section(&readme(), "## Tools the tests use");
    for tool in [
        "PostgreSQL",
        "Chromium",
        "pre-commit",
        "strace",
        "loop devices",
        "Kea, dnsmasq, named-checkzone",
        "busybox `udhcpc`",
        "pv, rsync",
        "python3",
        "PgBouncer",
        "promtool",
    ] {
        let row = tools
            .lines()
            .find(|l| l.starts_with('|') && l.contains(tool))
            .unwrap_or_else(|| panic!("no row for {tool} in:\n{tools}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(
            cells.len() >= 5 && cells[2].len() > 10,
            "{tool}: what it enables: {row}"
        );
        assert!(
            cells[3].contains("install") || cells[3].contains("--privileged"),
            "{tool}: how to install it: {row}"
        );
    }
}

#[test]
fn the_readme_schema_section_names_every_schema_ipamctl_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_ipamctl"))
        .arg("schema")
        .output()
        .expect("run ipamctl schema");
    assert!(out.status.success());
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let kinds: Vec<&String> = all.as_object().expect("an object").keys().collect();
    assert_eq!(kinds.len(), 6, "{kinds:?}");
    let text = section(
        &readme(),
        "## Validating manifests in an editor: JSON Schema",
    );
    let flat = text.replace('\n', " ");
    for kind in kinds {
        let file = kind.to_lowercase();
        for needed in [
            format!("\"{kind}\""),
            format!("ipamctl schema {file}`"),
            format!("schema/{file}.json"),
        ] {
            assert!(
                flat.contains(&needed),
                "the schema section does not name `{needed}`:\n{text}"
            );
        }
    }
}

#[test]
fn node_owners_are_named_after_the_subnet_or_prefix_they_are_claimed_in() {
    let text = readme();
    let mut seen = 0;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |flag: &str| {
            words
                .iter()
                .position(|w| *w == flag)
                .and_then(|i| words.get(i + 1))
                .copied()
        };
        let Some(node) = after("--owner").and_then(|o| o.strip_prefix("Node/")) else {
            continue;
        };
        seen += 1;
        let claimed_in = after("--subnet").or_else(|| {
            // A continued command: the range is on the next line.
            text.lines()
                .skip_while(|l| *l != line)
                .nth(1)
                .and_then(|next| {
                    let w: Vec<&str> = next.split_whitespace().collect();
                    w.iter()
                        .position(|x| *x == "--within" || *x == "--subnet")
                        .and_then(|i| w.get(i + 1).copied())
                })
        });
        if let Some(range) = claimed_in.or_else(|| after("--within")) {
            assert_eq!(
                node, range,
                "`Node/{node}` is claimed in `{range}`: a Node owner is named after it\n{line}"
            );
        }
    }
    assert!(seen >= 2, "the README shows Node owners");
}
