//! Selecting allocations: the query `list`, `release` and `reconcile` share, answered from
//! the store's owner index, sorted by namespace (cluster first), pool, then address.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::host_name::host_name;
use crate::model::selector::LabelSelector;
use crate::model::{AllocationManifest, Namespace, OwnerFilter, PoolName, PoolRef};
use crate::store::read::{load_pool, pool_not_found};
use crate::store::{Found, ObjectKind, Store};

/// Which allocations a command selects, validated. The owner filter goes to the store
/// (whose owner index answers it without reading every file); the rest is checked on the
/// manifests it returns.
#[derive(Debug, Default, Clone)]
pub struct Query {
    /// `--pool` (or `release`'s POOL).
    pub pool: Option<PoolName>,
    /// `--address`.
    pub address: Option<IpAddr>,
    /// `--owner`, `--uid`, `--kind`.
    pub filter: OwnerFilter,
    /// `--within`.
    pub within: Option<IpNet>,
    /// `-l`.
    pub labels: Option<LabelSelector>,
    /// `list --mac`: only the allocation holding this MAC (`spec.mac`).
    pub mac: Option<crate::model::mac::Mac>,
    /// `list --host-name`: only the allocations whose owner's NIC has this host name
    /// ([`host_name`]), the name DHCP hands the guest and DNS gives its addresses.
    pub host_name: Option<String>,
    /// `list --expired`: only the leases lapsed at this instant (the store's clock).
    pub lapsed_at: Option<crate::model::Timestamp>,
    /// `--tenant`: only this namespace's floating IPs ([`crate::model::tenant`]), whose
    /// owner names the tenant (the store's owner filter narrows them to its prefix).
    pub tenant: Option<Namespace>,
}

impl Query {
    /// Does `m` pass the selectors the store did not apply?
    fn keeps(&self, m: &AllocationManifest) -> bool {
        self.address.is_none_or(|a| a == m.spec.address)
            && self
                .lapsed_at
                .is_none_or(|now| m.spec.lapsed(now, std::time::Duration::ZERO))
            && self.mac.is_none_or(|mac| m.spec.mac == Some(mac))
            && self
                .host_name
                .as_ref()
                .is_none_or(|h| host_name(&m.spec.owner).is_ok_and(|n| n == *h))
            && self.within.is_none_or(|w| w.contains(&m.spec.address))
            && self
                .tenant
                .as_ref()
                .is_none_or(|t| m.spec.owner.tenant().as_ref() == Some(t))
            && self
                .labels
                .as_ref()
                .is_none_or(|l| l.matches(&m.metadata.labels))
    }
}

/// Reads every allocation of `scopes` (every scope, when `None`) that passes the query,
/// sorted.
///
/// The store reads, spread over the cores, only the allocations its owner index cannot
/// vouch for (a file exactly as ipamctl wrote it, unchanged since, is rebuilt from its
/// record) and, with `--owner`, `--uid` or `--kind`, only those that can match. Warnings
/// about broken files go to `warnings` in name order. An empty answer for a pool that does
/// not exist, or a `--within` prefix that no pool of the scopes overlaps, is exit 3.
pub fn collect(
    store: &(dyn Store + Sync),
    scopes: Option<&[Option<Namespace>]>,
    query: &Query,
    warnings: &mut Warnings,
) -> Result<Vec<AllocationManifest>> {
    let (pool, filter) = (query.pool.as_ref(), &query.filter);
    let mut broken = Vec::new();
    // What the store answered, kept in the store's own vector: `filter_map` then `collect`
    // reuses it in place (a manifest is no larger than an answer), where a vector of
    // `(scope, answer)` and then one of manifests were two copies of every manifest, 35 MB
    // and 8,000 page faults of `list -o json` at 50,000 allocations (issue 47).
    let mut kept = |ns: Option<Namespace>, f: Found| match f.parsed {
        Ok(m) => query.keeps(&m).then_some(m),
        Err(why) => {
            broken.push((ns, f.name, why));
            None
        }
    };
    let mut found: Vec<AllocationManifest> = match scopes {
        Some(scopes) => {
            let mut found = Vec::new();
            for ns in scopes {
                let answers = store.find_allocations(ns.as_ref(), pool, filter)?;
                let answers = answers.into_iter().filter_map(|f| kept(ns.clone(), f));
                if found.is_empty() {
                    found = answers.collect();
                } else {
                    found.extend(answers);
                }
            }
            found
        }
        None => store
            .find_allocations_everywhere(pool, filter)?
            .into_iter()
            .filter_map(|(ns, f)| kept(ns, f))
            .collect(),
    };
    broken.sort();
    for (ns, name, why) in broken {
        warnings.push(crate::engine::warning::unparsable(
            &store.locate(ObjectKind::Allocation, ns.as_ref(), &name),
            &why,
            "skipped",
        ));
    }
    if found.is_empty() {
        match scopes {
            Some(scopes) => check_exists(store, scopes, true, query)?,
            None => check_exists(store, &store.scopes()?, false, query)?,
        }
    }
    // Stable, and the store tends to answer in this order already: then this is one pass.
    found.sort_by(|a, b| {
        (&a.metadata.namespace, &a.spec.pool, a.spec.address).cmp(&(
            &b.metadata.namespace,
            &b.spec.pool,
            b.spec.address,
        ))
    });
    Ok(found)
}

/// Exit 3 when the query names a pool that no scope holds, or a `--within` prefix that no
/// pool of the scopes (or of `--pool`) overlaps: an empty list would hide the typo. A
/// missing pool is named in the namespace asked for (`named`: the one of `scopes`), else
/// as missing from every namespace.
fn check_exists(
    store: &dyn Store,
    scopes: &[Option<Namespace>],
    named: bool,
    query: &Query,
) -> Result<()> {
    let mut pools = Vec::new();
    for ns in scopes {
        let names = match &query.pool {
            Some(p) => vec![p.to_string()],
            None => store.list(ObjectKind::Pool, ns.as_ref())?,
        };
        for name in names {
            let Ok(name) = PoolName::new(&name) else {
                continue;
            };
            let pool = PoolRef {
                namespace: ns.clone(),
                name,
            };
            match load_pool(store, &pool) {
                Ok(m) => pools.push(m),
                Err(Error::NotFound { .. }) => {}
                // A pool that does not parse still exists; `check` says why.
                Err(_) => return Ok(()),
            }
        }
    }
    if let Some(pool) = &query.pool
        && pools.is_empty()
    {
        return Err(match scopes {
            [Some(ns)] if named => pool_not_found(
                store,
                &PoolRef {
                    namespace: Some(ns.clone()),
                    name: pool.clone(),
                },
            ),
            _ => Error::NotFound {
                message: format!("pool `{pool}` not found in any namespace"),
                hint: Some("`ipamctl pool list` shows the pools".into()),
            },
        });
    }
    if let Some(within) = query.within
        && !pools
            .iter()
            .any(|p| p.spec.cidr.contains(&within) || within.contains(&p.spec.cidr))
    {
        return Err(Error::NotFound {
            message: format!("no pool in scope overlaps `--within {within}`"),
            hint: Some("`ipamctl pool list` shows the pools and their prefixes".into()),
        });
    }
    Ok(())
}
