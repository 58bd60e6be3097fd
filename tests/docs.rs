//! The committed man pages under `man/` and completion scripts under `completions/` (what the
//! Debian package installs) must match what the clap definitions generate.
//! Regenerate with `IPAMCTL_BLESS=1 cargo test --test docs`.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use clap::CommandFactory;

#[test]
fn man_pages_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let pages = ipamctl::cli::docs::man_pages();
    if std::env::var_os("IPAMCTL_BLESS").is_some() {
        fs::create_dir_all(&dir).unwrap();
        for entry in fs::read_dir(&dir).unwrap() {
            fs::remove_file(entry.unwrap().path()).unwrap();
        }
        for (name, bytes) in &pages {
            fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let committed: BTreeSet<String> = fs::read_dir(&dir)
        .expect("man/ exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let generated: BTreeSet<String> = pages.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(
        committed, generated,
        "man/ holds other pages than the CLI has; run IPAMCTL_BLESS=1 cargo test --test docs"
    );
    for (name, bytes) in &pages {
        let on_disk = fs::read(dir.join(name)).unwrap();
        assert!(
            on_disk == *bytes,
            "man/{name} is stale; run IPAMCTL_BLESS=1 cargo test --test docs"
        );
    }
    assert!(generated.contains("ipamctl-allocate.1") && generated.contains("ipamctl-pool-list.1"));
}

#[test]
fn completion_scripts_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    let scripts = ipamctl::cli::docs::completion_scripts();
    if std::env::var_os("IPAMCTL_BLESS").is_some() {
        fs::create_dir_all(&dir).unwrap();
        for (name, text) in &scripts {
            fs::write(dir.join(name), text).unwrap();
        }
    }
    let committed: BTreeSet<String> = fs::read_dir(&dir)
        .expect("completions/ exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let generated: BTreeSet<String> = scripts.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(
        committed, generated,
        "run IPAMCTL_BLESS=1 cargo test --test docs"
    );
    for (name, text) in &scripts {
        let on_disk = fs::read_to_string(dir.join(name)).unwrap();
        assert!(
            on_disk == *text,
            "completions/{name} is stale; run IPAMCTL_BLESS=1 cargo test --test docs"
        );
        // Each calls `ipamctl` by name, so one script serves every installation.
        assert!(text.contains("ipamctl"), "{name}");
    }
}

#[test]
fn every_page_has_an_exit_status_section_with_every_code() {
    for (name, page) in ipamctl::cli::docs::man_pages() {
        let text = String::from_utf8(page).unwrap();
        let section = text
            .split(".SH \"EXIT STATUS\"\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{name} has no EXIT STATUS section"));
        for (code, _) in ipamctl::cli::docs::EXIT_STATUS {
            assert!(
                section.contains(&format!(".TP\n\\fB{code}\\fR\n")),
                "{name}: exit status {code} is not documented"
            );
        }
        assert!(
            !text.contains(".SH EXTRA"),
            "{name} still has an EXTRA section"
        );
    }
}

#[test]
fn pages_show_no_literal_markdown() {
    for (name, page) in ipamctl::cli::docs::man_pages() {
        let text = String::from_utf8(page).unwrap();
        for (i, line) in text.lines().enumerate() {
            assert!(
                !line.contains('`'),
                "{name}:{}: a literal backtick: {line}",
                i + 1
            );
            assert!(
                !line.contains("**"),
                "{name}:{}: literal bold: {line}",
                i + 1
            );
            assert!(
                !line.contains("]("),
                "{name}:{}: a Markdown link: {line}",
                i + 1
            );
        }
    }
}

#[test]
fn pages_refer_only_to_pages_that_exist() {
    let pages = ipamctl::cli::docs::man_pages();
    let names: BTreeSet<String> = pages
        .iter()
        .map(|(n, _)| n.trim_end_matches(".1").to_owned())
        .collect();
    let mut seen = 0;
    for (name, page) in &pages {
        let text = String::from_utf8(page.clone()).unwrap().replace("\\-", "-");
        let text = text.replace("\\fB", "").replace("\\fR", "");
        for (at, _) in text.match_indices("(1)") {
            let start = text[..at]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .map_or(0, |i| i + 1);
            let target = &text[start..at];
            assert!(
                names.contains(target),
                "{name} refers to {target}(1), which does not exist"
            );
            seen += 1;
        }
    }
    assert!(seen > pages.len(), "hardly any references were checked");
}

#[test]
fn the_help_epilogue_lists_every_exit_status() {
    let help = ipamctl::cli::Cli::command().render_long_help().to_string();
    for (code, _) in ipamctl::cli::docs::EXIT_STATUS {
        assert!(
            help.contains(&format!("\n  {code}  ")),
            "--help lacks exit status {code}"
        );
    }
}
