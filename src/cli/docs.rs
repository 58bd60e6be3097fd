//! Man pages generated from the clap definitions: `ipamctl(1)` and one page per subcommand.
//! `tests/docs.rs` fails when the committed pages under `man/` are stale.
//!
//! clap_mangen renders the `--help` text as it is; this module turns its Markdown code
//! spans into bold roff, replaces the `EXTRA` section (the `--help` epilogue) with `EXIT
//! STATUS`, `EXAMPLES` and `SEE ALSO` sections, and leaves out the `help` subcommand, which
//! has no page.

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::exit;

/// Every exit status and its meaning, as README and `ipamctl(1)` document them.
pub const EXIT_STATUS: &[(i32, &str)] = &[
    (exit::OK, "success"),
    (
        exit::FAILURE,
        "`check` found errors, `diff` found changes, `reconcile` found leaks; any failure not listed here (I/O error and the like)",
    ),
    (exit::INVALID, "invalid usage or input: nothing was written"),
    (
        exit::NOT_FOUND,
        "not found: no state directory, no such pool, namespace or prefix; release selectors that match nothing (unless `--ignore-not-found`)",
    ),
    (
        exit::CONFLICT,
        "conflict with the current state (an address held by another owner, a pool still in use, overlapping public pools, a guard that does not match, `diff` finding claims that break the invariants)",
    ),
    (
        exit::EXHAUSTED,
        "pool exhausted (for a supernet: no free block of the length asked for, naming the largest free block)",
    ),
    (
        exit::UNKNOWN,
        "outcome unknown (PostgreSQL): the connection was lost (or the server answered with a connection or shutdown error, SQLSTATE class 08 or 57) while the change was being committed, so it may or may not have been made; running the same command again is safe",
    ),
    (
        exit::QUOTA,
        "over a namespace's quota (`QUOTA_EXCEEDED` from `ipamctl serve`): the claim would take the namespace over a ceiling of one of its quotas, or it is over already; the message names the quota, its limit and what is held; nothing was claimed",
    ),
    (
        exit::DENIED,
        "denied (`ipamctl serve`'s `exit` for UNAUTHENTICATED and FORBIDDEN): no token, a wrong or revoked one, or a verb the token lacks in a namespace it may see",
    ),
    (
        exit::UNREACHABLE,
        "`--server URL` cannot be reached (no answer to connect within 10 s, a name that does not resolve, a connection refused): nothing was sent",
    ),
    (
        exit::TLS,
        "TLS with `--server https://…` failed (a certificate the system roots or `--cacert` do not trust, or one for another host): nothing was sent",
    ),
    (
        exit::INTERRUPTED,
        "interrupted by SIGINT or SIGTERM between two steps (`vpc delete`): it says what it did; run it again to finish",
    ),
];

/// Examples for the top page.
/// The top page's `ENVIRONMENT`: (variable, meaning).
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "IPAMCTL_STATE_DIR",
        "the state directory, as `-d` gives it (else the nearest ancestor of the current directory holding `.ipamctl`)",
    ),
    (
        "IPAMCTL_SERVER",
        "an `ipamctl serve` to run the command on, as `--server` gives it",
    ),
    (
        "IPAMCTL_TOKEN",
        "the bearer token sent to `--server` when `--token-file` is not given; never printed",
    ),
    (
        "IPAMCTL_LOCK_TIMEOUT",
        "how long a lock of the file store is waited for, in seconds (a finite decimal, 0 or more; unset or empty: 30). Any other value (`abc`, `-5`, `nan`, `inf`) is exit 2 naming it. A wait that reaches it is exit 1, naming the lock and its holder",
    ),
];

const EXAMPLES: &[&str] = &[
    "ipamctl init state && cd state",
    "ipamctl apply -f pools.yaml",
    "VM=$(virsh domuuid web-01)   # the VM's uuid (not bash's $UID, the user id)",
    "IP=$(ipamctl allocate vpc-main -n acme/prod --owner VirtualMachine/web-01/0 --uid \"$VM\")",
    "ipamctl list -n acme/prod -o json | jq -r '.items[].spec.address'",
    "ipamctl release --owner VirtualMachine/web-01/ --dry-run",
    "ipamctl diff -o markdown   # what this branch changes, for the pull request",
    "ipamctl check -o json      # in CI: exit 1 on any error",
];

/// Every completion script as (file name, text), where bash, zsh and fish look for them:
/// `completions/` holds them for the Debian package (`tests/docs.rs` keeps them current).
pub fn completion_scripts() -> Vec<(String, String)> {
    use crate::cli::Shell;
    [
        (Shell::Bash, "ipamctl.bash"),
        (Shell::Zsh, "_ipamctl"),
        (Shell::Fish, "ipamctl.fish"),
    ]
    .into_iter()
    .map(|(shell, name)| {
        let text = crate::cli::cmd::completions::script(shell)
            .expect("a completion script is written to memory");
        (name.to_owned(), text)
    })
    .collect()
}

/// Every man page as (file name, roff source).
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    let mut pages = Vec::new();
    // The version alone: `--version` adds the commit, which would make the committed pages
    // stale at every commit.
    let mut root = Cli::command()
        .name("ipamctl")
        .long_version(env!("CARGO_PKG_VERSION"))
        .disable_help_subcommand(true);
    // Propagates the global options into every subcommand, so each page lists them.
    root.build();
    collect(&root, "ipamctl", None, &mut pages);
    pages
}

fn collect(
    cmd: &clap::Command,
    name: &str,
    parent: Option<&str>,
    pages: &mut Vec<(String, Vec<u8>)>,
) {
    let cmd = cmd
        .clone()
        .name(name.to_owned())
        .bin_name(name.replace('-', " "));
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .expect("rendering into a Vec cannot fail");
    let text = String::from_utf8(buf).expect("clap_mangen writes UTF-8");
    let children: Vec<String> = cmd
        .get_subcommands()
        .map(|s| format!("{name}-{}", s.get_name()))
        .collect();
    let page = finish(&text, parent, &children);
    pages.push((format!("{name}.1"), page.into_bytes()));
    for sub in cmd.get_subcommands() {
        collect(
            sub,
            &format!("{name}-{}", sub.get_name()),
            Some(name),
            pages,
        );
    }
}

/// The page clap_mangen rendered, with our sections in place of `EXTRA` and code spans
/// in bold.
fn finish(text: &str, parent: Option<&str>, children: &[String]) -> String {
    let mut out = String::new();
    let mut skipping = false;
    let mut added = false;
    for line in text.lines() {
        if line.starts_with(".SH ") {
            skipping = line == ".SH EXTRA";
            if !added && (skipping || line == ".SH VERSION") {
                out.push_str(&sections(parent, children));
                added = true;
            }
        }
        if skipping {
            continue;
        }
        out.push_str(&bold_code(line));
        out.push('\n');
    }
    if !added {
        out.push_str(&sections(parent, children));
    }
    out
}

/// `EXIT STATUS`, `EXAMPLES` (top page only) and `SEE ALSO`.
fn sections(parent: Option<&str>, children: &[String]) -> String {
    let mut s = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in EXIT_STATUS {
        s.push_str(&format!(
            ".TP\n\\fB{code}\\fR\n{}\n",
            bold_code(&escape(meaning))
        ));
    }
    if parent.is_none() {
        s.push_str(".SH ENVIRONMENT\n");
        for (var, meaning) in ENVIRONMENT {
            s.push_str(&format!(
                ".TP\n\\fB{}\\fR\n{}\n",
                escape(var),
                bold_code(&escape(meaning))
            ));
        }
        s.push_str(".SH EXAMPLES\n.nf\n");
        for example in EXAMPLES {
            s.push_str(&escape(example));
            s.push('\n');
        }
        s.push_str(".fi\n");
    }
    let mut see: Vec<&str> = Vec::new();
    if let Some(p) = parent {
        see.push(p);
        if p != "ipamctl" {
            see.push("ipamctl");
        }
    }
    see.extend(children.iter().map(String::as_str));
    if !see.is_empty() {
        let refs: Vec<String> = see
            .iter()
            .map(|p| format!("\\fB{}\\fR(1)", escape(p)))
            .collect();
        s.push_str(&format!(".SH \"SEE ALSO\"\n{}\n", refs.join(", ")));
    }
    s
}

/// Text for a roff text line: backslashes, hyphens and quotes escaped, no leading dot.
fn escape(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\e")
        .replace('-', "\\-")
        .replace('\'', "\\*(Aq");
    if escaped.starts_with('.') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// Turns each Markdown code span (`` `x` ``) of a text line into bold; control lines are
/// left as they are.
fn bold_code(line: &str) -> String {
    if line.starts_with('.') || line.matches('`').count() < 2 {
        return line.to_owned();
    }
    let mut out = String::new();
    let mut open = false;
    let mut rest = line;
    while let Some(i) = rest.find('`') {
        out.push_str(&rest[..i]);
        // An odd last backtick is a literal one.
        let closes = open || rest[i + 1..].contains('`');
        out.push_str(match (open, closes) {
            (false, true) => "\\fB",
            (true, _) => "\\fR",
            (false, false) => "\\`",
        });
        open = closes && !open;
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_become_bold() {
        assert_eq!(
            bold_code("run `ipamctl init` now"),
            "run \\fBipamctl init\\fR now"
        );
        assert_eq!(bold_code("`a` and `b`"), "\\fBa\\fR and \\fBb\\fR");
        assert_eq!(bold_code(".TP `x`"), ".TP `x`");
        assert_eq!(bold_code("no spans"), "no spans");
    }
}
