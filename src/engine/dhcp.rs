//! `dhcp export`: the DHCP reservations of the scopes as values, one per allocation that has
//! a MAC, on the segment ([`crate::engine::segments`]) that holds its address. The command
//! renders them as Kea or dnsmasq configuration.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::engine::segments::{self, Nic, Scope, Segment};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::Owner;
use crate::model::mac::Mac;
use crate::store::Store;

/// Address family an export serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 only (Kea's `Dhcp4`).
    V4,
    /// IPv6 only (Kea's `Dhcp6`).
    V6,
    /// Both (dnsmasq serves both from one file).
    Both,
}

impl Family {
    /// Whether a server of this family serves `address`.
    pub fn serves(self, address: IpAddr) -> bool {
        match self {
            Family::V4 => address.is_ipv4(),
            Family::V6 => address.is_ipv6(),
            Family::Both => true,
        }
    }
}

/// One reservation: a MAC, the address it gets and the host name it is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The NIC's MAC.
    pub mac: Mac,
    /// The allocated address.
    pub address: IpAddr,
    /// The host name ([`crate::model::host_name::host_name`]).
    pub host: String,
    /// Who holds the address, and the allocation's name: for messages.
    pub owner: Owner,
    /// The allocation's name.
    pub allocation: String,
}

/// A segment and its reservations, in address order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpSubnet {
    /// The subnet (or pool) served.
    pub segment: Segment,
    /// One per allocation with a MAC on it.
    pub reservations: Vec<Reservation>,
}

/// The reservations of `scope` for `family`: every segment of that family (also one without
/// reservations, so that a NIC added later only adds a line), in namespace, pool and prefix
/// order. Two segments that overlap (the private pools of two tenants over one range, the
/// normal case) are exit 4 naming both: one server cannot serve them, and Kea and dnsmasq
/// refuse the file. A MAC held twice on one segment (a hand edit; the allocator refuses it)
/// is exit 4 naming both holders: no DHCP server can honour both. A MAC on a multicast
/// address is exit 2.
pub fn reservations(
    store: &(dyn Store + Sync),
    scope: &Scope,
    family: Family,
    warnings: &mut Warnings,
) -> Result<Vec<DhcpSubnet>> {
    let placed = segments::placed(store, scope, true, warnings)?;
    let mut out = Vec::with_capacity(placed.len());
    for (segment, nics) in placed {
        if !family.serves(segment.cidr.addr()) {
            continue;
        }
        let reservations: Vec<Reservation> = nics
            .into_iter()
            .map(|n: Nic| Reservation {
                mac: n.mac.expect("placed with macs_only"),
                address: n.address,
                host: n.host,
                owner: n.owner,
                allocation: n.allocation,
            })
            .collect();
        let mut seen: BTreeMap<Mac, &Reservation> = BTreeMap::new();
        for r in &reservations {
            // A pool may reach into ff00::/8 (the tests' top-of-space pools do); no DHCP
            // server leases a multicast address, and Kea refuses the reservation.
            if r.address.is_multicast() {
                return Err(Error::invalid(
                    format!("allocation `{}`", r.allocation),
                    format!(
                        "{} is a multicast address, which no DHCP server hands out; remove its MAC or export without `--pool {}`",
                        r.address, segment.pool
                    ),
                ));
            }
            if let Some(first) = seen.insert(r.mac, r) {
                return Err(twice(first, r));
            }
        }
        out.push(DhcpSubnet {
            segment,
            reservations,
        });
    }
    refuse_overlaps(&out)?;
    Ok(out)
}

/// Exit 4 naming the first two segments of `subnets` whose prefixes overlap. One DHCP
/// server cannot tell which of them a client on the wire belongs to: Kea refuses the second
/// `subnet4` with that prefix, dnsmasq a second `dhcp-host` of one address. A tenant's
/// network has its own server (or relay): export it alone.
fn refuse_overlaps(subnets: &[DhcpSubnet]) -> Result<()> {
    let mut by_start: Vec<&Segment> = subnets.iter().map(|s| &s.segment).collect();
    by_start.sort_by_key(|s| (s.cidr.network(), s.cidr.prefix_len()));
    // Two prefixes nest or are disjoint: in order of their first address, a segment overlaps
    // an earlier one only if it starts inside the last one met (an IPv4 address sorts
    // before every IPv6 one).
    let mut last: Option<&Segment> = None;
    for s in by_start {
        if let Some(w) = last
            && w.cidr.contains(&s.cidr.network())
        {
            return Err(Error::Conflict {
                message: format!(
                    "{} ({}) overlaps {} ({}): one DHCP server cannot serve both (Kea and dnsmasq refuse the file)",
                    w.label(),
                    w.cidr,
                    s.label(),
                    s.cidr
                ),
                hint: Some(
                    "export for the server on each network: one namespace (`-n NS`), or one pool or subnet (`--pool P`, `--subnet S`)"
                        .into(),
                ),
            });
        }
        last = Some(s);
    }
    Ok(())
}

fn twice(first: &Reservation, second: &Reservation) -> Error {
    let mac = first.mac;
    Error::Conflict {
        message: format!(
            "MAC {mac} is held by `{}` ({}, allocation `{}`) and `{}` ({}, allocation `{}`)",
            first.owner.with_uid(),
            first.address,
            first.allocation,
            second.owner.with_uid(),
            second.address,
            second.allocation
        ),
        hint: Some(
            "a DHCP server cannot tell them apart: give one NIC another MAC; `ipamctl check` lists every MAC held twice"
                .into(),
        ),
    }
}

/// Exit 4 naming the first NIC (one owner in one scope) whose reservations carry two MACs,
/// with the `mac set` that gives it the first one everywhere.
fn refuse_two_macs(subnets: &[DhcpSubnet]) -> Result<()> {
    let mut first: BTreeMap<(&Option<crate::model::Namespace>, &Owner), (&Segment, &Reservation)> =
        BTreeMap::new();
    for s in subnets {
        for r in &s.reservations {
            let (segment, seen) = *first
                .entry((&s.segment.namespace, &r.owner))
                .or_insert((&s.segment, r));
            if seen.mac == r.mac {
                continue;
            }
            let pool = crate::model::PoolRef {
                namespace: segment.namespace.clone(),
                name: segment.pool.clone(),
            };
            let owner = &seen.owner;
            let uid = owner
                .uid()
                .map_or_else(|| "no uid".to_owned(), |u| format!("uid {u}"));
            return Err(Error::Conflict {
                message: format!(
                    "NIC `{owner}` ({uid}) carries MAC {} on {} (allocation `{}`) and MAC {} on {} (allocation `{}`): two hosts for one NIC (a `mac set` interrupted between pools leaves this)",
                    seen.mac, seen.address, seen.allocation, r.mac, r.address, r.allocation
                ),
                hint: Some(format!(
                    "give it one MAC: {}",
                    crate::engine::hint::mac_set(&pool, seen.address, owner, &seen.mac.to_string())
                )),
            });
        }
    }
    Ok(())
}

/// One dnsmasq `dhcp-host`: a MAC with at most one IPv4 and one IPv6 address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The NIC's MAC.
    pub mac: Mac,
    /// Its IPv4 address, if any.
    pub v4: Option<IpAddr>,
    /// Its IPv6 address, if any.
    pub v6: Option<IpAddr>,
    /// The host name.
    pub host: String,
}

/// The reservations of `subnets` by MAC, for a server that matches a client by its MAC
/// alone, whatever the subnet (dnsmasq: its result for a MAC given twice is undefined). A
/// MAC is one host: one owner with at most one IPv4 and one IPv6 address (a dual-stack NIC);
/// a MAC on two owners, or on two addresses of one family, is exit 4 naming both holders.
/// So is a NIC (one owner in one scope) whose allocations carry two MACs (a `mac set`
/// interrupted between its pools): two `dhcp-host` lines would name one host. Sorted by
/// MAC.
pub fn hosts_by_mac(
    store: &(dyn Store + Sync),
    scope: &Scope,
    warnings: &mut Warnings,
) -> Result<(Vec<DhcpSubnet>, Vec<Host>)> {
    let subnets = reservations(store, scope, Family::Both, warnings)?;
    refuse_two_macs(&subnets)?;
    let mut hosts: BTreeMap<Mac, (Host, Vec<&Reservation>)> = BTreeMap::new();
    for r in subnets.iter().flat_map(|s| &s.reservations) {
        let (host, held) = hosts.entry(r.mac).or_insert_with(|| {
            (
                Host {
                    mac: r.mac,
                    v4: None,
                    v6: None,
                    host: r.host.clone(),
                },
                Vec::new(),
            )
        });
        let slot = if r.address.is_ipv4() {
            &mut host.v4
        } else {
            &mut host.v6
        };
        // The same owner's NIC in an IPv4 and an IPv6 pool is one host; anything else is
        // two holders of one MAC.
        if let Some(first) = held
            .iter()
            .find(|h| h.owner != r.owner || h.address.is_ipv4() == r.address.is_ipv4())
        {
            return Err(twice(first, r));
        }
        *slot = Some(r.address);
        held.push(r);
    }
    let hosts = hosts.into_values().map(|(h, _)| h).collect();
    Ok((subnets, hosts))
}
