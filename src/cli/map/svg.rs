//! The map as a standalone SVG document: the same grid as the text, each cell a `<rect>`
//! with a tooltip, a legend of swatches and the usage figures, on a canvas that fits its
//! longest line.

use std::fmt::Write as _;

use super::cells::Cell;
use super::kind::{EMPTY_OUTLINE, Kind};
use super::{GROUP, Layout, Map, SECTION};
use crate::model::candidates::address;

/// The outline of a block that holds a stored subnet: dark red, apart from the blue ramp.
const SUBNET_OUTLINE: &str = "#b31d28";

/// The pitch of a cell of the SVG map, in pixels.
pub(super) const CELL: usize = 12;
/// The side of a cell's square.
pub(super) const SIZE: usize = 10;
/// The small gap every [`GROUP`] cells.
const GROUP_GAP: usize = 6;
/// The larger gap every [`SECTION`] cells.
const SECTION_GAP: usize = 10;
/// The margin around everything.
pub(super) const MARGIN: usize = 10;
/// The height of a line of text.
pub(super) const LINE: usize = 18;
/// The narrowest width of the row labels.
const LABEL: usize = 110;
/// The space between a region's cell and its words.
const REGION_GAP: usize = 4;
/// The advance of a character of 12 px monospace text (0.6 em), rounded up.
pub(super) const CHAR: usize = 8;

/// Where the SVG map's cells go, for rows of `per_row` cells labelled in `label` pixels,
/// `pitch` pixels apart.
struct Grid {
    per_row: usize,
    label: usize,
    pitch: usize,
}

impl Grid {
    /// The left edge of the `i`th cell of a row.
    fn x_of(&self, i: usize) -> usize {
        MARGIN + self.label + i * CELL + (i / GROUP) * GROUP_GAP
    }

    /// The top edge of row `row`.
    fn y_of(&self, row: usize) -> usize {
        let grid_top = MARGIN + LINE;
        grid_top + row * self.pitch + (row * self.per_row / SECTION) * SECTION_GAP
    }
}

impl Map {
    /// The map as a standalone SVG document: the same grid, each cell a `<rect>` of class
    /// `cell KIND` with a `<title>` tooltip (a region's words written beside it too), then a
    /// legend (swatches of class `swatch KIND`) and the usage figures.
    pub fn svg(&self) -> String {
        let rows = self.rows();
        let longest_label = rows.iter().map(|(_, l, _)| l.len()).max().unwrap_or(0);
        let grid = Grid {
            per_row: self.per_row(),
            label: LABEL.max(longest_label * CHAR + CHAR),
            // A region's row is a line of text beside its cell.
            pitch: if self.layout == Layout::Regions {
                LINE
            } else {
                CELL
            },
        };
        let regions: Vec<String> = match self.layout {
            Layout::Regions => rows
                .iter()
                .map(|(_, _, cells)| cells[0].describe(self.v6, self.block_len()))
                .collect(),
            _ => Vec::new(),
        };
        let legend = self.legend();
        let legend_top = grid.y_of(rows.len()) + LINE;
        let usage_top = legend_top + legend.len() * LINE;
        // Under the usage: what the shades measure and the stored subnets, plain lines.
        let notes: Vec<String> = self
            .scale_line()
            .map(str::to_owned)
            .into_iter()
            .chain(self.subnet_lines.iter().cloned())
            .collect();
        let notes_top = usage_top + self.usage.len() * LINE;
        let height = notes_top + notes.len() * LINE + MARGIN;
        // Wide enough for the grid and for the longest line of text (title, legend, usage,
        // regions), at a monospace advance of 0.6 em rounded up to 8 px a character at 12 px.
        let mut usage = self.usage_lines();
        let legend_lines: Vec<String> = legend
            .iter()
            .map(|(kind, n)| {
                let style = kind.style();
                format!("{} {} ({n})", style.glyph, kind.label(self.scale))
            })
            .collect();
        usage.extend(notes);
        let longest = std::iter::once(self.title.chars().count())
            .chain(usage.iter().map(|l| l.chars().count()))
            .chain(legend_lines.iter().map(|l| l.chars().count() + 3))
            .max()
            .unwrap_or(0);
        let grid_right = grid.x_of(grid.per_row.min(self.cells.len()).max(1) - 1) + SIZE;
        let regions_right = regions
            .iter()
            .map(|r| grid.x_of(1) + REGION_GAP + r.chars().count() * CHAR)
            .max()
            .unwrap_or(0);
        let width = (grid_right.max(regions_right) + MARGIN).max(MARGIN + longest * CHAR + MARGIN);
        let mut svg = self.svg_head(width, height);
        self.svg_cells(&mut svg, &grid, rows, &regions);
        let items: Vec<(&str, Kind, String)> = legend
            .iter()
            .zip(legend_lines)
            .map(|((kind, _), line)| (kind.class(), *kind, line))
            .collect();
        swatch_lines(&mut svg, legend_top, &items);
        // The usage, then the notes, a line each.
        for (i, line) in usage.iter().enumerate() {
            let _ = writeln!(
                svg,
                r#"<text x="{MARGIN}" y="{}">{}</text>"#,
                usage_top + i * LINE + SIZE / 2,
                escape(line)
            );
        }
        svg.push_str("</svg>\n");
        svg
    }

    /// The SVG document up to its grid ([`document_head`]), with the outline of a block that
    /// holds a stored subnet.
    fn svg_head(&self, width: usize, height: usize) -> String {
        let subnet = format!(".in-subnet {{ stroke: {SUBNET_OUTLINE}; stroke-width: 2; }}\n");
        document_head(&self.title, width, height, self.kinds(), &subnet)
    }

    /// Appends the grid to `svg`: each row's label, then its cells with their tooltips, and
    /// a region's words (`regions`, one per row) after its cell.
    fn svg_cells(
        &self,
        svg: &mut String,
        grid: &Grid,
        rows: Vec<(usize, String, &[Cell])>,
        regions: &[String],
    ) {
        for (row, (_, label, cells)) in rows.into_iter().enumerate() {
            let y = grid.y_of(row);
            let _ = writeln!(
                svg,
                r#"<text class="label" x="{MARGIN}" y="{}">{label}</text>"#,
                y + SIZE / 2
            );
            for (i, cell) in cells.iter().enumerate() {
                let tip = self.tooltip(cell, &label);
                // A block that holds a stored subnet is outlined (its name in the tooltip
                // and under the grid).
                let outlined = if cell.fill.is_some() && cell.net.is_none() && cell.subnet.is_some()
                {
                    " in-subnet"
                } else {
                    ""
                };
                let _ = writeln!(
                    svg,
                    r#"<rect class="cell {}{outlined}" {}><title>{}</title></rect>"#,
                    cell.kind.class(),
                    square(cell.kind, grid.x_of(i), y),
                    escape(&tip)
                );
            }
            if let Some(words) = regions.get(row) {
                let _ = writeln!(
                    svg,
                    r#"<text class="region" x="{}" y="{}">{}</text>"#,
                    grid.x_of(1) + REGION_GAP,
                    y + SIZE / 2,
                    escape(words)
                );
            }
        }
    }

    /// A cell's tooltip: an allocated address's holder, else what the cell is (a region
    /// prefixed with its prefix, `label`).
    fn tooltip(&self, cell: &Cell, label: &str) -> String {
        let start = address(self.v6, cell.start);
        match self.owners.get(&start) {
            Some(owner) if cell.kind == Kind::Allocated && cell.fill.is_none() => {
                format!("{start} allocated to {owner}")
            }
            _ if self.layout == Layout::Regions => {
                format!("{label}: {}", cell.describe(self.v6, self.block_len()))
            }
            _ => cell.describe(self.v6, self.block_len()),
        }
    }
}

/// An SVG document of `width` by `height` pixels up to its drawing: the XML declaration,
/// the `<svg>` element, its title, the style of each of `kinds` (an empty block outlined)
/// and the `css` rules given, the white background and the bold `title` line. Text keeps its
/// spaces, so columns line up.
pub(super) fn document_head(
    title: &str,
    width: usize,
    height: usize,
    kinds: &[Kind],
    css: &str,
) -> String {
    let mut svg = String::new();
    let _ = writeln!(svg, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="12" xml:space="preserve">"#
    );
    let _ = writeln!(svg, "<title>{}</title>", escape(title));
    svg.push_str("<style>\n");
    svg.push_str("text { fill: #24292e; dominant-baseline: middle; white-space: pre; }\n");
    for kind in kinds {
        let style = kind.style();
        let outline = if *kind == Kind::Empty {
            format!(" stroke: {EMPTY_OUTLINE}; stroke-width: 1;")
        } else {
            String::new()
        };
        let _ = writeln!(svg, ".{} {{ fill: {};{outline} }}", style.class, style.fill);
    }
    svg.push_str(css);
    svg.push_str("</style>\n");
    let _ = writeln!(
        svg,
        r#"<rect width="{width}" height="{height}" fill="white"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN}" y="{}" font-weight="bold">{}</text>"#,
        MARGIN + LINE / 2,
        escape(title)
    );
    svg
}

/// Appends lines to `svg` from `top` down, each `(class, kind, words)`: a swatch of that
/// class (shaped as a cell of that kind is: an empty one inset for its outline), then the
/// words. A legend, or a supernet's prefixes.
pub(super) fn swatch_lines(svg: &mut String, top: usize, items: &[(&str, Kind, String)]) {
    for (i, (class, kind, line)) in items.iter().enumerate() {
        let y = top + i * LINE;
        let _ = writeln!(
            svg,
            r#"<rect class="swatch {class}" {}/>"#,
            square(*kind, MARGIN, y)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}">{}</text>"#,
            MARGIN + 2 * CELL,
            y + SIZE / 2,
            escape(line)
        );
    }
}

/// The geometry of a cell's square at `x`, `y`: an outlined one (empty) is inset by half a
/// pixel, so its 1-pixel outline covers whole pixels inside the square, as sharp as a fill.
fn square(kind: Kind, x: usize, y: usize) -> String {
    if kind == Kind::Empty {
        format!(
            r#"x="{x}.5" y="{y}.5" width="{}" height="{}""#,
            SIZE - 1,
            SIZE - 1
        )
    } else {
        format!(r#"x="{x}" y="{y}" width="{SIZE}" height="{SIZE}""#)
    }
}

/// Escapes text for XML character data and attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            c => escaped.push(c),
        }
    }
    escaped
}
