//! `ipamctl list`: allocations, sorted by namespace (cluster first), pool, then address;
//! and the selection `list`, `release` and `reconcile` share.

use std::io::Write;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::cli::output;
use crate::cli::{GlobalArgs, ListArgs, OutputFormat, Selectors};
use crate::error::{Error, Result};
use crate::model::selector::LabelSelector;
use crate::model::{AllocationManifest, Namespace, OwnerFilter, OwnerKind, PoolName};
use crate::store::{ObjectKind, Store};

/// Which allocations a command selects, validated. The owner filter goes to the store
/// (whose owner index answers it without reading every file); the rest is checked on the
/// manifests it returns.
#[derive(Debug, Default)]
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
}

impl Query {
    /// Validates the selectors (exit 2 on a malformed one).
    pub fn new(pool: Option<&str>, address: Option<&str>, select: &Selectors) -> Result<Query> {
        let mut filter = super::owner_filter(select.owner.as_deref(), select.uid.as_deref())?;
        if let Some(kind) = &select.kind {
            let kind = super::flag("--kind", kind.parse::<OwnerKind>())?;
            filter = super::flag("--kind", filter.with_kind(kind))?;
        }
        Ok(Query {
            pool: pool
                .map(|p| super::flag("--pool", PoolName::new(p)))
                .transpose()?,
            address: address
                .map(|a| super::address("--address", a))
                .transpose()?,
            filter,
            within: select
                .within
                .as_deref()
                .map(|w| super::prefix("--within", w))
                .transpose()?,
            labels: select
                .labels
                .as_deref()
                .map(|l| super::flag("--selector", LabelSelector::parse(l)))
                .transpose()?,
        })
    }

    /// Does `m` pass the selectors the store did not apply?
    fn keeps(&self, m: &AllocationManifest) -> bool {
        self.address.is_none_or(|a| a == m.spec.address)
            && self.within.is_none_or(|w| w.contains(&m.spec.address))
            && self
                .labels
                .as_ref()
                .is_none_or(|l| l.matches(&m.metadata.labels))
    }
}

/// Reads every allocation of the selected scopes that passes the query, sorted.
///
/// The store reads, spread over the cores, only the allocations its owner index cannot
/// vouch for (a file exactly as ipamctl wrote it, unchanged since, is rebuilt from its
/// record) and, with `--owner`, `--uid` or `--kind`, only those that can match. Warnings
/// about broken files come in name order. An empty answer for a pool that does not exist,
/// or a `--within` prefix that no pool of the scope overlaps, is exit 3.
pub fn collect(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    query: &Query,
) -> Result<Vec<AllocationManifest>> {
    let (pool, filter) = (query.pool.as_ref(), &query.filter);
    let listed = match g.namespace {
        Some(_) => {
            let mut listed = Vec::new();
            for ns in super::scopes(store, g)? {
                let found = store.find_allocations(ns.as_ref(), pool, filter)?;
                listed.extend(found.into_iter().map(|f| (ns.clone(), f)));
            }
            listed
        }
        None => store.find_allocations_everywhere(pool, filter)?,
    };
    let mut found = Vec::with_capacity(listed.len());
    let mut broken = Vec::new();
    for (ns, f) in listed {
        match f.parsed {
            Ok(m) if query.keeps(&m) => found.push(m),
            Ok(_) => {}
            Err(why) => broken.push((ns, f.name, why)),
        }
    }
    broken.sort();
    for (ns, name, why) in broken {
        eprintln!(
            "warning: {}: {why} (skipped; run `ipamctl check`)",
            store.locate(ObjectKind::Allocation, ns.as_ref(), &name)
        );
    }
    if found.is_empty() {
        check_exists(store, g, &super::scopes(store, g)?, query)?;
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
/// pool of the scopes (or of `--pool`) overlaps: an empty list would hide the typo.
fn check_exists(
    store: &dyn Store,
    g: &GlobalArgs,
    scopes: &[Option<Namespace>],
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
            let pool = crate::model::PoolRef {
                namespace: ns.clone(),
                name,
            };
            match crate::store::read::load_pool(store, &pool) {
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
        return Err(match super::namespace(g)? {
            Some(ns) => crate::store::read::pool_not_found(
                store,
                &crate::model::PoolRef {
                    namespace: Some(ns),
                    name: pool.clone(),
                },
            ),
            None => Error::NotFound {
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

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ListArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let mut query = Query::new(args.pool.as_deref(), args.address.as_deref(), &args.select)?;
    if let Some(name) = &args.subnet {
        // A stored subnet is its pool and its prefix.
        let (pool, cidr) = super::subnet::pool_and_prefix(store, g, name)?;
        query.pool = Some(pool.name);
        query.within = Some(cidr);
    }
    let found = collect(store, g, &query)?;
    let rendered = render(&found, g, out);
    // The process ends right after this command: freeing tens of thousands of manifests one
    // allocation at a time would only delay its exit (15-20 ms of `list -o json` at 50,000
    // allocations, timed phase by phase). An in-process caller leaks this one listing.
    std::mem::forget(found);
    rendered
}

fn render(found: &[AllocationManifest], g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    if output::write_list(out, g.output, found)? {
        return Ok(());
    }
    if found.is_empty() {
        eprintln!("No allocations found.");
        return Ok(());
    }
    let wide = g.output == Some(OutputFormat::Wide);
    let rows = found
        .iter()
        .map(|m| {
            let owner = &m.spec.owner;
            let mut row = vec![
                output::or_dash(m.metadata.namespace.as_ref()),
                m.spec.pool.to_string(),
                m.spec.address.to_string(),
                owner.to_string(),
                output::or_dash(owner.uid()),
            ];
            if wide {
                row.push(m.metadata.name.clone());
                row.push(output::labels(&m.metadata.labels));
            }
            row
        })
        .collect();
    let mut headers = vec!["NAMESPACE", "POOL", "ADDRESS", "OWNER", "UID"];
    if wide {
        headers.extend(["NAME", "LABELS"]);
    }
    output::write(out, &output::table(&headers, rows, &[], g.no_headers))
}
