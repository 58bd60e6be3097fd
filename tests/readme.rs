//! The README and the book are run: every fenced `sh` block of the README, then of each
//! page of `docs/src/` in `SUMMARY.md`'s order, as one bash script (`set -euo pipefail`) in a
//! scratch directory holding a copy of `testdata/demo/`, with the binary under test first on
//! `PATH`. Blocks marked `sh no-run` are skipped; there must be few.

mod book;
mod common;

use std::process::Command;

#[test]
#[cfg_attr(
    not(all(has_python3, has_curl)),
    ignore = "needs python3, which an example parses JSON with, and curl, the server's client (apt-get install python3 curl)"
)]
fn every_sh_block_of_the_readme_runs() {
    common::needs::require("python3");
    common::needs::require("curl");
    let pages = book::pages();
    // The README's tour makes the state the book's examples build on.
    assert_eq!(pages[0].path, "README.md", "the README's blocks run first");
    let blocks: Vec<(String, book::Block)> = pages
        .iter()
        .flat_map(|p| {
            book::blocks(&p.path, &p.text)
                .into_iter()
                .map(|b| (p.path.clone(), b))
        })
        .collect();
    let runnable: Vec<&(String, book::Block)> =
        blocks.iter().filter(|(_, b)| b.info == "sh").collect();
    let skipped = blocks.iter().filter(|(_, b)| b.info == "sh no-run").count();
    assert!(
        runnable.len() >= 8,
        "only {} runnable blocks",
        runnable.len()
    );
    assert!(
        skipped <= 6,
        "{skipped} blocks are marked `sh no-run`: make them run"
    );
    for (path, b) in &blocks {
        assert!(
            !b.info.starts_with("sh") || b.info == "sh" || b.info == "sh no-run",
            "{path}:{}: unknown info string `{}`",
            b.line,
            b.info
        );
    }

    let scratch = tempfile::tempdir().expect("a scratch directory");
    common::copy_tree(
        &common::fixture("demo"),
        &scratch.path().join("testdata/demo"),
    );
    let mut script = String::from("set -euo pipefail\n");
    for (path, b) in &runnable {
        script.push_str(&format!("echo '### {path}:{}' >&2\n", b.line));
        script.push_str(&b.text);
    }
    let path = common::path_with_bin();
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(scratch.path())
        .env("PATH", path)
        .env("HOME", scratch.path())
        .env("NO_COLOR", "1")
        .env("GIT_AUTHOR_NAME", "Readme")
        .env("GIT_AUTHOR_EMAIL", "readme@example.org")
        .env("GIT_COMMITTER_NAME", "Readme")
        .env("GIT_COMMITTER_EMAIL", "readme@example.org")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("IPAMCTL_STATE_DIR")
        .env_remove("IPAMCTL_STORE")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run bash");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let at = stderr
        .lines()
        .rfind(|l| l.starts_with("### ") && l.contains(".md:"))
        .unwrap_or("before the first block");
    assert!(
        out.status.success(),
        "the docs' sh blocks fail in the block at {at}\n--- stdout:\n{}--- stderr:\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Every block ran: the last marker is the last block's.
    let (path, last) = runnable.last().expect("runnable blocks");
    assert_eq!(at, format!("### {path}:{}", last.line));
}
