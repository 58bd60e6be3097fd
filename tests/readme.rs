//! The README is run: every fenced `sh` block, in order, as one bash script (`set -euo
//! pipefail`) in a scratch directory holding a copy of `testdata/demo/`, with the binary
//! under test first on `PATH`. Blocks marked `sh no-run` are skipped; there must be few.

mod common;

use std::path::Path;
use std::process::Command;

/// A fenced block of README.md: its info string, first line number and text.
struct Block {
    info: String,
    line: usize,
    text: String,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    line: i + 2,
                    text: String::new(),
                })
            }
            (Some(_), Some(_)) => blocks.push(open.take().expect("open")),
            (Some(block), None) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "README.md ends inside a fenced block");
    blocks
}

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("read README.md")
}

#[test]
#[cfg_attr(
    not(has_python3),
    ignore = "needs python3, which an example parses JSON with (apt-get install python3)"
)]
fn every_sh_block_of_the_readme_runs() {
    common::needs::require("python3");
    let blocks = blocks(&readme());
    let runnable: Vec<&Block> = blocks.iter().filter(|b| b.info == "sh").collect();
    let skipped = blocks.iter().filter(|b| b.info == "sh no-run").count();
    assert!(
        runnable.len() >= 8,
        "only {} runnable blocks",
        runnable.len()
    );
    assert!(
        skipped <= 5,
        "{skipped} blocks are marked `sh no-run`: make them run"
    );
    for b in &blocks {
        assert!(
            !b.info.starts_with("sh") || b.info == "sh" || b.info == "sh no-run",
            "README.md:{}: unknown info string `{}`",
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
    for b in &runnable {
        script.push_str(&format!("echo '### README.md:{}' >&2\n", b.line));
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
        .rfind(|l| l.starts_with("### README.md:"))
        .unwrap_or("before the first block");
    assert!(
        out.status.success(),
        "the README's sh blocks fail in the block at {at}\n--- stdout:\n{}--- stderr:\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Every block ran: the last marker is the last block's.
    let last = runnable.last().expect("runnable blocks");
    assert_eq!(at, format!("### README.md:{}", last.line));
}
