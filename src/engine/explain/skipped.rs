//! Why each address before the chosen one was skipped (`allocate --dry-run --explain`):
//! the chosen address is the first one a request can get in its pool's pick order, shown
//! as the list of the addresses before it in that order (lower ones for `pick: lowest`;
//! from the owner's hashed start upward and around for `hashed`) and the reason each was
//! skipped.
//!
//! Pure, like [`crate::model::candidates`]: the caller supplies the pool, the request's
//! narrowing and the taken addresses (a directory listing), and looks up the holders of
//! only those taken addresses that end up on the lines shown (`super::explain_request`).
//! The scan that finds each address's reason is in `skipped/scan.rs`.

mod scan;

use std::net::IpAddr;

use ipnet::IpNet;

use crate::model::candidates::{Span, address, ordinal, span_len};
use crate::model::subnet::SubnetManifest;
use crate::model::{Exclude, PoolSpec};

use scan::{Scan, span_of, walked};

/// How many lines an explanation shows before it counts the rest.
pub const DEFAULT_CAP: usize = 20;

/// Why an address before the chosen one is not handed out. The first that applies wins, in
/// this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The network address of a pool shorter than /31.
    PoolNetwork,
    /// The broadcast address of a pool shorter than /31.
    PoolBroadcast,
    /// The subnet-router anycast address of an IPv6 pool shorter than /127.
    PoolAnycast,
    /// Not inside the `--within` subnet.
    OutsideWithin(IpNet),
    /// The network address of the `--within` subnet (shorter than /31).
    WithinNetwork(IpNet),
    /// The broadcast address of the `--within` subnet (shorter than /31).
    WithinBroadcast(IpNet),
    /// The subnet-router anycast address of the IPv6 `--within` subnet (shorter than /127).
    WithinAnycast(IpNet),
    /// The pool's gateway.
    Gateway,
    /// Inside this entry of the pool's `exclude`.
    Excluded(Exclude),
    /// Given as `--reserved`.
    Reserved,
    /// Kept from every claim by a stored subnet of the pool: its name and what the address
    /// is to it ("the gateway", "a reserved address", …, as
    /// [`SubnetManifest::role_of`] says).
    Subnet(String, &'static str),
    /// An allocation holds it.
    Taken,
    /// Released by another owner within the pool's `reuseAfter` (as written), see
    /// [`crate::model::cooldown`].
    Cooling(String),
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
    pub chosen: Option<IpAddr>,
    /// The skipped addresses before `chosen` in the walk (the whole pool when `None`), in
    /// the walk's order, at most the cap's number of lines.
    pub lines: Vec<Line>,
    /// Where the walk started (a hashed pick), as an ordinal; `None`: at the lowest.
    pub start: Option<u128>,
    /// How many skipped addresses the lines leave out (up to 2^128 - 1 in IPv6).
    pub more: u128,
    /// Whether the spans are IPv6 ordinals.
    pub v6: bool,
}

/// What a request narrows the pool by.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The pool's spec.
    pub spec: &'a PoolSpec,
    /// `--within`, which lies inside the pool.
    pub within: Option<IpNet>,
    /// `--reserved` addresses.
    pub reserved: &'a [IpAddr],
    /// The addresses the pool's allocations hold, in any order.
    pub taken: &'a [IpAddr],
    /// The addresses other owners released within the pool's `reuseAfter`, in any order.
    pub cooling: &'a [IpAddr],
    /// The pool's stored subnets, whose gateways, reserved and edge addresses no claim gets.
    pub subnets: &'a [SubnetManifest],
    /// Where a hashed pick's walk starts (an ordinal, a candidate of the request); `None`
    /// for `pick: lowest`.
    pub start: Option<u128>,
}

/// Explains every address of the pool before `chosen` in the walk (all of them when `chosen`
/// is `None`), in at most `cap` lines; the rest is counted in [`Explanation::more`]. The walk
/// is the pool's from its first address up, or with a `start` from there up to the pool's
/// last address and on from its first. Cost grows with the number of lines shown, not with
/// the pool's size.
///
/// # Examples
///
/// ```
/// # use ipamctl::engine::explain::skipped::{explain, Reason, Request};
/// # let spec: ipamctl::model::PoolSpec = serde_json::from_str(
/// #     r#"{"cidr":"10.0.0.0/29","kind":"public","gateway":"10.0.0.1"}"#).unwrap();
/// let taken = ["10.0.0.2".parse().unwrap()];
/// let req = Request { spec: &spec, within: None, reserved: &[], taken: &taken, cooling: &[], subnets: &[], start: None };
/// let e = explain(&req, Some("10.0.0.3".parse().unwrap()), 20);
/// let reasons: Vec<_> = e.lines.iter().map(|l| l.reason.clone()).collect();
/// assert_eq!(reasons, [Reason::PoolNetwork, Reason::Gateway, Reason::Taken]);
/// ```
pub fn explain(req: &Request<'_>, chosen: Option<IpAddr>, cap: usize) -> Explanation {
    let mut explanation = Explanation {
        chosen,
        lines: Vec::new(),
        start: req.start,
        more: 0,
        v6: req.spec.cidr.addr().is_ipv6(),
    };
    let segments = walked(span_of(req.spec.cidr), req.start, chosen.map(ordinal));
    let scan = Scan::new(req);
    let mut lines: Vec<Line> = Vec::new();
    // One line past the cap tells that the line at the cap is complete.
    'segments: for &(first, last) in &segments {
        let mut a = first;
        while lines.len() <= cap {
            let (reason, end) = scan.reason_at(a);
            let end = end.min(last);
            let span = (a, end);
            match lines.last_mut() {
                Some(prev)
                    if prev.reason == reason
                        && reason != Reason::Taken
                        && prev.span.1.checked_add(1) == Some(a) =>
                {
                    prev.span.1 = span.1;
                }
                _ => lines.push(Line { span, reason }),
            }
            match end.checked_add(1) {
                Some(next) if next <= last => a = next,
                _ => continue 'segments,
            }
        }
        break;
    }
    lines.truncate(cap);
    let shown: u128 = lines.iter().map(|l| span_len(&l.span)).sum();
    // At most every address of the family but one: no sum overflows.
    let total = segments
        .iter()
        .map(span_len)
        .fold(0u128, u128::saturating_add);
    explanation.more = total.saturating_sub(shown);
    explanation.lines = lines;
    explanation
}

impl Reason {
    /// The reason in words; `holder` describes who holds a taken address.
    pub fn describe(&self, holder: &str) -> String {
        match self {
            Reason::PoolNetwork => "the pool's network address".into(),
            Reason::PoolBroadcast => "the pool's broadcast address".into(),
            Reason::PoolAnycast => "the pool's subnet-router anycast address".into(),
            Reason::OutsideWithin(w) => format!("outside `--within {w}`"),
            Reason::WithinNetwork(w) => format!("the network address of `--within {w}`"),
            Reason::WithinBroadcast(w) => format!("the broadcast address of `--within {w}`"),
            Reason::WithinAnycast(w) => {
                format!("the subnet-router anycast address of `--within {w}`")
            }
            Reason::Gateway => "the pool's gateway".into(),
            Reason::Excluded(e) => format!("excluded by the pool (`{e}`)"),
            Reason::Reserved => "reserved by `--reserved`".into(),
            Reason::Subnet(name, role) => format!("{role} of subnet `{name}`"),
            Reason::Cooling(window) => {
                format!("released by another owner less than {window} ago (the pool's reuseAfter)")
            }
            Reason::Taken => format!("taken by {holder}"),
            Reason::Free => "free now (released since the look-up)".into(),
        }
    }
}

impl Explanation {
    /// The explanation as text lines, for stderr. `holder` is asked only about the taken
    /// addresses on the lines shown, so a caller reading allocation files reads at most the
    /// cap's number of them.
    pub fn render(&self, holder: &mut dyn FnMut(IpAddr) -> String) -> Vec<String> {
        let v6 = self.v6;
        let one = |n: u128| address(v6, n).to_string();
        let spans: Vec<String> = self
            .lines
            .iter()
            .map(|l| match l.span {
                (lo, hi) if lo == hi => one(lo),
                (lo, hi) => format!("{}-{}", one(lo), one(hi)),
            })
            .collect();
        let width = spans.iter().map(String::len).max().unwrap_or(0);
        let mut out: Vec<String> = self
            .lines
            .iter()
            .zip(&spans)
            .map(|(line, span)| {
                let who = match line.reason {
                    Reason::Taken => holder(address(v6, line.span.0)),
                    _ => String::new(),
                };
                format!("  {span:<width$}  {}", line.reason.describe(&who))
            })
            .collect();
        if self.more > 0 {
            let s = if self.more == 1 { "" } else { "es" };
            out.push(format!(
                "  ... and {} more skipped address{s} not shown",
                crate::model::candidates::readable_count(self.more)
            ));
        }
        out.push(match (self.chosen, self.start) {
            (Some(addr), None) => format!("  -> {addr}: the lowest free candidate"),
            (Some(addr), Some(start)) => format!(
                "  -> {addr}: the first free candidate from {} on",
                address(v6, start)
            ),
            (None, _) => "  -> no free candidate left".to_owned(),
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::candidates::testing::{addrs, spec};

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
            cooling: &[],
            subnets: &[],
            start: None,
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
            cooling: &[],
            subnets: &[],
            start: None,
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
        let taken: Vec<IpAddr> = (1..=100).map(|i| IpAddr::from([10u8, 0, 0, i])).collect();
        let req = Request {
            spec: &spec,
            within: None,
            reserved: &[],
            taken: &taken,
            cooling: &[],
            subnets: &[],
            start: None,
        };
        let e = explain(&req, Some(IpAddr::from([10u8, 0, 0, 101])), 5);
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
            cooling: &[],
            subnets: &[],
            start: None,
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
            cooling: &[],
            subnets: &[],
            start: None,
        };
        let e = explain(&req, None, 20);
        assert_eq!(e.lines.len(), 4);
        assert_eq!(e.lines[3].reason, Reason::PoolBroadcast);
        assert_eq!(
            e.lines[3].span,
            (u128::from(u32::MAX), u128::from(u32::MAX))
        );
    }

    #[test]
    fn nothing_below_the_first_address_of_a_slash_31() {
        let spec = spec("10.0.0.0/31", None, &[]);
        let req = Request {
            spec: &spec,
            within: None,
            reserved: &[],
            taken: &[],
            cooling: &[],
            subnets: &[],
            start: None,
        };
        let e = explain(&req, Some(IpAddr::from([10u8, 0, 0, 0])), 20);
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
            cooling: &[],
            subnets: &[],
            start: None,
        };
        let e = explain(&req, Some(IpAddr::from([10u8, 0, 0, 3])), 20);
        assert_eq!(e.lines[1].reason, Reason::Free);
        assert_eq!(
            e.lines[1].span.1,
            crate::model::candidates::ordinal(IpAddr::from([10u8, 0, 0, 2]))
        );
    }

    #[test]
    fn a_hashed_walk_is_explained_from_its_start_and_around_the_top() {
        let spec = spec("10.0.0.0/29", Some("10.0.0.1"), &[]);
        let taken = addrs(&["10.0.0.5", "10.0.0.6", "10.0.0.2"]);
        let at = |a: &str| crate::model::candidates::ordinal(a.parse().unwrap());
        let req = Request {
            spec: &spec,
            within: None,
            reserved: &[],
            taken: &taken,
            cooling: &[],
            subnets: &[],
            start: Some(at("10.0.0.5")),
        };
        // From .5 up: .5 and .6 taken, .7 the broadcast; around: .0, .1, .2, then .3.
        let e = explain(&req, Some("10.0.0.3".parse().unwrap()), 20);
        assert_eq!(
            text(&e),
            [
                "  10.0.0.5  taken by `owner-of-10.0.0.5`",
                "  10.0.0.6  taken by `owner-of-10.0.0.6`",
                "  10.0.0.7  the pool's broadcast address",
                "  10.0.0.0  the pool's network address",
                "  10.0.0.1  the pool's gateway",
                "  10.0.0.2  taken by `owner-of-10.0.0.2`",
                "  -> 10.0.0.3: the first free candidate from 10.0.0.5 on",
            ]
        );
        // Without wrapping: only what lies between the start and the chosen address.
        let e = explain(&req, Some("10.0.0.7".parse().unwrap()), 20);
        assert_eq!(e.lines.len(), 2);
        // Exhausted: every address once, from the start around, counted past the cap.
        let e = explain(&req, None, 3);
        assert_eq!(e.lines.len(), 3);
        assert_eq!(e.lines[0].span.0, at("10.0.0.5"));
        assert_eq!(e.more, 8 - 3);
    }
}
