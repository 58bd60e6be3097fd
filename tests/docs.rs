//! The committed man pages under `man/` and completion scripts under `completions/` (what the
//! Debian package installs) must match what the clap definitions generate.
//! Regenerate with `IPAMCTL_BLESS=1 cargo test --test docs`.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use clap::CommandFactory;

/// Asserts that the directory `dir` (under the crate) holds exactly the `generated` files,
/// byte for byte; with `IPAMCTL_BLESS` set, writes them there first (removing the others).
fn committed_as_generated(dir: &str, generated: &[(String, Vec<u8>)]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    if std::env::var_os("IPAMCTL_BLESS").is_some() {
        fs::create_dir_all(&path).unwrap();
        for entry in fs::read_dir(&path).unwrap() {
            fs::remove_file(entry.unwrap().path()).unwrap();
        }
        for (name, bytes) in generated {
            fs::write(path.join(name), bytes).unwrap();
        }
    }
    let committed: BTreeSet<String> = fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("{dir}/: {e}"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let names: BTreeSet<String> = generated.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(
        committed, names,
        "{dir}/ holds other files than the CLI makes; run IPAMCTL_BLESS=1 cargo test --test docs"
    );
    for (name, bytes) in generated {
        let on_disk = fs::read(path.join(name)).unwrap();
        assert!(
            on_disk == *bytes,
            "{dir}/{name} is stale; run IPAMCTL_BLESS=1 cargo test --test docs"
        );
    }
}

#[test]
fn man_pages_are_up_to_date() {
    let pages = ipamctl::cli::docs::man_pages();
    committed_as_generated("man", &pages);
    let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"ipamctl-allocate.1") && names.contains(&"ipamctl-pool-list.1"));
}

#[test]
fn completion_scripts_are_up_to_date() {
    let scripts: Vec<(String, Vec<u8>)> = ipamctl::cli::docs::completion_scripts()
        .into_iter()
        .map(|(name, text)| (name, text.into_bytes()))
        .collect();
    committed_as_generated("completions", &scripts);
    assert_eq!(scripts.len(), 3);
    for (name, text) in &scripts {
        // Each calls `ipamctl` by name, never the path of the binary that wrote it, so one
        // script serves every installation.
        let text = String::from_utf8_lossy(text);
        assert!(text.contains("ipamctl"), "{name}");
        assert!(
            !text.contains(env!("CARGO_BIN_EXE_ipamctl")),
            "{name}: {text}"
        );
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

/// `--version` names the version and the commit the binary was built from (`build.rs`), `-V`
/// the version alone, as the man pages do.
#[test]
fn version_names_the_commit_it_was_built_from() {
    let run = |flag: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ipamctl"))
            .arg(flag)
            .output()
            .expect("run ipamctl");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        run("--version"),
        format!("ipamctl {version} (commit {head})\n")
    );
    assert_eq!(run("-V"), format!("ipamctl {version}\n"));
}

/// Every command's `--help` opens with its own summary, the one its doc comment declares:
/// a flattened group of flags with a doc comment of its own gave `dhcp export` and `dns
/// export` the group's "Which subnets an export covers" in place of theirs, and no long help.
#[test]
fn every_command_has_its_own_summary() {
    fn walk(cmd: &clap::Command, path: &str, seen: &mut Vec<(String, String, String)>) {
        // `help` repeats each command's summary by design.
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let name = format!("{path} {}", sub.get_name());
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let long = sub
                .get_long_about()
                .map(|a| a.to_string())
                .unwrap_or_default();
            assert!(!about.is_empty(), "`{name}` has no summary");
            seen.push((name.clone(), about, long));
            walk(sub, &name, seen);
        }
    }
    let mut declared = Vec::new();
    walk(&ipamctl::cli::Cli::command(), "ipamctl", &mut declared);
    // As the binary renders them: after clap has built the tree (flattening included).
    let mut cli = ipamctl::cli::Cli::command();
    cli.build();
    let root = cli.get_about().map(|a| a.to_string()).unwrap_or_default();
    assert!(
        root.starts_with("IPv4 and IPv6 address management"),
        "{root}"
    );
    let mut rendered = Vec::new();
    walk(&cli, "ipamctl", &mut rendered);
    let changed: Vec<String> = declared
        .iter()
        .zip(&rendered)
        .filter(|(d, r)| d.1 != r.1 || (!d.2.is_empty() && d.2 != r.2))
        .map(|(d, r)| format!("`{}`: declared `{}`, shown `{}`", d.0, d.1, r.1))
        .collect();
    assert_eq!(declared.len(), rendered.len());
    assert_eq!(changed, Vec::<String>::new());
}
