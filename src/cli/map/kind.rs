//! What a cell of the map can show, and how each kind looks: its glyph (the text map reads
//! without colour), its SVG class and fill, its ANSI colour and its legend's words.

/// What one cell shows: the state of one address, or how full one block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An address some allocation holds (whatever else it is).
    Allocated,
    /// A candidate nobody holds.
    Free,
    /// The pool's gateway or a stored subnet's.
    Gateway,
    /// Excluded by the pool.
    Excluded,
    /// Reserved by a stored subnet.
    Reserved,
    /// The network or broadcast address of the pool, of the `--within` prefix or of a stored
    /// subnet (IPv6: its subnet-router anycast address).
    NetworkBroadcast,
    /// A block without a single candidate.
    NoCandidates,
    /// A block with candidates, none allocated.
    Empty,
    /// A block up to a quarter full.
    Quarter,
    /// A block up to half full.
    Half,
    /// A block up to three quarters full.
    ThreeQuarters,
    /// A block more than three quarters full, with a candidate left.
    AlmostFull,
    /// A block with every candidate allocated.
    Full,
}

/// The legend of a map of addresses, in order.
pub(super) const ADDRESS_KINDS: [Kind; 6] = [
    Kind::Allocated,
    Kind::Free,
    Kind::Gateway,
    Kind::Reserved,
    Kind::Excluded,
    Kind::NetworkBroadcast,
];

/// The legend of a map of blocks, in order.
pub(super) const BLOCK_KINDS: [Kind; 7] = [
    Kind::Empty,
    Kind::Quarter,
    Kind::Half,
    Kind::ThreeQuarters,
    Kind::AlmostFull,
    Kind::Full,
    Kind::NoCandidates,
];

/// How a kind of cell looks.
pub(super) struct Style {
    /// Distinct per kind of a legend, so the map reads without colour.
    pub glyph: char,
    /// The SVG class of its cells.
    pub class: &'static str,
    /// The legend's words.
    pub label: &'static str,
    /// ANSI SGR parameters.
    pub ansi: &'static str,
    /// SVG fill.
    pub fill: &'static str,
}

/// The outline of an empty block in the SVG: its fill is the lightest of the ramp, so the
/// outline is what tells it from the white background (3:1 or more against white, the WCAG
/// contrast for graphics; `tests/map_svg.rs` measures it as rendered).
pub(super) const EMPTY_OUTLINE: &str = "#7b8235";

impl Kind {
    pub(super) fn style(self) -> Style {
        let (glyph, class, label, ansi, fill) = match self {
            Kind::Allocated => ('#', "allocated", "allocated", "1;31", "#d73a49"),
            Kind::Free => ('.', "free", "free", "32", "#a2d9a9"),
            Kind::Gateway => ('G', "gateway", "gateway", "1;34", "#0366d6"),
            Kind::Excluded => ('x', "excluded", "excluded", "33", "#e3b341"),
            Kind::Reserved => ('r', "reserved", "reserved by a subnet", "36", "#6a737d"),
            Kind::NetworkBroadcast => (
                '-',
                "network-broadcast",
                "network/broadcast",
                "35",
                "#8a63d2",
            ),
            // The shades of blocks are one sequential ramp (from ColorBrewer's YlGnBu), light
            // to dark as they fill: told apart by lightness alone, so by every colour-blind
            // reader too (`neighbouring_shades_differ_in_lightness` checks the steps). Empty
            // is the ramp's second step, not its near-white first, and is outlined
            // ([`EMPTY_OUTLINE`]), so it stands out from the page. No candidates is a neutral
            // grey off the ramp.
            Kind::NoCandidates => ('x', "no-candidates", "no candidates", "35", "#d9d9d9"),
            Kind::Empty => ('.', "empty", "empty", "32", "#edf8b1"),
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

    /// The shade of a block that has `candidates` candidates, `held` of them allocated.
    pub(super) fn of_block(held: u128, candidates: u128) -> Kind {
        match (held, candidates) {
            (_, 0) => Kind::NoCandidates,
            (0, _) => Kind::Empty,
            (h, c) if h >= c => Kind::Full,
            // Compared as quotients, so nothing overflows at 2^64 candidates and more.
            (h, c) if h <= c / 4 => Kind::Quarter,
            (h, c) if h <= c / 2 => Kind::Half,
            (h, c) if h <= c / 4 * 3 + (c % 4) * 3 / 4 => Kind::ThreeQuarters,
            _ => Kind::AlmostFull,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_shades_split_at_quarters() {
        assert_eq!(Kind::of_block(0, 0), Kind::NoCandidates);
        assert_eq!(Kind::of_block(0, 8), Kind::Empty);
        assert_eq!(Kind::of_block(2, 8), Kind::Quarter);
        assert_eq!(Kind::of_block(3, 8), Kind::Half);
        assert_eq!(Kind::of_block(6, 8), Kind::ThreeQuarters);
        assert_eq!(Kind::of_block(7, 8), Kind::AlmostFull);
        assert_eq!(Kind::of_block(8, 8), Kind::Full);
        assert_eq!(Kind::of_block(6, u128::MAX), Kind::Quarter);
        assert_eq!(Kind::of_block(u128::MAX, u128::MAX), Kind::Full);
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

    fn contrast(a: f64, b: f64) -> f64 {
        (a.max(b) + 0.05) / (a.min(b) + 0.05)
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
            let contrast = contrast(a, b);
            assert!(
                contrast >= 1.5,
                "{pair:?}: contrast {contrast:.2} is too low"
            );
        }
        let grey = luminance(Kind::NoCandidates.style().fill);
        for kind in ramp {
            let c = contrast(luminance(kind.style().fill), grey);
            assert!(c >= 1.25, "{kind:?} and no candidates: {c:.2}");
        }
    }

    #[test]
    fn empty_stands_out_from_the_white_page() {
        let white = luminance("#ffffff");
        let fill = contrast(luminance(Kind::Empty.style().fill), white);
        assert!(fill >= 1.1, "the empty fill against white: {fill:.2}");
        let outline = contrast(luminance(EMPTY_OUTLINE), white);
        assert!(
            outline >= 3.0,
            "the empty outline against white: {outline:.2}"
        );
    }
}
