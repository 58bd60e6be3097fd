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
    /// The first step of the ramp: under 5% used, or 1 to 9 allocations ([`Scale`]).
    Shade1,
    /// The second: 5% to under 20% used, or 10 to 99 allocations.
    Shade2,
    /// The third: 20% to under 80% used, or 100 to 999 allocations.
    Shade3,
    /// The fourth: 80% used or more, or 1,000 allocations or more; a candidate left.
    Shade4,
    /// A block with every candidate allocated.
    Full,
}

/// What the shade of a block or region measures. Each step's lower bound is at most the
/// true figure and its upper bound above it, so no cell looks fuller than it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The share of its candidates that are allocated: for blocks of 256 addresses (an IPv4
    /// /24, an IPv6 /120), where a share is a count an operator can picture.
    Share,
    /// How many allocations it holds, by powers of ten (a log scale): for IPv6 subnets and
    /// /64s, where 30 of 2^64 is a share of 10^-18 and only the count means anything.
    Count,
}

impl Scale {
    /// What the legend says the shade measures.
    pub fn legend(self) -> &'static str {
        match self {
            Scale::Share => "shade: share of a cell's candidates allocated (steps at 5%, 20%, 80%)",
            Scale::Count => {
                "shade: allocations a cell holds, log scale (steps at 1, 10, 100, 1,000), not its share"
            }
        }
    }
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
    Kind::Shade1,
    Kind::Shade2,
    Kind::Shade3,
    Kind::Shade4,
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
            Kind::Shade1 => (':', "shade-1", "under 5% used", "1;32", "#7fcdbb"),
            Kind::Shade2 => ('+', "shade-2", "5% to under 20% used", "33", "#1d91c0"),
            Kind::Shade3 => ('*', "shade-3", "20% to under 80% used", "1;33", "#225ea8"),
            Kind::Shade4 => ('%', "shade-4", "80% or more used", "31", "#253494"),
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

    /// The legend's words for this kind on a map shaded by `scale`.
    pub(super) fn label(self, scale: Scale) -> &'static str {
        match (scale, self) {
            (Scale::Count, Kind::Shade1) => "1 to 9 allocated",
            (Scale::Count, Kind::Shade2) => "10 to 99 allocated",
            (Scale::Count, Kind::Shade3) => "100 to 999 allocated",
            (Scale::Count, Kind::Shade4) => "1,000 or more allocated",
            _ => self.style().label,
        }
    }

    /// The shade, on `scale`, of a block that has `candidates` candidates, `held` of them
    /// allocated. A step is taken only once its lower bound is reached: 19.9% is the second
    /// step, never the third.
    pub(super) fn of_block(held: u128, candidates: u128, scale: Scale) -> Kind {
        match (held, candidates) {
            (_, 0) => Kind::NoCandidates,
            (0, _) => Kind::Empty,
            (h, c) if h >= c => Kind::Full,
            (h, _) if scale == Scale::Count => match h {
                1..=9 => Kind::Shade1,
                10..=99 => Kind::Shade2,
                100..=999 => Kind::Shade3,
                _ => Kind::Shade4,
            },
            // h/c against 5%, 20% and 80% as h * den >= c * num, exactly; where that
            // overflows (c above 2^123) as integer quotients, h / num >= c / den, which
            // differ from the exact test only within a few addresses of a bound.
            (h, c) => {
                let at_least = |num: u128, den: u128| match (h.checked_mul(den), c.checked_mul(num))
                {
                    (Some(scaled), Some(bound)) => scaled >= bound,
                    _ => h / num >= c / den,
                };
                if at_least(4, 5) {
                    Kind::Shade4
                } else if at_least(1, 5) {
                    Kind::Shade3
                } else if at_least(1, 20) {
                    Kind::Shade2
                } else {
                    Kind::Shade1
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_shades_split_at_quarters() {
        let share = |h, c| Kind::of_block(h, c, Scale::Share);
        assert_eq!(share(0, 0), Kind::NoCandidates);
        assert_eq!(share(0, 8), Kind::Empty);
        assert_eq!(share(12, 253), Kind::Shade1);
        assert_eq!(share(13, 253), Kind::Shade2);
        // 30 of 253 (11.9%) is not shaded as 24% would be.
        assert_eq!(share(30, 253), Kind::Shade2);
        assert_eq!(share(61, 253), Kind::Shade3);
        assert_eq!(share(202, 253), Kind::Shade3);
        assert_eq!(share(203, 253), Kind::Shade4);
        assert_eq!(share(253, 253), Kind::Full);
        assert_eq!(share(30, (1 << 64) - 2), Kind::Shade1);
        assert_eq!(share(u128::MAX / 2, u128::MAX), Kind::Shade3);
        assert_eq!(share(u128::MAX - 1, u128::MAX), Kind::Shade4);
        assert_eq!(share(u128::MAX, u128::MAX), Kind::Full);
        let count = |h| Kind::of_block(h, (1 << 64) - 2, Scale::Count);
        assert_eq!(count(0), Kind::Empty);
        assert_eq!(count(9), Kind::Shade1);
        assert_eq!(count(30), Kind::Shade2);
        assert_eq!(count(999), Kind::Shade3);
        assert_eq!(count(1000), Kind::Shade4);
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
            Kind::Shade1,
            Kind::Shade2,
            Kind::Shade3,
            Kind::Shade4,
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
