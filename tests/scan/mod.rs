//! Reads the Rust sources of the tests as text, for the checks that read them
//! (`tests/tools.rs`): each file with its comments and the insides of its literals blanked
//! (so braces, names and attributes are found only in code), its literals kept aside, its
//! functions with the `impl` they sit in, their attributes and bodies, and the names each
//! body refers to. Text, not a parser: enough for code as rustfmt writes it.

// Each checker uses a different subset.
#![allow(dead_code)]

pub mod krate;
pub mod shell;

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A string literal: where its opening quote is, and its value (escapes resolved).
#[derive(Debug, Clone)]
pub struct Lit {
    pub at: usize,
    pub value: String,
}

/// One source file.
pub struct Source {
    pub path: PathBuf,
    /// The module name it is known by: its stem, or its directory's name for `mod.rs`.
    pub module: String,
    /// The text with comments blanked and every literal's inside blanked (same byte offsets).
    pub masked: String,
    pub lits: Vec<Lit>,
}

/// One function (or method) of a source.
#[derive(Debug)]
pub struct Func {
    /// Index of its source in the crate.
    pub file: usize,
    pub name: String,
    /// The type of the `impl` (or trait) it sits in.
    pub owner: Option<String>,
    pub has_self: bool,
    /// The attributes above it (masked: reasons in quotes are blank).
    pub attrs: String,
    pub body: Range<usize>,
}

impl Func {
    pub fn is_test(&self) -> bool {
        self.attrs.contains("#[test]")
    }
}

/// A name a body refers to.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ref {
    /// `Q::name`.
    Path(String, String),
    /// `.name(`.
    Method(String),
    /// `name(` alone: a call.
    Bare(String),
    /// `name` alone, not called: a variable, or a function used as a value.
    Value(String),
}

impl Source {
    pub fn read(path: &Path) -> Source {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let module = match path.file_stem().and_then(|s| s.to_str()) {
            Some("mod") => path.parent().and_then(|p| p.file_name()),
            _ => path.file_stem(),
        }
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
        let (masked, lits) = mask(&text);
        Source {
            path: path.to_owned(),
            module,
            masked,
            lits,
        }
    }

    /// The literals inside `range`.
    pub fn lits_in(&self, range: &Range<usize>) -> impl Iterator<Item = &Lit> {
        // `lits` is in order of offset.
        let from = self.lits.partition_point(|l| l.at < range.start);
        let to = self.lits.partition_point(|l| l.at < range.end);
        self.lits[from..to.max(from)].iter()
    }

    /// The literal whose opening quote is the first non-blank character at or after `at`,
    /// passing over `&`, `(`, `format!(`, `.arg(` and the like.
    pub fn lit_after(&self, mut at: usize) -> Option<&Lit> {
        let b = self.masked.as_bytes();
        let prefixes = [".args", ".arg", "format!", "r#", "r", "b"];
        loop {
            while at < b.len() && (b[at].is_ascii_whitespace() || b",()[&".contains(&b[at])) {
                at += 1;
            }
            if self.lit_at(at).is_some() {
                break;
            }
            match prefixes.iter().find(|p| self.masked[at..].starts_with(*p)) {
                Some(p) => at += p.len(),
                None => break,
            }
        }
        self.lit_at(at)
    }

    fn lit_at(&self, at: usize) -> Option<&Lit> {
        let i = self.lits.partition_point(|l| l.at < at);
        self.lits.get(i).filter(|l| l.at == at)
    }

    /// Each `mod NAME;` of this file, with its `#[path = "…"]` if it has one.
    pub fn modules(&self) -> Vec<(String, Option<String>)> {
        let mut found = Vec::new();
        for at in words(&self.masked, "mod") {
            let rest = &self.masked[at + 3..];
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let after = rest.trim_start()[name.len()..].trim_start();
            if name.is_empty() || !after.starts_with(';') {
                continue;
            }
            let before = &self.masked[..at];
            let item_start = before.rfind(['}', ';', '{']).map_or(0, |i| i + 1);
            let path = before[item_start..]
                .contains("#[path")
                .then(|| self.lits_in(&(item_start..at)).next())
                .flatten()
                .map(|l| l.value.clone());
            found.push((name, path));
        }
        found
    }

    /// The functions of this file (nested ones too), as `file` of a crate.
    pub fn functions(&self, file: usize) -> Vec<Func> {
        let m = &self.masked;
        let impls = self.impls();
        let mut found = Vec::new();
        for at in words(m, "fn") {
            let rest = &m[at + 2..];
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() {
                continue;
            }
            let Some(open) = signature_end(m, at) else {
                continue;
            };
            if m.as_bytes()[open] != b'{' {
                continue;
            }
            let body = open..matching(m, open);
            let signature = &m[at..open];
            let has_self = signature
                .find('(')
                .is_some_and(|p| !words(&signature[p..], "self").is_empty());
            let item_start = m[..at].rfind(['}', ';', '{']).map_or(0, |i| i + 1);
            let owner = impls
                .iter()
                .filter(|(_, r)| r.start < at && at < r.end)
                .min_by_key(|(_, r)| r.end - r.start)
                .map(|(t, _)| t.clone());
            found.push(Func {
                file,
                name,
                owner,
                has_self,
                attrs: m[item_start..at].to_owned(),
                body,
            });
        }
        found
    }

    /// Each `impl … {` and `trait … {` block: the type it is for, and its braces.
    fn impls(&self) -> Vec<(String, Range<usize>)> {
        let m = &self.masked;
        let mut found = Vec::new();
        for keyword in ["impl", "trait"] {
            for at in words(m, keyword) {
                let Some(open) = m[at..].find(['{', ';']).map(|o| at + o) else {
                    continue;
                };
                if m.as_bytes()[open] != b'{' {
                    continue;
                }
                let header = &m[at + keyword.len()..open];
                let header = match words(header, "for").first() {
                    Some(&f) if keyword == "impl" => &header[f + 3..],
                    _ => header,
                };
                // Past the generics of `impl<T>` and any `&`, `mut`, `dyn`, a path's prefix.
                let header = strip_generics(header);
                let ty = header
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .find(|w| !w.is_empty() && !["mut", "dyn"].contains(w))
                    .map(|w| w.rsplit("::").next().unwrap_or(w).to_owned());
                if let Some(ty) = ty {
                    found.push((ty, open..matching(m, open)));
                }
            }
        }
        found
    }

    /// The names the code in `range` refers to.
    pub fn refs(&self, range: &Range<usize>) -> BTreeSet<Ref> {
        let m = &self.masked[range.clone()];
        let b = m.as_bytes();
        let mut refs = BTreeSet::new();
        let mut values = BTreeSet::new();
        let mut i = 0;
        while i < b.len() {
            if !(b[i].is_ascii_alphabetic() || b[i] == b'_')
                || (i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let name = &m[start..i];
            let next = m[i..].trim_start();
            if next.starts_with('!') && !next.starts_with("!=") {
                continue;
            }
            let before = m[..start].trim_end();
            if let Some(q) = before.strip_suffix("::") {
                let q: String = q
                    .chars()
                    .rev()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                refs.insert(Ref::Path(q, name.to_owned()));
            } else if before.ends_with('.') {
                if next.starts_with('(') || next.starts_with("::<") {
                    refs.insert(Ref::Method(name.to_owned()));
                }
            } else if next.starts_with('(') {
                refs.insert(Ref::Bare(name.to_owned()));
            } else if next.starts_with([')', ',', ']', ';']) {
                values.insert(name);
            }
        }
        for name in values {
            if !bound(m, name) {
                refs.insert(Ref::Value(name.to_owned()));
            }
        }
        refs
    }
}

/// Is `name` a variable of `code` (a `let`'s, a closure's, a loop's)? Then it is no
/// function used as a value.
fn bound(code: &str, name: &str) -> bool {
    let simple = [
        format!("let {name}"),
        format!("let mut {name}"),
        format!("for {name} "),
        format!("|{name}|"),
        format!("|{name},"),
        format!(", {name}|"),
        format!("|{name}:"),
    ];
    if simple.iter().any(|p| !words(code, p).is_empty()) {
        return true;
    }
    // Tuple patterns: `let (a, name)`, `for (a, name) in`, `|(a, name)|`.
    ["let (", "let mut (", "for (", "|("].iter().any(|open| {
        code.match_indices(open).any(|(at, _)| {
            let start = at + open.len();
            let end = code[start..].find(')').map_or(code.len(), |e| start + e);
            !words(&code[start..end], name).is_empty()
        })
    })
}

/// Offsets of `word` standing alone (not part of a longer name) in `text`.
pub fn words(text: &str, word: &str) -> Vec<usize> {
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let b = text.as_bytes();
    text.match_indices(word)
        .map(|(at, _)| at)
        .filter(|&at| {
            (at == 0 || !ident(b[at - 1])) && b.get(at + word.len()).is_none_or(|&c| !ident(c))
        })
        .collect()
}

/// `header` past a leading `<…>`.
fn strip_generics(header: &str) -> &str {
    let t = header.trim_start();
    if !t.starts_with('<') {
        return t;
    }
    let mut depth = 0;
    for (i, c) in t.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return &t[i + 1..];
                }
            }
            _ => {}
        }
    }
    t
}

/// The `{` that opens the body of the `fn` at `at`, or the `;` of a declaration without one.
fn signature_end(m: &str, at: usize) -> Option<usize> {
    let b = m.as_bytes();
    let mut depth = 0i32;
    for (i, &c) in b.iter().enumerate().skip(at) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' | b';' if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

/// The offset just past the brace that closes the one at `open`.
pub fn matching(m: &str, open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in m.bytes().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    m.len()
}

/// `text` with comments blanked and the inside of every string and char literal blanked
/// (offsets kept), and the string literals with their values.
pub fn mask(text: &str) -> (String, Vec<Lit>) {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut lits = Vec::new();
    let blank = |out: &mut Vec<u8>, r: Range<usize>| {
        for x in &mut out[r] {
            if *x != b'\n' {
                *x = b' ';
            }
        }
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let prev_ident = i > 0 && ident(b[i - 1]);
        if b[i..].starts_with(b"//") {
            let end = text[i..].find('\n').map_or(b.len(), |e| i + e);
            blank(&mut out, i..end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            let mut j = i;
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i..j);
            i = j;
        } else if !prev_ident
            && (b[i..].starts_with(b"r\"")
                || b[i..].starts_with(b"r#")
                || b[i..].starts_with(b"br\"")
                || b[i..].starts_with(b"br#"))
        {
            let r = i + if b[i] == b'b' { 2 } else { 1 };
            let hashes = b[r..].iter().take_while(|&&c| c == b'#').count();
            let open = r + hashes;
            if b.get(open) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let end = (open + 1..b.len())
                .find(|&j| b[j..].starts_with(&close))
                .unwrap_or(b.len());
            lits.push(Lit {
                at: open,
                value: text[open + 1..end].to_owned(),
            });
            blank(&mut out, open + 1..end);
            i = end + close.len();
        } else if b[i] == b'"' {
            let mut j = i + 1;
            let mut value = String::new();
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    match b.get(j + 1) {
                        Some(b'n') => value.push('\n'),
                        Some(b't') => value.push('\t'),
                        Some(b'0') => value.push('\0'),
                        Some(b'\n') => {
                            // A continuation: the newline and the next line's indent go.
                            j += 2;
                            while j < b.len() && b[j].is_ascii_whitespace() {
                                j += 1;
                            }
                            continue;
                        }
                        Some(&c) => value.push(c as char),
                        None => {}
                    }
                    j += 2;
                } else {
                    let len = text[j..].chars().next().map_or(1, char::len_utf8);
                    value.push_str(&text[j..j + len]);
                    j += len;
                }
            }
            lits.push(Lit { at: i, value });
            blank(&mut out, i + 1..j.min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\'', 'é'), or a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                (i + 3..b.len()).find(|&j| b[j] == b'\'')
            } else {
                let len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 1 + len)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i + 1..end);
                    i = end + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    let masked = String::from_utf8(out).unwrap_or_default();
    (masked, lits)
}
