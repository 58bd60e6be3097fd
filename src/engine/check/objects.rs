//! `ipamctl check` of a store without a state directory (`ipamctl --store URL check`): the
//! same rules as on a state directory, on the objects the store holds, read through
//! [`crate::store::Objects`], and the store's own findings
//! ([`crate::store::Database::inspect`]: rows that are no host address, columns that
//! disagree with the manifest, a count ledger that disagrees with the rows, a low-water hint
//! above a free candidate). Findings name each object by the path `export` would write it
//! to, so that both stores' reports read alike; the summary names the database.
//!
//! Everything is read in one snapshot ([`crate::store::Database::snapshot`]): no finding is
//! an artefact of a command running beside the check, so none needs the state directory's
//! second read.

use std::time::SystemTime;

use super::{Decoded, Finding, Report, error, prefixes, ranges, rules};
use crate::error::Result;
use crate::model::layout::object_path as path_of;
use crate::model::{Namespace, OwnerFilter};
use crate::store::inspect::ManifestFile;
use crate::store::{ObjectKind, Store};
use crate::yaml;

/// A stored object as the rules see a file: they read only its path, scope and name.
fn as_file(kind: ObjectKind, scope: Option<&Namespace>, name: &str) -> ManifestFile {
    ManifestFile::row(path_of(kind, scope, name), scope, name)
}

/// Decodes the objects of `kind` of every scope, each with its finding if it does not.
fn read_kind<T>(
    store: &dyn Store,
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
            let file = as_file(kind, scope.as_ref(), &name);
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

/// Checks what `store` holds without writing to it (see the module docs), in one snapshot
/// of its database if it has one.
pub(super) fn check_objects(store: &dyn Store) -> Result<Report> {
    let Some(database) = store.database() else {
        return check_now(store);
    };
    let mut report = None;
    database.snapshot(&mut || {
        report = Some(check_now(store)?);
        Ok(())
    })?;
    Ok(report.expect("the snapshot ran the check"))
}

fn check_now(store: &dyn Store) -> Result<Report> {
    let mut findings = Vec::new();
    let scopes = store.scopes()?;
    let pools = read_kind(
        store,
        &scopes,
        ObjectKind::Pool,
        yaml::decode_pool,
        &mut findings,
    )?;
    let subnets = read_kind(
        store,
        &scopes,
        ObjectKind::Subnet,
        yaml::decode_subnet,
        &mut findings,
    )?;
    let cooldown = read_kind(
        store,
        &scopes,
        ObjectKind::Cooldown,
        yaml::decode_cooldown,
        &mut findings,
    )?;
    let prefix_claims = read_kind(
        store,
        &scopes,
        ObjectKind::PrefixClaim,
        yaml::decode_prefix_claim,
        &mut findings,
    )?;
    let mut allocations = Vec::new();
    for (scope, found) in store.find_allocations_everywhere(None, &OwnerFilter::default())? {
        let file = as_file(ObjectKind::Allocation, scope.as_ref(), &found.name);
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
    // Read for the findings of a row that does not parse; then what the others allow.
    read_kind(
        store,
        &scopes,
        ObjectKind::Quota,
        yaml::decode_quota,
        &mut findings,
    )?;
    findings.extend(super::quotas::over_quota(store));
    if let Some(database) = store.database() {
        findings.extend(database.inspect()?.into_iter().map(Finding::from));
    }
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
