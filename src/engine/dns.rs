//! `dns export`: the records of a forward zone (an A or AAAA per address of a named NIC)
//! and of the reverse zones that cover those addresses, as values. The command writes them
//! as zone files with a `named.conf` fragment.
//!
//! Reverse zones are cut on octet boundaries for IPv4 (`in-addr.arpa`) and nibble
//! boundaries for IPv6 (`ip6.arpa`, RFC 3596): a segment's prefix length rounded *up* to the
//! next boundary, so that every zone written lies inside the segment and holds names only
//! for its addresses (a /20 gives the /24 zones that hold exported addresses). An IPv4
//! segment longer than a /24 would need its enclosing /24 zone, which it shares with others:
//! that is refused unless the operator says they serve the whole /24 (`enclosing`); RFC 2317
//! classless delegation is not written. A zone inside another zone of the export (a /24
//! subnet of a /16 pool) is folded into the outer one.
//!
//! The SOA serial is derived from the state, not from the directory the zones are rendered
//! into ([`settled`]): the second of the newest change the store records in the exported
//! scopes, as a Unix time. A fresh checkout or a fresh directory renders the same serial
//! for the same state, and any change after a render is dated a later second.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::engine::segments::{self, Scope, Segment};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::store::Store;

/// The records of an export. Names are relative to their zone; every list is sorted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Zones {
    /// The forward zone's records: host name and one address (A or AAAA).
    pub forward: Vec<(String, IpAddr)>,
    /// The reverse zones, by name (`1.42.10.in-addr.arpa`), each with its PTR records:
    /// relative owner name (`7`, or `@` for the zone's apex) and host name.
    pub reverse: BTreeMap<String, Vec<(String, String)>>,
}

/// The records of every named NIC (a `VirtualMachine` or `Node` allocation, with or without
/// a MAC) of `scope`. `enclosing`: write an IPv4 segment longer than a /24 into its enclosing
/// /24 zone instead of refusing it (exit 2). An address named by two owners (private pools
/// of two namespaces overlap) is exit 4 naming both.
pub fn zones(
    store: &(dyn Store + Sync),
    scope: &Scope,
    enclosing: bool,
    warnings: &mut Warnings,
) -> Result<Zones> {
    let placed = segments::placed(store, scope, false, warnings)?;
    let mut forward = Vec::new();
    // Reverse zone length (bits) → zone → owner → (host, holder).
    let mut ptr: BTreeMap<(u8, String), BTreeMap<String, (String, String)>> = BTreeMap::new();
    for (segment, nics) in &placed {
        if nics.is_empty() {
            continue;
        }
        let bits = zone_bits(segment, enclosing)?;
        for nic in nics {
            forward.push((nic.host.clone(), nic.address));
            let (zone, owner) = split(nic.address, bits);
            let holder = nic.owner.with_uid();
            let records = ptr.entry((bits, zone)).or_default();
            if let Some((_, other)) = records.get(&owner)
                && *other != holder
            {
                return Err(Error::Conflict {
                    message: format!(
                        "address {} is held by `{other}` and `{holder}`: one reverse name cannot point at both",
                        nic.address
                    ),
                    hint: Some("export one namespace at a time (`-n NS`)".into()),
                });
            }
            records.insert(owner, (nic.host.clone(), holder));
        }
    }
    forward.sort();
    forward.dedup();
    Ok(Zones {
        forward,
        reverse: fold(ptr),
    })
}

/// How long [`settled`] waits for the state to hold still.
const SETTLE: Duration = Duration::from_secs(10);

/// How far ahead of the store's clock its newest change may be dated (seconds) before the
/// export refuses it: a change is never dated later than when it was made.
const FUTURE: i64 = 2;

/// [`zones`], with the serial their state gives: the newest change to the scopes exported
/// (a Unix time in seconds; 1 for a store that records none).
///
/// A change dated in the same second as the serial, but made after the zones were read,
/// would get the same serial for other records. So the state is read only once the store's
/// clock is past the second of its newest change, and read again if a change came in while
/// it was read: any change after that is dated a later second, so a later render gets a
/// strictly higher serial. A state that does not hold still for [`SETTLE`] is exit 4.
pub fn settled(
    store: &(dyn Store + Sync),
    scope: &Scope,
    enclosing: bool,
    warnings: &mut Warnings,
) -> Result<(Zones, u32)> {
    let scopes = scope.scopes.as_deref();
    let deadline = Instant::now() + SETTLE;
    loop {
        let before = store.changed(scopes)?;
        let newest = before.newest.unwrap_or(0);
        if newest > before.now.saturating_add(FUTURE) {
            // Waiting would not help, and a serial from it would not rise with the changes
            // made until that time.
            return Err(Error::Conflict {
                message: format!(
                    "the state's newest change is dated {} s ahead of the clock that dates its changes: a serial taken from it would not rise with the next change",
                    newest - before.now
                ),
                hint: Some(
                    "set the clock right, or bring the file's time back (`touch` the files dated ahead)"
                        .into(),
                ),
            });
        }
        if before.now > newest {
            let mut seen = Warnings::default();
            let read = zones(store, scope, enclosing, &mut seen)?;
            if store.changed(scopes)?.newest == before.newest {
                warnings.extend(seen);
                let serial = u32::try_from(newest).unwrap_or(u32::MAX).max(1);
                return Ok((read, serial));
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::Conflict {
                message: format!(
                    "the state kept changing for {} s while the zones were read: no serial is sure to be higher than the last render's",
                    SETTLE.as_secs()
                ),
                hint: Some("run `ipamctl dns export` again when the changes have stopped".into()),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The length of `segment`'s reverse zones, in bits of the address.
fn zone_bits(segment: &Segment, enclosing: bool) -> Result<u8> {
    let len = segment.cidr.prefix_len();
    let step = if segment.cidr.addr().is_ipv4() { 8 } else { 4 };
    let up = len.div_ceil(step) * step;
    if segment.cidr.addr().is_ipv4() && up > 24 {
        if enclosing {
            return Ok(24);
        }
        let (zone, _) = split(segment.cidr.network(), 24);
        return Err(Error::Usage {
            message: format!(
                "{} ({}) is smaller than a /24: its reverse names belong to `{zone}`, which covers addresses outside it (RFC 2317 delegation is not written)",
                segment.label(),
                segment.cidr
            ),
            hint: Some(format!(
                "if you serve all of `{zone}`, add --reverse-enclosing; else leave it out with --pool or --subnet"
            )),
        });
    }
    Ok(up.max(step))
}

/// `address` as its reverse zone of `bits` bits and the owner name inside it.
fn split(address: IpAddr, bits: u8) -> (String, String) {
    let (labels, per, suffix): (Vec<String>, u8, &str) = match address {
        IpAddr::V4(a) => (
            a.octets().iter().map(u8::to_string).collect(),
            8,
            "in-addr.arpa",
        ),
        IpAddr::V6(a) => (
            a.octets()
                .iter()
                .flat_map(|o| [o >> 4, o & 0xf])
                .map(|n| format!("{n:x}"))
                .collect(),
            4,
            "ip6.arpa",
        ),
    };
    let cut = usize::from(bits / per);
    let rev = |parts: &[String]| parts.iter().rev().cloned().collect::<Vec<_>>().join(".");
    let zone = match cut {
        0 => suffix.to_owned(),
        _ => format!("{}.{suffix}", rev(&labels[..cut])),
    };
    let owner = match rev(&labels[cut..]) {
        o if o.is_empty() => "@".to_owned(),
        o => o,
    };
    (zone, owner)
}

/// Folds every zone that lies inside a shorter zone of the export into it, its owner names
/// made relative to the outer zone.
fn fold(
    ptr: BTreeMap<(u8, String), BTreeMap<String, (String, String)>>,
) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    // Shortest zones first, so an outer zone exists before the zones inside it arrive.
    for ((_, zone), records) in ptr {
        let outer = out
            .keys()
            .find(|o| zone.ends_with(&format!(".{o}")))
            .cloned();
        let (target, prefix) = match outer {
            Some(o) => {
                let inner = zone[..zone.len() - o.len() - 1].to_owned();
                (o, Some(inner))
            }
            None => (zone, None),
        };
        let into = out.entry(target).or_default();
        for (owner, (host, _)) in records {
            let name = match (&prefix, owner.as_str()) {
                (None, _) => owner,
                (Some(p), "@") => p.clone(),
                (Some(p), o) => format!("{o}.{p}"),
            };
            into.insert(name, host);
        }
    }
    out.into_iter()
        .map(|(zone, records)| (zone, records.into_iter().collect()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_names_cut_on_octets_and_nibbles() {
        let v4: IpAddr = "10.42.1.7".parse().unwrap();
        assert_eq!(split(v4, 24), ("1.42.10.in-addr.arpa".into(), "7".into()));
        assert_eq!(split(v4, 16), ("42.10.in-addr.arpa".into(), "7.1".into()));
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let (zone, owner) = split(v6, 64);
        assert_eq!(zone, "0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa");
        assert_eq!(owner, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0");
        assert_eq!(split(v6, 128).1, "@");
    }

    #[test]
    fn an_inner_zone_folds_into_the_outer_one() {
        let mut ptr = BTreeMap::new();
        ptr.insert(
            (16, "42.10.in-addr.arpa".to_owned()),
            BTreeMap::from([("2.0".to_owned(), ("a".to_owned(), "A".to_owned()))]),
        );
        ptr.insert(
            (24, "1.42.10.in-addr.arpa".to_owned()),
            BTreeMap::from([("7".to_owned(), ("b".to_owned(), "B".to_owned()))]),
        );
        let out = fold(ptr);
        assert_eq!(
            out["42.10.in-addr.arpa"],
            vec![("2.0".into(), "a".into()), ("7.1".into(), "b".into())]
        );
        assert_eq!(out.len(), 1);
    }
}
