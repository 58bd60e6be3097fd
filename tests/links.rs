//! Every relative link of the README and the book resolves: the file (or directory) it
//! names exists, and an anchor names a heading of that page, as GitHub and mdBook make
//! anchors from headings. Every page of `docs/src/` is in `SUMMARY.md`, so none is left
//! unreachable (and unrun: `tests/readme.rs` runs the pages `SUMMARY.md` lists).

mod book;

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// A heading's anchor: lowercase, letters, digits, `-` and `_` kept, spaces made `-`, all
/// else dropped (GitHub's rule, which mdBook's agrees with for these headings).
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The text outside fenced blocks, each code span blanked (a span may show `](`).
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            let mut in_code = false;
            for c in line.chars() {
                if c == '`' {
                    in_code = !in_code;
                }
                out.push(if in_code { ' ' } else { c });
            }
        }
        out.push('\n');
    }
    out
}

/// The anchors of a page's headings (a repeated heading's get `-1`, `-2`, …).
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(heading) = line.strip_prefix('#').map(|h| h.trim_start_matches('#')) else {
            continue;
        };
        if fenced || !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// `path` with `.` and `..` resolved (without touching the file system).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Every inline link target of `markdown`'s prose: `[text](target)`.
fn targets(markdown: &str) -> Vec<String> {
    let text = prose(markdown);
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            let target = &rest[..end];
            if !target.contains(char::is_whitespace) {
                found.push(target.to_owned());
            }
        }
    }
    found
}

#[test]
fn every_relative_link_and_anchor_of_the_readme_and_the_book_resolves() {
    let root = book::root();
    let mut pages: Vec<book::Page> = book::pages();
    // Pages SUMMARY.md does not list are checked too (and reported below).
    let listed: BTreeSet<String> = pages.iter().map(|p| p.path.clone()).collect();
    let mut unlisted = Vec::new();
    for entry in std::fs::read_dir(root.join("docs/src")).expect("docs/src") {
        let name = entry.expect("an entry").file_name();
        let path = format!("docs/src/{}", name.to_string_lossy());
        if path.ends_with(".md") && path != "docs/src/SUMMARY.md" && !listed.contains(&path) {
            unlisted.push(path.clone());
            pages.push(book::Page {
                text: std::fs::read_to_string(root.join(&path)).expect("a page"),
                path,
            });
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let dir = Path::new(&page.path).parent().expect("a page's directory");
        for target in targets(&page.text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let linked = if file.is_empty() {
                PathBuf::from(&page.path)
            } else {
                normal(&dir.join(file))
            };
            let Ok(text) = (if linked.extension().is_some_and(|e| e == "md") {
                std::fs::read_to_string(root.join(&linked))
            } else {
                root.join(&linked)
                    .try_exists()
                    .ok()
                    .filter(|e| *e)
                    .map(|_| String::new())
                    .ok_or_else(|| std::io::Error::other("missing"))
            }) else {
                broken.push(format!(
                    "{}: `{target}`: no {}",
                    page.path,
                    linked.display()
                ));
                continue;
            };
            if let Some(anchor) = anchor
                && !anchors(&text).contains(anchor)
            {
                broken.push(format!(
                    "{}: `{target}`: no heading of {} has the anchor `#{anchor}`",
                    page.path,
                    linked.display()
                ));
            }
        }
    }
    assert!(checked > 40, "only {checked} relative links found");
    assert_eq!(broken, Vec::<String>::new());
    assert_eq!(
        unlisted,
        Vec::<String>::new(),
        "pages docs/src/SUMMARY.md does not list"
    );
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(
        slug("Branches that rarely conflict: `pick: hashed`"),
        "branches-that-rarely-conflict-pick-hashed"
    );
    assert_eq!(
        slug("Guarantees, and the protocol behind them"),
        "guarantees-and-the-protocol-behind-them"
    );
    let page = "# A\n\n## A\n\n```sh\n# not a heading\n```\n#hashtag\n";
    assert_eq!(
        anchors(page),
        BTreeSet::from(["a".to_owned(), "a-1".to_owned()])
    );
    assert_eq!(
        targets("[x](a.md#b) `[y](c.md)` [z](https://e.org)\n```\n[w](d.md)\n```\n"),
        ["a.md#b", "https://e.org"]
    );
}
