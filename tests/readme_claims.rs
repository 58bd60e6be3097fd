//! The README's reference claims, read against what the binary says: its exit-status table
//! against `ipamctl(1)`'s (one list, `cli::docs::EXIT_STATUS`), and `schema --help` against
//! the schemas `ipamctl schema` prints. (The PostgreSQL set-up it gives is run by
//! `tests/pg_roles.rs`; an interrupted PostgreSQL `vpc delete` by `tests/pg_vpc_interrupt.rs`.)

use std::process::Command;

mod book;

/// The README and the book's pages, one after another.
fn readme() -> String {
    book::text()
}

#[test]
fn the_readme_exit_status_table_says_what_the_man_page_says() {
    let text = readme();
    for (code, meaning) in ipamctl::cli::docs::EXIT_STATUS {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("| {code} | ")))
            .unwrap_or_else(|| panic!("the README's exit-status table has no row for {code}"));
        let cell = row
            .split(" | ")
            .nth(1)
            .expect("a meaning")
            .trim_end_matches(" |");
        // The same words; the README may add an `(also: …)`.
        assert!(
            cell == *meaning || cell.starts_with(&format!("{meaning} (also:")),
            "exit {code}: the README says `{cell}`, the man page `{meaning}`"
        );
    }
}

#[test]
fn schema_help_names_every_schema_ipamctl_prints() {
    let bin = env!("CARGO_BIN_EXE_ipamctl");
    let out = Command::new(bin)
        .arg("schema")
        .output()
        .expect("run ipamctl schema");
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let help = Command::new(bin)
        .args(["schema", "--help"])
        .output()
        .expect("run ipamctl schema --help");
    let help = String::from_utf8(help.stdout).unwrap();
    let kinds: Vec<&String> = all.as_object().expect("an object").keys().collect();
    for kind in &kinds {
        assert!(
            help.contains(kind.as_str()),
            "`schema --help` does not name {kind}:\n{help}"
        );
        let file = format!("schema/{}.json", kind.to_lowercase());
        assert!(
            help.contains(&file),
            "`schema --help` does not name {file}:\n{help}"
        );
    }
    let count = ["four", "five", "six", "seven"][kinds.len() - 4];
    assert!(help.contains(&format!("the {count} manifests")), "{help}");
    assert!(readme().contains(&format!("all {count} manifests")));
}

#[test]
fn the_release_profile_installs_a_binary_without_debug_info() {
    // `cargo install` builds the release profile: line tables made that binary 43 MB.
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("read Cargo.toml");
    let release = toml
        .split("[profile.release]\n")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [profile.release] table");
    let settings: Vec<&str> = release.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(settings.contains(&"debug = false"), "{release}");
    assert!(settings.contains(&"strip = true"), "{release}");
}
