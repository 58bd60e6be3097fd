//! The command × lock × invariant table of `src/engine/mod.rs` is true, and complete: read
//! from the sources (as `tests/layers.rs` reads them), every engine function a command
//! handler in `src/cli/` calls that writes to the store (directly or through the engine
//! functions it calls) has a row, and each row's entry reaches every lock the row names.
//! So a command that writes and takes no lock fails here, unless its row says `none` and
//! why.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One function of `src/engine/`: its module (`vpc`, for `vpc.rs` and `vpc/delete.rs`), its
/// file, and its body.
#[derive(Debug)]
struct Func {
    module: String,
    file: String,
    body: String,
}

/// Store calls that write.
const WRITES: [&str; 7] = [
    ".create(",
    ".replace(",
    ".delete(",
    ".delete_if(",
    ".claim(",
    ".claim_copy(",
    ".release(",
];

/// The lock a table's word names, as the call that takes it.
fn lock_call(word: &str) -> Option<&'static str> {
    match word {
        "scope" => Some(".lock_scope("),
        "pool" => Some(".lock_pool("),
        "claim" => Some(".lock_claim("),
        "prefix-claim" => Some(".lock_prefix_claim("),
        _ => None,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("read a source directory")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The functions of one source text: (name, body), bodies found by matching braces.
fn functions(source: &str) -> Vec<(String, String)> {
    let bytes = source.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(i) = source[at..].find("fn ") {
        let start = at + i;
        at = start + 3;
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let name: String = source[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body's brace: the first `{` outside the signature's parentheses and brackets
        // (`[PoolRef; 2]` holds a `;`); a `;` there first is a declaration without a body.
        let mut nesting = 0i32;
        let mut open = None;
        for (j, b) in bytes[at..].iter().enumerate() {
            match b {
                b'(' | b'[' => nesting += 1,
                b')' | b']' => nesting -= 1,
                b'{' if nesting == 0 => {
                    open = Some(at + j);
                    break;
                }
                b';' if nesting == 0 => break,
                _ => {}
            }
        }
        let Some(open) = open else {
            continue;
        };
        let mut depth = 0usize;
        let mut end = open;
        for (j, b) in bytes[open..].iter().enumerate() {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j;
                        break;
                    }
                }
                _ => {}
            }
        }
        found.push((name, source[open..=end].to_owned()));
    }
    found
}

/// The engine's functions by name (a name may be in several modules).
fn engine(root: &Path) -> BTreeMap<String, Vec<Func>> {
    let dir = root.join("src/engine");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let mut by_name: BTreeMap<String, Vec<Func>> = BTreeMap::new();
    for path in files {
        let rel = path.strip_prefix(&dir).expect("under src/engine");
        let module = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|s| s.trim_end_matches(".rs").to_owned())
            .expect("a module");
        let source = std::fs::read_to_string(&path).expect("read a source file");
        for (name, body) in functions(&source) {
            by_name.entry(name).or_default().push(Func {
                module: module.clone(),
                file: rel.display().to_string(),
                body: body.clone(),
            });
        }
    }
    by_name
}

/// The engine functions `body` (of a function in `module`) calls: `m::name(` in module `m`
/// (`super::name(` in its own), a bare `name(` in the same module or in one the file names
/// in a `use`.
fn callees<'a>(
    body: &str,
    module: &str,
    uses: &str,
    by_name: &'a BTreeMap<String, Vec<Func>>,
) -> Vec<&'a Func> {
    let mut out = Vec::new();
    let bytes = body.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for (at, _) in body.match_indices('(') {
        let mut start = at;
        while start > 0 && ident(bytes[start - 1]) {
            start -= 1;
        }
        if start == at || start > 0 && bytes[start - 1] == b'.' {
            continue;
        }
        let name = &body[start..at];
        let Some(funcs) = by_name.get(name) else {
            continue;
        };
        let qualifier = body[..start].strip_suffix("::").map(|before| {
            let q = before.len() - before.bytes().rev().take_while(|b| ident(*b)).count();
            &before[q..]
        });
        for f in funcs {
            let matches = match qualifier {
                Some(q) => q == f.module || q == "super" && f.module == module,
                None => {
                    f.module == module
                        || uses.contains(&format!("engine::{}::{name}", f.module))
                        || uses.contains(&format!("engine::{}::{{", f.module))
                            && uses.contains(name)
                }
            };
            if matches {
                out.push(f);
            }
        }
    }
    out
}

/// Everything reachable from `start` in the engine, `start` included.
fn reach<'a>(
    start: &'a Func,
    by_name: &'a BTreeMap<String, Vec<Func>>,
    uses: &BTreeMap<String, String>,
) -> Vec<&'a Func> {
    let mut seen: BTreeSet<(String, usize)> = BTreeSet::new();
    let mut stack = vec![start];
    let mut out = Vec::new();
    while let Some(f) = stack.pop() {
        if !seen.insert((f.file.clone(), f.body.as_ptr() as usize)) {
            continue;
        }
        out.push(f);
        let file_uses = uses.get(&f.file).map(String::as_str).unwrap_or("");
        stack.extend(callees(&f.body, &f.module, file_uses, by_name));
    }
    out
}

/// The `use` lines of every engine file, by file.
fn uses(root: &Path) -> BTreeMap<String, String> {
    let dir = root.join("src/engine");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    files
        .into_iter()
        .map(|p| {
            let source = std::fs::read_to_string(&p).expect("read");
            let uses: String = source
                .split(';')
                .filter(|s| s.trim_start().starts_with("use ") || s.contains("\nuse "))
                .collect::<Vec<_>>()
                .join(";");
            (
                p.strip_prefix(&dir).expect("under").display().to_string(),
                uses,
            )
        })
        .collect()
}

/// The table's rows: (entries as `module::fn`, lock words).
fn table(root: &Path) -> Vec<(Vec<String>, Vec<String>)> {
    let text = std::fs::read_to_string(root.join("src/engine/mod.rs")).expect("read");
    let mut rows = Vec::new();
    for line in text.lines() {
        let Some(row) = line.strip_prefix("//! |") else {
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        if cells.len() < 4 || cells[0] == "command" || cells[0].starts_with("---") {
            continue;
        }
        let ticked = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        let locks: Vec<String> = ticked(cells[2])
            .into_iter()
            .filter(|w| lock_call(w).is_some() || w == "none")
            .collect();
        rows.push((ticked(cells[1]), locks));
    }
    rows
}

/// The engine functions the command handlers call, as `module::fn`: each `m::f(` of a file
/// of `src/cli/` whose `m` is an engine module the file names (`engine::m`).
fn called_from_cli(root: &Path, by_name: &BTreeMap<String, Vec<Func>>) -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&root.join("src/cli"), &mut files);
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = BTreeSet::new();
    for path in files {
        let source = std::fs::read_to_string(&path).expect("read");
        let bytes = source.as_bytes();
        for (at, _) in source.match_indices("::") {
            let mut end = at + 2;
            while end < bytes.len() && ident(bytes[end]) {
                end += 1;
            }
            if bytes.get(end) != Some(&b'(') {
                continue;
            }
            let mut start = at;
            while start > 0 && ident(bytes[start - 1]) {
                start -= 1;
            }
            let (module, name) = (&source[start..at], &source[at + 2..end]);
            let named = source.contains(&format!("engine::{module}"))
                || source.contains(&format!("engine::{{{module}"));
            if named
                && by_name
                    .get(name)
                    .is_some_and(|funcs| funcs.iter().any(|f| f.module == module))
            {
                out.insert(format!("{module}::{name}"));
            }
        }
    }
    out
}

fn find<'a>(by_name: &'a BTreeMap<String, Vec<Func>>, entry: &str) -> Option<&'a Func> {
    let (module, name) = entry.split_once("::")?;
    by_name.get(name)?.iter().find(|f| f.module == module)
}

#[test]
fn every_command_that_writes_takes_the_locks_its_row_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let by_name = engine(root);
    let uses = uses(root);
    let rows = table(root);
    assert!(rows.len() >= 10, "the table has {} rows", rows.len());
    let mut problems = Vec::new();
    let mut tabled = BTreeSet::new();
    for (entries, locks) in &rows {
        for entry in entries {
            tabled.insert(entry.clone());
            let Some(f) = find(&by_name, entry) else {
                problems.push(format!("`{entry}`: no such engine function"));
                continue;
            };
            let reached = reach(f, &by_name, &uses);
            for word in locks {
                let Some(call) = lock_call(word) else {
                    continue;
                };
                if !reached.iter().any(|g| g.body.contains(call)) {
                    problems.push(format!("`{entry}` takes no {word} lock (no `{call}`)"));
                }
            }
            if locks.is_empty() {
                problems.push(format!("`{entry}`: the row names no lock (or `none`)"));
            }
        }
    }
    for entry in called_from_cli(root, &by_name) {
        let Some(f) = find(&by_name, &entry) else {
            continue;
        };
        let reached = reach(f, &by_name, &uses);
        let writes = reached
            .iter()
            .any(|g| WRITES.iter().any(|w| g.body.contains(w)));
        if writes && !tabled.contains(&entry) {
            let locks = reached.iter().any(|g| g.body.contains(".lock_"));
            problems.push(format!(
                "`{entry}` writes (called from src/cli/) but has no row in the table of src/engine/mod.rs{}",
                if locks { "" } else { ", and takes no lock" }
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check can fail: a planted engine function that writes without a lock, called from
/// the command line, is reported; one that locks is not.
#[test]
fn a_writer_without_a_lock_is_reported() {
    let body = "fn planted(store: &dyn Store) -> Result<()> {\n    store.create(ObjectKind::Pool, None, \"p\", b\"\")?;\n    Ok(())\n}\n";
    let locked = "fn locked(store: &dyn Store) -> Result<()> {\n    let _l = store.lock_scope(None)?;\n    helper(store)\n}\nfn helper(store: &dyn Store) -> Result<()> {\n    store.replace(ObjectKind::Pool, None, \"p\", b\"\")\n}\n";
    let mut by_name: BTreeMap<String, Vec<Func>> = BTreeMap::new();
    for source in [body, locked] {
        for (name, body) in functions(source) {
            by_name.entry(name).or_default().push(Func {
                module: "planted".into(),
                file: "planted.rs".into(),
                body,
            });
        }
    }
    let uses = BTreeMap::new();
    let reaches_lock = |entry: &str| {
        let f = find(&by_name, entry).expect("planted");
        reach(f, &by_name, &uses)
            .iter()
            .any(|g| g.body.contains(".lock_"))
    };
    let writes = |entry: &str| {
        let f = find(&by_name, entry).expect("planted");
        reach(f, &by_name, &uses)
            .iter()
            .any(|g| WRITES.iter().any(|w| g.body.contains(w)))
    };
    assert!(writes("planted::planted") && !reaches_lock("planted::planted"));
    assert!(writes("planted::locked") && reaches_lock("planted::locked"));
}
