//! One test binary as text: its root file and the modules it includes (`mod x;`, with
//! `#[path]` too), their functions, who refers to whom, and the literal arguments of the
//! calls that run programs. Name resolution is by name and by what is in sight, not by
//! type: two functions of one name are both called, and a method is found only on a type
//! the caller names (or its own), so `.count(` is an iterator's unless `Db` is in sight.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Func, Ref, Source, shell, words};

/// One test binary: its root file and the modules it includes, and their functions.
pub struct Crate {
    pub sources: Vec<Source>,
    pub funcs: Vec<Func>,
    /// Function name -> indexes in `funcs`.
    by_name: BTreeMap<String, Vec<usize>>,
}

impl Crate {
    /// The binary whose root file is `root` (`tests/NAME.rs`), with every module it
    /// includes, however deep.
    pub fn load(root: &Path) -> Crate {
        let mut sources = vec![Source::read(root)];
        let mut i = 0;
        while i < sources.len() {
            let path = sources[i].path.clone();
            let dir = path.parent().expect("a directory").to_owned();
            let own_dir = if path.file_name().is_some_and(|n| n == "mod.rs") || i == 0 {
                dir.clone()
            } else {
                dir.join(path.file_stem().expect("a stem"))
            };
            for (name, at) in sources[i].modules() {
                let file = match at {
                    Some(rel) => dir.join(rel),
                    None => [
                        own_dir.join(format!("{name}/mod.rs")),
                        own_dir.join(format!("{name}.rs")),
                    ]
                    .into_iter()
                    .find(|p| p.is_file())
                    .unwrap_or_else(|| panic!("{}: no file for `mod {name};`", path.display())),
                };
                if !sources.iter().any(|s| same_file(&s.path, &file)) {
                    sources.push(Source::read(&file));
                }
            }
            i += 1;
        }
        let funcs: Vec<Func> = sources
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.functions(i))
            .collect();
        let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, f) in funcs.iter().enumerate() {
            by_name.entry(f.name.clone()).or_default().push(i);
        }
        Crate {
            sources,
            funcs,
            by_name,
        }
    }

    /// The file `f` is in.
    pub fn source(&self, f: &Func) -> &Source {
        &self.sources[f.file]
    }

    /// The functions `f` refers to.
    pub fn callees(&self, f: &Func) -> Vec<usize> {
        let src = self.source(f);
        let signature_start = src.masked[..f.body.start].rfind("fn ").unwrap_or(0);
        let body = &src.masked[signature_start..f.body.end];
        let mut out = Vec::new();
        for r in src.refs(&f.body) {
            let (Ref::Path(_, name) | Ref::Method(name) | Ref::Bare(name) | Ref::Value(name)) = &r;
            for &i in self.by_name.get(name).into_iter().flatten() {
                let g = &self.funcs[i];
                let hit = match &r {
                    Ref::Path(q, name) if q == "Self" => {
                        g.name == *name && g.owner.is_some() && g.owner == f.owner
                    }
                    Ref::Path(q, name) => {
                        g.name == *name
                            && (g.owner.as_deref() == Some(q.as_str())
                                || (g.owner.is_none() && self.sources[g.file].module == *q))
                    }
                    Ref::Method(name) => {
                        g.name == *name
                            && g.has_self
                            && g.owner.as_ref().is_some_and(|t| {
                                f.owner.as_ref() == Some(t) || !words(body, t).is_empty()
                            })
                    }
                    Ref::Bare(name) | Ref::Value(name) => g.name == *name && g.owner.is_none(),
                };
                if hit {
                    out.push(i);
                }
            }
        }
        out
    }

    /// Helpers that run the program they are given (a parameter or closure argument named
    /// `program`): (name, its position among the call's arguments, called as a method).
    pub fn runners(&self) -> Vec<(String, usize, bool)> {
        let mut found = Vec::new();
        for f in &self.funcs {
            let m = &self.source(f).masked;
            let signature_start = m[..f.body.start].rfind("fn ").unwrap_or(f.body.start);
            let signature = &m[signature_start..f.body.start];
            let params = params(signature);
            if let Some(at) = params.iter().position(|p| p == "program")
                && m[f.body.clone()].contains("Command::new(program)")
            {
                let at = if f.has_self { at - 1 } else { at };
                found.push((f.name.clone(), at, f.has_self));
            }
        }
        for src in &self.sources {
            for at in words(&src.masked, "let") {
                let rest = &src.masked[at + 3..];
                let Some((name, rest)) = rest.trim_start().split_once('=') else {
                    continue;
                };
                let rest = rest.trim_start();
                if let Some(closure) = rest.strip_prefix('|')
                    && let Some((ps, _)) = closure.split_once('|')
                {
                    let ps: Vec<String> = ps
                        .split(',')
                        .map(|p| p.split(':').next().unwrap_or("").trim().to_owned())
                        .collect();
                    if let Some(i) = ps.iter().position(|p| p == "program") {
                        found.push((name.trim().to_owned(), i, false));
                    }
                }
            }
        }
        found
    }

    /// The programs of the shell string given to the `sh`/`bash` of `Command::new` at `at`:
    /// the literal after its `"-c"`, within the statement; `None` when the string is made
    /// at run time.
    pub fn shell_string(&self, src: &Source, at: usize) -> Option<Vec<String>> {
        let end = src.masked[at..]
            .find(';')
            .map_or(src.masked.len(), |e| at + e);
        let Some(c) = src.lits_in(&(at..end)).find(|l| l.value == "-c") else {
            return Some(Vec::new());
        };
        match src.lit_after(c.at + 4) {
            Some(script) if script.at < end => Some(shell::programs(&script.value)),
            _ => None,
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    a.canonicalize().ok() == b.canonicalize().ok()
}

/// The parameter names of a signature `fn name(a: A, b: B) -> …`.
fn params(signature: &str) -> Vec<String> {
    let Some(open) = signature.find('(') else {
        return Vec::new();
    };
    let inner = &signature[open + 1..signature.rfind(')').unwrap_or(signature.len())];
    let mut out = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in inner.chars() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current);
    out.iter()
        .map(|p| {
            let name = p.split(':').next().unwrap_or("").trim();
            name.trim_start_matches('&')
                .trim_start_matches("mut ")
                .trim()
                .to_owned()
        })
        .filter(|p| !p.is_empty())
        .collect()
}

/// The literal arguments at `index` of every call of `name` in `range`.
pub fn call_args(
    src: &Source,
    range: &std::ops::Range<usize>,
    name: &str,
    method: bool,
    index: usize,
) -> Vec<String> {
    let m = &src.masked;
    let mut out = Vec::new();
    for at in words(&m[range.clone()], name) {
        let at = range.start + at;
        let before = m[..at].trim_end();
        if method != before.ends_with('.') || before.ends_with("fn") {
            continue;
        }
        let open = at + name.len();
        if !m[open..].starts_with('(') {
            continue;
        }
        let (mut depth, mut arg, mut start) = (0, 0, open + 1);
        for (i, c) in m[open..].char_indices() {
            let i = open + i;
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => {
                    if arg == index {
                        break;
                    }
                    arg += 1;
                    start = i + 1;
                }
                _ => {}
            }
        }
        if arg == index
            && let Some(lit) = src.lit_after(start)
            && m[start..lit.at].trim().is_empty()
        {
            out.push(lit.value.clone());
        }
    }
    out
}

/// The arrays of literals in `range` (`["a", "b", …]`), as their words.
pub fn arrays(src: &Source, range: &std::ops::Range<usize>) -> Vec<Vec<String>> {
    let m = &src.masked;
    let mut out = Vec::new();
    for (at, _) in m[range.clone()].match_indices('[') {
        let at = range.start + at;
        let Some(first) = src.lit_after(at + 1) else {
            continue;
        };
        if !m[at + 1..first.at].trim().is_empty() {
            continue;
        }
        let end = m[at..].find(']').map_or(m.len(), |e| at + e);
        out.push(src.lits_in(&(at..end)).map(|l| l.value.clone()).collect());
    }
    out
}
