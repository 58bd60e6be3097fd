//! `dhcp leases`: what the guests actually leased, against what was allocated. The leases a
//! server recorded ([`crate::model::lease`]) are set beside the segments of the scope and
//! the allocations on them, and every difference is a [`Drift`]: a lease of an address
//! nobody holds, a lease of a held address to another MAC than its allocation's, a
//! reservation never leased, a lease past its end.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use serde::Serialize;

use crate::engine::dhcp::Family;
use crate::engine::list::{self, Query};
use crate::engine::metrics::{Metric, Sample, Value};
use crate::engine::segments::{self, Scope, Segment};
use crate::engine::warning::Warnings;
use crate::error::Result;
use crate::model::lease::Lease;
use crate::model::mac::Mac;
use crate::model::{AllocationManifest, Namespace, PoolName};
use crate::store::Store;

/// The kinds of drift, in the order a report lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriftKind {
    /// A current lease of an address no allocation holds (released, or never claimed).
    Unheld,
    /// A current lease of a held address to another MAC than the allocation's (or to any
    /// MAC, when the allocation has none).
    OtherMac,
    /// A reservation (an allocation with a MAC) whose address has no lease at all: its
    /// guest never came up, or came up with another MAC.
    NeverLeased,
    /// A lease past its end (or reclaimed by the server) that the server still records.
    Expired,
}

impl DriftKind {
    /// Every kind, in report order.
    pub const ALL: [DriftKind; 4] = [
        DriftKind::Unheld,
        DriftKind::OtherMac,
        DriftKind::NeverLeased,
        DriftKind::Expired,
    ];

    /// Its name in tables, JSON and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::Unheld => "unheld",
            DriftKind::OtherMac => "other-mac",
            DriftKind::NeverLeased => "never-leased",
            DriftKind::Expired => "expired",
        }
    }
}

/// One difference between the leases and the allocations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    /// What kind.
    pub kind: DriftKind,
    /// The segment (subnet, or pool without subnets) of the address.
    pub segment: Segment,
    /// The address.
    pub address: IpAddr,
    /// The allocation of the address, if one holds it.
    pub held: Option<Held>,
    /// The lease of the address, if the server recorded one.
    pub lease: Option<Lease>,
}

/// The allocation of a drifting address: its owner, name and MAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// `Kind/name` of the owner.
    pub owner: String,
    /// The allocation's name.
    pub allocation: String,
    /// Its MAC, if it has one.
    pub mac: Option<Mac>,
}

/// The comparison of one scope's allocations with a server's leases.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Every drift, by segment, then address, then kind.
    pub drifts: Vec<Drift>,
    /// How many leases the files hold on the scope's segments.
    pub leases: usize,
    /// How many leases lie outside every segment of the scope (not judged: another
    /// namespace's, or a range ipamctl does not know).
    pub outside: usize,
    /// How many reservations (allocations with a MAC) the scope has of the family.
    pub reservations: usize,
    /// The segments judged, for counts that are zero too.
    pub segments: Vec<Segment>,
}

impl Report {
    /// The count of each kind of drift on each segment judged (zeros included), in
    /// segment order.
    pub fn counts(&self) -> Vec<(&Segment, DriftKind, usize)> {
        let mut by: HashMap<(usize, DriftKind), usize> = HashMap::new();
        for d in &self.drifts {
            if let Some(at) = self.segments.iter().position(|s| *s == d.segment) {
                *by.entry((at, d.kind)).or_default() += 1;
            }
        }
        let mut out = Vec::new();
        for (at, s) in self.segments.iter().enumerate() {
            for kind in DriftKind::ALL {
                out.push((s, kind, by.get(&(at, kind)).copied().unwrap_or(0)));
            }
        }
        out
    }
}

/// Compares `leases` (of the addresses `family` covers) with the allocations of `scope` at
/// `now` (seconds since the epoch). A lease is judged on the first segment of the scope
/// that holds its address; one on none is counted as outside. A `--pool` or `--subnet`
/// that names nothing is exit 3, as for `dhcp export`.
pub fn compare(
    store: &(dyn Store + Sync),
    scope: &Scope,
    family: Family,
    leases: &[Lease],
    now: u64,
    warnings: &mut Warnings,
) -> Result<Report> {
    let placed = segments::placed(store, scope, true, warnings)?;
    let segments: Vec<Segment> = placed
        .iter()
        .map(|(s, _)| s.clone())
        .filter(|s| family.serves(s.cidr.addr()))
        .collect();
    let held = holders(store, scope, &segments, warnings)?;
    let mut report = Report {
        segments: segments.clone(),
        ..Report::default()
    };
    let mut leased: BTreeSet<(usize, IpAddr)> = BTreeSet::new();
    for lease in leases {
        let Some(at) = segments
            .iter()
            .position(|s| s.cidr.contains(&lease.address))
        else {
            report.outside += 1;
            continue;
        };
        report.leases += 1;
        leased.insert((at, lease.address));
        let segment = &segments[at];
        let holder = held.get(&(&segment.namespace, &segment.pool, lease.address));
        let kind = if lease.ended(now) {
            Some(DriftKind::Expired)
        } else {
            match holder {
                None => Some(DriftKind::Unheld),
                Some(h) if lease.hardware.is_some() && lease.mac != h.spec.mac => {
                    Some(DriftKind::OtherMac)
                }
                Some(_) => None,
            }
        };
        if let Some(kind) = kind {
            report.drifts.push(Drift {
                kind,
                segment: segment.clone(),
                address: lease.address,
                held: holder.map(held_of),
                lease: Some(lease.clone()),
            });
        }
    }
    never_leased(&placed, &segments, &leased, &mut report);
    let order = |d: &Drift| {
        let at = segments.iter().position(|s| *s == d.segment);
        (at, d.address, d.kind)
    };
    report.drifts.sort_by_key(order);
    Ok(report)
}

/// Adds a `never-leased` drift for each reservation of `placed` on a judged segment whose
/// address has no lease in `leased` (by segment index and address).
fn never_leased(
    placed: &segments::Placed,
    segments: &[Segment],
    leased: &BTreeSet<(usize, IpAddr)>,
    report: &mut Report,
) {
    for (segment, nics) in placed {
        let Some(at) = segments.iter().position(|s| s == segment) else {
            continue;
        };
        for nic in nics {
            report.reservations += 1;
            if !leased.contains(&(at, nic.address)) {
                report.drifts.push(Drift {
                    kind: DriftKind::NeverLeased,
                    segment: segment.clone(),
                    address: nic.address,
                    held: Some(Held {
                        owner: nic.owner.to_string(),
                        allocation: nic.allocation.clone(),
                        mac: nic.mac,
                    }),
                    lease: None,
                });
            }
        }
    }
}

fn held_of(m: &AllocationManifest) -> Held {
    Held {
        owner: m.spec.owner.to_string(),
        allocation: m.metadata.name.clone(),
        mac: m.spec.mac,
    }
}

/// Allocations by (namespace, pool, address).
type Holders<'a> = HashMap<(&'a Option<Namespace>, &'a PoolName, IpAddr), AllocationManifest>;

/// Every allocation of the segments' pools, by (namespace, pool, address): whoever holds
/// an address, NIC or not.
fn holders<'a>(
    store: &(dyn Store + Sync),
    scope: &Scope,
    segments: &'a [Segment],
    warnings: &mut Warnings,
) -> Result<Holders<'a>> {
    let scopes = match &scope.scopes {
        Some(s) => s.clone(),
        None => store.scopes()?,
    };
    let found = list::collect(store, Some(&scopes), &Query::default(), warnings)?;
    let mut held = HashMap::new();
    for m in found {
        let Some(s) = segments.iter().find(|s| {
            s.namespace == m.metadata.namespace
                && s.pool == m.spec.pool
                && s.cidr.contains(&m.spec.address)
        }) else {
            continue;
        };
        held.insert((&s.namespace, &s.pool, m.spec.address), m);
    }
    Ok(held)
}

/// `ipamctl_dhcp_lease_drift`: for each report (its lease file's format named, e.g. `kea4`)
/// the count of each kind of drift on each segment judged, zeros included, so that an alert
/// can fire on `> 0` and a resolved drift is seen going back to 0.
pub fn drift_metric(reports: &[(&'static str, Report)]) -> Metric {
    let mut samples = Vec::new();
    for (format, report) in reports {
        for (segment, kind, n) in report.counts() {
            samples.push(Sample {
                labels: vec![
                    (
                        "namespace",
                        segment
                            .namespace
                            .as_ref()
                            .map(|n| n.to_string())
                            .unwrap_or_default(),
                    ),
                    ("pool", segment.pool.to_string()),
                    (
                        "subnet",
                        segment
                            .subnet
                            .as_ref()
                            .map(|s| s.to_string())
                            .unwrap_or_default(),
                    ),
                    ("format", (*format).to_owned()),
                    ("drift", kind.as_str().to_owned()),
                ],
                value: Value::Count(n as u128),
            });
        }
    }
    Metric {
        name: "ipamctl_dhcp_lease_drift",
        help: "Differences between a DHCP server's lease file and the allocations, by kind (unheld, other-mac, never-leased, expired), on each subnet (or pool without subnets).",
        samples,
    }
}
