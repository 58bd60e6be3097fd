//! The conflicts across files and sides that git's own merge cannot see: an address claimed
//! on both sides with different owners, an owner claiming on both sides, overlapping prefix
//! claims, an allocation left outside its pool.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use crate::engine::diff::answer::{Conflict, ConflictKind, short};
use crate::engine::diff::classify::owner_text;
use crate::engine::diff::read::{Read, Reader, Tree, parse};
use crate::engine::git::{Repo, Status};
use crate::error::Result;
use crate::model::layout::{locate, object_path as path_of};
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::subnet::{off_limits_role, pool_candidates};
use crate::model::{AllocationManifest, Namespace, parse_allocation_name};
use crate::store::ObjectKind;

/// The prefix claims of the base branch's tip `other` that are new since the fork `old`.
pub(super) fn other_side_prefix_claims(
    repo: &Repo,
    reader: &Reader<'_>,
    old: &str,
    other: &str,
) -> Result<Vec<PrefixClaimManifest>> {
    let paths: Vec<String> = repo
        .changed(old, Some(other))?
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| matches!(locate(p), Some((ObjectKind::PrefixClaim, _, _))))
        .collect();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    Ok(reader
        .read(Tree::Commit(other), &refs)?
        .into_iter()
        .flatten()
        .filter_map(|b| match parse(ObjectKind::PrefixClaim, &b) {
            Read::PrefixClaim(m) => Some(*m),
            _ => None,
        })
        .collect())
}

/// The conflicts of the branch's prefix claims `ours` with `theirs`: same pool and scope,
/// overlapping prefixes, another claim.
pub(super) fn prefix_overlaps(
    ours: &[PrefixClaimManifest],
    theirs: &[PrefixClaimManifest],
    where_: &str,
) -> Vec<Conflict> {
    let mut found = Vec::new();
    for a in ours {
        for b in theirs {
            let same_pool =
                a.spec.pool == b.spec.pool && a.metadata.namespace == b.metadata.namespace;
            if same_pool
                && a.metadata.name != b.metadata.name
                && (a.spec.prefix.contains(&b.spec.prefix)
                    || b.spec.prefix.contains(&a.spec.prefix))
            {
                found.push(Conflict {
                    conflict: ConflictKind::PrefixOverlap,
                    object: format!("{}/{}", ObjectKind::PrefixClaim.resource(), a.metadata.name),
                    message: format!(
                        "{} of `{}` overlaps {} of `{}` in pool `{}`, {where_}",
                        a.spec.prefix, a.spec.owner, b.spec.prefix, b.spec.owner, a.spec.pool
                    ),
                });
            }
        }
    }
    found
}

/// The conflicts of the branch's prefix claims on the new side: a claim overlapping
/// another claim of its pool there, or outside its pool (or its pool gone).
pub(super) fn new_side_prefix_conflicts(
    reader: &Reader<'_>,
    tree: Tree<'_>,
    ours: &[PrefixClaimManifest],
) -> Result<Vec<Conflict>> {
    let mut conflicts = Vec::new();
    let mut scopes: Vec<Option<Namespace>> =
        ours.iter().map(|c| c.metadata.namespace.clone()).collect();
    scopes.sort();
    scopes.dedup();
    for ns in scopes {
        let names = reader.names(tree, ObjectKind::PrefixClaim, ns.as_ref())?;
        let paths: Vec<String> = names
            .iter()
            .map(|n| path_of(ObjectKind::PrefixClaim, ns.as_ref(), n))
            .collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let all: Vec<PrefixClaimManifest> = reader
            .read(tree, &refs)?
            .into_iter()
            .flatten()
            .filter_map(|b| match parse(ObjectKind::PrefixClaim, &b) {
                Read::PrefixClaim(m) => Some(*m),
                _ => None,
            })
            .collect();
        let mine: Vec<PrefixClaimManifest> = ours
            .iter()
            .filter(|c| c.metadata.namespace == ns)
            .cloned()
            .collect();
        conflicts.extend(prefix_overlaps(&mine, &all, "on the new side"));
        for c in &mine {
            let pool_path = path_of(ObjectKind::Pool, ns.as_ref(), c.spec.pool.as_str());
            let pool = reader.read(tree, &[pool_path.as_str()])?.pop().flatten();
            let inside = pool.map(|b| parse(ObjectKind::Pool, &b)).is_some_and(
                |r| matches!(r, Read::Pool(p) if p.spec.cidr.contains(&c.spec.prefix)),
            );
            if !inside {
                conflicts.push(Conflict {
                    conflict: ConflictKind::PrefixOverlap,
                    object: format!("{}/{}", ObjectKind::PrefixClaim.resource(), c.metadata.name),
                    message: format!(
                        "{} of `{}` lies outside pool `{}` (or the pool is gone) on the new side",
                        c.spec.prefix, c.spec.owner, c.spec.pool
                    ),
                });
            }
        }
    }
    Ok(conflicts)
}

/// The branch's claims against what the base branch claimed meanwhile.
pub(super) fn across_sides(
    repo: &Repo,
    old: &str,
    other: &str,
    claims: &[AllocationManifest],
) -> Result<Vec<Conflict>> {
    let theirs: Vec<String> = repo
        .changed(old, Some(other))?
        .into_iter()
        .filter(|(s, p)| {
            *s != Status::Deleted && matches!(locate(p), Some((ObjectKind::Allocation, _, _)))
        })
        .map(|(_, p)| p)
        .collect();
    let wanted: Vec<(String, String)> = theirs
        .iter()
        .map(|p| (other.to_owned(), p.clone()))
        .collect();
    let mut by_path: HashMap<String, AllocationManifest> = HashMap::new();
    let mut by_owner: HashMap<(Option<Namespace>, String, String), AllocationManifest> =
        HashMap::new();
    for (path, bytes) in theirs.iter().zip(repo.blobs(&wanted)?) {
        if let Some(Read::Allocation(m)) = bytes.map(|b| parse(ObjectKind::Allocation, &b)) {
            let key = owner_key(&m);
            by_owner.insert(key, (*m).clone());
            by_path.insert(path.clone(), *m);
        }
    }
    let mut conflicts = Vec::new();
    for m in claims {
        let ns = m.metadata.namespace.as_ref();
        let path = path_of(ObjectKind::Allocation, ns, &m.metadata.name);
        let object = format!("ipallocation/{}", m.metadata.name);
        if let Some(t) = by_path.get(&path)
            && t.spec.owner != m.spec.owner
        {
            conflicts.push(Conflict {
                conflict: ConflictKind::ClaimedOnBothSides,
                object: object.clone(),
                message: format!(
                    "{} in pool `{}` is claimed here by `{}` and on {} by `{}`; git will stop on an add/add conflict",
                    m.spec.address,
                    m.spec.pool,
                    owner_text(m),
                    short(other),
                    owner_text(t)
                ),
            });
        }
        if let Some(t) = by_owner.get(&owner_key(m))
            && t.spec.address != m.spec.address
        {
            conflicts.push(Conflict {
                conflict: ConflictKind::OwnerClaimedTwice,
                object,
                message: format!(
                    "`{}` claims {} in pool `{}` here and {} on {}; after a merge it would hold two",
                    owner_text(m),
                    m.spec.address,
                    m.spec.pool,
                    t.spec.address,
                    short(other)
                ),
            });
        }
    }
    Ok(conflicts)
}

/// An owner's identity in its pool.
fn owner_key(m: &AllocationManifest) -> (Option<Namespace>, String, String) {
    (
        m.metadata.namespace.clone(),
        m.spec.pool.to_string(),
        owner_text(m),
    )
}

/// Allocations the branch claims, and every allocation of a pool it changes, that are not
/// candidates of their pool on the new side.
pub(super) fn outside_pools(
    reader: &Reader<'_>,
    tree: Tree<'_>,
    claims: &[AllocationManifest],
    pools_touched: &BTreeSet<(Option<Namespace>, String)>,
) -> Result<Vec<Conflict>> {
    // (scope, pool) -> addresses to check.
    let mut check: BTreeMap<(Option<Namespace>, String), BTreeSet<IpAddr>> = BTreeMap::new();
    for m in claims {
        check
            .entry((m.metadata.namespace.clone(), m.spec.pool.to_string()))
            .or_default()
            .insert(m.spec.address);
    }
    for (ns, pool) in pools_touched {
        let names = reader.names(tree, ObjectKind::Allocation, ns.as_ref())?;
        let held = names
            .iter()
            .filter_map(|n| parse_allocation_name(n))
            .filter(|(p, _)| p == pool)
            .map(|(_, a)| a);
        check
            .entry((ns.clone(), pool.clone()))
            .or_default()
            .extend(held);
    }
    let mut conflicts = Vec::new();
    for ((ns, pool), addresses) in check {
        if addresses.is_empty() {
            continue;
        }
        let path = path_of(ObjectKind::Pool, ns.as_ref(), &pool);
        let manifest = reader
            .read(tree, &[&path])?
            .pop()
            .flatten()
            .map(|b| parse(ObjectKind::Pool, &b));
        let subnets = reader.subnets(tree, ns.as_ref(), &pool)?;
        let candidates = match manifest {
            Some(Read::Pool(p)) => pool_candidates(&p, &subnets),
            // Unreadable: reported as such above, or by `ipamctl check`.
            Some(_) => continue,
            None => {
                for address in addresses {
                    conflicts.push(outside(&pool, address, "which does not exist"));
                }
                continue;
            }
        };
        for address in addresses {
            if let Some((subnet, role)) = off_limits_role(&subnets, address) {
                let why = format!("on {role} of subnet `{}`", subnet.metadata.name);
                conflicts.push(outside(&pool, address, &why));
            } else if !candidates.contains(address) {
                conflicts.push(outside(&pool, address, "whose candidates it is not among"));
            }
        }
    }
    Ok(conflicts)
}

fn outside(pool: &str, address: IpAddr, why: &str) -> Conflict {
    let mut name = String::new();
    crate::model::push_allocation_name(&mut name, pool, address);
    Conflict {
        conflict: ConflictKind::OutsidePool,
        object: format!("ipallocation/{name}"),
        message: format!("{address} is left in pool `{pool}`, {why}"),
    }
}
