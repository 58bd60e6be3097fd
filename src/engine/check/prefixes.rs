//! The rules of `ipamctl check` for prefix claims: each against its path, its owner (never a
//! tenant's floating IP) and its pool (a supernet that exists, the prefix inside it and on
//! no exclude), and the claims of one pool against each other (no two overlap: the lock
//! keeps ipamctl's own claims apart, an outside writer such as a `git pull` of another
//! clone's claim can still make one).

use std::collections::HashMap;

use ipnet::IpNet;

use super::ranges::misplaced;
use super::rules::{KnownPool, PoolKey};
use super::{Decoded, Finding, error};
use crate::engine::prefix::overlaps;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::vpc::vpc_uid;
use crate::model::{Owner, OwnerKind, PoolKind, Uid};

/// Checks every claim; overlapping claims of one pool are reported on both files.
pub(super) fn check_prefix_claims(
    claims: &[Decoded<PrefixClaimManifest>],
    pools: &HashMap<PoolKey<'_>, KnownPool<'_>>,
    findings: &mut Vec<Finding>,
) {
    let mut by_pool: HashMap<PoolKey<'_>, Vec<(IpNet, &str)>> = HashMap::new();
    let mut by_owner: HashMap<(PoolKey<'_>, &Owner), Vec<(IpNet, &str)>> = HashMap::new();
    for Decoded { file, manifest } in claims {
        let Some(c) = manifest else { continue };
        findings.extend(misplaced(
            &c.metadata,
            &file.stem,
            &file.rel,
            file.scope.as_ref(),
        ));
        if let Some(message) = c.tenant_problem() {
            findings.push(error(&file.rel, message));
        }
        let key = (&file.scope, c.spec.pool.as_str());
        let prefix = c.spec.prefix;
        match pools.get(&key).map(|k| k.manifest()) {
            None => findings.push(error(
                &file.rel,
                format!(
                    "prefix claim of pool `{}`, which does not exist in its scope",
                    c.spec.pool
                ),
            )),
            // A pool that does not decode has its own finding.
            Some(None) => {}
            Some(Some(pool)) if pool.spec.kind != PoolKind::Supernet => findings.push(error(
                &file.rel,
                format!(
                    "prefix claim of pool `{}`, which is a {} pool, not a supernet",
                    c.spec.pool, pool.spec.kind
                ),
            )),
            Some(Some(pool)) if !pool.spec.cidr.contains(&prefix) || prefix == pool.spec.cidr => {
                findings.push(error(
                    &file.rel,
                    format!(
                        "{prefix} is outside pool `{}` ({})",
                        c.spec.pool, pool.spec.cidr
                    ),
                ));
            }
            Some(Some(pool)) => {
                if let Some(e) = pool.spec.exclude.iter().find(|e| overlaps(e.net(), prefix)) {
                    findings.push(error(
                        &file.rel,
                        format!(
                            "{prefix} overlaps {e}, excluded from pool `{}`",
                            c.spec.pool
                        ),
                    ));
                }
            }
        }
        by_pool
            .entry(key)
            .or_default()
            .push((prefix, file.rel.as_str()));
        by_owner
            .entry((key, &c.spec.owner))
            .or_default()
            .push((prefix, file.rel.as_str()));
    }
    check_overlaps(by_pool, findings);
    check_owners(by_owner, findings);
    check_vpc_ranges(claims, pools, findings);
}

/// An owner holds one prefix per supernet: a claim copied under another name (what merging
/// two clones gives, or an `import` before it refused one) is a finding on each file.
fn check_owners(
    by_owner: HashMap<(PoolKey<'_>, &Owner), Vec<(IpNet, &str)>>,
    findings: &mut Vec<Finding>,
) {
    for (((_, pool), owner), mut held) in by_owner {
        if held.len() < 2 {
            continue;
        }
        held.sort();
        let all: Vec<String> = held.iter().map(|(p, _)| p.to_string()).collect();
        for (_, rel) in &held {
            findings.push(error(
                rel,
                format!(
                    "owner `{owner}` holds {} prefixes of pool `{pool}` ({}), where an owner holds one: release all but one",
                    held.len(),
                    all.join(", ")
                ),
            ));
        }
    }
}

/// A VPC's pool lies inside a range its VPC claimed from a supernet (a claim owned by the
/// VPC's router, of the pool's family), when the VPC drew any: the rest of the supernet is
/// other VPCs'. `apply` and `import` refuse to make one that does not
/// ([`crate::engine::holders`]).
fn check_vpc_ranges(
    claims: &[Decoded<PrefixClaimManifest>],
    pools: &HashMap<PoolKey<'_>, KnownPool<'_>>,
    findings: &mut Vec<Finding>,
) {
    let mut ranges: HashMap<&Uid, Vec<IpNet>> = HashMap::new();
    for c in claims.iter().filter_map(|d| d.manifest.as_ref()) {
        if c.spec.owner.kind() == OwnerKind::Vpc
            && let Some(uid) = c.spec.owner.uid()
        {
            ranges.entry(uid).or_default().push(c.spec.prefix);
        }
    }
    let mut found: Vec<Finding> = Vec::new();
    for known in pools.values() {
        let Some(pool) = known.manifest() else {
            continue;
        };
        let Some(uid) = vpc_uid(pool) else { continue };
        let cidr = pool.spec.cidr;
        let family: Vec<&IpNet> = ranges
            .get(&uid)
            .into_iter()
            .flatten()
            .filter(|r| r.addr().is_ipv4() == cidr.addr().is_ipv4())
            .collect();
        if !family.is_empty() && !family.iter().any(|r| r.contains(&cidr)) {
            let shown: Vec<String> = family.iter().map(ToString::to_string).collect();
            found.push(error(
                known.rel(),
                format!(
                    "VPC pool `{}` ({cidr}) is outside the range its VPC claimed ({}): it overlaps what the supernet hands out to others; put it back inside",
                    pool.metadata.name,
                    shown.join(", ")
                ),
            ));
        }
    }
    findings.extend(found);
}

/// Two claims of one pool that share an address: a finding on each file.
fn check_overlaps(by_pool: HashMap<PoolKey<'_>, Vec<(IpNet, &str)>>, findings: &mut Vec<Finding>) {
    for (_, mut held) in by_pool {
        // Sorted by network address, a claim overlaps a later one only if it contains that
        // one's network: compare each with the widest-reaching earlier claim.
        held.sort();
        let mut reach: Option<(IpNet, &str)> = None;
        for (prefix, rel) in held {
            if let Some((wide, wide_rel)) = reach
                && wide.contains(&prefix.network())
            {
                for (at, other, with) in [(rel, wide, wide_rel), (wide_rel, prefix, rel)] {
                    findings.push(error(
                        at,
                        format!("overlaps {other}, the claim in `{with}`: two claims hold its addresses; release one of them"),
                    ));
                }
                if wide.broadcast() >= prefix.broadcast() {
                    continue;
                }
            }
            reach = Some((prefix, rel));
        }
    }
}
