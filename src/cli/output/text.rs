//! Plain text out: writing to stdout (a closed pipe named as such), kubectl-style tables
//! (comfy-table, no borders, numbers right-aligned) and blocks of `key: value` lines.

use std::io::Write;

use comfy_table::presets::NOTHING;
use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, Width};

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

/// A plain, kubectl-style table: upper-case headers (none with `--no-headers`), columns
/// separated by spaces, no borders. Columns listed in `right` are right-aligned (numbers).
pub fn table(
    headers: &[&str],
    rows: Vec<Vec<String>>,
    right: &[usize],
    no_headers: bool,
) -> String {
    let headers = (!no_headers).then_some(headers);
    render(&styled(headers, rows, right))
}

/// [`table`]'s table of `rows`.
fn styled(headers: Option<&[&str]>, rows: Vec<Vec<String>>, right: &[usize]) -> Table {
    let mut table = Table::new();
    table
        .load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled);
    if let Some(headers) = headers {
        table.set_header(headers.to_vec());
    }
    for row in rows {
        table.add_row(row);
    }
    dress(&mut table, right);
    table
}

/// Aligns `table`'s columns (those of `right` to the right) and pads each with two blanks.
fn dress(table: &mut Table, right: &[usize]) {
    for &i in right {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
}

/// The lines of `table`, each without its trailing blanks.
fn render(table: &Table) -> String {
    let mut text: String = table
        .lines()
        .map(|l| l.trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n");
    text.push('\n');
    text
}

/// A [`table`] printed as its rows come, a block of [`Blocks::ROWS`] rows at a time, so that
/// a table of any length holds one block in memory. Each block is printed as [`table`] would
/// print it, its columns at least as wide as they were in the blocks before, so a table of
/// one block is [`table`]'s, byte for byte. The header is printed over the first block, and
/// again over a block that widened a column (the rows above no longer line up with it).
pub struct Blocks {
    headers: &'static [&'static str],
    right: &'static [usize],
    no_headers: bool,
    /// Each column's width so far, but the last's (nothing follows it to line up).
    widths: Vec<u16>,
    rows: Vec<Vec<String>>,
    /// Whether a block was printed.
    started: bool,
}

impl Blocks {
    /// The most rows a block holds.
    pub const ROWS: usize = 1000;

    /// A table of `headers` (see [`table`]), nothing printed yet.
    pub fn new(
        headers: &'static [&'static str],
        right: &'static [usize],
        no_headers: bool,
    ) -> Blocks {
        let mut widths = vec![0; headers.len().saturating_sub(1)];
        if !no_headers {
            let header = styled(Some(headers), Vec::new(), &[]);
            for (w, h) in widths.iter_mut().zip(header.column_max_content_widths()) {
                *w = h;
            }
        }
        Blocks {
            headers,
            right,
            no_headers,
            widths,
            rows: Vec::with_capacity(Self::ROWS),
            started: false,
        }
    }

    /// Adds `row`, printing the block it fills.
    pub fn push(&mut self, out: &mut dyn Write, row: Vec<String>) -> Result<()> {
        self.rows.push(row);
        if self.rows.len() < Self::ROWS {
            return Ok(());
        }
        self.block(out)
    }

    /// Prints the rows not printed yet; a table of no rows at all is its header alone.
    pub fn finish(&mut self, out: &mut dyn Write) -> Result<()> {
        if self.started && self.rows.is_empty() {
            return Ok(());
        }
        self.block(out)
    }

    fn block(&mut self, out: &mut dyn Write) -> Result<()> {
        let rows = std::mem::replace(&mut self.rows, Vec::with_capacity(Self::ROWS));
        let mut table = styled(None, rows, self.right);
        let mut grown = false;
        for (w, c) in self
            .widths
            .iter_mut()
            .zip(table.column_max_content_widths())
        {
            grown |= c > *w;
            *w = (*w).max(c);
        }
        if !self.no_headers && (!self.started || grown) {
            // A block of no rows has its columns from the header alone.
            table.set_header(self.headers.to_vec());
            dress(&mut table, self.right);
        }
        for (i, &width) in self.widths.iter().enumerate() {
            if let Some(column) = table.column_mut(i) {
                // The bound counts the padding.
                let width = Width::Fixed(width.saturating_add(2));
                column.set_constraint(ColumnConstraint::LowerBoundary(width));
            }
        }
        self.started = true;
        write(out, &render(&table))?;
        out.flush().map_err(|e| Error::io(STDOUT, e))
    }
}
