//! The address map of `pool show --map`: a pool, or one subnet of it, drawn cell by cell as
//! terminal text or as an SVG document. Pure: it takes the pool and its taken addresses and
//! returns strings; deciding whether to colour is the caller's business.

use std::fmt::Write as _;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::model::PoolSpec;
use crate::model::candidates::{
    Candidates, Span, Usage, address, host_span, ordinal, readable_count, span_len,
};

/// IPv4 views of at most this prefix length (1024 addresses) get one cell per address;
/// larger ones one cell per /24.
const ADDRESS_CELLS_FROM: u8 = 22;

/// IPv6 views of at most this prefix length (256 addresses) get one cell per address;
/// larger ones one cell per /120 that holds an allocation (a /64 has 2^56 of them: only the
/// ones in use are drawn, never millions of cells).
const ADDRESS_CELLS_FROM_V6: u8 = 120;

/// The largest IPv4 view drawn at all: a /12 is 4096 cells of one /24 each.
pub const LARGEST_VIEW: u8 = 12;

/// At most this many cells of /120s are drawn for an IPv6 view.
const MOST_V6_BLOCKS: usize = 4096;

/// Can `view` be drawn? An IPv4 view up to a /12; any IPv6 view.
pub fn drawable(view: IpNet) -> bool {
    view.addr().is_ipv6() || view.prefix_len() >= LARGEST_VIEW
}

/// Cells that start a new section (a blank line, a gap): a /24 of addresses, a /16 of /24s.
const SECTION: usize = 256;

/// Cells between the small gaps of a row.
const GROUP: usize = 8;

/// What one cell shows: the state of one address, or how full one /24 is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An address some allocation holds (whatever else it is).
    Allocated,
    /// A candidate nobody holds.
    Free,
    /// The pool's gateway.
    Gateway,
    /// Excluded by the pool.
    Excluded,
    /// The network or broadcast address of the pool or of the `--within` subnet.
    NetworkBroadcast,
    /// A /24 without a single candidate.
    NoCandidates,
    /// A /24 with candidates, none allocated.
    Empty,
    /// A /24 up to a quarter full.
    Quarter,
    /// A /24 up to half full.
    Half,
    /// A /24 up to three quarters full.
    ThreeQuarters,
    /// A /24 more than three quarters full, with a candidate left.
    AlmostFull,
    /// A /24 with every candidate allocated.
    Full,
}

/// The legend of a map of addresses, in order.
const ADDRESS_KINDS: [Kind; 5] = [
    Kind::Allocated,
    Kind::Free,
    Kind::Gateway,
    Kind::Excluded,
    Kind::NetworkBroadcast,
];

/// The legend of a map of /24s, in order.
const BLOCK_KINDS: [Kind; 7] = [
    Kind::Empty,
    Kind::Quarter,
    Kind::Half,
    Kind::ThreeQuarters,
    Kind::AlmostFull,
    Kind::Full,
    Kind::NoCandidates,
];

/// How a kind of cell looks.
struct Style {
    /// Distinct per kind of a legend, so the map reads without colour.
    glyph: char,
    /// The SVG class of its cells.
    class: &'static str,
    /// The legend's words.
    label: &'static str,
    /// ANSI SGR parameters.
    ansi: &'static str,
    /// SVG fill.
    fill: &'static str,
}

impl Kind {
    fn style(self) -> Style {
        let (glyph, class, label, ansi, fill) = match self {
            Kind::Allocated => ('#', "allocated", "allocated", "1;31", "#d73a49"),
            Kind::Free => ('.', "free", "free", "32", "#a2d9a9"),
            Kind::Gateway => ('G', "gateway", "gateway", "1;34", "#0366d6"),
            Kind::Excluded => ('x', "excluded", "excluded", "33", "#e3b341"),
            Kind::NetworkBroadcast => (
                '-',
                "network-broadcast",
                "network/broadcast",
                "35",
                "#8a63d2",
            ),
            // The shades of /24s are one sequential ramp (from ColorBrewer's YlGnBu), light
            // to dark as they fill: told apart by lightness alone, so by every colour-blind
            // reader too (`neighbouring_shades_differ_in_lightness` checks the steps). No
            // candidates is a neutral grey off the ramp.
            Kind::NoCandidates => ('x', "no-candidates", "no candidates", "35", "#d9d9d9"),
            Kind::Empty => ('.', "empty", "empty", "32", "#ffffd9"),
            Kind::Quarter => (':', "quarter", "up to 25% used", "1;32", "#7fcdbb"),
            Kind::Half => ('+', "half", "up to 50% used", "33", "#1d91c0"),
            Kind::ThreeQuarters => ('*', "three-quarters", "up to 75% used", "1;33", "#225ea8"),
            Kind::AlmostFull => ('%', "almost-full", "over 75% used", "31", "#253494"),
            Kind::Full => ('#', "full", "full", "1;31", "#081d58"),
        };
        Style {
            glyph,
            class,
            label,
            ansi,
            fill,
        }
    }

    /// The SVG class of cells of this kind (`allocated`, `free`, `network-broadcast`, …).
    pub fn class(self) -> &'static str {
        self.style().class
    }

    /// The shade of a /24 that has `candidates` candidates, `held` of them allocated.
    fn of_block(held: u64, candidates: u64) -> Kind {
        match (held, candidates) {
            (_, 0) => Kind::NoCandidates,
            (0, _) => Kind::Empty,
            (h, c) if h >= c => Kind::Full,
            (h, c) if 4 * h <= c => Kind::Quarter,
            (h, c) if 2 * h <= c => Kind::Half,
            (h, c) if 4 * h <= 3 * c => Kind::ThreeQuarters,
            _ => Kind::AlmostFull,
        }
    }
}

/// One cell: its kind and, for a /24, how many of its candidates are allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cell {
    /// Its first address, as an ordinal.
    start: u128,
    kind: Kind,
    /// `(held, candidates)` of a /24; `None` for an address.
    fill: Option<(u64, u64)>,
}

/// A drawn pool: a grid of cells over `view`, with the usage figures that go under it.
#[derive(Clone, Debug)]
pub struct Map {
    /// What is drawn, as the first line says it.
    title: String,
    /// Addresses per cell: 1, or 256 for an IPv4 view larger than a /22 or an IPv6 view
    /// larger than a /120.
    step: u128,
    /// IPv6 (else IPv4).
    v6: bool,
    cells: Vec<Cell>,
    /// `(what, usage)` lines under the legend: the pool's, then the subnet's.
    usage: Vec<(String, Usage)>,
    /// Who holds each allocated address, for the SVG's tooltips (see [`Map::with_owners`]).
    owners: std::collections::HashMap<IpAddr, String>,
}

impl Map {
    /// Draws pool `name` with spec `spec`, whose allocations hold `taken`, over `within`
    /// (which the caller checked lies inside the pool and is no larger than a
    /// [`LARGEST_VIEW`]) or the whole pool.
    ///
    /// An address is allocated if an allocation holds it, whatever else it is; else the
    /// gateway, the network or broadcast address (of the pool, or of `within`), excluded, or
    /// free, in that order. A /24 is shaded by the share of its candidates (as
    /// `allocate --within` would see them) that are allocated.
    pub fn new(name: &str, spec: &PoolSpec, within: Option<IpNet>, taken: &[IpAddr]) -> Map {
        let view = within.unwrap_or(spec.cidr);
        let v6 = view.addr().is_ipv6();
        let mut sorted: Vec<u128> = taken
            .iter()
            .filter(|a| a.is_ipv6() == v6)
            .map(|&a| ordinal(a))
            .collect();
        sorted.sort_unstable();
        sorted.dedup();
        let (first, last) = (ordinal(view.network()), ordinal(view.broadcast()));
        let per_address = view.prefix_len()
            >= if v6 {
                ADDRESS_CELLS_FROM_V6
            } else {
                ADDRESS_CELLS_FROM
            };
        let (step, cells, sparse) = if per_address {
            let cells = (first..=last)
                .map(|a| Cell {
                    start: a,
                    kind: address_kind(spec, view, &sorted, a),
                    fill: None,
                })
                .collect();
            (1, cells, false)
        } else {
            (256, block_cells(spec, view, within.is_some(), &sorted), v6)
        };
        let mut usage = vec![(format!("pool {}", spec.cidr), Usage::of(spec, taken))];
        let mut title = format!("{name} {}", spec.cidr);
        if let Some(w) = within {
            usage.push((format!("within {w}"), Usage::within(spec, w, taken)));
            title.push_str(&format!(", within {w}"));
        }
        title.push_str(match (step, sparse) {
            (1, _) => ": one cell per address",
            (_, true) => ": one cell per /120 that holds an allocation",
            _ => ": one cell per /24",
        });
        Map {
            title,
            step,
            v6,
            cells,
            usage,
            owners: Default::default(),
        }
    }

    /// Is each cell one address (not a /24)?
    pub fn per_address(&self) -> bool {
        self.step == 1
    }

    /// Names the holder of each address (`KIND/NAME (uid U)`) in the tooltips of the SVG's
    /// cells; an allocated address without one says `allocated` alone.
    pub fn with_owners(mut self, owners: impl IntoIterator<Item = (IpAddr, String)>) -> Map {
        self.owners = owners.into_iter().collect();
        self
    }

    /// The kinds of the legend, with how many cells of each the map has.
    fn legend(&self) -> Vec<(Kind, usize)> {
        let kinds: &[Kind] = if self.step == 1 {
            &ADDRESS_KINDS
        } else {
            &BLOCK_KINDS
        };
        kinds
            .iter()
            .map(|&k| (k, self.cells.iter().filter(|c| c.kind == k).count()))
            .collect()
    }

    /// Cells per row: 32, or 16 when there are no more than 16.
    fn per_row(&self) -> usize {
        if self.cells.len() > 16 { 32 } else { 16 }
    }

    /// The rows: the index of their first cell, its address, and their cells. A row ends
    /// after [`Map::per_row`] cells, or where the next cell does not follow on (a sparse map
    /// of IPv6 /120s).
    fn rows(&self) -> Vec<(usize, IpAddr, &[Cell])> {
        let per_row = self.per_row();
        let mut rows = Vec::new();
        let mut start = 0;
        for i in 1..=self.cells.len() {
            let follows = self
                .cells
                .get(i)
                .is_some_and(|c| c.start == self.cells[i - 1].start + self.step);
            if i == self.cells.len() || i - start == per_row || !follows {
                let cells = &self.cells[start..i];
                rows.push((start, address(self.v6, cells[0].start), cells));
                start = i;
            }
        }
        rows
    }

    /// The prefix length of one block cell: /24 or /120.
    fn block_len(&self) -> u8 {
        if self.v6 { 120 } else { 24 }
    }

    /// The usage figures, a line each.
    fn usage_lines(&self) -> Vec<String> {
        self.usage
            .iter()
            .map(|(what, u)| {
                format!(
                    "{what}: {} candidates, {} allocated, {} free ({:.1}% used)",
                    readable_count(u.candidates),
                    u.allocated,
                    readable_count(u.free),
                    u.percent_used
                )
            })
            .collect()
    }

    /// The map as terminal text: a title, rows of glyphs labelled with their first address
    /// (a space every 8 cells, a blank line between /24s of addresses or /16s of /24s), the
    /// legend with counts, and the usage figures. With `colour`, glyphs are wrapped in ANSI
    /// colour codes; without, the glyphs alone tell the kinds apart.
    pub fn text(&self, colour: bool) -> String {
        let paint = |kind: Kind, text: &str| {
            if colour {
                format!("\x1b[{}m{text}\x1b[0m", kind.style().ansi)
            } else {
                text.to_owned()
            }
        };
        let width = self
            .rows()
            .iter()
            .map(|(_, a, _)| a.to_string().len())
            .max()
            .unwrap_or(0);
        let mut text = format!("{}\n", self.title);
        for (index, addr, cells) in self.rows() {
            if index > 0 && (index % SECTION == 0 || self.v6 && self.step > 1) {
                text.push('\n');
            }
            let _ = write!(text, "{addr:<width$} ");
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
                    style.label
                )
            })
            .collect();
        text.push_str(&legend.join("  "));
        text.push('\n');
        for line in self.usage_lines() {
            text.push_str(&line);
            text.push('\n');
        }
        text
    }

    /// The map as a standalone SVG document: the same grid, each cell a `<rect>` of class
    /// `cell KIND` with a `<title>` tooltip, then a legend (swatches of class `swatch KIND`)
    /// and the usage figures.
    pub fn svg(&self) -> String {
        let grid = Grid {
            per_row: self.per_row(),
        };
        let rows = self.rows();
        let legend = self.legend();
        let legend_top = grid.y_of(rows.len()) + LINE;
        let usage_top = legend_top + legend.len() * LINE;
        let height = usage_top + self.usage.len() * LINE + MARGIN;
        // Wide enough for the grid and for the longest line of text (title, legend, usage),
        // at a monospace advance of 0.6 em rounded up to 8 px a character at 12 px.
        let usage = self.usage_lines();
        let legend_lines: Vec<String> = legend
            .iter()
            .map(|(kind, n)| {
                let style = kind.style();
                format!("{} {} ({n})", style.glyph, style.label)
            })
            .collect();
        let longest = std::iter::once(self.title.chars().count())
            .chain(usage.iter().map(|l| l.chars().count()))
            .chain(legend_lines.iter().map(|l| l.chars().count() + 3))
            .max()
            .unwrap_or(0);
        let width = (grid.x_of(grid.per_row.min(self.cells.len()).max(1) - 1) + SIZE + MARGIN)
            .max(MARGIN + longest * 8 + MARGIN);
        let mut svg = self.svg_head(width, height);
        self.svg_cells(&mut svg, &grid, rows);
        for (i, ((kind, _), line)) in legend.iter().zip(&legend_lines).enumerate() {
            let y = legend_top + i * LINE;
            let style = kind.style();
            let _ = writeln!(
                svg,
                r#"<rect class="swatch {}" x="{MARGIN}" y="{y}" width="{SIZE}" height="{SIZE}"/>"#,
                style.class
            );
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}">{}</text>"#,
                MARGIN + 2 * CELL,
                y + SIZE / 2,
                escape(line)
            );
        }
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

    /// The SVG document up to its grid: the XML declaration, the `<svg>` element of
    /// `width` by `height` pixels, its title, the style of each kind, the background and the
    /// title line.
    fn svg_head(&self, width: usize, height: usize) -> String {
        let mut svg = String::new();
        let _ = writeln!(svg, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">"#
        );
        let _ = writeln!(svg, "<title>{}</title>", escape(&self.title));
        svg.push_str("<style>\n");
        svg.push_str("text { fill: #24292e; dominant-baseline: middle; }\n");
        let kinds: &[Kind] = if self.step == 1 {
            &ADDRESS_KINDS
        } else {
            &BLOCK_KINDS
        };
        for kind in kinds {
            let style = kind.style();
            let _ = writeln!(svg, ".{} {{ fill: {}; }}", style.class, style.fill);
        }
        svg.push_str("</style>\n");
        let _ = writeln!(
            svg,
            r#"<rect width="{width}" height="{height}" fill="white"/>"#
        );
        let _ = writeln!(
            svg,
            r#"<text x="{MARGIN}" y="{}" font-weight="bold">{}</text>"#,
            MARGIN + LINE / 2,
            escape(&self.title)
        );
        svg
    }

    /// Appends the grid to `svg`: each row's label, then its cells with their tooltips.
    fn svg_cells(&self, svg: &mut String, grid: &Grid, rows: Vec<(usize, IpAddr, &[Cell])>) {
        let block_len = self.block_len();
        for (row, (_, addr, cells)) in rows.into_iter().enumerate() {
            let y = grid.y_of(row);
            let _ = writeln!(
                svg,
                r#"<text class="label" x="{MARGIN}" y="{}">{addr}</text>"#,
                y + SIZE / 2
            );
            for (i, cell) in cells.iter().enumerate() {
                let start = address(self.v6, cell.start);
                let style = cell.kind.style();
                let tip = match (cell.fill, self.owners.get(&start)) {
                    (None, Some(owner)) if cell.kind == Kind::Allocated => {
                        format!("{start} allocated to {owner}")
                    }
                    (None, _) => format!("{start} {}", style.label),
                    (Some((held, count)), _) => {
                        format!("{start}/{block_len}: {held} of {count} candidates allocated")
                    }
                };
                let _ = writeln!(
                    svg,
                    r#"<rect class="cell {}" x="{}" y="{y}" width="{SIZE}" height="{SIZE}"><title>{}</title></rect>"#,
                    style.class,
                    grid.x_of(i),
                    escape(&tip)
                );
            }
        }
    }
}

/// The pitch of a cell of the SVG map, in pixels.
const CELL: usize = 12;
/// The side of a cell's square.
const SIZE: usize = 10;
/// The small gap every [`GROUP`] cells.
const GROUP_GAP: usize = 6;
/// The larger gap every [`SECTION`] cells.
const SECTION_GAP: usize = 10;
/// The margin around everything.
const MARGIN: usize = 10;
/// The height of a line of text.
const LINE: usize = 18;
/// The width of the row labels.
const LABEL: usize = 110;

/// Where the SVG map's cells go, for rows of `per_row` cells.
struct Grid {
    per_row: usize,
}

impl Grid {
    /// The left edge of the `i`th cell of a row.
    fn x_of(&self, i: usize) -> usize {
        MARGIN + LABEL + i * CELL + (i / GROUP) * GROUP_GAP
    }

    /// The top edge of row `row`.
    fn y_of(&self, row: usize) -> usize {
        let grid_top = MARGIN + LINE;
        grid_top + row * CELL + (row * self.per_row / SECTION) * SECTION_GAP
    }
}

/// The cells of one /24 (or IPv6 /120) each over `view` of pool `spec` (`within`: a view
/// narrower than the pool), shaded by how many of their candidates the sorted `taken`
/// ordinals hold. An IPv6 view is sparse: only the /120s in use, in order (the first one
/// when none is), at most [`MOST_V6_BLOCKS`].
fn block_cells(spec: &PoolSpec, view: IpNet, within: bool, taken: &[u128]) -> Vec<Cell> {
    let v6 = view.addr().is_ipv6();
    let (first, last) = (ordinal(view.network()), ordinal(view.broadcast()));
    let mut candidates = Candidates::of_pool(spec);
    if within {
        candidates = candidates.within(view);
    }
    let spans = candidates.spans();
    let block = |lo: u128| {
        let hi = lo + 255;
        let count = overlap(&spans, lo, hi);
        let held = taken[taken.partition_point(|&a| a < lo)..]
            .iter()
            .take_while(|&&a| a <= hi)
            .filter(|&&a| candidates.contains(address(v6, a)))
            .count() as u64;
        Cell {
            start: lo,
            kind: Kind::of_block(held, count),
            fill: Some((held, count)),
        }
    };
    if !v6 {
        return (first..=last).step_by(256).map(block).collect();
    }
    let mut starts: Vec<u128> = taken
        .iter()
        .filter(|&&a| first <= a && a <= last)
        .map(|&a| a & !0xff)
        .collect();
    starts.dedup();
    if starts.is_empty() {
        starts.push(first);
    }
    starts.into_iter().take(MOST_V6_BLOCKS).map(block).collect()
}

/// The kind of address `a` of `view`, a subnet of pool `spec`; `taken` is sorted.
fn address_kind(spec: &PoolSpec, view: IpNet, taken: &[u128], a: u128) -> Kind {
    let in_hosts = |(lo, hi): Span| lo <= a && a <= hi;
    let addr = address(view.addr().is_ipv6(), a);
    if taken.binary_search(&a).is_ok() {
        Kind::Allocated
    } else if spec.gateway == Some(addr) {
        Kind::Gateway
    } else if !in_hosts(host_span(spec.cidr)) || !in_hosts(host_span(view)) {
        Kind::NetworkBroadcast
    } else if spec.exclude.iter().any(|e| e.net().contains(&addr)) {
        Kind::Excluded
    } else {
        Kind::Free
    }
}

/// How many addresses of the sorted, disjoint `spans` lie in `lo..=hi`.
fn overlap(spans: &[Span], lo: u128, hi: u128) -> u64 {
    let start = spans.partition_point(|&(_, shi)| shi < lo);
    spans[start..]
        .iter()
        .take_while(|&&(slo, _)| slo <= hi)
        .map(|&(slo, shi)| span_len(&(slo.max(lo), shi.min(hi))) as u64)
        .sum()
}

/// Escapes text for XML character data and attribute values.
fn escape(text: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::candidates::testing::{addrs, spec};

    fn glyphs(map: &Map) -> String {
        map.cells.iter().map(|c| c.kind.style().glyph).collect()
    }

    #[test]
    fn each_address_gets_its_kind() {
        let map = Map::new(
            "p",
            &spec("10.0.0.0/28", Some("10.0.0.1"), &["10.0.0.4/31"]),
            None,
            &addrs(&["10.0.0.2", "10.0.0.5"]),
        );
        assert_eq!(glyphs(&map), "-G#.x#.........-");
    }

    #[test]
    fn within_marks_its_own_network_and_broadcast() {
        let map = Map::new(
            "p",
            &spec("10.0.0.0/24", None, &[]),
            Some("10.0.0.16/29".parse().unwrap()),
            &addrs(&["10.0.0.18"]),
        );
        assert_eq!(glyphs(&map), "-.#....-");
        assert_eq!(map.usage.len(), 2);
        assert_eq!(map.usage[1].1.candidates, 6);
        assert_eq!(map.usage[1].1.allocated, 1);
    }

    #[test]
    fn slash_31_has_no_network_or_broadcast() {
        let map = Map::new("p", &spec("10.0.0.0/31", None, &[]), None, &[]);
        assert_eq!(glyphs(&map), "..");
    }

    #[test]
    fn larger_than_a_slash_22_is_one_cell_per_slash_24() {
        let mut taken = addrs(&["10.0.0.5"]);
        taken.extend((0..=255).map(|i| IpAddr::from([10u8, 0, 2, i])));
        taken.extend((1..=100).map(|i| IpAddr::from([10u8, 0, 3, i])));
        let map = Map::new(
            "p",
            &spec("10.0.0.0/21", Some("10.0.0.1"), &["10.0.4.0/24"]),
            None,
            &taken,
        );
        assert_eq!(map.step, 256);
        assert_eq!(glyphs(&map), ":.#+x...");
        // 10.0.0.0/24 loses the network address and the gateway; 10.0.1.0/24 loses none.
        assert_eq!(map.cells[0].fill, Some((1, 254)));
        assert_eq!(map.cells[1].fill, Some((0, 256)));
        assert_eq!(map.cells[7].fill, Some((0, 255)));
    }

    #[test]
    fn a_slash_22_is_still_one_cell_per_address() {
        let map = Map::new("p", &spec("10.0.0.0/22", None, &[]), None, &[]);
        assert_eq!((map.step, map.cells.len()), (1, 1024));
    }

    #[test]
    fn block_shades_split_at_quarters() {
        assert_eq!(Kind::of_block(0, 0), Kind::NoCandidates);
        assert_eq!(Kind::of_block(0, 8), Kind::Empty);
        assert_eq!(Kind::of_block(2, 8), Kind::Quarter);
        assert_eq!(Kind::of_block(3, 8), Kind::Half);
        assert_eq!(Kind::of_block(6, 8), Kind::ThreeQuarters);
        assert_eq!(Kind::of_block(7, 8), Kind::AlmostFull);
        assert_eq!(Kind::of_block(8, 8), Kind::Full);
    }

    #[test]
    fn legend_glyphs_and_classes_are_distinct() {
        for kinds in [&ADDRESS_KINDS[..], &BLOCK_KINDS[..]] {
            let mut glyphs: Vec<char> = kinds.iter().map(|k| k.style().glyph).collect();
            let mut classes: Vec<&str> = kinds.iter().map(|k| k.class()).collect();
            glyphs.sort_unstable();
            glyphs.dedup();
            classes.sort_unstable();
            classes.dedup();
            assert_eq!((glyphs.len(), classes.len()), (kinds.len(), kinds.len()));
        }
    }

    #[test]
    fn text_rows_are_labelled_and_slash_24s_separated() {
        let map = Map::new("p", &spec("10.0.0.0/23", None, &[]), None, &[]);
        let text = map.text(false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "p 10.0.0.0/23: one cell per address");
        assert_eq!(lines[1], "10.0.0.0    -....... ........ ........ ........");
        assert_eq!(lines[9], "");
        assert!(lines[10].starts_with("10.0.1.0    ........ "));
        assert!(!text.contains('\x1b'));
    }

    #[test]
    fn colour_wraps_runs_of_glyphs() {
        let map = Map::new("p", &spec("10.0.0.0/29", Some("10.0.0.1"), &[]), None, &[]);
        let text = map.text(true);
        assert!(text.contains("\x1b[35m-\x1b[0m\x1b[1;34mG\x1b[0m\x1b[32m.....\x1b[0m"));
    }

    #[test]
    fn svg_escapes_the_title() {
        let map = Map::new("a&b", &spec("10.0.0.0/30", None, &[]), None, &[]);
        let svg = map.svg();
        assert!(svg.contains("<title>a&amp;b 10.0.0.0/30"));
        assert_eq!(svg.matches(r#"class="cell "#).count(), 4);
    }

    /// WCAG relative luminance of `#rrggbb`.
    fn luminance(hex: &str) -> f64 {
        let channel = |i: usize| {
            let c = f64::from(u8::from_str_radix(&hex[i..i + 2], 16).unwrap()) / 255.0;
            if c <= 0.03928 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
    }

    #[test]
    fn neighbouring_shades_differ_in_lightness() {
        let ramp = [
            Kind::Empty,
            Kind::Quarter,
            Kind::Half,
            Kind::ThreeQuarters,
            Kind::AlmostFull,
            Kind::Full,
        ];
        for pair in ramp.windows(2) {
            let (a, b) = (
                luminance(pair[0].style().fill),
                luminance(pair[1].style().fill),
            );
            assert!(a > b, "{pair:?}: the ramp must darken as it fills");
            let contrast = (a + 0.05) / (b + 0.05);
            assert!(
                contrast >= 1.5,
                "{pair:?}: contrast {contrast:.2} is too low"
            );
        }
        let grey = luminance(Kind::NoCandidates.style().fill);
        for kind in ramp {
            let l = luminance(kind.style().fill);
            let contrast = (l.max(grey) + 0.05) / (l.min(grey) + 0.05);
            assert!(
                contrast >= 1.25,
                "{kind:?} and no candidates: {contrast:.2}"
            );
        }
    }

    #[test]
    fn overlap_counts_the_intersection() {
        let spans = [(1, 3), (10, 20), (30, 30)];
        assert_eq!(overlap(&spans, 0, 100), 3 + 11 + 1);
        assert_eq!(overlap(&spans, 15, 30), 6 + 1);
        assert_eq!(overlap(&spans, 4, 9), 0);
    }
}
