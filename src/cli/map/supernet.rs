//! The map of a supernet pool (`pool show --map`): it hands out prefixes, so it is drawn by
//! them, not address by address. A bar of up to 64 cells, each an equal share of the pool,
//! says how much of the share is claimed; under it every claimed prefix, excluded prefix and
//! maximal free block in address order, each with its holder or state. Works alike for an
//! IPv4 /8 and an IPv6 /32: the rows are as many as the claims and free blocks, never one per
//! address.

use std::fmt::Write as _;

use ipnet::IpNet;

use super::kind::{BLOCK_KINDS, Kind, Scale};
use super::svg::{CELL, CHAR, LINE, MARGIN, SIZE, document_head, escape, swatch_lines};
use crate::model::candidates::address;
use crate::model::prefix::free_blocks;

/// Cells of the bar, at most: fewer for a pool with fewer addresses.
const BAR_CELLS: u32 = 64;

/// One row of the map.
struct Row {
    prefix: IpNet,
    state: &'static str,
    holder: String,
}

/// A prefix as a span of address ordinals, first and last.
fn span(net: IpNet) -> (u128, u128) {
    match net {
        IpNet::V4(n) => (
            u128::from(u32::from(n.network())),
            u128::from(u32::from(n.broadcast())),
        ),
        IpNet::V6(n) => (u128::from(n.network()), u128::from(n.broadcast())),
    }
}

/// Every claimed prefix (with its holder), excluded prefix and maximal free block of
/// supernet `cidr`, in address order.
fn rows(cidr: IpNet, claims: &[(IpNet, String)], excluded: &[IpNet]) -> Vec<Row> {
    let taken: Vec<IpNet> = claims
        .iter()
        .map(|(p, _)| *p)
        .chain(excluded.iter().copied())
        .collect();
    let mut rows: Vec<Row> = claims
        .iter()
        .map(|(prefix, holder)| Row {
            prefix: *prefix,
            state: "claimed",
            holder: holder.clone(),
        })
        .chain(excluded.iter().map(|p| Row {
            prefix: *p,
            state: "excluded",
            holder: "-".into(),
        }))
        .chain(free_blocks(cidr, &taken).into_iter().map(|p| Row {
            prefix: p,
            state: "free",
            holder: "-".into(),
        }))
        .collect();
    rows.sort_by_key(|r| (span(r.prefix).0, r.prefix.prefix_len()));
    rows
}

/// The bar of supernet `cidr`: the prefix length of one cell, and each cell's shade by the
/// share of its addresses the `claims` cover.
fn bar(cidr: IpNet, claims: &[(IpNet, String)]) -> (u8, Vec<Kind>) {
    let host_bits = u32::from(cidr.max_prefix_len() - cidr.prefix_len());
    let cell_bits = host_bits.saturating_sub(BAR_CELLS.ilog2());
    let cells = 1u32 << (host_bits - cell_bits);
    let (first, _) = span(cidr);
    let claimed: Vec<(u128, u128)> = claims.iter().map(|(p, _)| span(*p)).collect();
    let kinds = (0..cells)
        .map(|i| {
            let lo = first + (u128::from(i) << cell_bits);
            let hi = lo + ((1u128 << cell_bits) - 1);
            let covered: u128 = claimed
                .iter()
                .map(|&(a, b)| {
                    let (a, b) = (a.max(lo), b.min(hi));
                    if a > b { 0 } else { b - a + 1 }
                })
                .sum();
            Kind::of_block(covered, hi - lo + 1, Scale::Share)
        })
        .collect();
    let len = cidr.max_prefix_len() - u8::try_from(cell_bits).expect("at most 128 bits");
    (len, kinds)
}

/// The first line of the map.
fn title_line(title: &str, cidr: IpNet, claims: usize, cell_len: u8) -> String {
    format!(
        "{title} {cidr}: supernet, {claims} claimed prefix{}, one cell per /{cell_len}",
        if claims == 1 { "" } else { "es" },
    )
}

/// The legend's words for a shade of the bar: the share of a cell's addresses claimed.
fn bar_label(kind: Kind) -> String {
    match kind {
        Kind::Empty => "none claimed".into(),
        Kind::Full => "all claimed".into(),
        k => k.label(Scale::Share).replace(" used", " claimed"),
    }
}

/// The shades of the bar, in the legend's order: a map's shades of blocks, less "no
/// candidates" (every address of a supernet can be claimed).
const BAR_KINDS: &[Kind] = BLOCK_KINDS.split_last().expect("not empty").1;

/// The text map of supernet `title` (`cidr`), with its `claims` (prefix, holder) and its
/// `excluded` prefixes.
pub fn text(title: &str, cidr: IpNet, claims: &[(IpNet, String)], excluded: &[IpNet]) -> String {
    let rows = rows(cidr, claims, excluded);
    let (cell_len, kinds) = bar(cidr, claims);
    let bar: String = kinds.iter().map(|k| k.style().glyph).collect();
    let width = rows
        .iter()
        .map(|r| r.prefix.to_string().len())
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "{}\n{bar}\n\n",
        title_line(title, cidr, claims.len(), cell_len)
    );
    for r in &rows {
        out.push_str(&format!(
            "{:<width$}  {:<8}  {}\n",
            r.prefix.to_string(),
            r.state,
            r.holder
        ));
    }
    let legend: Vec<String> = BAR_KINDS
        .iter()
        .map(|&k| format!("{} {}", k.style().glyph, bar_label(k)))
        .collect();
    out.push('\n');
    out.push_str(&legend.join("  "));
    out.push('\n');
    out
}

/// The map of supernet `title` as a standalone SVG document: the title, the bar (a
/// `<rect class="cell KIND">` per cell, its share in the tooltip), then a line per
/// prefix (a swatch of class `claimed`, `excluded` or `free` and its words: prefix,
/// state, holder), then the legend.
pub fn svg(title: &str, cidr: IpNet, claims: &[(IpNet, String)], excluded: &[IpNet]) -> String {
    let rows = rows(cidr, claims, excluded);
    let (cell_len, kinds) = bar(cidr, claims);
    let head = title_line(title, cidr, claims.len(), cell_len);
    let width_of = rows
        .iter()
        .map(|r| r.prefix.to_string().len())
        .max()
        .unwrap_or(0);
    let lines: Vec<(&str, Kind, String)> = rows
        .iter()
        .map(|r| {
            let words = format!(
                "{:<width_of$}  {:<8}  {}",
                r.prefix.to_string(),
                r.state,
                r.holder
            );
            (r.state, Kind::Allocated, words)
        })
        .collect();
    let legend: Vec<(&str, Kind, String)> = BAR_KINDS
        .iter()
        .map(|&k| {
            (
                k.class(),
                k,
                format!("{} {}", k.style().glyph, bar_label(k)),
            )
        })
        .collect();
    let longest = std::iter::once(head.chars().count())
        .chain(
            lines
                .iter()
                .chain(&legend)
                .map(|(_, _, l)| l.chars().count() + 3),
        )
        .max()
        .unwrap_or(0);
    let width = (MARGIN * 2 + longest * CHAR).max(MARGIN * 2 + kinds.len() * CELL);
    let bar_top = MARGIN + LINE;
    let rows_top = bar_top + CELL + LINE;
    let legend_top = rows_top + lines.len() * LINE + LINE;
    let height = legend_top + legend.len() * LINE + MARGIN;
    let mut svg = svg_head(&head, width, height);
    let (first, _) = span(cidr);
    for (i, kind) in kinds.iter().enumerate() {
        let lo = first + ((i as u128) << (cidr.max_prefix_len() - cell_len));
        let net = IpNet::new(address(cidr.addr().is_ipv6(), lo), cell_len)
            .expect("a cell's length is valid");
        let _ = writeln!(
            svg,
            r#"<rect class="cell {}" x="{}" y="{bar_top}" width="{SIZE}" height="{SIZE}"><title>{net}: {}</title></rect>"#,
            kind.class(),
            MARGIN + i * CELL,
            escape(&bar_label(*kind))
        );
    }
    swatch_lines(&mut svg, rows_top, &lines);
    swatch_lines(&mut svg, legend_top, &legend);
    svg.push_str("</svg>\n");
    svg
}

/// The SVG document up to its bar ([`document_head`]), with a fill for each state of a
/// prefix: claimed red as an allocated address is, free green as a free one.
fn svg_head(head: &str, width: usize, height: usize) -> String {
    let mut css = String::new();
    for (state, kind) in [
        ("claimed", Kind::Allocated),
        ("excluded", Kind::Excluded),
        ("free", Kind::Free),
    ] {
        let _ = writeln!(css, ".{state} {{ fill: {}; }}", kind.style().fill);
    }
    document_head(head, width, height, BAR_KINDS, &css)
}

#[cfg(test)]
mod tests {
    // By its path, not `super::*`: the same items, named as the layer check reads paths.
    use crate::cli::map::supernet::*;

    #[test]
    fn a_supernet_is_drawn_by_its_claims_and_free_blocks() {
        let cidr: IpNet = "10.0.0.0/16".parse().unwrap();
        let claims = [
            ("10.0.0.0/20".parse().unwrap(), "VPC/router".to_owned()),
            ("10.0.16.0/24".parse().unwrap(), "FloatingIP/a".to_owned()),
        ];
        let drawn = text("sn", cidr, &claims, &["10.0.255.0/24".parse().unwrap()]);
        let lines: Vec<&str> = drawn.lines().collect();
        assert_eq!(
            lines[0],
            "sn 10.0.0.0/16: supernet, 2 claimed prefixes, one cell per /22"
        );
        // 64 cells of a /22 each: the /20 fills four, the /24 a quarter of the fifth (the
        // step from 20% to under 80%).
        assert_eq!(lines[1], format!("####*{}", ".".repeat(59)));
        assert_eq!(lines[3], "10.0.0.0/20    claimed   VPC/router");
        assert_eq!(lines[4], "10.0.16.0/24   claimed   FloatingIP/a");
        assert_eq!(lines[5], "10.0.17.0/24   free      -");
        assert!(drawn.contains("10.0.255.0/24  excluded  -"), "{drawn}");
        assert!(drawn.contains("10.0.128.0/18  free      -"), "{drawn}");
    }

    #[test]
    fn an_ipv6_supernet_is_drawn_without_counting_addresses() {
        let cidr: IpNet = "2001:db8::/32".parse().unwrap();
        let claims = [("2001:db8::/64".parse().unwrap(), "VPC/router".to_owned())];
        let drawn = text("v6", cidr, &claims, &[]);
        let lines: Vec<&str> = drawn.lines().collect();
        // A /64 is 2^-26 of a /38 cell: under 5%.
        assert_eq!(lines[1], format!(":{}", ".".repeat(63)));
        // Free blocks of every length from /64 up to /33: 32 rows and the claim.
        assert_eq!(drawn.matches("  free  ").count(), 32, "{drawn}");
    }
}
