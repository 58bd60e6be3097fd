//! Child-prefix arithmetic of supernet pools: the free space of a pool as maximal aligned
//! blocks, the best-fit choice of the next prefix, and exact counts of free blocks. Pure and
//! never enumerating addresses: it sorts the taken prefixes and walks their complement, so an
//! IPv6 /32 holding 50,000 claims costs a sort of 50,000 prefixes.
//!
//! # The rule: best fit
//!
//! A prefix of length `len` is carved out of the *smallest* maximal free aligned block that
//! can hold it (lowest first among equals), at that block's lowest address. Why: handing out
//! the lowest free block instead (first fit) splits a large aligned region to serve a small
//! request while a small hole lies idle; a later request for a large prefix then finds no
//! aligned block of its size although enough addresses are free. Best fit fills the small
//! holes first and keeps large aligned blocks whole, as a buddy allocator does, so a /56
//! request still succeeds after many /64s were handed out.
//!
//! # Examples
//!
//! ```
//! use ipamctl::model::prefix::{best_fit, free_blocks};
//! let pool = "10.0.0.0/24".parse().unwrap();
//! let taken = ["10.0.0.0/26".parse().unwrap(), "10.0.0.128/30".parse().unwrap()];
//! // Free: .64/26, .132/30, .136/29, .144/28, .160/27, .192/26. The /28 fills the hole of
//! // exactly its size instead of splitting .64/26.
//! assert_eq!(best_fit(pool, &taken, 28).unwrap().to_string(), "10.0.0.144/28");
//! assert_eq!(free_blocks(pool, &taken).len(), 6);
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bounds on the lengths a supernet hands out: `spec.prefixLengths: {min: 44, max: 64}`.
/// Either bound may be absent: then any length longer than the pool's own (up to 32 or 128)
/// is allowed on that side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrefixLengths {
    /// The shortest length handed out (the largest prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u8>,
    /// The longest length handed out (the smallest prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u8>,
}

impl PrefixLengths {
    /// Checks the bounds against the pool `cidr`: each bound longer than the pool's own
    /// length and at most 32 (IPv4) or 128 (IPv6), and `min ≤ max`. The message names the
    /// field.
    pub fn validate(&self, cidr: IpNet) -> Result<(), String> {
        for (field, bound) in [("min", self.min), ("max", self.max)] {
            if let Some(len) = bound
                && (len <= cidr.prefix_len() || len > cidr.max_prefix_len())
            {
                return Err(format!(
                    "spec.prefixLengths.{field}: `{len}` must be longer than the pool's /{} and at most {}",
                    cidr.prefix_len(),
                    cidr.max_prefix_len()
                ));
            }
        }
        if let (Some(min), Some(max)) = (self.min, self.max)
            && min > max
        {
            return Err(format!(
                "spec.prefixLengths: min `{min}` is longer than max `{max}`"
            ));
        }
        Ok(())
    }

    /// The lengths a pool `cidr` with these bounds hands out, shortest first.
    pub fn range(&self, cidr: IpNet) -> std::ops::RangeInclusive<u8> {
        let min = self.min.unwrap_or(cidr.prefix_len() + 1);
        let max = self.max.unwrap_or(cidr.max_prefix_len());
        min..=max
    }

    /// Whether a pool `cidr` with these bounds hands out prefixes of length `len`.
    pub fn allows(&self, cidr: IpNet, len: u8) -> bool {
        self.range(cidr).contains(&len)
    }
}

/// No free aligned block of the requested length: `largest` is the largest free block of the
/// pool (lowest first among equals), `None` when the pool is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoRoom {
    /// The largest free block, if any address is free.
    pub largest: Option<IpNet>,
}

/// A prefix as an inclusive range of integers in its family's width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Span {
    start: u128,
    end: u128,
}

fn to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn span(net: IpNet) -> Span {
    let start = to_u128(net.network());
    Span {
        start,
        end: to_u128(net.broadcast()),
    }
}

/// The prefix of `len` at `start`, in the family of `like`.
fn net_at(like: IpNet, start: u128, len: u8) -> IpNet {
    let addr = match like {
        // The value came from an IPv4 span, so it fits in 32 bits.
        IpNet::V4(_) => IpAddr::V4(Ipv4Addr::from(start as u32)),
        IpNet::V6(_) => IpAddr::V6(Ipv6Addr::from(start)),
    };
    IpNet::new(addr, len).expect("len is at most the family's width")
}

/// Appends the maximal aligned blocks covering `[start, end]` (inclusive) to `out`, lowest
/// first. `width` is 32 or 128.
fn cover(like: IpNet, mut start: u128, end: u128, width: u8, out: &mut Vec<IpNet>) {
    loop {
        // The largest block aligned at `start`: its size is 2^(trailing zeros of start).
        let align = start.trailing_zeros().min(u32::from(width));
        // The largest block that also ends at or before `end`: (end - start + 1) may be
        // 2^128, which does not fit; count the bits of (end - start) instead.
        let room = end - start;
        let fits = if room == u128::MAX {
            128
        } else {
            127 - (room + 1).leading_zeros()
        };
        let bits = align.min(fits);
        out.push(net_at(like, start, width - bits as u8));
        if bits == 128 {
            return;
        }
        let last = start + ((1u128 << bits) - 1);
        if last >= end {
            return;
        }
        start = last + 1;
    }
}

/// The maximal aligned free blocks of `pool` once every prefix in `taken` is removed
/// (claims and excludes; single addresses count as /32 or /128), lowest first. Prefixes of
/// another family or outside the pool are ignored; overlapping or nested ones are fine.
/// Blocks are disjoint, aligned, cover exactly the free addresses, and none can be doubled
/// into its aligned parent inside the free space.
pub fn free_blocks(pool: IpNet, taken: &[IpNet]) -> Vec<IpNet> {
    let pool = pool.trunc();
    let whole = span(pool);
    let mut spans: Vec<Span> = taken
        .iter()
        .filter(|t| t.addr().is_ipv4() == pool.addr().is_ipv4())
        .map(|t| span(t.trunc()))
        .filter(|s| s.end >= whole.start && s.start <= whole.end)
        .map(|s| Span {
            start: s.start.max(whole.start),
            end: s.end.min(whole.end),
        })
        .collect();
    spans.sort_unstable();
    let width = pool.max_prefix_len();
    let mut out = Vec::new();
    // `next`: the lowest address not yet known to be taken or emitted; None past the top.
    let mut next = Some(whole.start);
    for s in spans {
        let Some(from) = next else { break };
        if s.start > from {
            cover(pool, from, s.start - 1, width, &mut out);
        }
        if s.end >= from {
            next = s.end.checked_add(1).filter(|n| *n <= whole.end);
        }
    }
    if let Some(from) = next
        && from <= whole.end
    {
        cover(pool, from, whole.end, width, &mut out);
    }
    out
}

/// The largest of `free` (shortest prefix), lowest first among equals.
pub fn largest(free: &[IpNet]) -> Option<IpNet> {
    free.iter().copied().min_by_key(|b| b.prefix_len())
}

/// Best fit: the lowest block of length `len` inside the smallest free aligned block that can
/// hold it (lowest first among equals). Err carries the largest free block, if any; so does a
/// `len` shorter than the pool's or longer than the family's width.
pub fn best_fit(pool: IpNet, taken: &[IpNet], len: u8) -> Result<IpNet, NoRoom> {
    let free = free_blocks(pool, taken);
    best_fit_in(&free, len).ok_or(NoRoom {
        largest: largest(&free),
    })
}

/// [`best_fit`] over free blocks already computed by [`free_blocks`].
pub fn best_fit_in(free: &[IpNet], len: u8) -> Option<IpNet> {
    let block = free
        .iter()
        .filter(|b| b.prefix_len() <= len && len <= b.max_prefix_len())
        // Longest prefix = smallest block; `max_by_key` keeps the last of equals, so
        // reverse to keep the lowest.
        .rev()
        .max_by_key(|b| b.prefix_len())?;
    Some(IpNet::new(block.network(), len).expect("len checked against the family's width"))
}

/// How many blocks of length `len` the free space holds (exact; saturates at u128::MAX).
pub fn free_count(free: &[IpNet], len: u8) -> u128 {
    free.iter()
        .filter(|b| b.prefix_len() <= len && len <= b.max_prefix_len())
        .map(|b| {
            let bits = u32::from(len - b.prefix_len());
            1u128.checked_shl(bits).unwrap_or(u128::MAX)
        })
        .fold(0u128, u128::saturating_add)
}

/// The buddy chain of `prefix`, from its own length up to /1: for each length, the block
/// beside the prefix's ancestor of that length (its buddy) and the block the two make
/// together (their parent), longest first. A claim of `prefix` splits the free block that
/// holds it into the buddies longer than that block; a released `prefix` merges with each
/// buddy in turn that is a free block, as a buddy allocator does.
pub fn buddies(prefix: IpNet) -> Vec<(IpNet, IpNet)> {
    let prefix = prefix.trunc();
    let width = prefix.max_prefix_len();
    let start = to_u128(prefix.network());
    (1..=prefix.prefix_len())
        .rev()
        .map(|len| {
            let bit = 1u128 << (width - len);
            let ancestor = start & !(bit - 1);
            (
                net_at(prefix, ancestor ^ bit, len),
                net_at(prefix, ancestor & !bit, len - 1),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn the_whole_space_is_one_block_and_counts_saturate() {
        let all = net("::/0");
        assert_eq!(free_blocks(all, &[]), vec![all]);
        assert_eq!(free_count(&[all], 128), u128::MAX);
        assert_eq!(free_count(&[all], 127), 1 << 127);
        let v4 = net("0.0.0.0/0");
        assert_eq!(free_count(&[v4], 32), 1 << 32);
        // The top address taken: the walk must not overflow past it.
        let top = free_blocks(all, &[net("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")]);
        assert_eq!(top.len(), 128);
        assert_eq!(top[0], net("::/1"));
        let low = free_blocks(all, &[net("::/128")]);
        assert_eq!(low.len(), 128);
        assert_eq!(*low.last().unwrap(), net("8000::/1"));
    }

    #[test]
    fn buddies_climb_from_the_prefix_to_the_whole_space() {
        let chain = buddies(net("10.0.0.64/26"));
        assert_eq!(chain.len(), 26);
        assert_eq!(chain[0], (net("10.0.0.0/26"), net("10.0.0.0/25")));
        assert_eq!(chain[1], (net("10.0.0.128/25"), net("10.0.0.0/24")));
        assert_eq!(chain[25], (net("128.0.0.0/1"), net("0.0.0.0/0")));
        // A claim of a /26 in a free /24 leaves the /26 beside it and the /25 above it.
        let pool = net("10.0.0.0/24");
        let split: Vec<IpNet> = chain
            .iter()
            .map(|(b, _)| *b)
            .filter(|b| b.prefix_len() > pool.prefix_len())
            .collect();
        assert_eq!(split, free_blocks(pool, &[net("10.0.0.64/26")]));
        let top = buddies(net("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"));
        assert_eq!(top[0].0, net("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/128"));
        assert_eq!(top[127], (net("::/1"), net("::/0")));
    }

    #[test]
    fn a_full_pool_has_no_room_and_no_largest_block() {
        let pool = net("10.0.0.0/24");
        assert_eq!(
            best_fit(pool, &[net("10.0.0.0/16")], 30),
            Err(NoRoom { largest: None })
        );
        assert_eq!(
            best_fit(pool, &[net("10.0.0.0/25")], 24),
            Err(NoRoom {
                largest: Some(net("10.0.0.128/25"))
            })
        );
    }

    #[test]
    fn bounds_are_checked_against_the_pool() {
        let pool = net("2001:db8::/32");
        let ok = PrefixLengths {
            min: Some(44),
            max: Some(64),
        };
        assert!(ok.validate(pool).is_ok());
        assert!(ok.allows(pool, 56) && !ok.allows(pool, 40) && !ok.allows(pool, 65));
        for bad in [(Some(32), None), (None, Some(129)), (Some(64), Some(48))] {
            let lengths = PrefixLengths {
                min: bad.0,
                max: bad.1,
            };
            assert!(lengths.validate(pool).is_err(), "{bad:?}");
        }
        assert_eq!(PrefixLengths::default().range(pool), 33..=128);
    }

    #[test]
    fn fifty_thousand_claims_in_an_ipv6_slash_32_are_quick() {
        let pool = net("2001:db8::/32");
        let taken: Vec<IpNet> = (0..50_000u128)
            .map(|i| net_at(pool, to_u128(pool.network()) + (i << 64), 64))
            .collect();
        let started = std::time::Instant::now();
        let got = best_fit(pool, &taken, 64).unwrap();
        assert_eq!(got.to_string(), "2001:db8:0:c350::/64");
        let free = free_blocks(pool, &taken);
        assert_eq!(free_count(&free, 64), (1u128 << 32) - 50_000);
        assert!(started.elapsed().as_secs() < 2, "{:?}", started.elapsed());
    }

    /// The oracle: a bitmap of the 256 addresses of 10.0.0.0/24.
    struct Oracle {
        free: [bool; 256],
    }

    impl Oracle {
        fn block_free(&self, start: usize, len: u8) -> bool {
            let size = 1usize << (32 - len);
            self.free[start..start + size].iter().all(|f| *f)
        }

        /// Every aligned free block whose aligned parent (inside the /24) is not free.
        fn maximal(&self) -> Vec<(usize, u8)> {
            let mut out = Vec::new();
            for len in 24..=32u8 {
                let size = 1usize << (32 - len);
                for start in (0..256).step_by(size) {
                    let parent_free = len > 24 && {
                        let parent = start & !(2 * size - 1);
                        self.block_free(parent, len - 1)
                    };
                    if self.block_free(start, len) && !parent_free {
                        out.push((start, len));
                    }
                }
            }
            out.sort();
            out
        }

        fn count(&self, len: u8) -> u128 {
            let size = 1usize << (32 - len);
            (0..256)
                .step_by(size)
                .filter(|s| self.block_free(*s, len))
                .count() as u128
        }

        fn best_fit(&self, len: u8) -> Option<usize> {
            self.maximal()
                .into_iter()
                .filter(|(_, l)| *l <= len)
                // Smallest block first, then lowest address.
                .min_by_key(|(start, l)| (std::cmp::Reverse(*l), *start))
                .map(|(start, _)| start)
        }

        fn set(&mut self, n: IpNet, free: bool) {
            let s = span(n);
            for i in (s.start - 0x0a00_0000)..=(s.end - 0x0a00_0000) {
                self.free[i as usize] = free;
            }
        }
    }

    fn v4(start: usize, len: u8) -> IpNet {
        net_at(net("10.0.0.0/24"), 0x0a00_0000 + start as u128, len)
    }

    #[derive(Clone, Debug)]
    enum Op {
        Claim(u8),
        Release(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (26u8..=30).prop_map(Op::Claim),
            1 => any::<usize>().prop_map(Op::Release),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn best_fit_free_blocks_and_counts_match_the_brute_force_oracle(
            excludes in proptest::collection::vec((0usize..256, 28u8..=32), 0..4),
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let pool = net("10.0.0.0/24");
            let mut oracle = Oracle { free: [true; 256] };
            let mut taken: Vec<IpNet> = Vec::new();
            for (start, len) in excludes {
                let ex = v4(start, len).trunc();
                oracle.set(ex, false);
                taken.push(ex);
            }
            let fixed = taken.len();
            for op in ops {
                match op {
                    Op::Claim(len) => {
                        let got = best_fit(pool, &taken, len);
                        match oracle.best_fit(len) {
                            Some(start) => {
                                prop_assert_eq!(got, Ok(v4(start, len)));
                                oracle.set(v4(start, len), false);
                                taken.push(v4(start, len));
                            }
                            None => {
                                let largest = oracle
                                    .maximal()
                                    .into_iter()
                                    .min_by_key(|(start, l)| (*l, *start))
                                    .map(|(s, l)| v4(s, l));
                                prop_assert_eq!(got, Err(NoRoom { largest }));
                            }
                        }
                    }
                    Op::Release(i) if taken.len() > fixed => {
                        let i = fixed + i % (taken.len() - fixed);
                        let gone = taken.remove(i);
                        oracle.set(gone, true);
                        // Excludes may overlap each other (never claims): re-mark them.
                        for ex in &taken[..fixed] {
                            oracle.set(*ex, false);
                        }
                    }
                    Op::Release(_) => {}
                }
                let free = free_blocks(pool, &taken);
                let want: Vec<IpNet> =
                    oracle.maximal().into_iter().map(|(s, l)| v4(s, l)).collect();
                prop_assert_eq!(&free, &want);
                for len in 24..=32 {
                    prop_assert_eq!(free_count(&free, len), oracle.count(len), "/{}", len);
                }
            }
        }
    }
}
