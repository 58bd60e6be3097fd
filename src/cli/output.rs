//! Rendering, in one place: tables (comfy-table), JSON and YAML documents, kubectl's `List`
//! envelope, `-o name` lines, and what a changing command did to each object.
//!
//! The output contract every command keeps: data on stdout, diagnostics on stderr; a list
//! in JSON or YAML is one `{"apiVersion": "v1", "kind": "List", "items": [...]}` document;
//! `-o name` prints `ipallocation/<name>` or `ipampool/<name>` lines; a changing command
//! prints each object it touched with `status.action` in JSON and YAML, and
//! `kind/name action` lines in table form.
//!
//! Plain text and tables are in `output/text.rs`, the `-o name` of each object in
//! `output/named.rs`; JSON, YAML, lists and changes here.

mod named;
mod text;

pub use named::{Held, Named, Whole};
pub use text::{Blocks, STDOUT, line, table, write};

use std::io::Write;

use serde::Serialize;

use crate::cli::{ColorChoice, OutputFormat};
use crate::error::{Error, Result};
use crate::yaml;

/// Writes `value` as pretty JSON with a trailing newline, streamed rather than built in
/// memory first (`list -o json` of 50,000 allocations is tens of megabytes).
pub fn write_json<T: Serialize + ?Sized>(out: &mut dyn Write, value: &T) -> Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut out, value).map_err(|e| Error::io(STDOUT, e.into()))?;
    out.write_all(b"\n")
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(STDOUT, e))
}

/// kubectl's envelope of a list: `{"apiVersion": "v1", "kind": "List", "items": [...]}`,
/// what every command prints for a list in JSON and YAML.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct List<'a, T> {
    api_version: &'static str,
    kind: &'static str,
    items: &'a [T],
}

/// `items` in a [`List`].
pub fn list<T>(items: &[T]) -> List<'_, T> {
    List {
        api_version: "v1",
        kind: "List",
        items,
    }
}

/// Writes `items` as a pretty JSON [`List`] with a trailing newline: byte for byte what
/// [`write_json`] writes for `list(items)`, but the items rendered on every core, which
/// halves `list -o json` of 50,000 allocations on two cores.
///
/// The items are cut into chunks of [`JSON_CHUNK`], dealt to the threads in turn, and
/// written in order as each is done: at most two chunks a thread are held, where rendering
/// one part per thread held the whole output (27 MB, 8,000 page faults at 50,000
/// allocations; issue 47). A hand-made pipeline rather than a thread pool's crate: two
/// bounded channels a thread, in the standard library, are the whole of it.
pub fn write_json_list<T: Serialize + Sync>(out: &mut dyn Write, items: &[T]) -> Result<()> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if items.len() < 2 * JSON_CHUNK || threads == 1 {
        return write_json(out, &list(items));
    }
    // The pretty printer writes the envelope's fields, then `"items": [\n`, the items
    // indented two levels and separated by `,\n`, then `\n  ]\n}`. Each chunk rendered as an
    // envelope of its own, cut to what lies between those brackets and joined by `,\n`, is
    // the whole list's rendering; the first chunk's head is the head of the whole.
    const OPEN: &[u8] = b"\"items\": [\n";
    const CLOSE: &[u8] = b"\n  ]\n}";
    let chunks: Vec<&[T]> = items.chunks(JSON_CHUNK).collect();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    let written: std::io::Result<()> = std::thread::scope(|scope| {
        let receivers: Vec<_> = (0..threads)
            .map(|t| {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(1);
                let mine = chunks.iter().skip(t).step_by(threads);
                scope.spawn(move || {
                    for part in mine {
                        let json = serde_json::to_vec_pretty(&list(part))
                            .expect("manifests serialize to JSON");
                        if tx.send(json).is_err() {
                            return; // The writer stopped: a write failed.
                        }
                    }
                });
                rx
            })
            .collect();
        for i in 0..chunks.len() {
            let part = receivers[i % threads]
                .recv()
                .expect("each thread renders its chunks in turn");
            let open = part
                .windows(OPEN.len())
                .position(|w| w == OPEN)
                .expect("a List renders its items array")
                + OPEN.len();
            if i == 0 {
                out.write_all(&part[..open])?;
            } else {
                out.write_all(b",\n")?;
            }
            out.write_all(&part[open..part.len() - CLOSE.len()])?;
        }
        out.write_all(CLOSE)?;
        out.write_all(b"\n")?;
        out.flush()
    });
    written.map_err(|e| Error::io(STDOUT, e))
}

/// How many items [`write_json_list`] renders at a time on one thread: about half a
/// megabyte of JSON for allocations.
const JSON_CHUNK: usize = 1024;

/// Writes `items` as one YAML [`List`] document.
pub fn write_yaml_list<T: Serialize>(out: &mut dyn Write, items: &[T]) -> Result<()> {
    write(out, &yaml::encode(&list(items)))
}

/// Writes `items` as a [`List`] in JSON or YAML, or `-o name` lines; `false` for a format
/// the caller renders itself (a table).
pub fn write_list<T: Serialize + Sync + Named>(
    out: &mut dyn Write,
    format: Option<OutputFormat>,
    items: &[T],
) -> Result<bool> {
    match format {
        Some(OutputFormat::Json) => write_json_list(out, items)?,
        Some(OutputFormat::Yaml) => write_yaml_list(out, items)?,
        Some(OutputFormat::Name) => write_names(out, items)?,
        Some(OutputFormat::Table | OutputFormat::Wide) | None => return Ok(false),
    }
    Ok(true)
}

/// Writes one `kind/name` line per object (`-o name`).
pub fn write_names<T: Named>(out: &mut dyn Write, items: &[T]) -> Result<()> {
    let mut text = String::new();
    for item in items {
        text.push_str(&item.resource());
        text.push('\n');
    }
    write(out, &text)
}

/// What a changing command did (or, in a dry run, would do) to an object, as
/// `status.action` and the word after `kind/name` in table form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// A new object was written.
    Created,
    /// An existing object was changed.
    Configured,
    /// The object was already as asked.
    Unchanged,
    /// The owner already held this allocation: nothing was claimed.
    Existing,
    /// An allocation was deleted.
    Released,
    /// A pool was deleted.
    Deleted,
    /// `reconcile` without `--apply`: the owner no longer exists.
    Leaked,
    /// `reconcile --expired` without `--apply`: the lease lapsed more than its grace ago.
    Lapsed,
    /// `renew`: the lease runs until its new `expiresAt`.
    Renewed,
    /// `reconcile --apply`: the allocation changed since it was found leaked; kept.
    Skipped,
    /// A token was revoked.
    Revoked,
    /// Dry run: would be created.
    WouldCreate,
    /// Dry run: would be changed.
    WouldConfigure,
    /// Dry run: would be released.
    WouldRelease,
    /// Dry run: would be deleted.
    WouldDelete,
}

impl Action {
    /// The action's word, as JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Configured => "configured",
            Action::Unchanged => "unchanged",
            Action::Existing => "existing",
            Action::Released => "released",
            Action::Deleted => "deleted",
            Action::Leaked => "leaked",
            Action::Lapsed => "lapsed",
            Action::Renewed => "renewed",
            Action::Skipped => "skipped",
            Action::Revoked => "revoked",
            Action::WouldCreate => "would-create",
            Action::WouldConfigure => "would-configure",
            Action::WouldRelease => "would-release",
            Action::WouldDelete => "would-delete",
        }
    }

    /// The action a dry run reports instead of this one (itself when nothing would change).
    pub fn planned(self, dry_run: bool) -> Action {
        match (dry_run, self) {
            (false, a) => a,
            (true, Action::Created) => Action::WouldCreate,
            (true, Action::Configured) => Action::WouldConfigure,
            (true, Action::Released) => Action::WouldRelease,
            (true, Action::Deleted) => Action::WouldDelete,
            (true, a) => a,
        }
    }
}

impl From<crate::engine::subnet::Put> for Action {
    /// What `apply` and `subnet create` report for what a put did.
    fn from(put: crate::engine::subnet::Put) -> Action {
        use crate::engine::subnet::Put;
        match put {
            Put::Created => Action::Created,
            Put::Configured => Action::Configured,
            Put::Unchanged => Action::Unchanged,
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `status` of a changed object.
#[derive(Clone, Debug, Serialize)]
pub struct ChangeStatus {
    /// What was done.
    pub action: Action,
}

/// An object and what a command did to it: in JSON and YAML, the object's own fields with
/// `status: {action}` after them.
#[derive(Clone, Debug, Serialize)]
pub struct Change<T> {
    /// `kind/name`.
    #[serde(skip)]
    pub resource: String,
    /// The object as it now is (or, for a release or delete, as it was).
    #[serde(flatten)]
    pub object: T,
    /// What was done.
    pub status: ChangeStatus,
}

impl<T: Named> Change<T> {
    /// `object`, to which `action` was done.
    pub fn new(object: T, action: Action) -> Change<T> {
        Change {
            resource: object.resource(),
            object,
            status: ChangeStatus { action },
        }
    }
}

impl<T> Named for Change<T> {
    fn resource(&self) -> String {
        self.resource.clone()
    }
}

/// Writes what a changing command did: `kind/name action` lines in table form, `kind/name`
/// lines with `-o name`, and in JSON or YAML the changed objects with their `status`: one
/// object alone when the command changes one object by nature (`one`), else a [`List`].
pub fn write_changes<T: Serialize + Sync>(
    out: &mut dyn Write,
    format: Option<OutputFormat>,
    changes: &[Change<T>],
    one: bool,
) -> Result<()> {
    match (format, changes) {
        (Some(OutputFormat::Json), [change]) if one => write_json(out, change),
        (Some(OutputFormat::Yaml), [change]) if one => write(out, &yaml::encode(change)),
        (Some(OutputFormat::Json | OutputFormat::Yaml | OutputFormat::Name), _) => {
            write_list(out, format, changes).map(|_| ())
        }
        (Some(OutputFormat::Table | OutputFormat::Wide) | None, _) => {
            let mut text = String::new();
            for change in changes {
                text.push_str(&format!("{} {}\n", change.resource, change.status.action));
            }
            write(out, &text)
        }
    }
}

/// Pretty JSON with a trailing newline.
pub fn json<T: Serialize + ?Sized>(value: &T) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("manifests serialize to JSON");
    text.push('\n');
    text
}

/// Whether to colour output: `always` and `never` say so; `auto` colours a terminal
/// (`is_terminal`) unless `NO_COLOR` is set to anything but the empty string, as
/// <https://no-color.org> asks. An explicit `--color always` overrides `NO_COLOR`.
pub fn use_colour(
    choice: ColorChoice,
    is_terminal: bool,
    no_color: Option<&std::ffi::OsStr>,
) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => is_terminal && no_color.is_none_or(|v| v.is_empty()),
    }
}

/// Labels as a table cell: `k=v,k2=v2`, or `-` for none.
pub fn labels(labels: &std::collections::BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "-".to_owned();
    }
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

/// `-` for an absent value in a table cell.
pub fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// Prints each of `warnings` as one `warning:` line on stderr, where diagnostics go.
pub fn warn(warnings: &crate::engine::warning::Warnings) {
    for w in warnings.iter() {
        diagnostic(&format!("warning: {w}"));
    }
}

/// Prints `line` on stderr. Unlike `eprintln!`, a stderr nobody reads any more (`2>&1 |
/// head -1`) is no panic: the line is lost, and the exit code still says how it went.
pub fn diagnostic(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Has the reader of this process's stdout gone (a pipe or socket closed at its other end,
/// as `| head -1` does once it has its line)? A file or a terminal never has.
pub fn reader_gone() -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::OUT)];
    let polled = poll(&mut fds, Some(&Timespec::default()));
    matches!(polled, Ok(n) if n > 0) && fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP)
}

/// The error of a write to a stdout whose reader has gone.
pub fn closed() -> crate::error::Error {
    let source = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
    crate::error::Error::io(STDOUT, source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn a_list_rendered_in_chunks_is_the_list_rendered_whole() {
        #[derive(Serialize)]
        struct Item {
            n: usize,
            names: Vec<String>,
            // Named like the envelope's field: the split must find the envelope's own.
            items: Vec<usize>,
        }
        for len in [0, 1, 2047, 2048, 2049, 5000] {
            let items: Vec<Item> = (0..len)
                .map(|n| Item {
                    n,
                    names: vec![format!("a{n}"), "b\"c".into()],
                    items: vec![n],
                })
                .collect();
            let mut chunked = Vec::new();
            write_json_list(&mut chunked, &items).unwrap();
            let mut whole = Vec::new();
            write_json(&mut whole, &list(&items)).unwrap();
            assert_eq!(
                String::from_utf8(chunked).unwrap(),
                String::from_utf8(whole).unwrap(),
                "{len}"
            );
        }
    }

    #[test]
    fn a_list_is_kubectls_list_envelope() {
        let mut text = Vec::new();
        write_json_list(&mut text, &[1, 2]).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [1, 2]})
        );
        let mut empty = Vec::new();
        write_json_list(&mut empty, &[] as &[u8]).unwrap();
        assert_eq!(
            String::from_utf8(empty).unwrap(),
            "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": []\n}\n"
        );
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert!(use_colour(ColorChoice::Auto, true, None));
        assert!(use_colour(ColorChoice::Auto, true, empty));
        assert!(!use_colour(ColorChoice::Auto, true, set));
        assert!(!use_colour(ColorChoice::Auto, false, None));
        assert!(use_colour(ColorChoice::Always, false, set));
        assert!(!use_colour(ColorChoice::Never, true, None));
    }

    /// The rows of a table, `n` of them, whose owner column is `wide` characters from row
    /// `from` on.
    fn rows(n: usize, from: usize, wide: usize) -> Vec<Vec<String>> {
        (0..n)
            .map(|i| {
                let owner = format!("o{i:05}");
                let owner = if i >= from {
                    format!("{owner:é<wide$}")
                } else {
                    owner
                };
                vec![
                    (i + 1).to_string(),
                    owner,
                    "10.0.0.1".into(),
                    "created".into(),
                ]
            })
            .collect()
    }

    fn blocks(rows: Vec<Vec<String>>, no_headers: bool) -> String {
        const HEADERS: &[&str] = &["LINE", "OWNER", "ADDRESS", "RESULT"];
        let mut out = Vec::new();
        let mut table = Blocks::new(HEADERS, &[0], no_headers);
        for row in rows {
            table.push(&mut out, row).unwrap();
        }
        table.finish(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_table_of_one_block_is_the_table_printed_whole() {
        let headers = ["LINE", "OWNER", "ADDRESS", "RESULT"];
        for n in [0, 1, 2, Blocks::ROWS] {
            for no_headers in [false, true] {
                let whole = table(&headers, rows(n, n / 2, 9), &[0], no_headers);
                assert_eq!(blocks(rows(n, n / 2, 9), no_headers), whole, "{n} rows");
            }
        }
    }

    #[test]
    fn a_table_in_blocks_repeats_its_header_only_over_a_block_that_widened_a_column() {
        let n = 3 * Blocks::ROWS + 5;
        // The third block holds the first wider owner (the line numbers keep their width).
        let text = blocks(rows(n, 2 * Blocks::ROWS + 7, 12), false);
        let lines: Vec<&str> = text.lines().collect();
        let headers: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].starts_with("LINE"))
            .collect();
        assert_eq!(headers, [0, 2 * Blocks::ROWS + 1], "{text}");
        assert_eq!(lines.len(), n + 2);
        // Within each header's stretch, every row lines up under it.
        let column = |line: &str| line.find("10.0.0.1").or_else(|| line.find("ADDRESS"));
        let at = |l: &str| column(l).map(|b| l[..b].chars().count());
        for stretch in [&lines[..headers[1]], &lines[headers[1]..]] {
            let first = at(stretch[0]);
            assert!(stretch.iter().all(|l| at(l) == first), "{stretch:?}");
        }
        // Rows never lose width: the fourth block keeps the third's.
        assert_eq!(at(lines[n + 1]), at(lines[headers[1]]));
        assert!(
            blocks(rows(n, n, 0), true)
                .lines()
                .all(|l| !l.starts_with("LINE"))
        );
    }
}
