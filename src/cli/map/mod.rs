//! The address map of `pool show --map` and of the report: a pool, or one prefix of it,
//! drawn cell by cell as terminal text or as an SVG document. Pure: it takes the pool, its
//! stored subnets and its taken addresses and returns strings; deciding whether to colour is
//! the caller's business.
//!
//! A small view is drawn one cell per address; a larger IPv4 view one cell per /24 (a /24
//! that holds a stored subnet outlined, the subnet named under the grid); an IPv6 view up to
//! a /64 one cell per /120 in use, or, when at most [`ZOOM_BLOCKS`] are, each of those
//! /120s address by address; a larger IPv6 view one cell per region: each stored subnet and
//! each /64 in use outside them, with its counts (a /48 has 2^16 /64s and 2^72 /120s: only
//! what holds something, or is a subnet, is drawn). Blocks are shaded by the share of their
//! candidates allocated, regions by how many allocations they hold on a log scale
//! ([`Scale`]): a share of 2^64 means nothing.

mod cells;
mod kind;
pub mod supernet;
mod svg;
mod text;

use std::net::IpAddr;

use ipnet::IpNet;

use self::kind::{ADDRESS_KINDS, BLOCK_KINDS};
pub use self::kind::{Kind, Scale};
use cells::Cell;

use crate::model::PoolManifest;
use crate::model::candidates::{Usage, address, readable_count};
use crate::model::subnet::{SubnetManifest, pool_candidates};

/// IPv4 views of at most this prefix length (1024 addresses) get one cell per address;
/// larger ones one cell per /24.
const ADDRESS_CELLS_FROM: u8 = 22;

/// IPv6 views of at most this prefix length (256 addresses) get one cell per address.
const ADDRESS_CELLS_FROM_V6: u8 = 120;

/// IPv6 views of at least this prefix length (up to a /64) get one cell per /120 in use;
/// larger ones one cell per region.
const BLOCK_CELLS_FROM_V6: u8 = 64;

/// An IPv6 view of /120 blocks with at most this many in use is drawn address by address,
/// those blocks alone: where its allocations sit, zoomed in.
const ZOOM_BLOCKS: usize = 4;

pub use crate::engine::pool::{LARGEST_VIEW, drawable};

/// Cells that start a new section (a blank line, a gap): a /24 of addresses, a /16 of /24s.
const SECTION: usize = 256;

/// Cells between the small gaps of a row.
const GROUP: usize = 8;

/// What a cell is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// One address.
    Addresses,
    /// 256 addresses: a /24, or an IPv6 /120.
    Blocks,
    /// An IPv6 stored subnet, or a /64 in use: a row of its own, with its counts.
    Regions,
}

/// A drawn pool: a grid of cells over its view, with the usage figures that go under it.
#[derive(Clone, Debug)]
pub struct Map {
    /// What is drawn, as the first line says it.
    title: String,
    layout: Layout,
    /// IPv6 (else IPv4).
    v6: bool,
    cells: Vec<Cell>,
    /// `(what, usage)` lines under the legend: the pool's, then the view's.
    usage: Vec<(String, Usage)>,
    /// What the shade of a block or region measures.
    scale: Scale,
    /// The stored subnets in the view, a line each under the grid (not for regions, which
    /// are the subnets): where each sits and its counts.
    subnet_lines: Vec<String>,
    /// Who holds each allocated address, for the SVG's tooltips (see [`Map::with_owners`]).
    owners: std::collections::HashMap<IpAddr, String>,
}

impl Map {
    /// Draws pool `name` (`pool`, with stored subnets `subnets`), whose allocations hold
    /// `taken`, over `within` (which the caller checked lies inside the pool and is no
    /// larger than a [`LARGEST_VIEW`]) or the whole pool.
    ///
    /// Candidates are the pool's without every subnet's network, broadcast, gateway and
    /// reserved addresses ([`pool_candidates`], as every claim sees them): those are drawn
    /// as such, never as free, and the usage lines add up (candidates = allocated + free).
    /// A block or region is shaded by the share of its candidates that are allocated.
    pub fn new(
        name: &str,
        pool: &PoolManifest,
        subnets: &[SubnetManifest],
        within: Option<IpNet>,
        taken: &[IpAddr],
    ) -> Map {
        let usage = Usage::of_candidates(&pool_candidates(pool, subnets), taken);
        Map::with_usage(name, pool, subnets, within, taken, usage)
    }

    /// [`Map::new`] from what the engine gathers ([`crate::engine::pool::Drawn`]): `taken`
    /// need only be the addresses held inside the view, `usage` is the whole pool's.
    pub fn with_usage(
        name: &str,
        pool: &PoolManifest,
        subnets: &[SubnetManifest],
        within: Option<IpNet>,
        taken: &[IpAddr],
        usage: Usage,
    ) -> Map {
        let spec = &pool.spec;
        let view = within.unwrap_or(spec.cidr);
        let v6 = view.addr().is_ipv6();
        let sorted = cells::ordinals(taken, v6);
        let mut layout = match (v6, view.prefix_len()) {
            (false, p) if p >= ADDRESS_CELLS_FROM => Layout::Addresses,
            (false, _) => Layout::Blocks,
            (true, p) if p >= ADDRESS_CELLS_FROM_V6 => Layout::Addresses,
            (true, p) if p >= BLOCK_CELLS_FROM_V6 => Layout::Blocks,
            (true, _) => Layout::Regions,
        };
        let all = pool_candidates(pool, subnets);
        let candidates = match within {
            Some(w) => all.within(w),
            None => all,
        };
        let in_use = cells::blocks_in_use(view, &sorted);
        let zoomed = layout == Layout::Blocks && v6 && in_use.len() <= ZOOM_BLOCKS;
        let scale = if layout == Layout::Regions {
            Scale::Count
        } else {
            Scale::Share
        };
        let cells = match layout {
            Layout::Addresses => {
                cells::address_cells(spec, subnets, view, cells::span_of(view), &sorted)
            }
            Layout::Blocks if zoomed => {
                layout = Layout::Addresses;
                in_use
                    .iter()
                    .flat_map(|&lo| {
                        cells::address_cells(spec, subnets, view, (lo, lo + 255), &sorted)
                    })
                    .collect()
            }
            Layout::Blocks => cells::block_cells(&candidates, subnets, view, &sorted),
            Layout::Regions => cells::region_cells(&candidates, subnets, view, &sorted),
        };
        let subnet_lines = if layout == Layout::Regions {
            Vec::new()
        } else {
            let block_len = (layout == Layout::Blocks).then_some(if v6 { 120 } else { 24 });
            cells::subnet_lines(&candidates, subnets, view, &sorted, block_len)
        };
        let mut usage = vec![(format!("pool {}", spec.cidr), usage)];
        let mut title = format!("{name} {}", spec.cidr);
        if let Some(w) = within {
            let inside: Vec<IpAddr> = taken.iter().copied().filter(|a| w.contains(a)).collect();
            usage.push((
                format!("within {w}"),
                Usage::of_candidates(&candidates, &inside),
            ));
            title.push_str(&format!(", within {w}"));
        }
        title.push_str(what_a_cell_is(layout, v6, zoomed));
        Map {
            title,
            layout,
            v6,
            cells,
            usage,
            scale,
            subnet_lines,
            owners: Default::default(),
        }
    }

    /// Is each cell one address (not a block or region)?
    pub fn per_address(&self) -> bool {
        self.layout == Layout::Addresses
    }

    /// Names the holder of each address (`KIND/NAME (uid U)`) in the tooltips of the SVG's
    /// cells; an allocated address without one says `allocated` alone.
    pub fn with_owners(mut self, owners: impl IntoIterator<Item = (IpAddr, String)>) -> Map {
        self.owners = owners.into_iter().collect();
        self
    }

    /// The kinds of the legend.
    fn kinds(&self) -> &'static [Kind] {
        if self.per_address() {
            &ADDRESS_KINDS
        } else {
            &BLOCK_KINDS
        }
    }

    /// What the legend says the shades measure; `None` for a map of addresses.
    fn scale_line(&self) -> Option<&'static str> {
        (!self.per_address()).then(|| self.scale.legend())
    }

    /// The kinds of the legend, with how many cells of each the map has.
    fn legend(&self) -> Vec<(Kind, usize)> {
        self.kinds()
            .iter()
            .map(|&k| (k, self.cells.iter().filter(|c| c.kind == k).count()))
            .collect()
    }

    /// Cells per row: 32, or 16 when there are no more than 16; 1 for regions.
    fn per_row(&self) -> usize {
        match self.layout {
            Layout::Regions => 1,
            _ if self.cells.len() > 16 => 32,
            _ => 16,
        }
    }

    /// Addresses per cell (of addresses and blocks).
    fn step(&self) -> u128 {
        if self.per_address() { 1 } else { 256 }
    }

    /// The rows: the index of their first cell, its label, and their cells. A row ends after
    /// [`Map::per_row`] cells, or where the next cell does not follow on (a sparse map of
    /// IPv6 /120s). A region is a row of its own, labelled with its prefix.
    fn rows(&self) -> Vec<(usize, String, &[Cell])> {
        let per_row = self.per_row();
        let mut rows = Vec::new();
        let mut start = 0;
        for i in 1..=self.cells.len() {
            let follows = self
                .cells
                .get(i)
                .is_some_and(|c| c.start == self.cells[i - 1].start + self.step());
            if i == self.cells.len() || i - start == per_row || !follows {
                let cells = &self.cells[start..i];
                let label = match cells[0].net {
                    Some(net) => net.to_string(),
                    None => address(self.v6, cells[0].start).to_string(),
                };
                rows.push((start, label, cells));
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
                let mut line = format!(
                    "{what}: {} candidates, {} allocated, {} free ({:.1}% used)",
                    readable_count(u.candidates),
                    u.allocated,
                    readable_count(u.free),
                    u.percent_used
                );
                if u.off_candidates > 0 {
                    line.push_str(&format!(
                        "; {} more on addresses no claim is given (ipamctl check)",
                        u.off_candidates
                    ));
                }
                line
            })
            .collect()
    }
}

/// What one cell of a map of `layout` is, as its title ends (`zoomed`: the few /120s in
/// use of an IPv6 view, address by address).
fn what_a_cell_is(layout: Layout, v6: bool, zoomed: bool) -> &'static str {
    match (layout, v6) {
        (Layout::Addresses, true) if zoomed => {
            ": one cell per address of each /120 that holds an allocation"
        }
        (Layout::Addresses, _) => ": one cell per address",
        (Layout::Blocks, true) => ": one cell per /120 that holds an allocation",
        (Layout::Blocks, false) => ": one cell per /24",
        (Layout::Regions, _) => ": one cell per subnet, and per /64 in use outside the subnets",
    }
}

#[cfg(test)]
mod tests;
