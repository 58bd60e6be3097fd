//! `ipamctl check --store`: the same rules as on a state directory, on what a database
//! holds, and the database's own (rows that are no host address, columns that disagree
//! with the manifest, a count ledger that disagrees with the rows, a low-water hint above a
//! free candidate). Findings name each object by the path `export` would write it to, so
//! that both stores' reports read alike; the summary names the database.
//!
//! Everything is read in one snapshot ([`PgStore::snapshot`]): no finding is an artefact of
//! a command running beside the check, so none needs the file store's second read.

use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::SystemTime;

use super::layout::ManifestFile;
use super::{Decoded, Finding, Report, Severity, error, prefixes, ranges, rules};
use crate::error::{Error, Result};
use crate::model::candidates::Candidates;
use crate::model::layout::{NAMESPACES, object_path as path_of};
use crate::model::{Namespace, OwnerFilter, PoolName};
use crate::store::pg::PgStore;
use crate::store::{ObjectKind, Objects, Queries};
use crate::yaml;

/// Why `rows` objects of `kind` stored under `ns`, which is no namespace, are read by no
/// command ([`PgStore::unreadable_namespaces`]), and what to do.
pub(crate) fn unreadable_namespace(ns: &str, kind: ObjectKind, rows: i64) -> String {
    let why = Namespace::new(ns)
        .err()
        .unwrap_or_else(|| format!("namespace `{ns}`"));
    format!(
        "{why}; no command reads its {rows} {} row{} (written by an older ipamctl, or by hand): \
         move them to a namespace of another name",
        kind.resource(),
        if rows == 1 { "" } else { "s" }
    )
}

/// A database row as the rules see a file. The rules read only its path, scope and name;
/// `dir` is never read through (a database row has no directory): the root's handle stands
/// in.
fn as_file(
    root: &Arc<OwnedFd>,
    kind: ObjectKind,
    scope: Option<&Namespace>,
    name: &str,
) -> ManifestFile {
    ManifestFile {
        rel: path_of(kind, scope, name),
        dir: Arc::clone(root),
        name: name.into(),
        scope: scope.cloned(),
        stem: name.to_owned(),
    }
}

/// Decodes the objects of `kind` of every scope, each with its finding if it does not.
fn read_kind<T>(
    store: &PgStore,
    root: &Arc<OwnedFd>,
    scopes: &[Option<Namespace>],
    kind: ObjectKind,
    decode: fn(&str) -> std::result::Result<T, String>,
    findings: &mut Vec<Finding>,
) -> Result<Vec<Decoded<T>>> {
    let mut read = Vec::new();
    for scope in scopes {
        let mut names = store.list(kind, scope.as_ref())?;
        names.sort();
        for name in names {
            let Some(bytes) = store.get(kind, scope.as_ref(), &name)? else {
                continue;
            };
            let file = as_file(root, kind, scope.as_ref(), &name);
            let manifest = match std::str::from_utf8(&bytes)
                .map_err(|_| "is not UTF-8 text".to_owned())
                .and_then(decode)
            {
                Ok(m) => Some(m),
                Err(why) => {
                    findings.push(error(&file.rel, why));
                    None
                }
            };
            read.push(Decoded { file, manifest });
        }
    }
    Ok(read)
}

/// Checks what `store` holds without writing to it (see the module docs).
pub fn check_database(store: &PgStore) -> Result<Report> {
    let root: Arc<OwnedFd> = Arc::new(
        std::fs::File::open("/")
            .map_err(|e| Error::io("/", e))?
            .into(),
    );
    let mut report = None;
    store.snapshot(&mut || {
        report = Some(check_in_snapshot(store, &root)?);
        Ok(())
    })?;
    Ok(report.expect("the snapshot ran the check"))
}

fn check_in_snapshot(store: &PgStore, root: &Arc<OwnedFd>) -> Result<Report> {
    let mut findings = Vec::new();
    let scopes = store.scopes()?;
    let pools = read_kind(
        store,
        root,
        &scopes,
        ObjectKind::Pool,
        yaml::decode_pool,
        &mut findings,
    )?;
    let subnets = read_kind(
        store,
        root,
        &scopes,
        ObjectKind::Subnet,
        yaml::decode_subnet,
        &mut findings,
    )?;
    let cooldown = read_kind(
        store,
        root,
        &scopes,
        ObjectKind::Cooldown,
        yaml::decode_cooldown,
        &mut findings,
    )?;
    let prefix_claims = read_kind(
        store,
        root,
        &scopes,
        ObjectKind::PrefixClaim,
        yaml::decode_prefix_claim,
        &mut findings,
    )?;
    let mut allocations = Vec::new();
    for (scope, found) in store.find_allocations_everywhere(None, &OwnerFilter::default())? {
        let file = as_file(root, ObjectKind::Allocation, scope.as_ref(), &found.name);
        let manifest = match found.parsed {
            Ok(m) => Some(m),
            Err(why) => {
                findings.push(error(&file.rel, why));
                None
            }
        };
        allocations.push(Decoded { file, manifest });
    }
    allocations.sort_by(|a, b| a.file.rel.cmp(&b.file.rel));
    let known = rules::check_pools(&pools, &mut findings);
    prefixes::check_prefix_claims(&prefix_claims, &known, &mut findings);
    ranges::check_subnets(&subnets, &known, &mut findings);
    ranges::check_off_limits(&allocations, &subnets, &mut findings);
    let idle_records = ranges::check_cooldown(&cooldown, &known, SystemTime::now(), &mut findings);
    let related = rules::check_allocations(&allocations, &known, &mut findings);
    findings.extend(related);
    findings.extend(super::macs::check_macs(&allocations, &known));
    findings.extend(super::identity::check_identities(&allocations));
    super::macs::explain_malformed(&mut findings);
    database_findings(store, &pools, &mut findings)?;
    findings.sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
    findings.dedup();
    Ok(Report {
        findings,
        pools: pools.len(),
        allocations: allocations.len(),
        leftovers: Vec::new(),
        idle_records,
        unrecorded: Vec::new(),
        held_twice: Vec::new(),
    })
}

/// The scope a namespace column names (`''`: the cluster scope); `None` if it names none.
fn scope_of(ns: &str) -> Option<Option<Namespace>> {
    match ns {
        "" => Some(None),
        ns => Namespace::new(ns).ok().map(Some),
    }
}

/// The path of an allocation row, by its columns.
fn row_path(ns: &str, pool: &str, address: &str) -> String {
    let scope = scope_of(ns).flatten();
    let host = address.split('/').next().unwrap_or(address);
    let name = match (PoolName::new(pool), host.parse::<IpAddr>()) {
        (Ok(pool), Ok(addr)) => crate::model::allocation_name(&pool, addr),
        _ => format!("{pool}-{host}"),
    };
    path_of(ObjectKind::Allocation, scope.as_ref(), &name)
}

/// What only the database can say ([`PgStore::inspect`]), as findings.
fn database_findings(
    store: &PgStore,
    pools: &[Decoded<crate::model::PoolManifest>],
    findings: &mut Vec<Finding>,
) -> Result<()> {
    let inspected = store.inspect()?;
    for (kind, ns, rows) in store.unreadable_namespaces()? {
        findings.push(error(
            &format!("{NAMESPACES}/{ns}/{}/", kind.dir()),
            unreadable_namespace(&ns, kind, rows),
        ));
    }
    for row in &inspected.not_host {
        findings.push(error(
            &row_path(&row.namespace, &row.pool, &row.address),
            format!(
                "the row's address is `{}`, not a host address (/32 or /128): it is a second key for its address, which look-ups miss; release it, or fix it in psql with set_masklen(address, 32)",
                row.address
            ),
        ));
    }
    for (row, columns, manifest) in &inspected.disagreeing {
        findings.push(error(
            &row_path(&row.namespace, &row.pool, &row.address),
            format!(
                "the row's columns (owner {columns}) disagree with its manifest ({manifest}): ipamctl finds owners by the columns; release it and allocate again"
            ),
        ));
    }
    for (ns, name, columns, manifest) in &inspected.claims_disagreeing {
        let Some(scope) = scope_of(ns) else { continue };
        findings.push(error(
            &path_of(ObjectKind::PrefixClaim, scope.as_ref(), name),
            format!(
                "the prefix claim row's columns ({columns}) disagree with its manifest ({manifest}): the database arbitrates claims by the columns; release it and claim again"
            ),
        ));
    }
    for (ns, pool, ledger, rows) in &inspected.ledger_drift {
        let scope = scope_of(ns).flatten();
        findings.push(error(
            &path_of(ObjectKind::Pool, scope.as_ref(), pool),
            format!(
                "the count ledger (ipamctl.pool_counts) says {ledger} allocations, the table holds {rows}: `pool list` miscounts; fix it in psql: INSERT INTO ipamctl.pool_counts (namespace, pool, delta) VALUES ('{ns}', '{pool}', {})",
                rows - ledger
            ),
        ));
    }
    for (ns, pool, hint) in &inspected.hints {
        let Some(scope) = scope_of(ns) else { continue };
        let manifest = pools.iter().find_map(|p| {
            let m = p.manifest.as_ref()?;
            (p.file.scope == scope && m.metadata.name == *pool).then_some(m)
        });
        let Some(manifest) = manifest else { continue };
        let candidates = Candidates::of_pool(&manifest.spec);
        let name = manifest.name();
        let lowest = store
            .free_candidates(scope.as_ref(), &name, &candidates, false)?
            .next()
            .transpose()?;
        if let Some(free) = lowest.filter(|free| free < hint) {
            findings.push(Finding {
                severity: Severity::Warning,
                path: path_of(ObjectKind::Pool, scope.as_ref(), pool),
                message: format!(
                    "the low-water hint (ipamctl.pool_hints) is {hint}, above the free candidate {free}: `allocate` hands out higher addresses than the lowest until a release lowers it; fix it in psql: UPDATE ipamctl.pool_hints SET low_water = NULL WHERE namespace = '{ns}' AND pool = '{pool}'"
                ),
            });
        }
    }
    Ok(())
}
