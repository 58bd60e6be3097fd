//! `allocate --dry-run --explain`: why the chosen address is the lowest one a request can get,
//! as the list of lower addresses and the reason each was skipped.
//!
//! Pure, like [`crate::pool`]: the caller supplies the pool, the request's narrowing and the
//! taken addresses (a directory listing), and looks up the holders of only those taken
//! addresses that end up on the lines shown.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::model::{Exclude, PoolSpec};
use crate::pool::Span;

/// How many lines an explanation shows before it counts the rest.
pub const DEFAULT_CAP: usize = 20;

/// Why an address below the chosen one is not handed out. The first that applies wins, in
/// this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The network address of a pool shorter than /31.
    PoolNetwork,
    /// The broadcast address of a pool shorter than /31.
    PoolBroadcast,
    /// Not inside the `--within` subnet.
    OutsideWithin(Ipv4Net),
    /// The network address of the `--within` subnet (shorter than /31).
    WithinNetwork(Ipv4Net),
    /// The broadcast address of the `--within` subnet (shorter than /31).
    WithinBroadcast(Ipv4Net),
    /// The pool's gateway.
    Gateway,
    /// Inside this entry of the pool's `exclude`.
    Excluded(Exclude),
    /// Given as `--reserved`.
    Reserved,
    /// An allocation holds it.
    Taken,
    /// A candidate nobody holds: the state changed between the claim's look-up and the
    /// listing the explanation was made from (a dry run takes no lock).
    Free,
}

/// One line: a run of consecutive addresses with the same reason. A [`Reason::Taken`] line
/// is always one address, so it can name its holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The addresses, inclusive.
    pub span: Span,
    /// Why they were skipped.
    pub reason: Reason,
}

/// Why `chosen` (or nothing, for an exhausted request) came out of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The address the request gets; `None` when no candidate is left.
    pub chosen: Option<Ipv4Addr>,
    /// The skipped addresses below `chosen` (the whole pool when `None`), ascending, at most
    /// the cap's number of lines.
    pub lines: Vec<Line>,
    /// How many skipped addresses the lines leave out.
    pub more: u64,
}

/// What a request narrows the pool by.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The pool's spec.
    pub spec: &'a PoolSpec,
    /// `--within`, which lies inside the pool.
    pub within: Option<Ipv4Net>,
    /// `--reserved` addresses.
    pub reserved: &'a [Ipv4Addr],
    /// The addresses the pool's allocations hold, in any order.
    pub taken: &'a [Ipv4Addr],
}

/// Explains every address of the pool below `chosen` (all of them when `chosen` is `None`),
/// in at most `cap` lines; the rest is counted in [`Explanation::more`]. Cost grows with the
/// number of lines shown, not with the pool's size.
///
/// # Examples
///
/// ```
/// # use ipamctl::explain::{explain, Reason, Request};
/// # let spec: ipamctl::model::PoolSpec = serde_json::from_str(
/// #     r#"{"cidr":"10.0.0.0/29","kind":"public","gateway":"10.0.0.1"}"#).unwrap();
/// let taken = ["10.0.0.2".parse().unwrap()];
/// let req = Request { spec: &spec, within: None, reserved: &[], taken: &taken };
/// let e = explain(&req, Some("10.0.0.3".parse().unwrap()), 20);
/// let reasons: Vec<_> = e.lines.iter().map(|l| l.reason.clone()).collect();
/// assert_eq!(reasons, [Reason::PoolNetwork, Reason::Gateway, Reason::Taken]);
/// ```
pub fn explain(req: &Request<'_>, chosen: Option<Ipv4Addr>, cap: usize) -> Explanation {
    let first = u64::from(u32::from(req.spec.cidr.network()));
    let last = match chosen {
        Some(addr) => u64::from(u32::from(addr)).checked_sub(1),
        None => Some(u64::from(u32::from(req.spec.cidr.broadcast()))),
    };
    let mut explanation = Explanation {
        chosen,
        lines: Vec::new(),
        more: 0,
    };
    let Some(last) = last.filter(|&l| l >= first) else {
        return explanation;
    };
    let scan = Scan::new(req);
    let mut lines: Vec<Line> = Vec::new();
    let mut a = first;
    // One line past the cap tells that the line at the cap is complete.
    while a <= last && lines.len() <= cap {
        let (reason, end) = scan.reason_at(a);
        let end = end.min(last);
        let span = (a as u32, end as u32);
        match lines.last_mut() {
            Some(prev)
                if prev.reason == reason
                    && reason != Reason::Taken
                    && u64::from(prev.span.1) + 1 == a =>
            {
                prev.span.1 = span.1;
            }
            _ => lines.push(Line { span, reason }),
        }
        a = end + 1;
    }
    lines.truncate(cap);
    let shown: u64 = lines
        .iter()
        .map(|l| u64::from(l.span.1 - l.span.0) + 1)
        .sum();
    explanation.more = last - first + 1 - shown;
    explanation.lines = lines;
    explanation
}

/// The request, arranged for finding the reason at an address and how far it extends.
struct Scan<'a> {
    req: &'a Request<'a>,
    /// Addresses where the reason may change: every single-address reason and the address
    /// after it, every span's start and the address after its end. Sorted, deduplicated.
    breaks: Vec<u64>,
    taken: Vec<u32>,
    reserved: Vec<u32>,
}

impl<'a> Scan<'a> {
    fn new(req: &'a Request<'a>) -> Scan<'a> {
        let mut singles: Vec<u32> = Vec::new();
        let mut spans: Vec<Span> = Vec::new();
        let cidr = req.spec.cidr;
        singles.extend([u32::from(cidr.network()), u32::from(cidr.broadcast())]);
        if let Some(w) = req.within {
            spans.push(span_of(w));
            singles.extend([u32::from(w.network()), u32::from(w.broadcast())]);
        }
        singles.extend(req.spec.gateway.map(u32::from));
        spans.extend(req.spec.exclude.iter().map(|e| span_of(e.net())));
        let mut taken: Vec<u32> = req.taken.iter().copied().map(u32::from).collect();
        taken.sort_unstable();
        let mut reserved: Vec<u32> = req.reserved.iter().copied().map(u32::from).collect();
        reserved.sort_unstable();
        singles.extend(&taken);
        singles.extend(&reserved);
        let mut breaks: Vec<u64> = singles
            .iter()
            .flat_map(|&s| [u64::from(s), u64::from(s) + 1])
            .chain(
                spans
                    .iter()
                    .flat_map(|&(lo, hi)| [u64::from(lo), u64::from(hi) + 1]),
            )
            .collect();
        breaks.sort_unstable();
        breaks.dedup();
        Scan {
            req,
            breaks,
            taken,
            reserved,
        }
    }

    /// The last address of a run that starts at `a` and crosses no break.
    fn run_end(&self, a: u64, natural_end: u64) -> u64 {
        let i = self.breaks.partition_point(|&b| b <= a);
        let before_break = self.breaks.get(i).map_or(u64::MAX, |&b| b - 1);
        natural_end.min(before_break)
    }

    /// The reason `a` is skipped and the last address of the run it starts.
    fn reason_at(&self, a: u64) -> (Reason, u64) {
        let req = self.req;
        let cidr = req.spec.cidr;
        let addr = Ipv4Addr::from(a as u32);
        let wide = cidr.prefix_len() < 31;
        if wide && addr == cidr.network() {
            return (Reason::PoolNetwork, a);
        }
        if wide && addr == cidr.broadcast() {
            return (Reason::PoolBroadcast, a);
        }
        if let Some(w) = req.within {
            let (lo, hi) = span_of(w);
            if a < u64::from(lo) {
                return (Reason::OutsideWithin(w), self.run_end(a, u64::from(lo) - 1));
            }
            if a > u64::from(hi) {
                return (Reason::OutsideWithin(w), self.run_end(a, u64::MAX));
            }
            if w.prefix_len() < 31 && addr == w.network() {
                return (Reason::WithinNetwork(w), a);
            }
            if w.prefix_len() < 31 && addr == w.broadcast() {
                return (Reason::WithinBroadcast(w), a);
            }
        }
        if req.spec.gateway == Some(addr) {
            return (Reason::Gateway, a);
        }
        if let Some(e) = req.spec.exclude.iter().find(|e| e.net().contains(&addr)) {
            let end = u64::from(u32::from(e.net().broadcast()));
            return (Reason::Excluded(*e), self.run_end(a, end));
        }
        if self.reserved.binary_search(&(a as u32)).is_ok() {
            return (Reason::Reserved, a);
        }
        if self.taken.binary_search(&(a as u32)).is_ok() {
            return (Reason::Taken, a);
        }
        (Reason::Free, self.run_end(a, u64::MAX))
    }
}

fn span_of(net: Ipv4Net) -> Span {
    (u32::from(net.network()), u32::from(net.broadcast()))
}

impl Reason {
    /// The reason in words; `holder` describes who holds a taken address.
    pub fn describe(&self, holder: &str) -> String {
        match self {
            Reason::PoolNetwork => "the pool's network address".into(),
            Reason::PoolBroadcast => "the pool's broadcast address".into(),
            Reason::OutsideWithin(w) => format!("outside `--within {w}`"),
            Reason::WithinNetwork(w) => format!("the network address of `--within {w}`"),
            Reason::WithinBroadcast(w) => format!("the broadcast address of `--within {w}`"),
            Reason::Gateway => "the pool's gateway".into(),
            Reason::Excluded(e) => format!("excluded by the pool (`{e}`)"),
            Reason::Reserved => "reserved by `--reserved`".into(),
            Reason::Taken => format!("taken by {holder}"),
            Reason::Free => "free now (released since the look-up)".into(),
        }
    }
}

impl Explanation {
    /// The explanation as text lines, for stderr. `holder` is asked only about the taken
    /// addresses on the lines shown, so a caller reading allocation files reads at most the
    /// cap's number of them.
    pub fn render(&self, holder: &mut dyn FnMut(Ipv4Addr) -> String) -> Vec<String> {
        let spans: Vec<String> = self
            .lines
            .iter()
            .map(|l| crate::pool::format_spans(&[l.span]).remove(0))
            .collect();
        let width = spans.iter().map(String::len).max().unwrap_or(0);
        let mut out: Vec<String> = self
            .lines
            .iter()
            .zip(&spans)
            .map(|(line, span)| {
                let who = match line.reason {
                    Reason::Taken => holder(Ipv4Addr::from(line.span.0)),
                    _ => String::new(),
                };
                format!("  {span:<width$}  {}", line.reason.describe(&who))
            })
            .collect();
        if self.more > 0 {
            let s = if self.more == 1 { "" } else { "es" };
            out.push(format!(
                "  ... and {} more skipped address{s} not shown",
                self.more
            ));
        }
        out.push(match self.chosen {
            Some(addr) => format!("  -> {addr}: the lowest free candidate"),
            None => "  -> no free candidate left".to_owned(),
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pool::testing::{addrs, spec};

    fn text(e: &Explanation) -> Vec<String> {
        e.render(&mut |a| format!("`owner-of-{a}`"))
    }

    #[test]
    fn explains_network_gateway_excludes_reserved_and_taken_in_order() {
        let spec = spec(
            "10.0.0.0/24",
            Some("10.0.0.1"),
            &["10.0.0.2", "10.0.0.8/30"],
        );
        let taken = addrs(&["10.0.0.3", "10.0.0.4", "10.0.0.9", "10.0.0.200"]);
        let reserved = addrs(&["10.0.0.5", "10.0.0.6"]);
        let req = Request {
            spec: &spec,
            within: None,
            reserved: &reserved,
            taken: &taken,
        };
        let e = explain(&req, Some("10.0.0.7".parse().unwrap()), 20);
        assert_eq!(
            text(&e),
            [
                "  10.0.0.0           the pool's network address",
                "  10.0.0.1           the pool's gateway",
                "  10.0.0.2           excluded by the pool (`10.0.0.2`)",
                "  10.0.0.3           taken by `owner-of-10.0.0.3`",
                "  10.0.0.4           taken by `owner-of-10.0.0.4`",
                "  10.0.0.5-10.0.0.6  reserved by `--reserved`",
                "  -> 10.0.0.7: the lowest free candidate",
            ]
        );
        assert_eq!(e.more, 0);
    }

    #[test]
    fn within_reports_the_outside_as_one_run_and_its_own_edges() {
        let spec = spec("10.42.0.0/16", None, &[]);
        let taken = addrs(&["10.42.0.5", "10.42.1.1"]);
        let req = Request {
            spec: &spec,
            within: Some("10.42.1.0/24".parse().unwrap()),
            reserved: &[],
            taken: &taken,
        };
        let e = explain(&req, Some("10.42.1.2".parse().unwrap()), 20);
        let line = |span: &str, why: &str| format!("  {span:<21}  {why}");
        assert_eq!(
            text(&e),
            [
                line("10.42.0.0", "the pool's network address"),
                line("10.42.0.1-10.42.0.255", "outside `--within 10.42.1.0/24`"),
                line(
                    "10.42.1.0",
                    "the network address of `--within 10.42.1.0/24`"
                ),
                line("10.42.1.1", "taken by `owner-of-10.42.1.1`"),
                "  -> 10.42.1.2: the lowest free candidate".to_owned(),
            ]
        );
    }

    #[test]
    fn the_cap_counts_the_rest_and_asks_only_about_shown_holders() {
        let spec = spec("10.0.0.0/24", None, &[]);
        let taken: Vec<Ipv4Addr> = (1..=100).map(|i| Ipv4Addr::new(10, 0, 0, i)).collect();
        let req = Request {
            spec: &spec,
            within: None,
            reserved: &[],
            taken: &taken,
        };
        let e = explain(&req, Some(Ipv4Addr::new(10, 0, 0, 101)), 5);
        assert_eq!(e.lines.len(), 5);
        assert_eq!(e.more, 101 - 5);
        let mut asked = 0;
        let lines = e.render(&mut |_| {
            asked += 1;
            "x".into()
        });
        assert_eq!(asked, 4);
        assert_eq!(lines[5], "  ... and 96 more skipped addresses not shown");
    }

    #[test]
    fn exhausted_explains_the_whole_pool_including_its_broadcast() {
        let spec = spec("10.0.0.0/30", Some("10.0.0.1"), &[]);
        let taken = addrs(&["10.0.0.2"]);
        let req = Request {
            spec: &spec,
            within: None,
            reserved: &[],
            taken: &taken,
        };
        let e = explain(&req, None, 20);
        let reasons: Vec<Reason> = e.lines.iter().map(|l| l.reason.clone()).collect();
        assert_eq!(
            reasons,
            [
                Reason::PoolNetwork,
                Reason::Gateway,
                Reason::Taken,
                Reason::PoolBroadcast
            ]
        );
        assert_eq!(text(&e).last().unwrap(), "  -> no free candidate left");
    }

    #[test]
    fn the_top_of_the_address_space_does_not_overflow() {
        let spec = spec("255.255.255.252/30", None, &["255.255.255.254"]);
        let req = Request {
            spec: &spec,
            within: None,
            reserved: &[],
            taken: &addrs(&["255.255.255.253"]),
        };
        let e = explain(&req, None, 20);
        assert_eq!(e.lines.len(), 4);
        assert_eq!(e.lines[3].reason, Reason::PoolBroadcast);
        assert_eq!(e.lines[3].span, (u32::MAX, u32::MAX));
    }

    #[test]
    fn nothing_below_the_first_address_of_a_slash_31() {
        let spec = spec("10.0.0.0/31", None, &[]);
        let req = Request {
            spec: &spec,
            within: None,
            reserved: &[],
            taken: &[],
        };
        let e = explain(&req, Some(Ipv4Addr::new(10, 0, 0, 0)), 20);
        assert!(e.lines.is_empty());
        assert_eq!(e.more, 0);
    }

    #[test]
    fn a_free_address_below_the_chosen_one_says_the_state_moved() {
        let spec = spec("10.0.0.0/29", None, &[]);
        let req = Request {
            spec: &spec,
            within: None,
            reserved: &[],
            taken: &[],
        };
        let e = explain(&req, Some(Ipv4Addr::new(10, 0, 0, 3)), 20);
        assert_eq!(e.lines[1].reason, Reason::Free);
        assert_eq!(e.lines[1].span.1, u32::from(Ipv4Addr::new(10, 0, 0, 2)));
    }
}
