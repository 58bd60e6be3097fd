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
