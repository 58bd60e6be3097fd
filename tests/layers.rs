//! The five layers, checked from the sources as Cargo would check separate crates: every
//! `crate::` path a file names (in `use` lines, in code, and in the `schema_with`/`with`
//! strings of serde and schemars attributes) must point at its own layer or one below it,
//! `store::fs` and `store::pg` never name each other, `engine` names neither (it reaches them
//! through the store's capabilities), no two files import each other in a
//! circle, only `engine` (and the stores themselves) take locks or units of work, no clap and
//! no printing below `cli`, command handlers do not call the store, and no file or function
//! grows past its size without a comment that says why.
//!
//! ```text
//! cli      may import anything but serve (its `serve` command calls `serve::run`);
//!          only lib.rs and main.rs import it
//! serve    cli's rank, a second front end: engine, store, model, yaml, error; never cli
//! engine   store, model, yaml, error
//! store    model, yaml, error
//! yaml     model, error
//! model    error
//! ```
//!
//! The checker is [`violations`], a function of the sources; the tests below run it on the
//! crate and on sources with one planted violation each, to show that it can fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first; a file may import its own layer and those before it. The
/// front ends, `cli` and `serve`, share the top rank and never import each other (but for
/// [`SERVE_COMMAND`]).
const LAYERS: [&str; 6] = ["model", "yaml", "store", "engine", "cli", "serve"];

/// The one file of `cli` that names `serve`: the `serve` command, which parses its flags
/// and calls `serve::run`.
const SERVE_COMMAND: &str = "cli/cmd/serve.rs";

/// A file longer than this is split by concept; only one indivisible table may stay longer,
/// with a `// Length:` comment in its header (before its first item) saying why.
const MAX_FILE_LINES: usize = 600;
/// A function longer than this needs a `// Length:` comment above it (STYLE.md: ~80).
const MAX_FN_LINES: usize = 80;

/// The layer of a source file by its path under `src/` (`None` for lib.rs, main.rs and
/// error.rs, which stand beside the layers: error below them all, lib and main above).
fn layer_of(path: &str) -> Option<&'static str> {
    LAYERS
        .iter()
        .find(|l| path.starts_with(&format!("{l}/")))
        .copied()
}

/// The rank of a module path's first segment: `error` is below every layer, `cli` the top.
fn rank(top: &str) -> Option<usize> {
    match top {
        "error" => Some(0),
        "serve" => rank("cli"),
        _ => LAYERS.iter().position(|l| *l == top).map(|i| i + 1),
    }
}

/// The module path of a file (`cli/cmd/mod.rs` is `cli::cmd`, `store/read.rs` is
/// `store::read`, `lib.rs` is the crate root).
fn module_of(path: &str) -> Vec<String> {
    let stem = path.trim_end_matches(".rs");
    let mut segs: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if segs
        .last()
        .is_some_and(|s| s == "mod" || s == "lib" || s == "main")
    {
        segs.pop();
    }
    segs
}

/// `source` with its comments blanked (newlines kept, so line numbers stay), its string and
/// character literals kept: the `schema_with = "crate::…"` strings are imports too.
fn strip_comments(source: &str) -> String {
    strip(source, false)
}

/// [`strip_comments`], and with `strings` the string and character literals blanked too
/// (byte for byte, so positions stay): what brace counting reads.
fn strip(source: &str, strings: bool) -> String {
    let b = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let blank = |out: &mut String, bytes: &[u8]| {
        for &c in bytes {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            blank(&mut out, &b[i..end]);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &b[i..j]);
            i = j;
        } else if b[i] == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let start = i + 2 + hashes;
            let end = b[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |n| start + n + close.len());
            push_literal(&mut out, &source[i..end], strings);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            push_literal(&mut out, &source[i..end], strings);
            i = end;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '"') or a lifetime ('a): only the first is skipped.
            let len = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..].iter().position(|&c| c == b'\'').map(|n| n + 3)
            } else {
                let ch = source[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(ch + 2)
            };
            let end = i + len.unwrap_or(1);
            push_literal(&mut out, &source[i..end], strings && len.is_some());
            i = end;
        } else {
            let ch = source[i..].chars().next().expect("i is on a char boundary");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// A literal as it is, or (with `blank`) as spaces, one per byte.
fn push_literal(out: &mut String, literal: &str, blank: bool) {
    if blank {
        out.extend(literal.bytes().map(|c| if c == b'\n' { '\n' } else { ' ' }));
    } else {
        out.push_str(literal);
    }
}

/// The inline modules of a file (`mod tests { … }`): their names and byte ranges, read
/// from `bare` (comments and literals blanked, so every brace is code).
fn inline_modules(bare: &str) -> Vec<(String, usize, usize)> {
    let b = bare.as_bytes();
    let mut out = Vec::new();
    for (at, _) in bare.match_indices("mod ") {
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let rest = &bare[at + 4..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = at + 4 + (rest.len() - after.len());
        let mut depth = 0usize;
        for (k, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((name.clone(), open, k));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The module path at byte `at` of a file: the file's, and the inline modules around `at`.
fn module_at(file_module: &[String], inline: &[(String, usize, usize)], at: usize) -> Vec<String> {
    let mut module = file_module.to_vec();
    module.extend(
        inline
            .iter()
            .filter(|(_, from, to)| (*from..=*to).contains(&at))
            .map(|(name, _, _)| name.clone()),
    );
    module
}

/// Every module path that `code` names through `crate::`, `super::` or `self::`, expanded
/// from `use` trees (`crate::{a::b, c}`), with the line it is on.
fn paths_named(
    code: &str,
    file_module: &[String],
    inline: &[(String, usize, usize)],
) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let word_start =
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':');
        let base: Option<(usize, Vec<String>)> = if !word_start {
            None
        } else if b[i..].starts_with(b"crate::") {
            Some((7, Vec::new()))
        } else if b[i..].starts_with(b"super::") {
            let mut m = module_at(file_module, inline, i);
            let mut len = 0;
            while b[i + len..].starts_with(b"super::") {
                m.pop();
                len += 7;
            }
            Some((len, m))
        } else if b[i..].starts_with(b"self::") {
            Some((6, module_at(file_module, inline, i)))
        } else {
            None
        };
        match base {
            Some((len, prefix)) => {
                let line = code[..i].matches('\n').count() + 1;
                let (end, trees) = use_tree(code, i + len);
                for t in trees {
                    let mut p = prefix.clone();
                    p.extend(t);
                    found.push((line, p));
                }
                i = end.max(i + 1);
            }
            None => i += 1,
        }
    }
    found
}

/// Parses a path or use tree at `at` (`a::b`, `a::{b, c::d}`, `{a, b}`): every path it names,
/// and where it ends.
fn use_tree(code: &str, at: usize) -> (usize, Vec<Vec<String>>) {
    let b = code.as_bytes();
    let skip_ws = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        j
    };
    let mut j = skip_ws(at);
    let mut segs = Vec::new();
    loop {
        if b.get(j) == Some(&b'{') {
            let mut all = Vec::new();
            j += 1;
            loop {
                j = skip_ws(j);
                if b.get(j) == Some(&b'}') {
                    j += 1;
                    break;
                }
                let (end, trees) = use_tree(code, j);
                for t in trees {
                    let mut p: Vec<String> = segs.clone();
                    p.extend(t);
                    all.push(p);
                }
                j = skip_ws(end);
                // Past `as name`, to the comma or the brace.
                while j < b.len() && b[j] != b',' && b[j] != b'}' {
                    j += 1;
                }
                if b.get(j) == Some(&b',') {
                    j += 1;
                }
                if j >= b.len() {
                    break;
                }
            }
            return (j, all);
        }
        let start = j;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
            j += 1;
        }
        if j == start {
            break;
        }
        let seg = &code[start..j];
        if seg != "self" {
            segs.push(seg.to_owned());
        }
        if b[j..].starts_with(b"::") {
            j += 2;
        } else {
            break;
        }
    }
    (j, vec![segs])
}

/// The file a module path lands in: the longest prefix of it that is a file of `files`.
fn file_of(path: &[String], files: &BTreeSet<String>) -> Option<String> {
    (1..=path.len()).rev().find_map(|k| {
        let stem = path[..k].join("/");
        [format!("{stem}.rs"), format!("{stem}/mod.rs")]
            .into_iter()
            .find(|f| files.contains(f))
    })
}

/// The line ranges of the functions of `code` (1-based, inclusive), with their names: from
/// the `fn` line to the line of the brace that closes its body.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let Some(pos) = t.find("fn ") else { continue };
        let before = &t[..pos];
        let is_decl = before.is_empty()
            || before.split_whitespace().all(|w| {
                ["pub", "pub(crate)", "const", "async", "unsafe"].contains(&w)
                    || w.starts_with("pub(")
            });
        if !is_decl {
            continue;
        }
        let name: String = t[pos + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body opens at the first `{` after the signature; it ends when the depth is 0.
        let (mut depth, mut opened) = (0i32, false);
        'scan: for (m, l) in lines.iter().enumerate().skip(n) {
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    ';' if !opened => break 'scan,
                    _ => {}
                }
                if opened && depth == 0 {
                    out.push((name.clone(), n + 1, m + 1));
                    break 'scan;
                }
            }
        }
    }
    out
}

/// Whether the file's header (its comments and blank lines before the first item) carries a
/// `// Length:` comment: a function's own `// Length:` comment excuses the function, never
/// the file around it.
fn length_explained_in_header(source: &str) -> bool {
    source
        .lines()
        .take_while(|l| {
            let l = l.trim_start();
            l.is_empty() || l.starts_with("//")
        })
        .any(|l| l.trim_start().starts_with("// Length:"))
}

/// Whether the lines just above line `n` (1-based) carry a `// Length:` comment.
fn length_explained(source: &str, n: usize) -> bool {
    source
        .lines()
        .take(n - 1)
        .collect::<Vec<_>>()
        .iter()
        .rev()
        .take_while(|l| {
            let t = l.trim_start();
            t.starts_with("//") || t.starts_with("#[")
        })
        .any(|l| l.trim_start().starts_with("// Length:"))
}

/// Every broken rule in `sources` (path under `src/` → text), one line each.
fn violations(sources: &BTreeMap<String, String>) -> Vec<String> {
    let files: BTreeSet<String> = sources.keys().cloned().collect();
    let mut found = Vec::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, source) in sources {
        let code = strip_comments(source);
        let layer = layer_of(path);
        let own = layer.and_then(rank);
        let module = module_of(path);
        let in_store_impl = |p: &str| {
            if path.starts_with("store/fs/") {
                Some(("store::fs", "store::pg", p.starts_with("store::pg")))
            } else if path.starts_with("store/pg/") {
                Some(("store::pg", "store::fs", p.starts_with("store::fs")))
            } else {
                None
            }
        };
        let inline = inline_modules(&strip(source, true));
        for (line, named) in paths_named(&code, &module, &inline) {
            let Some(top) = named.first() else { continue };
            let joined = named.join("::");
            if let (Some(own), Some(theirs)) = (own, rank(top))
                && theirs > own
            {
                found.push(format!(
                    "src/{path}:{line}: {} imports `crate::{joined}`, a layer above it",
                    layer.unwrap_or("?")
                ));
            }
            if top == "cli" && layer.is_some() && layer != Some("cli") {
                found.push(format!(
                    "src/{path}:{line}: only lib.rs and main.rs import cli"
                ));
            }
            if top == "serve" && layer.is_some() && layer != Some("serve") && path != SERVE_COMMAND
            {
                found.push(format!(
                    "src/{path}:{line}: only lib.rs, main.rs and {SERVE_COMMAND} import serve"
                ));
            }
            if let Some((me, other, hit)) = in_store_impl(&joined)
                && hit
            {
                found.push(format!(
                    "src/{path}:{line}: {me} imports `crate::{joined}` ({other} is its sibling)"
                ));
            }
            // The engine reaches what one store alone can do through the store's
            // capabilities (`store::capability`), never by naming the store.
            if layer == Some("engine")
                && named.len() > 1
                && named[0] == "store"
                && matches!(named[1].as_str(), "fs" | "pg")
            {
                found.push(format!(
                    "src/{path}:{line}: engine imports `crate::{joined}`; reach it through a capability of `Store`"
                ));
            }
            if let Some(to) = file_of(&named, &files)
                && to != *path
            {
                graph.entry(path.clone()).or_default().insert(to);
            }
        }
        let below_cli = matches!(layer, Some("model" | "yaml" | "store" | "engine"));
        for (n, line) in code.lines().enumerate() {
            let n = n + 1;
            if below_cli {
                for word in ["clap::", "clap_complete::", "clap_mangen::"] {
                    if line.contains(word) {
                        found.push(format!("src/{path}:{n}: `{word}` below cli"));
                    }
                }
                for mac in ["print!(", "println!(", "eprint!(", "eprintln!("] {
                    if line
                        .match_indices(mac)
                        .any(|(i, _)| i == 0 || !line.as_bytes()[i - 1].is_ascii_alphanumeric())
                    {
                        found.push(format!(
                            "src/{path}:{n}: `{mac}` below cli (warnings travel up as values)"
                        ));
                    }
                }
            }
            if !matches!(layer, Some("engine" | "store")) {
                for call in [".lock_pool(", ".lock_scope(", ".lock_owner(", "atomically("] {
                    if line.contains(call) {
                        found.push(format!("src/{path}:{n}: `{call}` outside engine and store"));
                    }
                }
            }
            if path.starts_with("cli/cmd/") {
                for call in [
                    "get(", "create(", "replace(", "delete(", "list(", "claim(", "release(",
                ] {
                    if line.contains(&format!("store.{call}")) {
                        found.push(format!("src/{path}:{n}: a command handler calls `store.{call}…)`: call the engine"));
                    }
                }
            }
        }
        let lines = source.lines().count();
        if lines > MAX_FILE_LINES && !length_explained_in_header(source) {
            found.push(format!("src/{path}: {lines} lines, more than {MAX_FILE_LINES}, and no `// Length:` comment says why"));
        }
        for (name, from, to) in functions(&code) {
            let len = to - from + 1;
            if len > MAX_FN_LINES && !length_explained(source, from) {
                found.push(format!(
                    "src/{path}:{from}: fn `{name}` is {len} lines, more than {MAX_FN_LINES}, and no `// Length:` comment above it says why"
                ));
            }
        }
    }
    for circle in circles(&graph) {
        found.push(format!("an import cycle: {}", circle.join(" -> ")));
    }
    found
}

/// The strongly connected components of more than one file (Tarjan's algorithm).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Every `.rs` file under `src/`, by its path relative to `src/`.
fn crate_sources() -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).expect("src/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).expect("under src/");
                let text = std::fs::read_to_string(&path).expect("a source file is UTF-8");
                out.insert(rel.to_string_lossy().replace('\\', "/"), text);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    walk(&root, &root, &mut out);
    out
}

#[test]
fn the_crate_keeps_its_layers() {
    let sources = crate_sources();
    for layer in LAYERS {
        assert!(
            sources.keys().any(|p| p.starts_with(&format!("{layer}/"))),
            "src/{layer}/ holds no file"
        );
    }
    let found = violations(&sources);
    assert!(
        found.is_empty(),
        "{} broken rules:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The crate's sources with `path` replaced by (or given) `text`.
fn planted(path: &str, text: &str) -> Vec<String> {
    let mut sources = crate_sources();
    let old = sources.remove(path).unwrap_or_default();
    sources.insert(path.to_owned(), format!("{old}\n{text}\n"));
    violations(&sources)
}

#[test]
fn an_upward_import_is_caught() {
    let found = planted("model/names.rs", "use crate::cli::output;");
    assert!(
        found
            .iter()
            .any(|v| v.contains("model imports `crate::cli::output`")),
        "{found:?}"
    );
    let found = planted(
        "store/read.rs",
        "fn f() { crate::engine::allocate::allocate; }",
    );
    assert!(
        found
            .iter()
            .any(|v| v.contains("store imports `crate::engine::allocate::allocate`")),
        "{found:?}"
    );
    let found = planted("yaml/mod.rs", "use crate::{model::Owner, store::Store};");
    assert!(
        found
            .iter()
            .any(|v| v.contains("yaml imports `crate::store::Store`")),
        "{found:?}"
    );
    let found = planted("engine/check.rs", "use crate::cli::output::line;");
    assert!(
        found
            .iter()
            .any(|v| v.contains("only lib.rs and main.rs import cli")),
        "{found:?}"
    );
}

#[test]
fn the_two_front_ends_do_not_import_each_other() {
    let found = planted("serve/http.rs", "use crate::cli::output;");
    assert!(
        found
            .iter()
            .any(|v| v.contains("src/serve/http.rs")
                && v.contains("only lib.rs and main.rs import cli")),
        "{found:?}"
    );
    let found = planted("cli/cmd/list.rs", "fn f() { crate::serve::sdl(); }");
    assert!(
        found
            .iter()
            .any(|v| v.contains("only lib.rs, main.rs and cli/cmd/serve.rs import serve")),
        "{found:?}"
    );
    let found = planted("engine/list.rs", "use crate::serve::Config;");
    assert!(
        found
            .iter()
            .any(|v| v.contains("engine imports `crate::serve::Config`, a layer above it")),
        "{found:?}"
    );
    // The `serve` command may call into the server; nothing else of cli may.
    let found = planted(SERVE_COMMAND, "fn g() { crate::serve::sdl(); }");
    assert!(
        !found.iter().any(|v| v.contains("src/cli/cmd/serve.rs")),
        "{found:?}"
    );
}

#[test]
fn a_schema_with_string_is_an_import() {
    let found = planted(
        "model/pool.rs",
        "#[derive(JsonSchema)] struct S { #[schemars(schema_with = \"crate::cli::schema::x\")] a: u8 }",
    );
    assert!(
        found.iter().any(|v| v.contains("`crate::cli::schema::x`")),
        "{found:?}"
    );
}

#[test]
fn comments_are_not_imports() {
    let before = violations(&crate_sources());
    let found = planted(
        "model/pool.rs",
        "// see crate::cli::output\n/// [`crate::engine`]\n/* crate::cli */",
    );
    assert_eq!(found, before);
}

#[test]
fn the_stores_do_not_import_each_other() {
    let found = planted("store/fs/lock/mod.rs", "use crate::store::pg::PgStore;");
    assert!(
        found
            .iter()
            .any(|v| v.contains("store::fs imports `crate::store::pg::PgStore`")),
        "{found:?}"
    );
}

#[test]
fn the_engine_does_not_name_a_store() {
    for (path, text) in [
        // Files of their own, so that no import already there answers for the planted one.
        ("engine/planted.rs", "use crate::store::fs::FsStore;"),
        (
            "engine/check/planted.rs",
            "use crate::store::{Store, pg::PgStore};",
        ),
        ("engine/diff/planted.rs", "use crate::store::{self, fs};"),
        (
            "engine/planted/mod.rs",
            "fn f() { crate::store::pg::conninfo::is_postgres(\"\"); }",
        ),
    ] {
        let found = planted(path, text);
        assert!(
            found.iter().any(|v| v.contains(&format!("src/{path}:"))
                && v.contains("engine imports `crate::store::")),
            "{path}: {found:?}"
        );
    }
    // A doc link is no import.
    let before = violations(&crate_sources());
    assert_eq!(
        planted("engine/history.rs", "//! [`crate::store::fs`]"),
        before
    );
}

#[test]
fn a_cycle_is_caught() {
    let mut sources = crate_sources();
    for (file, line) in [
        ("model/vpc.rs", "use crate::model::selector::LabelSelector;"),
        ("model/selector.rs", "use crate::model::vpc::VPC_KIND;"),
    ] {
        sources
            .get_mut(file)
            .expect("the file exists")
            .push_str(&format!("\n{line}\n"));
    }
    let found = violations(&sources);
    assert!(
        found
            .iter()
            .any(|v| v == "an import cycle: model/selector.rs -> model/vpc.rs"),
        "{found:?}"
    );
}

#[test]
fn locks_printing_and_clap_below_cli_are_caught() {
    let found = planted(
        "cli/cmd/pool.rs",
        "fn f(s: &dyn Store) { s.lock_scope(None); }",
    );
    assert!(
        found
            .iter()
            .any(|v| v.contains("`.lock_scope(` outside engine and store")),
        "{found:?}"
    );
    let found = planted("engine/release.rs", "fn f() { eprintln!(\"warning\"); }");
    assert!(
        found.iter().any(|v| v.contains("`eprintln!(` below cli")),
        "{found:?}"
    );
    let found = planted("store/read.rs", "fn f(_: clap::Command) {}");
    assert!(
        found.iter().any(|v| v.contains("`clap::` below cli")),
        "{found:?}"
    );
    let found = planted(
        "cli/cmd/pool.rs",
        "fn f(store: &dyn Store) { store.delete(k, None, \"x\"); }",
    );
    assert!(
        found.iter().any(|v| v.contains("calls `store.delete(…)`")),
        "{found:?}"
    );
}

#[test]
fn a_long_function_needs_its_reason() {
    let body = "    let _ = 1;\n".repeat(MAX_FN_LINES);
    let found = planted("model/vpc.rs", &format!("fn long_one() {{\n{body}}}"));
    assert!(
        found.iter().any(|v| v.contains("fn `long_one` is")),
        "{found:?}"
    );
    let found = planted(
        "model/vpc.rs",
        &format!("// Length: one table, row by row.\nfn long_one() {{\n{body}}}"),
    );
    assert!(
        !found.iter().any(|v| v.contains("fn `long_one` is")),
        "{found:?}"
    );
}

#[test]
fn a_long_file_needs_its_reason_in_its_header() {
    let long = |header: &str| {
        let body = "const _: u8 = 0;\n".repeat(MAX_FILE_LINES);
        let mut sources = crate_sources();
        sources.insert(
            "model/long.rs".to_owned(),
            format!("//! A long file.\n{header}\n{body}"),
        );
        violations(&sources)
    };
    let caught = |found: &[String]| found.iter().any(|v| v.starts_with("src/model/long.rs:"));
    assert!(caught(&long("")), "a file over the ceiling is caught");
    assert!(
        !caught(&long("// Length: one table, row by row.\n")),
        "a `// Length:` comment in the header excuses it"
    );
    // A function's own `// Length:` comment, further down, excuses the function only.
    let mut sources = crate_sources();
    let body = "const _: u8 = 0;\n".repeat(MAX_FILE_LINES);
    sources.insert(
        "model/long.rs".to_owned(),
        format!("//! A long file.\n\n{body}// Length: one match.\nfn f() {{}}\n"),
    );
    assert!(
        caught(&violations(&sources)),
        "a function's reason is not the file's"
    );
}

/// One request path (issue 42): a batch's line becomes the engine's typed request
/// (`engine::request`) by the constructor the single command uses, never a command line
/// that clap parses again (the batch files name no clap), and the engine builds the request.
#[test]
fn the_batch_builds_no_command_line() {
    let sources = crate_sources();
    let batch: Vec<_> = sources
        .iter()
        .filter(|(path, _)| path.starts_with("cli/cmd/batch") || path.starts_with("serve/"))
        .collect();
    assert!(
        batch.len() >= 2,
        "the batch's files moved: update this test"
    );
    for (path, source) in batch {
        let code = strip_comments(source);
        for word in ["clap", "FromArgMatches", "argv"] {
            assert!(
                !code.contains(word),
                "{path} names `{word}`: a batch's request is built by engine::request, not parsed as a command line"
            );
        }
    }
    let request = sources
        .get("engine/request/mod.rs")
        .expect("the typed requests live in engine/request/");
    assert!(request.contains("pub use allocate::{AllocateInput, AllocateRequest"));
}

/// One executor (issue 42): the command line runs requests only through the engine's
/// executor (`engine/executor/`): no front-end file groups a store's requests, hands off a
/// lost connection's, tells a store a batch runs, or runs a request by hand; the single
/// `allocate` and `release` are the executor with one request.
#[test]
fn the_command_line_runs_requests_through_the_executor() {
    let sources = crate_sources();
    let machinery = [
        ".grouped(",
        ".group_size(",
        ".lost()",
        ".batch(",
        ".batch_done(",
        "request.run(",
    ];
    let front_ends = |p: &&String| p.starts_with("cli/") || p.starts_with("serve/");
    for (path, source) in sources.iter().filter(|(p, _)| front_ends(p)) {
        let code = strip_comments(source);
        for word in machinery {
            assert!(
                !code.contains(word),
                "{path} calls `{word}`: running requests is the engine's executor's (engine/executor/)"
            );
        }
    }
    for command in ["cli/cmd/allocate.rs", "cli/cmd/release.rs"] {
        let code = strip_comments(&sources[command]);
        assert!(
            code.contains("Executor::one("),
            "{command} runs its request without the executor"
        );
    }
    assert!(
        strip_comments(&sources["cli/cmd/batch.rs"]).contains("executor.run("),
        "the batch runs its requests without the executor"
    );
    assert!(
        strip_comments(&sources["serve/work.rs"]).contains("executor.run("),
        "the server runs its requests without the executor"
    );
}
