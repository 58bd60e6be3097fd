//! The one module that knows the YAML library (serde-saphyr), so it can be swapped.
//!
//! Reading is bounded (size, nesting, alias expansion), strict (duplicate keys, unknown
//! fields and tags outside the YAML core schema are errors) and never panics; writing is
//! deterministic: fixed key order, and every scalar that a YAML 1.1 reader would take for a
//! boolean, number or null is quoted.
//!
//! Allocations, which `list` and `check` read by the tens of thousands, first try a fast path
//! (`canonical`) that only accepts the exact bytes [`encode`] writes; everything else goes to
//! the library.

mod canonical;
mod list;

pub mod conflict;

pub use list::{
    Checked, Item, ListError, MAX_ITEM_BYTES, MAX_ITEM_VALUES, MAX_LIST_BYTES, check_list,
    read_list,
};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_saphyr::{Budget, DuplicateKeyPolicy, Options};

use crate::model::cooldown::CooldownRecord;
use crate::model::kind::QUOTA_KIND;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::subnet::{SUBNET_KIND, SubnetManifest};
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
/// The longest excerpt of a file's bytes a message quotes (in characters, within backticks).
const EXCERPT_CHARS: usize = 64;

/// `message` with every backtick-quoted span (the library's and the validators' quotes of
/// the file's own bytes) cut to [`EXCERPT_CHARS`] characters and escaped: an error about a
/// file planted in the state directory (a hard link to a secret, a binary) shows no more
/// of it than it takes to find the line.
pub fn excerpted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(256));
    for (i, part) in message.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        let mut chars = part.chars();
        let limit = if i % 2 == 0 {
            usize::MAX
        } else {
            EXCERPT_CHARS
        };
        for c in chars.by_ref().take(limit) {
            if c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        if chars.next().is_some() {
            out.push('…');
        }
    }
    // A quote the file's bytes unbalanced cannot let the rest through whole.
    if out.chars().count() > MESSAGE_CHARS {
        out = out.chars().take(MESSAGE_CHARS).collect();
        out.push('…');
    }
    out
}

/// The longest message about a file's content, whatever its quotes.
const MESSAGE_CHARS: usize = 400;

fn one_line(err: serde_saphyr::Error) -> String {
    let text = excerpted(&err.to_string());
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
    /// A subnet, parsed and validated on its own (its pool is checked when applied), with
    /// its gateway filled in.
    Subnet(Box<SubnetManifest>),
    /// A namespace's quota, parsed and validated.
    Quota(Box<crate::model::quota::QuotaManifest>),
    /// An allocation document: `apply` refuses these.
    Allocation,
}

/// Every library read goes through here, so no manifest with a tag outside the core schema
/// is ever read.
fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    // Tags first, so that a tagged value is refused for its tag rather than for whatever the
    // library made of it (`!!timestamp` into a string is "cannot deserialize tagged scalar").
    // Every tag, `%TAG` handle and verbatim tag begins with `!` (YAML 1.2 §6.8.2, §6.9.1): a
    // text without one carries none, and is not parsed a second time to find out.
    let scanned_whole = !text.contains('!') || core_tags_only(text)?;
    let value = serde_saphyr::from_str_with_options(text, options()).map_err(one_line)?;
    if !scanned_whole {
        // Cannot happen with today's limits, which are the library's defaults on both sides;
        // if a limit ever differs, refusing is the answer that cannot let a tag through.
        return Err("the document could not be checked for tags".into());
    }
    Ok(value)
}

/// The tags the YAML 1.2 core schema defines; the only ones a manifest may carry.
const CORE_TAGS: &str = "!!str, !!int, !!float, !!bool, !!null, !!map, !!seq";

/// Refuses the first tag outside the core schema, as `line L column C: tag `T` is not
/// allowed; ...`, naming the tag as written. `Ok(false)` when the text does not parse (the
/// library then says why), `Ok(true)` when every node was seen.
///
/// serde-saphyr cannot do this alone: `reject_unsupported_tags` refuses only tags it does not
/// know, and it knows (and applies) `!!binary`, `!!timestamp`, `!!merge`, `!!value` and `!`.
/// Its own parser does see every tag, so this reads the event stream rather than the text: a
/// `!` in a quoted or block scalar or in a comment is no tag to it. Core tags are matched by
/// what they resolve to, so `!<tag:yaml.org,2002:str>` passes and a `!!str` whose handle a
/// `%TAG` directive rebinds does not.
fn core_tags_only(text: &str) -> Result<bool, String> {
    use serde_saphyr::granit_parser::{Event, Parser};
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else {
            return Ok(false);
        };
        let tag = match &event {
            Event::Scalar(_, _, _, tag)
            | Event::SequenceStart(_, _, tag)
            | Event::MappingStart(_, _, tag) => tag,
            _ => continue,
        };
        let Some(tag) = tag else { continue };
        if tag.is_yaml_core_schema() {
            continue;
        }
        let at = span.tag_start().unwrap_or(span.start);
        let written = span
            .tag_span()
            .and_then(|t| t.slice(text))
            .map_or_else(|| tag.to_string(), str::to_owned);
        return Err(format!(
            "line {} column {}: tag `{written}` is not allowed; only the YAML core schema's tags are ({CORE_TAGS})",
            at.line(),
            at.col() + 1
        ));
    }
    Ok(true)
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
        Some(SUBNET_KIND) => {
            let subnet: SubnetManifest = from_str(text)?;
            subnet.validate()?;
            Ok(Document::Subnet(Box::new(subnet.normalized())))
        }
        Some(QUOTA_KIND) => {
            let quota: crate::model::quota::QuotaManifest = from_str(text)?;
            quota.validate()?;
            Ok(Document::Quota(Box::new(quota)))
        }
        Some(ALLOCATION_KIND) => Ok(Document::Allocation),
        Some(other) => Err(format!(
            "kind: `{other}` is not supported; expected `{POOL_KIND}`, `{SUBNET_KIND}` or `{QUOTA_KIND}` (or `{ALLOCATION_KIND}`, which only `ipamctl allocate` writes)"
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
    if crate::yaml::conflict::sides(text).is_some() {
        return Err("unresolved merge conflict (git conflict markers): edit the file to the pool it should be, `git add` it, and run `ipamctl check`".into());
    }
    expect_single(text)?;
    let pool: PoolManifest = from_str(text)?;
    pool.validate().map_err(|e| excerpted(&e))?;
    Ok(pool)
}

/// Parses and validates a tokens file (`ipamctl token`): one `TokenList` document.
pub fn decode_tokens(text: &str) -> Result<crate::model::token::TokenFile, String> {
    expect_single(text)?;
    let file: crate::model::token::TokenFile = from_str(text)?;
    file.validate()?;
    Ok(file)
}

/// Parses and validates one subnet manifest file from the state directory.
pub fn decode_subnet(text: &str) -> Result<SubnetManifest, String> {
    expect_single(text)?;
    let subnet: SubnetManifest = from_str(text)?;
    subnet.validate().map_err(|e| excerpted(&e))?;
    Ok(subnet)
}

/// Parses and validates one quota from the state directory.
pub fn decode_quota(text: &str) -> Result<crate::model::quota::QuotaManifest, String> {
    expect_single(text)?;
    let quota: crate::model::quota::QuotaManifest = from_str(text)?;
    quota.validate().map_err(|e| excerpted(&e))?;
    Ok(quota)
}

/// Parses and validates one prefix claim from the state directory.
pub fn decode_prefix_claim(text: &str) -> Result<PrefixClaimManifest, String> {
    expect_single(text)?;
    let claim: PrefixClaimManifest = from_str(text)?;
    claim.validate().map_err(|e| excerpted(&e))?;
    Ok(claim)
}

/// Parses and validates one cooldown record from the state directory.
pub fn decode_cooldown(text: &str) -> Result<CooldownRecord, String> {
    match decode_canonical_cooldown(text) {
        Some(record) => Ok(record),
        None => decode_cooldown_with_library(text),
    }
}

/// [`decode_allocation_with_library`]'s counterpart for a cooldown record.
fn decode_cooldown_with_library(text: &str) -> Result<CooldownRecord, String> {
    expect_single(text)?;
    let record: CooldownRecord = from_str(text)?;
    record.validate().map_err(|e| excerpted(&e))?;
    Ok(record)
}

/// Parses and validates one allocation manifest file from the state directory.
pub fn decode_allocation(text: &str) -> Result<AllocationManifest, String> {
    match decode_canonical_allocation(text) {
        Some(alloc) => Ok(alloc),
        None => decode_allocation_with_library(text),
    }
}

/// [`decode_allocation`], and whether `text` is byte for byte what [`encode`] writes for the
/// manifest (so ends in a newline): a file that is exactly ipamctl's output is no prefix of
/// a longer manifest being written.
pub fn decode_allocation_exact(text: &str) -> (Result<AllocationManifest, String>, bool) {
    match decode_canonical_allocation(text) {
        Some(alloc) => (Ok(alloc), true),
        None => (decode_allocation_with_library(text), false),
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

/// [`decode_canonical_allocation`]'s counterpart for a cooldown record, with the same guard.
fn decode_canonical_cooldown(text: &str) -> Option<CooldownRecord> {
    let record = canonical::parse_cooldown(text)?;
    record.validate().ok()?;
    (encode(&record) == text).then_some(record)
}

/// The slow path, and the only one for anything ipamctl did not write itself. Its errors
/// quote the file only in short excerpts ([`excerpted`]).
fn decode_allocation_with_library(text: &str) -> Result<AllocationManifest, String> {
    library_allocation(text).map_err(|e| excerpted(&e))
}

fn library_allocation(text: &str) -> Result<AllocationManifest, String> {
    if let Some(sides) = crate::yaml::conflict::sides(text) {
        return Err(crate::yaml::conflict::allocation_message(
            &sides,
            decode_allocation,
        ));
    }
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

    /// A file planted in the state (a hard link to `/etc/shadow`, a binary) is quoted in an
    /// error only as a short, escaped excerpt.
    #[test]
    fn errors_quote_a_file_only_in_short_escaped_excerpts() {
        let secret = format!("root:$6${}:19000:0:99999:7:::\n", "x".repeat(90));
        let why = decode_allocation(&secret).unwrap_err();
        assert!(why.contains("unknown field `root:$6$xxx"), "{why}");
        assert!(!why.contains(&"x".repeat(EXCERPT_CHARS)), "{why}");
        assert!(why.contains('…'), "{why}");
        let binary = "\u{1b}[31m: 1\n";
        let why = decode_allocation(binary).unwrap_err();
        assert!(!why.contains('\u{1b}'), "{why}");
        let unbalanced = format!("`{}: 1\n", "y".repeat(2000));
        assert!(excerpted(&unbalanced).chars().count() <= MESSAGE_CHARS + 1);
    }

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

    /// The message `decode_pool` gives for `tag` at line `line`, column `column`.
    fn tag_refusal(line: usize, column: usize, tag: &str) -> String {
        format!(
            "line {line} column {column}: tag `{tag}` is not allowed; only the YAML core schema's tags are ({CORE_TAGS})"
        )
    }

    #[test]
    fn tags_outside_the_core_schema_are_refused_naming_them() {
        for (tag, value) in [
            ("!!binary", "cA=="),
            ("!!timestamp", "p"),
            ("!!set", "p"),
            ("!!python/name:os.system", "p"),
            ("!p", "p"),
            ("!", "p"),
            ("!<tag:example.com,2000:p>", "p"),
            ("!<tag:yaml.org,2002:binary>", "cA=="),
        ] {
            let text = POOL.replace("name: p", &format!("name: {tag} {value}"));
            assert_eq!(decode_pool(&text), Err(tag_refusal(4, 9, tag)), "{tag}");
        }
    }

    #[test]
    fn core_tags_are_matched_by_what_they_resolve_to() {
        let verbatim = POOL.replace("name: p", "name: !<tag:yaml.org,2002:str> p");
        assert_eq!(decode_pool(&verbatim), decode_pool(POOL));
        // A directive may rebind `!!`; the tag is then no core tag, whatever it looks like.
        let rebound = format!(
            "%TAG !! tag:example.com,2000:\n---\n{}",
            POOL.replace("name: p", "name: !!str p")
        );
        assert_eq!(core_tags_only(&rebound), Err(tag_refusal(6, 9, "!!str")));
        let split = "%TAG !y! tag:yaml.org,2002:\n--- !y!str p\n";
        assert_eq!(core_tags_only(split), Ok(true));
    }

    #[test]
    fn a_bang_in_a_quoted_or_block_scalar_or_a_comment_is_no_tag() {
        let text = POOL.replace(
            "  name: p\n",
            "  name: p # !!binary\n  # !foo\n  annotations:\n    a: \"!!binary cA==\"\n    b: '!p'\n    c: |\n      !!set\n    d: x!y\n",
        );
        assert!(decode_pool(&text).is_ok(), "{:?}", decode_pool(&text));
    }

    #[test]
    fn a_tagged_allocation_reads_as_unparsable() {
        let text = include_str!(
            "../../testdata/demo/namespaces/acme/prod/ipallocations/vpc-main-10-42-0-1.yaml"
        );
        assert!(decode_allocation(text).is_ok());
        let tagged = text.replace("pool: vpc-main", "pool: !!binary dnBjLW1haW4=");
        let line = 1 + text
            .lines()
            .position(|l| l.starts_with("  pool: "))
            .expect("a pool line");
        assert_eq!(
            decode_allocation(&tagged),
            Err(tag_refusal(line, 9, "!!binary"))
        );
    }

    #[test]
    fn text_the_parser_rejects_is_left_to_the_library() {
        assert_eq!(core_tags_only("a: [unclosed\n"), Ok(false));
        let err = decode_pool("a: [unclosed\n").unwrap_err();
        assert!(!err.contains("tag"), "{err}");
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
