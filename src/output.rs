//! Rendering, in one place: tables (comfy-table), JSON and YAML streams.

use std::io::Write;

use comfy_table::presets::NOTHING;
use comfy_table::{CellAlignment, ContentArrangement, Table};
use serde::Serialize;

use crate::cli::ColorChoice;
use crate::error::{Error, Result};

/// Where command output goes; errors writing it (a closed pipe) carry this name.
pub const STDOUT: &str = "<stdout>";

/// Writes `text` to `out`.
pub fn write(out: &mut dyn Write, text: &str) -> Result<()> {
    out.write_all(text.as_bytes())
        .map_err(|e| Error::io(STDOUT, e))
}

/// Writes one line.
pub fn line(out: &mut dyn Write, text: &str) -> Result<()> {
    write(out, &format!("{text}\n"))
}

/// A plain, kubectl-style table: upper-case headers, columns separated by spaces, no
/// borders. Columns listed in `right` are right-aligned (numbers).
pub fn table(headers: &[&str], rows: Vec<Vec<String>>, right: &[usize]) -> String {
    let mut table = Table::new();
    table
        .load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.to_vec());
    for row in rows {
        table.add_row(row);
    }
    for &i in right {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    let mut text: String = table
        .lines()
        .map(|l| l.trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n");
    text.push('\n');
    text
}

/// Writes `value` as pretty JSON with a trailing newline, streamed rather than built in
/// memory first (`list -o json` of 50,000 allocations is tens of megabytes).
pub fn write_json<T: Serialize + ?Sized>(out: &mut dyn Write, value: &T) -> Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut out, value).map_err(|e| Error::io(STDOUT, e.into()))?;
    out.write_all(b"\n")
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(STDOUT, e))
}

/// Writes `items` as a pretty JSON array with a trailing newline: byte for byte what
/// [`write_json`] writes for the slice, but rendered in one chunk per core, which halves
/// `list -o json` of 50,000 allocations on two cores.
pub fn write_json_list<T: Serialize + Sync>(out: &mut dyn Write, items: &[T]) -> Result<()> {
    const MIN_CHUNK: usize = 1024;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if items.len() < 2 * MIN_CHUNK || threads == 1 {
        return write_json(out, items);
    }
    let chunk = items.len().div_ceil(threads).max(MIN_CHUNK);
    // The pretty printer writes an array as `[\n`, its elements indented one level and
    // separated by `,\n`, then `\n]`: chunks rendered as arrays of their own, stripped of
    // their brackets and joined by `,\n`, are the whole array's rendering.
    let parts: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    serde_json::to_vec_pretty(part).expect("manifests serialize to JSON")
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    let written: std::io::Result<()> = (|| {
        out.write_all(b"[\n")?;
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                out.write_all(b",\n")?;
            }
            out.write_all(&part[2..part.len() - 2])?;
        }
        out.write_all(b"\n]\n")?;
        out.flush()
    })();
    written.map_err(|e| Error::io(STDOUT, e))
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

/// `-` for an absent value in a table cell.
pub fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
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
        }
        for len in [0, 1, 2047, 2048, 2049, 5000] {
            let items: Vec<Item> = (0..len)
                .map(|n| Item {
                    n,
                    names: vec![format!("a{n}"), "b\"c".into()],
                })
                .collect();
            let mut chunked = Vec::new();
            write_json_list(&mut chunked, &items).unwrap();
            let mut whole = Vec::new();
            write_json(&mut whole, &items).unwrap();
            assert_eq!(
                String::from_utf8(chunked).unwrap(),
                String::from_utf8(whole).unwrap(),
                "{len}"
            );
        }
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
}
