//! The rules of `ipamctl check` for subnets and cooldown records: each against its path and
//! its pool, subnets of one pool against each other.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::rules::{KnownPool, PoolKey, scope_mismatch};
use super::{Decoded, Finding, Severity, error};
use crate::model::Metadata;
use crate::model::PoolRef;
use crate::model::cooldown::CooldownRecord;
use crate::model::subnet::{SubnetManifest, off_limits_role};
use crate::model::{AllocationManifest, PoolKind};

/// How far ahead of the checker's clock a `releasedAt` may be before it is reported: clocks
/// of machines sharing a repository disagree by moments, not minutes.
const CLOCK_SLACK: Duration = Duration::from_secs(60);

/// A name or namespace that disagrees with the file's path.
pub(super) fn misplaced(
    meta: &Metadata,
    stem: &str,
    rel: &str,
    scope: Option<&crate::model::Namespace>,
) -> Vec<Finding> {
    let mut found = Vec::new();
    if meta.name != stem {
        found.push(error(
            rel,
            format!(
                "metadata.name is `{}`, but the file is named `{stem}.yaml`",
                meta.name
            ),
        ));
    }
    if let Some(message) = scope_mismatch(meta.namespace.as_ref(), scope) {
        found.push(error(rel, message));
    }
    found
}

/// Checks each subnet against its path and its pool (it exists, holds the subnet), and the
/// subnets of one pool against each other (no overlap).
pub(super) fn check_subnets(
    subnets: &[Decoded<SubnetManifest>],
    pools: &HashMap<PoolKey<'_>, KnownPool<'_>>,
    findings: &mut Vec<Finding>,
) {
    let mut by_pool: HashMap<PoolKey<'_>, Vec<(&str, &SubnetManifest)>> = HashMap::new();
    for Decoded { file, manifest } in subnets {
        let Some(m) = manifest else { continue };
        findings.extend(misplaced(
            &m.metadata,
            &file.stem,
            &file.rel,
            file.scope.as_ref(),
        ));
        let pool = m.spec.pool.as_str();
        match pools.get(&(&file.scope, pool)) {
            None => findings.push(error(
                &file.rel,
                format!("subnet of pool `{pool}`, which does not exist in its scope"),
            )),
            Some(known) => {
                if let Some(p) = known.manifest()
                    && p.spec.kind == PoolKind::Supernet
                {
                    findings.push(error(
                        &file.rel,
                        format!(
                            "subnet of pool `{pool}`, a supernet, which has no subnets (a pool keeps its kind while it holds anything)"
                        ),
                    ));
                } else if let Some(p) = known.manifest()
                    && !p.spec.cidr.contains(&m.spec.cidr)
                {
                    findings.push(error(
                        &file.rel,
                        format!(
                            "{} does not lie inside its pool ({})",
                            m.spec.cidr, p.spec.cidr
                        ),
                    ));
                }
                // The options its guests are told: what it inherits must fit it.
                if let Some(p) = known.manifest()
                    && let Err(why) = m.dhcp(p)
                {
                    findings.push(error(&file.rel, why));
                }
            }
        }
        by_pool
            .entry((&file.scope, pool))
            .or_default()
            .push((file.rel.as_str(), m));
    }
    for siblings in by_pool.values_mut() {
        siblings.sort_by_key(|(_, m)| (m.spec.cidr.network(), m.spec.cidr.prefix_len()));
        for (i, (rel, a)) in siblings.iter().enumerate() {
            for (_, b) in &siblings[i + 1..] {
                if !a.spec.cidr.contains(&b.spec.cidr.network()) {
                    break;
                }
                findings.push(error(
                    rel,
                    format!(
                        "subnet `{}` ({}) overlaps subnet `{}` ({}) of the same pool",
                        a.metadata.name, a.spec.cidr, b.metadata.name, b.spec.cidr
                    ),
                ));
            }
        }
    }
}

/// Reports every allocation that sits on an address a subnet of its pool keeps from every
/// claim ([`SubnetManifest::off_limits`]): its gateway, reserved, network or broadcast
/// address. No claim makes one, and `subnet create` refuses to put a subnet's edge on a held
/// address, so such a file was written by hand or by an older ipamctl.
pub(super) fn check_off_limits(
    allocations: &[Decoded<AllocationManifest>],
    subnets: &[Decoded<SubnetManifest>],
    findings: &mut Vec<Finding>,
) {
    let mut by_pool: HashMap<PoolKey<'_>, Vec<SubnetManifest>> = HashMap::new();
    for Decoded { file, manifest } in subnets {
        if let Some(m) = manifest {
            by_pool
                .entry((&file.scope, m.spec.pool.as_str()))
                .or_default()
                .push(m.clone());
        }
    }
    if by_pool.is_empty() {
        return;
    }
    for Decoded { file, manifest } in allocations {
        let Some(m) = manifest else { continue };
        let Some(siblings) = by_pool.get(&(&file.scope, m.spec.pool.as_str())) else {
            continue;
        };
        let addr = m.spec.address;
        if let Some((subnet, role)) = off_limits_role(siblings, addr) {
            let pool = PoolRef {
                namespace: m.metadata.namespace.clone(),
                name: m.spec.pool.clone(),
            };
            findings.push(error(
                &file.rel,
                format!(
                    "address {addr} is {role} of {}, which no claim is given; release it ({}) and allocate again",
                    subnet.describe(),
                    crate::engine::hint::release(&pool, addr, &m.spec.owner)
                ),
            ));
        }
    }
}

/// Checks each cooldown record against its path and its pool. Returns the records that hold
/// nothing back (past the pool's window, of a pool without `reuseAfter`, or of no pool), by
/// path with their pool: what `check --fix` prunes.
pub(super) fn check_cooldown(
    records: &[Decoded<CooldownRecord>],
    pools: &HashMap<PoolKey<'_>, KnownPool<'_>>,
    now: SystemTime,
    findings: &mut Vec<Finding>,
) -> Vec<(String, PoolRef)> {
    let mut idle = Vec::new();
    for Decoded { file, manifest } in records {
        let Some(r) = manifest else { continue };
        findings.extend(misplaced(
            &r.metadata,
            &file.stem,
            &file.rel,
            file.scope.as_ref(),
        ));
        let warning = |message: String| Finding {
            severity: Severity::Warning,
            path: file.rel.clone(),
            message,
        };
        if r.has_legacy_name()
            && let Some((pool, address)) = crate::model::parse_allocation_name(&file.stem)
        {
            findings.push(warning(format!(
                "ambiguous name: this record of prefix {} of pool `{}` is named as pool `{pool}`'s record of address {address} would be (written before prefix records were named `….prefix`), and a release of that address would replace it; rename it to `{}.prefix.yaml`",
                r.prefix().map(|p| p.to_string()).unwrap_or_default(),
                r.spec.pool,
                file.stem,
            )));
        }
        const FIX: &str = "it holds nothing back; `ipamctl check --fix` removes it";
        let why = match pools.get(&(&file.scope, r.spec.pool.as_str())) {
            None => Some(format!(
                "cooldown record of pool `{}`, which does not exist in its scope; {FIX}",
                r.spec.pool
            )),
            // A pool that does not decode has its own finding; its window is unknown.
            Some(known) => match known.manifest().map(|p| &p.spec.reuse_after) {
                None => None,
                Some(None) => Some(format!(
                    "cooldown record of pool `{}`, which has no reuseAfter; {FIX}",
                    r.spec.pool
                )),
                Some(Some(window)) if !r.cooling(window.duration(), now) => Some(format!(
                    "released at {}, longer ago than the pool's reuseAfter ({window}); {FIX}",
                    r.spec.released_at
                )),
                Some(Some(_)) => None,
            },
        };
        if let Some(why) = why {
            findings.push(warning(why));
            idle.push((
                file.rel.clone(),
                PoolRef {
                    namespace: file.scope.clone(),
                    name: r.spec.pool.clone(),
                },
            ));
        }
        if r.released_at() > now + CLOCK_SLACK {
            findings.push(warning(format!(
                "releasedAt {} is ahead of this machine's clock: the address is kept until then plus the pool's reuseAfter",
                r.spec.released_at
            )));
        }
    }
    idle
}
