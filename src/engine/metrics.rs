//! `ipamctl metrics`: the figures an operator alerts on, as metric samples (values, not
//! text; `cli` renders them in Prometheus' exposition format). Every figure is the one `pool
//! list`, `subnet list` and `quota list` print, computed by the same functions
//! ([`crate::engine::pool::list`], [`crate::engine::subnet_usage::list`],
//! [`crate::engine::prefix::usage`], [`crate::engine::quota::usage`]), so they can never
//! disagree.

use std::net::IpAddr;
use std::time::SystemTime;

use ipnet::IpNet;

use crate::engine::warning::Warnings;
use crate::error::Result;
use crate::model::candidates::Usage;
use crate::model::cooldown::CooldownRecord;
use crate::model::{Namespace, PoolKind, PoolManifest, PoolRef};
use crate::store::Store;

/// A sample's value: a count, exact (an IPv6 pool's may exceed 64 bits), or a fraction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A whole number of addresses, prefixes or records.
    Count(u128),
    /// A share, 0 to 1.
    Ratio(f64),
}

/// One sample: its labels (in the order they are written) and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// `(label, value)` pairs; an empty value means "none" (a pool without a zone).
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: Value,
}

/// A gauge and its samples, in a fixed order (scope, pool, subnet, then the rest).
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    /// The metric's name, `ipamctl_…`.
    pub name: &'static str,
    /// What it measures, on one line (its `# HELP`).
    pub help: &'static str,
    /// Its samples; a metric without any is still listed (its `# HELP` and `# TYPE`).
    pub samples: Vec<Sample>,
}

/// The counts of `check`'s findings, for the metrics that carry them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Problems {
    /// Findings of severity error.
    pub errors: usize,
    /// Findings of severity warning.
    pub warnings: usize,
}

impl Problems {
    /// The counts of `report`'s findings.
    pub fn of(report: &crate::engine::check::Report) -> Problems {
        use crate::engine::check::Severity;
        Problems {
            errors: report.count(Severity::Error),
            warnings: report.count(Severity::Warning),
        }
    }
}

/// The metrics of every pool and subnet of `scopes`, and (if given) of `check`'s findings.
/// Pools that cannot be read are skipped with a warning in `warnings`, as `pool list` does.
pub fn collect(
    store: &dyn Store,
    scopes: &[Option<Namespace>],
    problems: Option<Problems>,
    warnings: &mut Warnings,
) -> Result<Vec<Metric>> {
    let mut m = Metrics::default();
    let pools = crate::engine::pool::list(store, scopes, warnings)?;
    // The addresses each address pool's cooldown records keep now, for its subnets' count.
    let mut cooling_in = Vec::new();
    let now = store.clock()?;
    for (manifest, usage) in &pools {
        let pool = PoolRef {
            namespace: manifest.metadata.namespace.clone(),
            name: manifest.name(),
        };
        let labels = pool_labels(manifest);
        if manifest.spec.kind == PoolKind::Supernet {
            let claims = crate::engine::prefix::pool_claims(store, &pool)?;
            supernet(
                &mut m,
                &labels,
                &crate::engine::prefix::usage(manifest, &claims),
            );
        } else {
            addresses(&mut m.pool, &labels, usage);
            let (leases, lapsed) = leases(store, &pool, now)?;
            m.leases.push(sample(&labels, Value::Count(leases)));
            m.lapsed.push(sample(&labels, Value::Count(lapsed)));
        }
        let cooling = cooling_records(store, &pool, manifest)?;
        m.pool_cooldown
            .push(sample(&labels, Value::Count(cooling.len() as u128)));
        cooling_in.push((pool, cooling));
    }
    for (subnet, status) in crate::engine::subnet_usage::list(store, scopes, None)? {
        let zone = pools
            .iter()
            .find(|(p, _)| {
                p.metadata.namespace == subnet.metadata.namespace && p.name() == subnet.spec.pool
            })
            .and_then(|(p, _)| p.spec.zone.as_ref().map(|z| z.to_string()));
        let labels = vec![
            ("namespace", or_empty(subnet.metadata.namespace.as_ref())),
            ("pool", subnet.spec.pool.to_string()),
            ("subnet", subnet.metadata.name.clone()),
            ("family", family(subnet.spec.cidr).into()),
            ("zone", zone.unwrap_or_default()),
        ];
        addresses(&mut m.subnet, &labels, &status.usage);
        let cooling = cooling_in
            .iter()
            .find(|(p, _)| p.namespace == subnet.metadata.namespace && p.name == subnet.spec.pool)
            .map_or(0, |(_, kept)| {
                kept.iter()
                    .filter(|at| at.is_some_and(|a| subnet.spec.cidr.contains(&a)))
                    .count()
            });
        m.subnet_cooldown
            .push(sample(&labels, Value::Count(cooling as u128)));
    }
    let namespaces: Vec<Namespace> = scopes.iter().flatten().cloned().collect();
    for u in crate::engine::quota::usage(store, Some(&namespaces))? {
        let labels = vec![
            ("namespace", u.namespace.to_string()),
            ("quota", u.quota.clone()),
            ("resource", u.resource.to_owned()),
        ];
        m.quota_used
            .push(sample(&labels, Value::Count(u128::from(u.used))));
        m.quota_limit
            .push(sample(&labels, Value::Count(u128::from(u.limit))));
    }
    Ok(m.finish(problems))
}

/// The leases of `pool`'s allocations, and how many of them lapsed by `now`.
fn leases(store: &dyn Store, pool: &PoolRef, now: crate::model::Timestamp) -> Result<(u128, u128)> {
    let found = store.find_allocations(
        pool.namespace.as_ref(),
        Some(&pool.name),
        &crate::model::OwnerFilter::default(),
    )?;
    let (mut leases, mut lapsed) = (0, 0);
    for m in found.into_iter().filter_map(|f| f.parsed.ok()) {
        if m.spec.expires_at.is_some() {
            leases += 1;
            lapsed += u128::from(m.spec.lapsed(now, std::time::Duration::ZERO));
        }
    }
    Ok((leases, lapsed))
}

/// The samples of every metric, by metric, before they are named.
#[derive(Default)]
struct Metrics {
    pool: AddressMetrics,
    subnet: AddressMetrics,
    pool_cooldown: Vec<Sample>,
    subnet_cooldown: Vec<Sample>,
    leases: Vec<Sample>,
    lapsed: Vec<Sample>,
    claimed: Vec<Sample>,
    largest_length: Vec<Sample>,
    largest_addresses: Vec<Sample>,
    free_blocks: Vec<Sample>,
    quota_used: Vec<Sample>,
    quota_limit: Vec<Sample>,
}

/// The usage figures of an address pool, or of a subnet.
#[derive(Default)]
struct AddressMetrics {
    capacity: Vec<Sample>,
    allocated: Vec<Sample>,
    free: Vec<Sample>,
    used: Vec<Sample>,
    off: Vec<Sample>,
}

/// The usage metrics of address pools and of subnets: (pool metric, subnet metric, help).
const USAGE: [(&str, &str, &str); 5] = [
    (
        "ipamctl_pool_capacity_addresses",
        "ipamctl_subnet_capacity_addresses",
        "Candidates: the addresses a claim can be given (the prefix less its network and broadcast addresses, gateway, excludes and subnets' reserved addresses), as pool list's and subnet list's CANDIDATES.",
    ),
    (
        "ipamctl_pool_allocated_addresses",
        "ipamctl_subnet_allocated_addresses",
        "Allocations on candidates (ALLOCATED).",
    ),
    (
        "ipamctl_pool_free_addresses",
        "ipamctl_subnet_free_addresses",
        "Candidates no allocation holds (FREE); addresses a cooldown record keeps are counted here too.",
    ),
    (
        "ipamctl_pool_used_ratio",
        "ipamctl_subnet_used_ratio",
        "Allocated candidates over candidates, 0 to 1 (USED, unrounded); 0 when there are no candidates.",
    ),
    (
        "ipamctl_pool_off_candidate_allocations",
        "ipamctl_subnet_off_candidate_allocations",
        "Allocations on addresses that are not candidates (the pool was edited after the claim; `ipamctl check` names them).",
    ),
];

impl AddressMetrics {
    /// The samples of each of [`USAGE`], in its order.
    fn into_samples(self) -> [Vec<Sample>; 5] {
        [
            self.capacity,
            self.allocated,
            self.free,
            self.used,
            self.off,
        ]
    }
}

impl Metrics {
    /// Names the samples, in the order the exposition lists them.
    fn finish(self, problems: Option<Problems>) -> Vec<Metric> {
        let metric = |name, help, samples| Metric {
            name,
            help,
            samples,
        };
        let mut all = Vec::new();
        for (pool, m) in [(true, self.pool), (false, self.subnet)] {
            for ((for_pool, for_subnet, help), samples) in USAGE.into_iter().zip(m.into_samples()) {
                all.push(metric(
                    if pool { for_pool } else { for_subnet },
                    help,
                    samples,
                ));
            }
        }
        all.extend([
            metric(
                "ipamctl_pool_cooldown_records",
                "Cooldown records that keep an address (a supernet's: a prefix) from other owners now, within the pool's reuseAfter.",
                self.pool_cooldown,
            ),
            metric(
                "ipamctl_subnet_cooldown_records",
                "Cooldown records that keep an address of the subnet from other owners now, within its pool's reuseAfter.",
                self.subnet_cooldown,
            ),
            metric(
                "ipamctl_pool_leases",
                "Allocations that are leases (allocate --ttl): they lapse unless renewed.",
                self.leases,
            ),
            metric(
                "ipamctl_pool_lapsed_leases",
                "Leases whose expiresAt has passed (the store's clock), still held until reconcile --expired --apply (or a server's reaper) releases them after their grace.",
                self.lapsed,
            ),
            metric(
                "ipamctl_supernet_claimed_prefixes",
                "Child prefixes claimed from a supernet pool.",
                self.claimed,
            ),
            metric(
                "ipamctl_supernet_largest_free_prefix_length",
                "Prefix length of a supernet's largest free block (no sample when it is full).",
                self.largest_length,
            ),
            metric(
                "ipamctl_supernet_largest_free_addresses",
                "Addresses in a supernet's largest free block (0 when it is full).",
                self.largest_addresses,
            ),
            metric(
                "ipamctl_supernet_free_blocks",
                "Free blocks of each prefix length a supernet hands out (label length), as pool list's FREE.",
                self.free_blocks,
            ),
        ]);
        all.extend(quota_metrics(self.quota_used, self.quota_limit));
        if let Some(p) = problems {
            let by = |severity: &str, n: usize| Sample {
                labels: vec![("severity", severity.into())],
                value: Value::Count(n as u128),
            };
            all.push(metric(
                "ipamctl_check_problems",
                "Findings of `ipamctl check` on the whole store, by severity (errors fail the check).",
                vec![by("error", p.errors), by("warning", p.warnings)],
            ));
        }
        all
    }
}

/// The quotas' gauges: what is held of each ceiling, and the ceiling.
fn quota_metrics(used: Vec<Sample>, limit: Vec<Sample>) -> [Metric; 2] {
    [
        Metric {
            name: "ipamctl_quota_used",
            help: "What a namespace holds of a resource one of its quotas limits (addresses, floatingIPs, prefixes), as quota list's USED; alert when it nears ipamctl_quota_limit.",
            samples: used,
        },
        Metric {
            name: "ipamctl_quota_limit",
            help: "A quota's ceiling on a resource of its namespace (spec.hard), as quota list's LIMIT; a claim that would go over it is refused (exit 7, QUOTA_EXCEEDED).",
            samples: limit,
        },
    ]
}

/// The usage samples of one address pool or subnet (`labels`).
fn addresses(m: &mut AddressMetrics, labels: &[(&'static str, String)], u: &Usage) {
    let ratio = if u.candidates == 0 {
        0.0
    } else {
        u.allocated as f64 / u.candidates as f64
    };
    m.capacity.push(sample(labels, Value::Count(u.candidates)));
    m.allocated
        .push(sample(labels, Value::Count(u128::from(u.allocated))));
    m.free.push(sample(labels, Value::Count(u.free)));
    m.used.push(sample(labels, Value::Ratio(ratio)));
    m.off
        .push(sample(labels, Value::Count(u128::from(u.off_candidates))));
}

/// The samples of one supernet pool (`labels`).
fn supernet(m: &mut Metrics, labels: &[(&'static str, String)], u: &crate::engine::prefix::Usage) {
    m.claimed
        .push(sample(labels, Value::Count(u.claimed.len() as u128)));
    if let Some(block) = u.largest {
        m.largest_length
            .push(sample(labels, Value::Count(u128::from(block.prefix_len()))));
    }
    m.largest_addresses.push(sample(
        labels,
        Value::Count(u.largest.map_or(0, block_size)),
    ));
    for (length, n) in &u.free {
        let mut labels = labels.to_vec();
        labels.push(("length", length.to_string()));
        m.free_blocks.push(sample(&labels, Value::Count(*n)));
    }
}

/// The number of addresses in `block` (2^128 does not fit: a free ::/0 counts one less).
fn block_size(block: IpNet) -> u128 {
    let host_bits = u32::from(block.max_prefix_len() - block.prefix_len());
    1u128.checked_shl(host_bits).unwrap_or(u128::MAX)
}

fn sample(labels: &[(&'static str, String)], value: Value) -> Sample {
    Sample {
        labels: labels.to_vec(),
        value,
    }
}

/// A pool's labels: namespace (empty for a public pool), pool, family and zone.
fn pool_labels(m: &PoolManifest) -> Vec<(&'static str, String)> {
    vec![
        ("namespace", or_empty(m.metadata.namespace.as_ref())),
        ("pool", m.metadata.name.clone()),
        ("family", family(m.spec.cidr).into()),
        (
            "zone",
            m.spec
                .zone
                .as_ref()
                .map(|z| z.to_string())
                .unwrap_or_default(),
        ),
    ]
}

fn or_empty(ns: Option<&Namespace>) -> String {
    ns.map(|n| n.to_string()).unwrap_or_default()
}

fn family(cidr: IpNet) -> &'static str {
    match cidr.network() {
        IpAddr::V4(_) => "ipv4",
        IpAddr::V6(_) => "ipv6",
    }
}

/// The cooldown records of `pool` that keep what they name from other owners now (none
/// without `reuseAfter`; one that cannot be read keeps it, as it does for a claim), each
/// with its address (`None`: a supernet's record, which keeps a prefix).
fn cooling_records(
    store: &dyn Store,
    pool: &PoolRef,
    m: &PoolManifest,
) -> Result<Vec<Option<IpAddr>>> {
    let Some(window) = &m.spec.reuse_after else {
        return Ok(Vec::new());
    };
    let now = SystemTime::now();
    let keeps =
        |r: &Option<CooldownRecord>| r.as_ref().is_none_or(|r| r.cooling(window.duration(), now));
    Ok(if m.spec.kind == PoolKind::Supernet {
        crate::engine::cooldown::prefix_records(store, pool)?
            .iter()
            .filter(|(_, r)| keeps(r))
            .map(|_| None)
            .collect()
    } else {
        crate::engine::cooldown::records(store, pool)?
            .into_iter()
            .filter(|(_, r)| keeps(r))
            .map(|(address, _)| Some(address))
            .collect()
    })
}

/// `metrics` in Prometheus' text exposition format (both front ends serve it: `ipamctl
/// metrics` and the server's `GET /metrics`): each metric's `# HELP` and `# TYPE gauge`
/// lines, then its samples, in the order given.
pub fn exposition(metrics: &[Metric]) -> String {
    let mut text = String::new();
    for m in metrics {
        text.push_str(&format!("# HELP {} {}\n", m.name, escape_help(m.help)));
        text.push_str(&format!("# TYPE {} gauge\n", m.name));
        for s in &m.samples {
            let labels: Vec<String> = s
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            let value = match s.value {
                // Exact: the reader rounds to a float, not this file.
                Value::Count(n) => n.to_string(),
                Value::Ratio(r) => r.to_string(),
            };
            text.push_str(&format!("{}{{{}}} {value}\n", m.name, labels.join(",")));
        }
    }
    text
}

/// A `# HELP` text: backslash and line feed escaped.
fn escape_help(text: &str) -> String {
    escape(text, false)
}

/// A label value: backslash, double quote and line feed escaped.
fn escape_label(text: &str) -> String {
    escape(text, true)
}

/// `text` with backslash and line feed escaped, and with `quote` the double quote too.
/// (Char by char, not by `str::replace`: the lock table's check reads a `.replace(` call
/// as a store's write.)
fn escape(text: &str, quote: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_counts_its_addresses_up_to_the_whole_space() {
        let net = |s: &str| s.parse::<IpNet>().unwrap();
        assert_eq!(block_size(net("10.0.0.0/24")), 256);
        assert_eq!(block_size(net("10.0.0.1/32")), 1);
        assert_eq!(block_size(net("fd00::/64")), 1 << 64);
        assert_eq!(block_size(net("::/0")), u128::MAX);
    }

    #[test]
    fn exposition_writes_help_type_and_escaped_labels() {
        let m = Metric {
            name: "ipamctl_x",
            help: "a \\ b",
            samples: vec![Sample {
                labels: vec![("pool", "a\"b\nc".into()), ("zone", String::new())],
                value: Value::Count(u128::MAX),
            }],
        };
        assert_eq!(
            exposition(&[m]),
            "# HELP ipamctl_x a \\\\ b\n# TYPE ipamctl_x gauge\n\
             ipamctl_x{pool=\"a\\\"b\\nc\",zone=\"\"} 340282366920938463463374607431768211455\n"
        );
    }
}
