//! An oracle of `spec.pick: hashed` written from the README's words alone: the key is the
//! SHA-256 that `sha256sum` (coreutils, not ipamctl's code) gives of
//! `ipamctl-pick-v1\n<namespace>\n<pool>\n<Kind>/<name>`, its first 16 bytes big-endian; the
//! start is the candidate at position `key mod count` of the ascending candidates; the walk
//! takes the first free one at or above it, else the lowest free one. Candidates are listed
//! one by one, so only small prefixes are for it.

// Every test crate uses a different subset of the oracle.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::{Command, Stdio};

use ipnet::IpNet;

/// The key of `owner` (`Kind/name`) in pool `pool` of namespace `ns` (`""`: cluster scope).
pub fn key(ns: &str, pool: &str, owner: &str) -> u128 {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run sha256sum (coreutils)");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(format!("ipamctl-pick-v1\n{ns}\n{pool}\n{owner}").as_bytes())
        .expect("write to sha256sum");
    let out = child.wait_with_output().expect("wait for sha256sum");
    assert!(out.status.success(), "sha256sum failed");
    let hex = String::from_utf8(out.stdout).expect("hex digits");
    u128::from_str_radix(&hex[..32], 16).expect("32 hex digits")
}

/// A pool's (or a request's) candidates, ascending, as ordinals.
pub struct Oracle {
    pub v6: bool,
    pub candidates: Vec<u128>,
}

fn ordinal(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u32::from(a).into(),
        IpAddr::V6(a) => a.into(),
    }
}

impl Oracle {
    /// The host addresses of an IPv4 `cidr` (all of a /31 or /32; else without network and
    /// broadcast) but `gateway` and `exclude` (addresses or prefixes).
    pub fn v4(cidr: &str, gateway: Option<&str>, exclude: &[&str]) -> Oracle {
        let net: IpNet = cidr.parse().unwrap();
        let excluded: Vec<IpNet> = exclude
            .iter()
            .map(|e| {
                e.parse()
                    .or_else(|_| e.parse::<IpAddr>().map(IpNet::from))
                    .unwrap()
            })
            .collect();
        let gateway: Option<IpAddr> = gateway.map(|g| g.parse().unwrap());
        let (lo, hi) = (ordinal(net.network()), ordinal(net.broadcast()));
        let (lo, hi) = if net.prefix_len() >= 31 {
            (lo, hi)
        } else {
            (lo + 1, hi - 1)
        };
        let candidates = (lo..=hi)
            .filter(|&n| {
                let a = IpAddr::V4(Ipv4Addr::from(n as u32));
                Some(a) != gateway && !excluded.iter().any(|e| e.contains(&a))
            })
            .collect();
        Oracle {
            v6: false,
            candidates,
        }
    }

    /// The addresses of a small IPv6 `cidr` (all of a /127 or /128; else without the
    /// subnet-router anycast address) but `gateway`.
    pub fn v6(cidr: &str, gateway: Option<&str>) -> Oracle {
        let net: IpNet = cidr.parse().unwrap();
        assert!(net.prefix_len() >= 112, "the oracle lists every candidate");
        let gateway: Option<u128> = gateway.map(|g| ordinal(g.parse().unwrap()));
        let (lo, hi) = (ordinal(net.network()), ordinal(net.broadcast()));
        let lo = if net.prefix_len() >= 127 { lo } else { lo + 1 };
        Oracle {
            v6: true,
            candidates: (lo..=hi).filter(|&n| Some(n) != gateway).collect(),
        }
    }

    /// Where an owner of key `key` starts.
    pub fn start(&self, key: u128) -> u128 {
        self.candidates[(key % self.candidates.len() as u128) as usize]
    }

    /// The address a claim from `start` gets when `taken` are held: the first free
    /// candidate at or above it, else the lowest free one.
    pub fn walk(&self, start: u128, taken: &BTreeSet<u128>) -> Option<u128> {
        let free = |c: &&u128| !taken.contains(c);
        let above = self.candidates.iter().filter(|&&c| c >= start).find(free);
        above.or_else(|| self.candidates.iter().find(free)).copied()
    }

    /// An ordinal as ipamctl prints it.
    pub fn address(&self, n: u128) -> String {
        if self.v6 {
            Ipv6Addr::from(n).to_string()
        } else {
            Ipv4Addr::from(n as u32).to_string()
        }
    }

    /// The first owner `name(i)` (i = 0, 1, …) whose start in pool `pool` of `ns` is `addr`.
    pub fn owner_starting_at(
        &self,
        addr: &str,
        name: impl Fn(usize) -> String,
        ns: &str,
        pool: &str,
    ) -> String {
        let want = ordinal(addr.parse().unwrap());
        (0..2000)
            .map(name)
            .find(|o| self.start(key(ns, pool, o)) == want)
            .unwrap_or_else(|| panic!("no owner of 2,000 starts at {addr}"))
    }
}

/// An `IPAMPool` manifest (followed by `---`); `pick` is written as given, and may carry
/// further spec lines after a newline (`"hashed\n  reuseAfter: 10m"`).
pub fn pool_yaml(
    name: &str,
    ns: Option<&str>,
    cidr: &str,
    gateway: Option<&str>,
    exclude: &[&str],
    pick: &str,
) -> String {
    let kind = if ns.is_some() { "private" } else { "public" };
    let mut y = format!("apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\n");
    if let Some(ns) = ns {
        y.push_str(&format!("  namespace: {ns}\n"));
    }
    y.push_str(&format!("spec:\n  cidr: {cidr}\n  kind: {kind}\n"));
    if let Some(g) = gateway {
        y.push_str(&format!("  gateway: {g}\n"));
    }
    if !exclude.is_empty() {
        y.push_str(&format!("  exclude: [{}]\n", exclude.join(", ")));
    }
    y.push_str(&format!("  pick: {pick}\n---\n"));
    y
}
