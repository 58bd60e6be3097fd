//! The one module that knows the YAML library (serde-saphyr), so it can be swapped.
//!
//! Reading is bounded (size, nesting, alias expansion), strict (duplicate keys and unknown
//! fields are errors) and never panics; writing is deterministic: fixed key order, and every
//! scalar that a YAML 1.1 reader would take for a boolean, number or null is quoted.
//!
//! Allocations, which `list` and `check` read by the tens of thousands, first try a fast path
//! (`canonical`) that only accepts the exact bytes [`encode`] writes; everything else goes to
//! the library.

mod canonical;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_saphyr::{Budget, DuplicateKeyPolicy, Options};

use crate::model::{ALLOCATION_KIND, AllocationManifest, POOL_KIND, PoolManifest};

/// Manifests larger than this are refused unread: a real one is a few hundred bytes.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

fn options() -> Options {
    let mut budget = Budget::default();
    budget.max_reader_input_bytes = Some(MAX_MANIFEST_BYTES as usize);
    serde_saphyr::options! {
        with_snippet: false,
        duplicate_keys: DuplicateKeyPolicy::Error,
        budget: Some(budget),
    }
}

/// Turns the library's error into one line: `line L column C: message`.
fn one_line(err: serde_saphyr::Error) -> String {
    let text = err.to_string();
    let first = text.lines().next().unwrap_or("invalid YAML").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    match err.location() {
        Some(loc) => {
            let (line, column) = (loc.line(), loc.column());
            let suffix = format!(" at line {line}, column {column}");
            let message = first.strip_suffix(&suffix).unwrap_or(first);
            format!("line {line} column {column}: {message}")
        }
        None => first.to_owned(),
    }
}

/// `apiVersion` and `kind`, read first so the right type can be chosen.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Header {
    api_version: Option<serde::de::IgnoredAny>,
    kind: Option<String>,
}

/// A document of an `apply` input.
#[derive(Debug)]
pub enum Document {
    /// A pool, parsed and validated.
    Pool(Box<PoolManifest>),
    /// An allocation document: `apply` refuses these.
    Allocation,
}

fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_saphyr::from_str_with_options(text, options()).map_err(one_line)
}

/// Splits a multi-document stream at `---` lines, dropping documents that hold only
/// comments or whitespace. Each part keeps its first line number (1-based).
fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") || line == "..." {
            docs.push((start, std::mem::take(&mut current)));
            start = i + 2;
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    docs.push((start, current));
    docs.retain(|(_, d)| {
        d.lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    });
    docs
}

/// Parses one document of an `apply` input. Errors name the field and value; the caller
/// adds the file and document number.
fn decode_document(text: &str) -> Result<Document, String> {
    let header: Header = from_str(text)?;
    if header.api_version.is_none() {
        return Err("apiVersion: missing".into());
    }
    match header.kind.as_deref() {
        Some(POOL_KIND) => {
            let pool: PoolManifest = from_str(text)?;
            pool.validate()?;
            // The store refuses to read a larger file, so it must never write one.
            let size = encode(&pool).len();
            if size as u64 > MAX_MANIFEST_BYTES {
                return Err(format!(
                    "the pool's manifest would be {size} bytes; at most {MAX_MANIFEST_BYTES} are allowed"
                ));
            }
            Ok(Document::Pool(Box::new(pool)))
        }
        Some(ALLOCATION_KIND) => Ok(Document::Allocation),
        Some(other) => Err(format!(
            "kind: `{other}` is not supported; expected `{POOL_KIND}` (or `{ALLOCATION_KIND}`, which only `ipamctl allocate` writes)"
        )),
        None => Err("kind: missing".into()),
    }
}

/// Parses a multi-document stream. Each error is `document N (line L): message`, with
/// line numbers counted in the whole stream.
pub fn decode_documents(text: &str) -> Result<Vec<Document>, String> {
    let docs = split_documents(text);
    if docs.is_empty() {
        return Err("no documents found".into());
    }
    docs.iter()
        .enumerate()
        .map(|(i, (start, doc))| {
            decode_document(doc).map_err(|e| {
                let e = shift_line(&e, *start - 1);
                format!("document {}: {e}", i + 1)
            })
        })
        .collect()
}

/// Rewrites a leading `line L column C:` so it counts from the start of the stream.
fn shift_line(message: &str, offset: usize) -> String {
    let Some(rest) = message.strip_prefix("line ") else {
        return message.to_owned();
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    match digits.parse::<usize>() {
        Ok(line) => format!("line {}{}", line + offset, &rest[digits.len()..]),
        Err(_) => message.to_owned(),
    }
}

/// Parses and validates one pool manifest file from the state directory.
pub fn decode_pool(text: &str) -> Result<PoolManifest, String> {
    expect_single(text)?;
    let pool: PoolManifest = from_str(text)?;
    pool.validate()?;
    Ok(pool)
}

/// Parses and validates one allocation manifest file from the state directory.
pub fn decode_allocation(text: &str) -> Result<AllocationManifest, String> {
    match decode_canonical_allocation(text) {
        Some(alloc) => Ok(alloc),
        None => decode_allocation_with_library(text),
    }
}

/// The fast path: `Some` only when `text` is byte for byte what [`encode`] writes for the
/// valid manifest returned. The library reads `encode(m)` back as `m` for every valid `m`
/// (what ipamctl writes, it reads back; `tests/fuzz.rs` and this module's tests check it), so
/// whatever this accepts, [`decode_allocation_with_library`] would have returned too.
fn decode_canonical_allocation(text: &str) -> Option<AllocationManifest> {
    let alloc = canonical::parse_allocation(text)?;
    alloc.validate().ok()?;
    // The guard that makes the fast path exact: the parser above may be as naive as it likes
    // about YAML, since only text that `encode` would have written itself gets through.
    (encode(&alloc) == text).then_some(alloc)
}

/// The slow path, and the only one for anything ipamctl did not write itself.
fn decode_allocation_with_library(text: &str) -> Result<AllocationManifest, String> {
    expect_single(text)?;
    let alloc: AllocationManifest = from_str(text)?;
    alloc.validate()?;
    Ok(alloc)
}

fn expect_single(text: &str) -> Result<(), String> {
    match split_documents(text).len() {
        0 => Err("the file is empty".into()),
        1 => Ok(()),
        n => Err(format!(
            "holds {n} documents; a state file holds exactly one"
        )),
    }
}

/// Encodes one manifest: same bytes for the same object.
pub fn encode<T: Serialize>(value: &T) -> String {
    serde_saphyr::to_string(value).expect("manifests serialize: plain structs of strings")
}

/// Encodes manifests as a multi-document stream (`---` between documents).
pub fn encode_stream<T: Serialize>(values: &[T]) -> String {
    values
        .iter()
        .map(|v| encode(v))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: p\nspec:\n  cidr: 10.0.0.0/24\n  kind: public\n";

    #[test]
    fn pools_round_trip_byte_for_byte() {
        let pool = decode_pool(POOL).unwrap();
        assert_eq!(encode(&pool), POOL);
    }

    #[test]
    fn unknown_fields_are_named() {
        let text = POOL.replace("kind: public", "kind: public\n  excludes: []");
        let err = decode_pool(&text).unwrap_err();
        assert!(err.contains("unknown field `excludes`"), "{err}");
        assert!(err.starts_with("line 8"), "{err}");
    }

    #[test]
    fn later_documents_report_stream_lines() {
        let text = format!("{POOL}---\n{}", POOL.replace("10.0.0.0/24", "10.0.0.1/24"));
        let err = decode_documents(&text).unwrap_err();
        assert!(err.starts_with("document 2: line 14"), "{err}");
        assert!(err.contains("did you mean `10.0.0.0/24`"), "{err}");
    }

    #[test]
    fn billion_laughs_is_refused() {
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for i in 0..12 {
            let prev = if i == 0 {
                "a".to_string()
            } else {
                format!("l{}", i - 1)
            };
            text.push_str(&format!("l{i}: &l{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        assert!(decode_pool(&text).is_err());
    }
}
