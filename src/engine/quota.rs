//! Quotas kept: a claim that would take a namespace over one of its quotas
//! ([`crate::model::quota`]) is refused, exit 7 ([`Error::QuotaExceeded`]), and nothing is
//! claimed. The one home of the rule: every writer that adds to what a namespace holds
//! calls [`admit`] here, whose guard it holds until its claim is durable.
//!
//! # What is charged to whom ([`Charge`])
//!
//! - an allocation in a namespace's pool: `addresses` of that namespace (a dual-stack
//!   claim makes one per family, so two);
//! - a tenant's floating IP (owner `FloatingIP/<tenant>/<name>`) in a cluster pool:
//!   `floatingIPs` of the tenant;
//! - a prefix claim in a namespace's supernet: `prefixes` of that namespace, and a VPC's
//!   range from a cluster supernet (annotated with its VPC, [`RANGE_ANNOTATION`]):
//!   `prefixes` of the VPC's namespace.
//!
//! - a VPC router's uplink in a cluster pool (owner `VPC/router` with the VPC's uid):
//!   `floatingIPs` of the VPC's namespace, found by the uid its pools record.
//!
//! Anything else (a cluster pool's allocation for another owner) is charged to no
//! namespace.
//!
//! # Why it is race-free
//!
//! No file name or constraint can arbitrate a count, so a lock does: every claim charged
//! to a namespace that has a quota on the resource takes the namespace's quota lock
//! ([`crate::store::Locks::lock_quota`]) once its look-up found the owner new, after its
//! claim locks (last in the order of [`crate::store::guard`]), and holds it until its
//! claim is durable (the file store: until the guard drops, after the exclusive create; a
//! database: until the transaction commits). Under it the claim reads the quotas again,
//! counts what the namespace holds (the stored objects as they are, never a cache) and
//! claims only below every limit. Two claims of one namespace therefore count one after
//! the other, and the second sees the first's. A holder asking again never reaches the
//! count: its look-up answers it first, so a re-ask at the ceiling is still `existing`.
//!
//! What the lock cannot see: a writer that takes no lock (a hand edit, `git pull`, a merge)
//! and a claim that read "no quota" just before the quota was first applied. Both can
//! leave a namespace over; `check` reports it, and claims are refused until it is back
//! under.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::subnet::Put;
use crate::engine::warning::{Warning, Warnings};
use crate::error::{Error, Result};
use crate::model::quota::{QuotaManifest, Resource};
use crate::model::vpc::{RANGE_ANNOTATION, range_annotation_vpc};
use crate::model::{Namespace, Owner, OwnerFilter, OwnerKind, PoolRef};
use crate::store::{ObjectKind, QuotaLock, Store};
use crate::yaml;

/// What one new claim is charged to: a namespace's resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Charge {
    /// The namespace whose quotas count it.
    pub namespace: Namespace,
    /// Which of their ceilings.
    pub resource: Resource,
}

impl Charge {
    /// A new allocation of `owner` in `pool` (see the module docs).
    pub fn of_allocation(pool: &PoolRef, owner: &Owner) -> Option<Charge> {
        match &pool.namespace {
            Some(ns) => Some(Charge {
                namespace: ns.clone(),
                resource: Resource::Addresses,
            }),
            None => owner.tenant().map(|tenant| Charge {
                namespace: tenant,
                resource: Resource::FloatingIps,
            }),
        }
    }

    /// A new prefix claim in `pool`, written with `annotations` (see the module docs).
    pub fn of_prefix(pool: &PoolRef, annotations: &BTreeMap<String, String>) -> Option<Charge> {
        let namespace = match &pool.namespace {
            Some(ns) => ns.clone(),
            None => range_annotation_vpc(annotations.get(RANGE_ANNOTATION)?)?.0,
        };
        Some(Charge {
            namespace,
            resource: Resource::Prefixes,
        })
    }
}

/// What a new allocation of `owner` in `pool` is charged to: [`Charge::of_allocation`],
/// and for a VPC router's uplink in a cluster pool (owner `VPC/router`, named by its VPC's
/// uid only) `floatingIPs` of the namespace whose VPC that is, found by the uid its pools
/// record: an uplink is a public address the tenant holds, as a floating IP is.
pub fn charge(store: &dyn Store, pool: &PoolRef, owner: &Owner) -> Result<Option<Charge>> {
    if let Some(charge) = Charge::of_allocation(pool, owner) {
        return Ok(Some(charge));
    }
    let (None, OwnerKind::Vpc, Some(uid)) = (&pool.namespace, owner.kind(), owner.uid()) else {
        return Ok(None);
    };
    for ns in store.scopes()?.into_iter().flatten() {
        if vpc_uids(store, &ns)?.contains(uid.as_str()) {
            return Ok(Some(Charge {
                namespace: ns,
                resource: Resource::FloatingIps,
            }));
        }
    }
    Ok(None)
}

/// The uids of the VPCs of `ns`, as their pools record them (`ownerReferences` of kind
/// `VPC`).
fn vpc_uids(store: &dyn Store, ns: &Namespace) -> Result<std::collections::BTreeSet<String>> {
    let mut uids = std::collections::BTreeSet::new();
    for name in store.list(ObjectKind::Pool, Some(ns))? {
        let Some(bytes) = store.get(ObjectKind::Pool, Some(ns), &name)? else {
            continue;
        };
        let Some(pool) = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| yaml::decode_pool(text).ok())
        else {
            continue; // `check` reports it
        };
        uids.extend(
            pool.metadata
                .owner_refs
                .iter()
                .filter(|r| r.kind == crate::model::vpc::VPC_KIND)
                .map(|r| r.uid.clone()),
        );
    }
    Ok(uids)
}

/// The quotas of `ns`, in name order. A quota that does not parse fails closed (exit 1,
/// naming its file): a ceiling nobody can read is not no ceiling.
pub fn quotas(store: &dyn Store, ns: &Namespace) -> Result<Vec<QuotaManifest>> {
    let mut names = store.list(ObjectKind::Quota, Some(ns))?;
    names.sort();
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        let Some(bytes) = store.get(ObjectKind::Quota, Some(ns), &name)? else {
            continue; // deleted since the listing
        };
        let path = || store.locate(ObjectKind::Quota, Some(ns), &name);
        let quota = std::str::from_utf8(&bytes)
            .map_err(|_| "is not UTF-8 text".to_owned())
            .and_then(yaml::decode_quota)
            .map_err(|why| Error::Corrupt {
                path: path().into(),
                message: format!(
                    "{why}; claims charged to namespace `{ns}` are refused until it is repaired: run `ipamctl check`"
                ),
            })?;
        found.push(quota);
    }
    Ok(found)
}

/// How much of `resource` namespace `ns` holds now, counted from the stored objects.
pub fn used(store: &dyn Store, ns: &Namespace, resource: Resource) -> Result<u64> {
    match resource {
        Resource::Addresses => store.count(ObjectKind::Allocation, Some(ns)),
        Resource::FloatingIps => {
            let floating = OwnerFilter::default()
                .with_kind(OwnerKind::FloatingIp)
                .map_err(|e| Error::invalid("owner", e))?;
            let found = store.find_allocations(None, None, &floating)?;
            let floating = found
                .iter()
                .filter_map(|f| f.parsed.as_ref().ok())
                .filter(|m| m.spec.owner.tenant().as_ref() == Some(ns))
                .count() as u64;
            Ok(floating + uplinks(store, ns)?)
        }
        Resource::Prefixes => {
            let own = store.count(ObjectKind::PrefixClaim, Some(ns))?;
            Ok(own + vpc_ranges_in_cluster(store, ns)?)
        }
    }
}

/// The uplinks of `ns`'s VPCs' routers in the cluster's pools.
fn uplinks(store: &dyn Store, ns: &Namespace) -> Result<u64> {
    let uids = vpc_uids(store, ns)?;
    if uids.is_empty() {
        return Ok(0);
    }
    let routers = OwnerFilter::default()
        .with_kind(OwnerKind::Vpc)
        .map_err(|e| Error::invalid("owner", e))?;
    let found = store.find_allocations(None, None, &routers)?;
    Ok(found
        .iter()
        .filter_map(|f| f.parsed.as_ref().ok())
        .filter(|m| {
            m.spec
                .owner
                .uid()
                .is_some_and(|u| uids.contains(u.as_str()))
        })
        .count() as u64)
}

/// The prefix claims of cluster supernets that are ranges of `ns`'s VPCs.
fn vpc_ranges_in_cluster(store: &dyn Store, ns: &Namespace) -> Result<u64> {
    let routers =
        OwnerFilter::new(Some("VPC/router"), None).map_err(|e| Error::invalid("owner", e))?;
    let mut count = 0;
    // Read here rather than through `engine::prefix`, which calls this module.
    for name in store.list(ObjectKind::PrefixClaim, None)? {
        let Some(bytes) = store.get(ObjectKind::PrefixClaim, None, &name)? else {
            continue;
        };
        let Some(claim) = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| yaml::decode_prefix_claim(text).ok())
        else {
            continue; // `check` reports it; an unreadable claim is no VPC's range
        };
        let range = claim.metadata.annotations.get(RANGE_ANNOTATION);
        if routers.matches(&claim.spec.owner)
            && range
                .and_then(|a| range_annotation_vpc(a))
                .map(|(n, _)| n)
                .as_ref()
                == Some(ns)
        {
            count += 1;
        }
    }
    Ok(count)
}

/// Admits a new claim charged to `charge`, or refuses it when it would take its namespace
/// over one of its quotas (exit 7, naming the quota, its limit and what is held). The
/// caller holds its claim locks and found that the owner holds nothing yet (a holder asking
/// again never gets here, so it never counts twice). When a quota limits the resource, the
/// namespace's quota lock is taken first and returned: the caller holds it until its claim
/// is durable, so that the next claim of the namespace counts this one. `None` when nothing
/// is charged or nothing limits it (a store that cannot be written: no lock either; its
/// claim fails as it would have).
pub fn admit(store: &dyn Store, charge: Option<&Charge>) -> Result<Option<QuotaLock>> {
    let Some(charge) = charge else {
        return Ok(None);
    };
    let limited =
        |quotas: &[QuotaManifest]| quotas.iter().any(|q| q.limit(charge.resource).is_some());
    if !limited(&quotas(store, &charge.namespace)?) {
        return Ok(None);
    }
    let lock = match store.lock_quota(&charge.namespace) {
        Ok(lock) => Some(lock),
        Err(Error::ReadOnly { .. }) => None,
        Err(e) => return Err(e),
    };
    // Read again under the lock: what the claim before this one left is what counts.
    refuse_over(store, charge)?;
    Ok(lock)
}

/// [`admit`] for a new allocation of `owner` in `pool` ([`charge`]); a dry run only refuses
/// ([`refuse_over`]), taking no lock.
pub fn admit_allocation(
    store: &dyn Store,
    pool: &PoolRef,
    owner: &Owner,
    dry_run: bool,
) -> Result<Option<QuotaLock>> {
    match (charge(store, pool, owner)?, dry_run) {
        (Some(charge), true) => refuse_over(store, &charge).map(|()| None),
        (charge, _) => admit(store, charge.as_ref()),
    }
}

/// [`admit`] without its lock, for an answer that claims nothing (a dry run, or a check
/// before a command's first write): exit 7 if the claim would take the namespace over.
pub fn refuse_over(store: &dyn Store, charge: &Charge) -> Result<()> {
    let quotas = quotas(store, &charge.namespace)?;
    if !quotas.iter().any(|q| q.limit(charge.resource).is_some()) {
        return Ok(()); // nothing to count against
    }
    let used = used(store, &charge.namespace, charge.resource)?;
    let over = quotas
        .iter()
        .filter_map(|q| Some((q, q.limit(charge.resource)?)))
        .find(|(_, limit)| used >= *limit);
    match over {
        Some((quota, limit)) => Err(Error::QuotaExceeded {
            namespace: charge.namespace.to_string(),
            quota: quota.metadata.name.clone(),
            resource: charge.resource.name(),
            limit,
            used,
        }),
        None => Ok(()),
    }
}

/// One ceiling of one quota against what its namespace holds, as `quota list`, `metrics`
/// and `check` show it.
#[derive(Clone, Debug, Serialize)]
pub struct Usage {
    /// The quota's namespace.
    pub namespace: Namespace,
    /// The quota's name.
    pub quota: String,
    /// The resource, as `spec.hard` spells it.
    pub resource: &'static str,
    /// What the namespace holds of it.
    pub used: u64,
    /// The quota's ceiling.
    pub limit: u64,
}

impl Usage {
    /// Whether the namespace holds more than the ceiling.
    pub fn over(&self) -> bool {
        self.used > self.limit
    }
}

/// Every ceiling of every quota of `scopes` (every namespace when `None`), in namespace,
/// quota and resource order, with what is held.
pub fn usage(store: &dyn Store, scopes: Option<&[Namespace]>) -> Result<Vec<Usage>> {
    let namespaces: Vec<Namespace> = match scopes {
        Some(list) => list.to_vec(),
        None => store.scopes()?.into_iter().flatten().collect(),
    };
    let mut out = Vec::new();
    for ns in namespaces {
        let quotas = quotas(store, &ns)?;
        let mut counted: BTreeMap<Resource, u64> = BTreeMap::new();
        for quota in &quotas {
            for resource in Resource::ALL {
                let Some(limit) = quota.limit(resource) else {
                    continue;
                };
                let used = match counted.get(&resource) {
                    Some(n) => *n,
                    None => *counted
                        .entry(resource)
                        .or_insert(used(store, &ns, resource)?),
                };
                out.push(Usage {
                    namespace: ns.clone(),
                    quota: quota.metadata.name.clone(),
                    resource: resource.name(),
                    used,
                    limit,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        (a.namespace.as_str(), &a.quota, a.resource).cmp(&(
            b.namespace.as_str(),
            &b.quota,
            b.resource,
        ))
    });
    Ok(out)
}

/// Writes `quota` (`apply`): created, configured or unchanged, as a subnet is. A ceiling
/// below what the namespace already holds is written all the same, with a warning: claims
/// charged to it are then refused until the namespace is back under.
pub fn put(
    store: &dyn Store,
    quota: &QuotaManifest,
    dry_run: bool,
    warnings: &mut Warnings,
) -> Result<Put> {
    let ns = quota
        .namespace()
        .expect("a validated quota has a namespace");
    let name = &quota.metadata.name;
    let bytes = yaml::encode(quota);
    let put = match store.get(ObjectKind::Quota, Some(ns), name)? {
        Some(held) if held == bytes.as_bytes() => Put::Unchanged,
        Some(_) => Put::Configured,
        None => Put::Created,
    };
    for resource in Resource::ALL {
        let Some(limit) = quota.limit(resource) else {
            continue;
        };
        let used = used(store, ns, resource)?;
        if used > limit {
            warnings.push(Warning::new(format!(
                "quota `{name}` of namespace `{ns}` allows {limit} {resource} but {used} are held; claims charged to it are refused until the namespace is back under"
            )));
        }
    }
    if dry_run {
        return Ok(put);
    }
    match put {
        Put::Unchanged => {}
        Put::Created => {
            if !store.create(ObjectKind::Quota, Some(ns), name, bytes.as_bytes())? {
                return Err(Error::conflict(format!(
                    "quota `{name}` of namespace `{ns}` was created meanwhile; apply again"
                )));
            }
        }
        Put::Configured => store.replace(ObjectKind::Quota, Some(ns), name, bytes.as_bytes())?,
    }
    Ok(put)
}

/// The quotas of namespaces over a ceiling (for `check`): what a hand edit, a merge or a
/// claim that raced a quota's first apply left.
pub fn over(store: &dyn Store) -> Result<Vec<Usage>> {
    Ok(usage(store, None)?
        .into_iter()
        .filter(Usage::over)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(ns: Option<&str>) -> PoolRef {
        PoolRef {
            namespace: ns.map(|n| Namespace::new(n).unwrap()),
            name: crate::model::PoolName::new("p").unwrap(),
        }
    }

    #[test]
    fn a_claim_is_charged_to_the_namespace_that_holds_it() {
        let vm = Owner::parse("VirtualMachine/web/0", None).unwrap();
        let charge = Charge::of_allocation(&pool(Some("acme/prod")), &vm).unwrap();
        assert_eq!(charge.namespace.as_str(), "acme/prod");
        assert_eq!(charge.resource, Resource::Addresses);
        assert_eq!(Charge::of_allocation(&pool(None), &vm), None);
        let fip = Owner::parse("FloatingIP/acme/fip-1", None).unwrap();
        let charge = Charge::of_allocation(&pool(None), &fip).unwrap();
        assert_eq!(charge.namespace.as_str(), "acme");
        assert_eq!(charge.resource, Resource::FloatingIps);
    }

    #[test]
    fn a_vpc_range_is_charged_to_its_vpcs_namespace() {
        let annotated = BTreeMap::from([(RANGE_ANNOTATION.to_owned(), "acme/prod/main".into())]);
        let charge = Charge::of_prefix(&pool(None), &annotated).unwrap();
        assert_eq!(charge.namespace.as_str(), "acme/prod");
        assert_eq!(charge.resource, Resource::Prefixes);
        assert_eq!(Charge::of_prefix(&pool(None), &BTreeMap::new()), None);
        let own = Charge::of_prefix(&pool(Some("acme")), &BTreeMap::new()).unwrap();
        assert_eq!(own.namespace.as_str(), "acme");
    }
}
