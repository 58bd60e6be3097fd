//! `ipamctl dhcp leases`: a DHCP server's lease file read (bounded, a regular file only),
//! compared with the allocations by [`crate::engine::leases`], and each drift rendered as a
//! table row or a JSON/YAML list item; a summary on stderr; exit 1 when anything drifts.

use std::io::{Read, Write};
use std::time::SystemTime;

use serde::Serialize;

use crate::cli::output::{self, Named};
use crate::cli::{DhcpFormat, DhcpLeasesArgs, GlobalArgs};
use crate::engine::dhcp::Family;
use crate::engine::leases::{self, Drift, DriftKind, Report};
use crate::engine::warning::Warnings;
use crate::error::{Error, Result, exit};
use crate::model::Timestamp;
use crate::model::lease::{self, Lease, LeaseFormat};
use crate::store::Store;

/// The largest lease file read: Kea's memfile of a million leases is about 150 MB.
const MAX_LEASE_FILE: u64 = 1 << 30;

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &DhcpLeasesArgs,
    out: &mut dyn Write,
) -> Result<i32> {
    let scope = super::dhcp::scope(store, g, &args.select)?;
    let now = match &args.at {
        Some(at) => super::flag("--at", Timestamp::parse(at))?.secs(),
        None => Timestamp::truncated(SystemTime::now()).secs(),
    };
    let (format, family) = formats(args.format);
    let leases = read(&args.file.display().to_string(), format)?;
    let mut warnings = Warnings::default();
    let report = leases::compare(store, &scope, family, &leases, now, &mut warnings);
    output::warn(&warnings);
    let report = report?;
    output::diagnostic(&summary(&report));
    let code = if report.drifts.is_empty() {
        exit::OK
    } else {
        exit::FAILURE
    };
    let items: Vec<Item> = report.drifts.iter().map(Item::of).collect();
    if !output::write_list(out, g.output, &items)? && !items.is_empty() {
        output::write(out, &table(&items, g))?;
    }
    Ok(code)
}

/// The lease file (`-`: stdin), read whole if it is a regular file of at most
/// [`MAX_LEASE_FILE`] bytes, and parsed; a malformed one is exit 2 naming the file and its
/// line.
pub(super) fn read(name: &str, format: LeaseFormat) -> Result<Vec<Lease>> {
    let mut bytes = Vec::new();
    let read = if name == "-" {
        std::io::stdin()
            .take(MAX_LEASE_FILE + 1)
            .read_to_end(&mut bytes)
    } else {
        super::apply::open_regular(name, "-")?
            .take(MAX_LEASE_FILE + 1)
            .read_to_end(&mut bytes)
    };
    read.map_err(|e| Error::io(name, e))?;
    if bytes.len() as u64 > MAX_LEASE_FILE {
        return Err(Error::invalid(
            name,
            format!("is larger than {MAX_LEASE_FILE} bytes, more than any lease file"),
        ));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        Error::invalid(
            name,
            format!(
                "is not UTF-8 text (at byte {}): not a lease file",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    lease::parse(format, &text).map_err(|why| Error::invalid(name, why))
}

/// The lease file format and the family a server of `format` serves.
pub(super) fn formats(format: DhcpFormat) -> (LeaseFormat, Family) {
    match format {
        DhcpFormat::Kea4 => (LeaseFormat::Kea4, Family::V4),
        DhcpFormat::Kea6 => (LeaseFormat::Kea6, Family::V6),
        DhcpFormat::Dnsmasq => (LeaseFormat::Dnsmasq, Family::Both),
    }
}

/// `2 drifts: 1 unheld, 0 other-mac, 1 never-leased, 0 expired (3 leases, 2 reservations)`.
fn summary(report: &Report) -> String {
    let counts: Vec<String> = DriftKind::ALL
        .iter()
        .map(|k| {
            let n = report.drifts.iter().filter(|d| d.kind == *k).count();
            format!("{n} {}", k.as_str())
        })
        .collect();
    let outside = match report.outside {
        0 => String::new(),
        n => format!(", {n} outside the scope, not judged"),
    };
    let n = report.drifts.len();
    format!(
        "{n} drift{}: {} ({} lease{} on {} segment{}, {} reservation{}{outside})",
        if n == 1 { "" } else { "s" },
        counts.join(", "),
        report.leases,
        if report.leases == 1 { "" } else { "s" },
        report.segments.len(),
        if report.segments.len() == 1 { "" } else { "s" },
        report.reservations,
        if report.reservations == 1 { "" } else { "s" },
    )
}

/// One drift as JSON and YAML show it: its kind of drift as `kind` and its address as
/// `name`, so that `-o name` prints `unheld/192.0.2.9` as every command prints
/// `kind/name`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    kind: &'static str,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    pool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    subnet: Option<String>,
    address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allocation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mac: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    leased_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_ends: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_host_name: Option<String>,
}

impl Named for Item {
    /// `-o name`: `unheld/192.0.2.3`.
    fn resource(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

impl Item {
    fn of(d: &Drift) -> Item {
        let lease = d.lease.as_ref();
        Item {
            kind: d.kind.as_str(),
            name: d.address.to_string(),
            namespace: d.segment.namespace.as_ref().map(|n| n.to_string()),
            pool: d.segment.pool.to_string(),
            subnet: d.segment.subnet.as_ref().map(|s| s.to_string()),
            address: d.address.to_string(),
            owner: d.held.as_ref().map(|h| h.owner.clone()),
            allocation: d.held.as_ref().map(|h| h.allocation.clone()),
            mac: d.held.as_ref().and_then(|h| h.mac).map(|m| m.to_string()),
            leased_to: lease.and_then(|l| l.hardware.clone()),
            lease_ends: lease.map(|l| match l.expires {
                Some(end) => Timestamp::from_secs(end).to_string(),
                None => "never".into(),
            }),
            lease_host_name: lease.and_then(|l| l.host.clone()),
        }
    }
}

fn table(items: &[Item], g: &GlobalArgs) -> String {
    let rows = items
        .iter()
        .map(|i| {
            vec![
                i.kind.to_owned(),
                output::or_dash(i.namespace.as_ref()),
                i.pool.clone(),
                output::or_dash(i.subnet.as_ref()),
                i.address.clone(),
                output::or_dash(i.owner.as_ref()),
                output::or_dash(i.mac.as_ref()),
                output::or_dash(i.leased_to.as_ref()),
                output::or_dash(i.lease_ends.as_ref()),
            ]
        })
        .collect();
    output::table(
        &[
            "DRIFT",
            "NAMESPACE",
            "POOL",
            "SUBNET",
            "ADDRESS",
            "OWNER",
            "MAC",
            "LEASED-TO",
            "LEASE-ENDS",
        ],
        rows,
        &[],
        g.no_headers,
    )
}
