//! The README and the book (`docs/src/`, its chapters in `SUMMARY.md`'s order): what the
//! tests that run the examples, check the links and read what the docs promise all read.
//! The examples build on each other in this order (`tests/readme.rs`).

#![allow(dead_code)] // Each test uses a part.

use std::path::Path;

/// One page: its path relative to the crate's root, and its text.
pub struct Page {
    pub path: String,
    pub text: String,
}

/// The crate's root, where `README.md` and `docs/` are.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> Page {
    let text =
        std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("read {path}: {e}"));
    Page {
        path: path.to_owned(),
        text,
    }
}

/// The README, then every page `docs/src/SUMMARY.md` links to, in its order.
pub fn pages() -> Vec<Page> {
    let mut pages = vec![read("README.md")];
    let summary = read("docs/src/SUMMARY.md");
    for line in summary.text.lines() {
        let Some((_, rest)) = line.split_once("](") else {
            continue;
        };
        let (target, _) = rest
            .split_once(')')
            .unwrap_or_else(|| panic!("SUMMARY.md: a link without its `)`: {line}"));
        pages.push(read(&format!("docs/src/{target}")));
    }
    pages
}

/// Every page, one after another: what a test looking for a section or a block reads.
pub fn text() -> String {
    pages()
        .into_iter()
        .map(|p| p.text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A fenced block: its info string, the line its text starts on (1-based) and its text.
pub struct Block {
    pub info: String,
    pub line: usize,
    pub text: String,
}

/// The fenced blocks of `markdown`, in order; `path` names it when a fence is left open.
pub fn blocks(path: &str, markdown: &str) -> Vec<Block> {
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
    assert!(open.is_none(), "{path} ends inside a fenced block");
    blocks
}
