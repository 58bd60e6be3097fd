//! Every hint is a command that works (issue 46): each `ipamctl …` command that a command's
//! advice names (a `hint:`, `warning:` or `note:` line, a batch result's `error.hint`, a
//! finding of `check`) is run, right after the command that printed it, on a copy of the
//! temporary directory it was printed against, and must not fail for its own usage (exit 2:
//! a missing argument, an invalid value, a flag it does not take).
//!
//! Why a hook in [`super::Test::run`] (and `tests/cli_check.rs`'s runner) rather than a list
//! of hints: every suite's every command goes through it, so a hint that a new error adds
//! is checked as soon as any test provokes it, with no list to keep up to date; and each is
//! run on the very state it was printed for (a copy taken before the test's next command
//! changes it), in the same working directory, with the same `-d state` (as
//! `IPAMCTL_STATE_DIR`) and environment (but its fail points), as the user who read it
//! would. On PostgreSQL (`IPAMCTL_TEST_STORE=postgres`) it runs on the state directory the
//! database was exported to. Commands a test spawns itself ([`super::Test::command`]) are
//! not seen. `tests/hints.rs` provokes the hints that no other suite does.
//!
//! A command is taken from a hint when a backtick span starts with `ipamctl`, or when
//! `ipamctl` and one of its subcommands (or a flag) follow `: `, `(` or start the hint (then
//! it runs to `; `, the matching `)` or the end). A template (an upper-case placeholder such
//! as `POOL` or `KIND/NAME`, a `…`, a shell variable) or a pipeline into ipamctl is prose,
//! not run; nor is a command for a database (`--store`), whose database the test has
//! dropped. With `IPAMCTL_TEST_HINTS_LOG` set to a file, each command found is appended to
//! it with what became of it.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a hinted command may run before it is killed (and counted as not failing for
/// its usage: a usage error is immediate).
const BOUND: Duration = Duration::from_secs(60);

/// What the command that printed the hints ran with.
pub struct Context<'a> {
    /// The test's temporary directory, as the command saw it.
    pub root: &'a Path,
    /// The working directory, relative to `root`.
    pub current_dir: &'a Path,
    /// The command had the implicit `-d state`.
    pub state_flag: bool,
    /// The environment the test set.
    pub envs: &'a [(OsString, OsString)],
    /// The command's arguments, for messages.
    pub args: &'a [OsString],
}

/// A command found in a hint.
#[derive(Debug, PartialEq, Eq)]
pub struct Hinted {
    /// The command, as printed.
    pub command: String,
    /// Why it is not run, if it is not.
    pub skipped: Option<&'static str>,
}

/// The advice a command printed: each `hint:`, `warning:` and `note:` line of stderr (an
/// `error:` line says what went wrong, and may name a command as a reference: "made with
/// `ipamctl allocate`"), each finding of a `check` table on stdout (`error` or `warning`, then the path
/// and the message), and the `error.hint` of each JSON result line of stdout (a batch's).
pub fn hints_of(stdout: &str, stderr: &str) -> Vec<String> {
    let mut hints: Vec<String> = stderr
        .lines()
        .filter_map(|l| {
            ["hint: ", "warning: ", "note: "]
                .iter()
                .find_map(|p| l.strip_prefix(p))
        })
        .map(str::to_owned)
        .collect();
    // `check -o json`: a List of findings.
    if let Ok(list) = serde_json::from_str::<serde_json::Value>(stdout)
        && let Some(items) = list["items"].as_array()
    {
        for item in items {
            if item["severity"].is_string()
                && let Some(message) = item["message"].as_str()
            {
                hints.push(message.to_owned());
            }
        }
    }
    for line in stdout.lines() {
        if line.starts_with('{') {
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(line)
                && let Some(hint) = value["error"]["hint"].as_str()
            {
                hints.push(hint.to_owned());
            }
        } else if let Some(finding) = ["error   ", "warning "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
        {
            hints.push(finding.trim_start().to_owned());
        }
    }
    hints
}

/// The commands a hint names (see the module docs).
pub fn commands_in(hint: &str) -> Vec<Hinted> {
    let mut found = Vec::new();
    for (i, part) in hint.split('`').enumerate() {
        if i % 2 == 1 {
            // Inside backticks: a command if it starts with ipamctl; a pipeline into it is a
            // shell snippet.
            if part == "ipamctl" || part.starts_with("ipamctl ") {
                found.push(judge(part));
            } else if part.contains("ipamctl ") && part.contains('|') {
                found.push(Hinted {
                    command: part.to_owned(),
                    skipped: Some("a pipeline"),
                });
            }
            continue;
        }
        let mut rest = part;
        while let Some(at) = rest.find("ipamctl ") {
            let before = &rest[..at];
            let opened = before.ends_with('(');
            let starts = (i == 0 && before.trim().is_empty()) || before.ends_with(": ") || opened;
            let tail = &rest[at..];
            let second = tail.split_whitespace().nth(1).unwrap_or_default();
            let command = second.starts_with('-') || subcommands().iter().any(|c| c == second);
            if !(starts && command) {
                rest = &tail["ipamctl ".len()..];
                continue;
            }
            let end = if opened {
                tail.find(')')
            } else {
                tail.find("; ")
            }
            .unwrap_or(tail.len());
            found.push(judge(tail[..end].trim_end_matches(['.', ' '])));
            rest = &tail[end..];
        }
    }
    found
}

/// The binary's subcommands, from its `--help`: what may follow `ipamctl` in a command
/// (prose that names the tool, "ipamctl reads only …", is none).
fn subcommands() -> &'static [String] {
    static LISTED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    LISTED.get_or_init(|| {
        let help = Command::new(super::BIN)
            .arg("--help")
            .output()
            .expect("run ipamctl --help");
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        help.lines()
            .skip_while(|l| *l != "Commands:")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .filter_map(|l| l.strip_prefix("  ").filter(|l| !l.starts_with(' ')))
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .collect()
    })
}

/// `command` with why it is not run, if it is a template or not for a state directory.
fn judge(command: &str) -> Hinted {
    let placeholder = |word: &str| {
        let word = word.trim_matches(|c| c == '\'' || c == '"');
        word.contains('…')
            || word.contains("...")
            || word.contains('$')
            || (!word.is_empty()
                && word.split('/').all(|part| {
                    !part.is_empty()
                        && part.starts_with(|c: char| c.is_ascii_uppercase())
                        && part
                            .chars()
                            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                }))
    };
    let skipped = if command.split_whitespace().any(placeholder) {
        Some("a template")
    } else if command.split_whitespace().any(|w| w == "--store") {
        Some("for a database")
    } else {
        None
    };
    Hinted {
        command: command.to_owned(),
        skipped,
    }
}

/// Runs every command the hints in `stdout` and `stderr` name on a copy of `ctx.root`;
/// panics, naming the hint and what it printed, if one exits 2.
#[track_caller]
pub fn run_hinted(ctx: &Context<'_>, stdout: &str, stderr: &str) {
    for hint in hints_of(stdout, stderr) {
        for hinted in commands_in(&hint) {
            let verdict = match hinted.skipped {
                Some(why) => format!("skipped ({why})"),
                None => run_hint(ctx, &hint, &hinted.command),
            };
            log(&verdict, &hinted.command);
        }
    }
}

/// Appends to `IPAMCTL_TEST_HINTS_LOG`, if set.
fn log(verdict: &str, command: &str) {
    let Some(path) = std::env::var_os("IPAMCTL_TEST_HINTS_LOG") else {
        return;
    };
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{verdict}\t{command}");
    }
}

/// Runs `command` on a copy of the context's directory; its verdict for the log.
#[track_caller]
fn run_hint(ctx: &Context<'_>, hint: &str, command: &str) -> String {
    let copy = tempfile::Builder::new()
        .prefix("ipamctl-hint-")
        .tempdir()
        .expect("create a temporary directory for a hint");
    copy_beside(ctx.root, copy.path());
    let mut roots = vec![ctx.root.to_path_buf()];
    if let Ok(canonical) = ctx.root.canonicalize() {
        roots.push(canonical);
    }
    let moved = |text: &str| {
        roots.iter().fold(text.to_owned(), |t, r| {
            t.replace(&*r.to_string_lossy(), &copy.path().to_string_lossy())
        })
    };
    let out = tempfile::tempdir().expect("a directory for the hint's output");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(moved(command))
        .current_dir(copy.path().join(ctx.current_dir))
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out.path().join("stdout")).expect("stdout file"))
        .stderr(std::fs::File::create(out.path().join("stderr")).expect("stderr file"));
    // The binary under test first on the test's `PATH`, or on the inherited one.
    let bin = Path::new(super::BIN)
        .parent()
        .expect("the binary's directory");
    let mut path = super::path_with_bin();
    for (key, value) in ctx.envs {
        match key.to_str() {
            Some("FAILPOINTS") => {}
            Some("PATH") => path = format!("{}:{}", bin.display(), value.to_string_lossy()),
            _ => {
                cmd.env(key, moved(&value.to_string_lossy()));
            }
        }
    }
    cmd.env("PATH", path);
    if ctx.state_flag {
        cmd.env("IPAMCTL_STATE_DIR", copy.path().join("state"));
    }
    let mut child = cmd.spawn().expect("spawn sh for a hint");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for a hint") {
            break Some(status);
        }
        if start.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let Some(code) = status.map(|s| s.code().unwrap_or(-1)) else {
        return format!("killed after {BOUND:?}");
    };
    let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap_or_default();
    assert_ne!(
        code,
        2,
        "a hint names a command that fails for its usage (exit 2)\n\
         the command: ipamctl {:?}\nprinted the hint: {hint}\n\
         whose command `{command}` printed:\n--- stdout:\n{}--- stderr:\n{}---",
        ctx.args,
        read("stdout"),
        read("stderr"),
    );
    format!("ran (exit {code})")
}

/// Copies `from` into `to` as it is: directories, regular files and symlinks (as symlinks);
/// what cannot be read (a FIFO, a file without permission) is left out.
fn copy_beside(from: &Path, to: &Path) {
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    for entry in entries.flatten() {
        let target = to.join(entry.file_name());
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if std::fs::create_dir(&target).is_ok() {
                copy_beside(&entry.path(), &target);
            }
        } else if kind.is_symlink() {
            if let Ok(link) = std::fs::read_link(entry.path()) {
                let _ = std::os::unix::fs::symlink(link, &target);
            }
        } else if kind.is_file() {
            let _ = std::fs::copy(entry.path(), &target);
        }
    }
}
