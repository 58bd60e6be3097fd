//! The addresses a pool's allocations hold, as runs of consecutive addresses.
//!
//! A pool is filled lowest first, so its taken addresses are a few runs however many there
//! are: 50,000 allocations made one after another are one run. An owner look-up hands them
//! to the claim, which cuts them out of the candidates; as runs, copying them and cutting
//! them out costs a step per run, where a list of addresses cost a step per address (at
//! 50,000 allocations, a third of a batch's CPU per request, see `bench/RESULTS.md`).

use std::net::IpAddr;

use crate::model::candidates::{Span, address, ordinal};

/// Addresses, as ascending runs of consecutive ones.
///
/// # Examples
///
/// ```
/// # use std::net::IpAddr;
/// # use ipamctl::model::taken::Taken;
/// let a = |s: &str| s.parse::<IpAddr>().unwrap();
/// let mut taken: Taken = [a("10.0.0.3"), a("10.0.0.1"), a("10.0.0.2")].into_iter().collect();
/// assert_eq!(taken.runs(false).count(), 1);
/// taken.remove(a("10.0.0.2"));
/// assert_eq!(taken.runs(false).count(), 2);
/// assert!(taken.contains(a("10.0.0.3")) && !taken.contains(a("10.0.0.2")));
/// assert_eq!(taken.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Taken {
    /// (IPv6?, first, last) ordinals: sorted, disjoint, and no two of one family adjacent.
    runs: Vec<(bool, u128, u128)>,
}

impl Taken {
    /// No address.
    pub fn new() -> Taken {
        Taken::default()
    }

    /// The index of the first run that ends at or after `(v6, a)`.
    fn at(&self, v6: bool, a: u128) -> usize {
        self.runs.partition_point(|&(f, _, hi)| (f, hi) < (v6, a))
    }

    /// Is `addr` among them?
    pub fn contains(&self, addr: IpAddr) -> bool {
        let (v6, a) = (addr.is_ipv6(), ordinal(addr));
        let i = self.at(v6, a);
        self.runs
            .get(i)
            .is_some_and(|&(f, lo, _)| f == v6 && lo <= a)
    }

    /// Adds `addr`, joining the runs it touches.
    pub fn insert(&mut self, addr: IpAddr) {
        let (v6, a) = (addr.is_ipv6(), ordinal(addr));
        let i = self.at(v6, a);
        if self
            .runs
            .get(i)
            .is_some_and(|&(f, lo, _)| f == v6 && lo <= a)
        {
            return;
        }
        let joins_before = i > 0 && {
            let (f, _, hi) = self.runs[i - 1];
            f == v6 && hi.checked_add(1) == Some(a)
        };
        let joins_after = self
            .runs
            .get(i)
            .is_some_and(|&(f, lo, _)| f == v6 && a.checked_add(1) == Some(lo));
        match (joins_before, joins_after) {
            (true, true) => {
                self.runs[i - 1].2 = self.runs[i].2;
                self.runs.remove(i);
            }
            (true, false) => self.runs[i - 1].2 = a,
            (false, true) => self.runs[i].1 = a,
            (false, false) => self.runs.insert(i, (v6, a, a)),
        }
    }

    /// Removes `addr`, splitting its run if it lies inside one.
    pub fn remove(&mut self, addr: IpAddr) {
        let (v6, a) = (addr.is_ipv6(), ordinal(addr));
        let i = self.at(v6, a);
        let Some(&(f, lo, hi)) = self.runs.get(i) else {
            return;
        };
        if f != v6 || a < lo {
            return;
        }
        match (lo == a, hi == a) {
            (true, true) => {
                self.runs.remove(i);
            }
            (true, false) => self.runs[i].1 = a + 1,
            (false, true) => self.runs[i].2 = a - 1,
            (false, false) => {
                self.runs[i].2 = a - 1;
                self.runs.insert(i + 1, (v6, a + 1, hi));
            }
        }
    }

    /// The runs of one family, ascending.
    pub fn runs(&self, v6: bool) -> impl Iterator<Item = Span> + '_ {
        self.runs
            .iter()
            .filter(move |&&(f, _, _)| f == v6)
            .map(|&(_, lo, hi)| (lo, hi))
    }

    /// How many addresses.
    pub fn len(&self) -> u128 {
        self.runs.iter().map(|&(_, lo, hi)| hi - lo + 1).sum()
    }

    /// No address at all?
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The addresses, IPv4 first, each family ascending.
    pub fn iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.runs
            .iter()
            .flat_map(|&(v6, lo, hi)| (lo..=hi).map(move |a| address(v6, a)))
    }
}

impl FromIterator<IpAddr> for Taken {
    /// In any order, repeats allowed; linear when ascending (as a listing is).
    fn from_iter<I: IntoIterator<Item = IpAddr>>(addrs: I) -> Taken {
        let mut all: Vec<(bool, u128)> = addrs
            .into_iter()
            .map(|a| (a.is_ipv6(), ordinal(a)))
            .collect();
        if !all.is_sorted() {
            all.sort_unstable();
        }
        let mut runs: Vec<(bool, u128, u128)> = Vec::new();
        for (v6, a) in all {
            match runs.last_mut() {
                Some((f, _, hi)) if *f == v6 && (*hi == a || hi.checked_add(1) == Some(a)) => {
                    *hi = a;
                }
                _ => runs.push((v6, a, a)),
            }
        }
        Taken { runs }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::model::candidates::Candidates;

    /// A small deterministic generator (xorshift), so that the comparison below covers
    /// many shapes without a dependency.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    fn addr(v6: bool, n: u64) -> IpAddr {
        address(v6, u128::from(n) + if v6 { u128::MAX - 40 } else { 0 })
    }

    #[test]
    fn runs_follow_a_set_of_addresses_through_inserts_and_removes() {
        let mut state = 0x2545_f491_4f6c_dd1d;
        for round in 0..200 {
            let mut taken = Taken::new();
            let mut set = BTreeSet::new();
            for _ in 0..60 {
                let r = next(&mut state);
                // Both families, and IPv6 at the top of the space: nothing overflows.
                let a = addr(r & 1 == 1, (r >> 1) % 40);
                if (r >> 8).is_multiple_of(3) {
                    taken.remove(a);
                    set.remove(&a);
                } else {
                    taken.insert(a);
                    set.insert(a);
                }
                let listed: Vec<IpAddr> = taken.iter().collect();
                let expected: Vec<IpAddr> = set.iter().copied().collect();
                assert_eq!(listed, expected, "round {round}");
                assert_eq!(taken.len(), set.len() as u128);
                for n in 0..40 {
                    for v6 in [false, true] {
                        let b = addr(v6, n);
                        assert_eq!(taken.contains(b), set.contains(&b), "{b} in round {round}");
                    }
                }
                // Runs are maximal: the same as collecting the set anew.
                assert_eq!(taken, set.iter().copied().collect::<Taken>());
                // Cut out of candidates as runs, they block what the addresses block.
                for (cidr, v6) in [
                    ("0.0.0.0/26", false),
                    ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffc0/122", true),
                ] {
                    let spec: crate::model::PoolSpec =
                        serde_json::from_str(&format!(r#"{{"cidr":"{cidr}","kind":"public"}}"#))
                            .expect("a pool spec");
                    let all = Candidates::of_pool(&spec);
                    let by_runs = all.clone().without_spans(taken.runs(v6));
                    let by_addresses = all.clone().without(set.iter().copied());
                    assert_eq!(
                        by_runs.spans(),
                        by_addresses.spans(),
                        "{cidr} in round {round}"
                    );
                }
            }
        }
    }

    #[test]
    fn collecting_in_any_order_with_repeats_gives_maximal_runs() {
        let a = |s: &str| s.parse::<IpAddr>().unwrap();
        let taken: Taken = [
            "10.0.0.5", "fd00::1", "10.0.0.4", "10.0.0.5", "10.0.0.7", "fd00::2",
        ]
        .into_iter()
        .map(a)
        .collect();
        let v4: Vec<Span> = taken.runs(false).collect();
        assert_eq!(v4, [(0x0a00_0004, 0x0a00_0005), (0x0a00_0007, 0x0a00_0007)]);
        assert_eq!(taken.runs(true).count(), 1);
        assert_eq!(taken.len(), 5);
    }
}
