//! The map as terminal text: rows of glyphs, the legend with counts, the usage figures.

use std::fmt::Write as _;

use super::kind::Kind;
use super::{GROUP, Layout, Map, SECTION};

impl Map {
    /// The map as terminal text: a title, rows of glyphs labelled with their first address
    /// (a space every 8 cells, a blank line between /24s of addresses, /16s of /24s or IPv6
    /// /120s; a region's row says what it is and its counts), the legend with counts, what
    /// the shades measure, the stored subnets in the view with their counts, and the usage
    /// figures. With `colour`, glyphs are wrapped in ANSI colour codes; without, the
    /// glyphs alone tell the kinds apart.
    pub fn text(&self, colour: bool) -> String {
        let paint = |kind: Kind, text: &str| {
            if colour {
                format!("\x1b[{}m{text}\x1b[0m", kind.style().ansi)
            } else {
                text.to_owned()
            }
        };
        let rows = self.rows();
        let width = rows.iter().map(|(_, l, _)| l.len()).max().unwrap_or(0);
        let mut text = format!("{}\n", self.title);
        let sparse = self.v6 && self.layout == Layout::Blocks;
        for (index, label, cells) in rows {
            if index > 0 && (index % SECTION == 0 || sparse) && self.layout != Layout::Regions {
                text.push('\n');
            }
            let _ = write!(text, "{label:<width$} ");
            for group in cells.chunks(GROUP) {
                text.push(' ');
                // One escape sequence per run of equal cells, not per cell.
                let mut rest = group;
                while let Some(head) = rest.first() {
                    let run = rest.iter().take_while(|c| c.kind == head.kind).count();
                    let glyphs: String =
                        std::iter::repeat_n(head.kind.style().glyph, run).collect();
                    text.push_str(&paint(head.kind, &glyphs));
                    rest = &rest[run..];
                }
            }
            if self.layout == Layout::Regions {
                let _ = write!(text, "  {}", cells[0].describe(self.v6, self.block_len()));
            }
            text.push('\n');
        }
        text.push('\n');
        let legend: Vec<String> = self
            .legend()
            .into_iter()
            .map(|(kind, n)| {
                let style = kind.style();
                format!(
                    "{} {} ({n})",
                    paint(kind, &style.glyph.to_string()),
                    kind.label(self.scale)
                )
            })
            .collect();
        text.push_str(&legend.join("  "));
        text.push('\n');
        if let Some(scale) = self.scale_line() {
            text.push_str(scale);
            text.push('\n');
        }
        for line in &self.subnet_lines {
            text.push_str(line);
            text.push('\n');
        }
        for line in self.usage_lines() {
            text.push_str(&line);
            text.push('\n');
        }
        text
    }
}
