//! The database's capabilities ([`crate::store::capability`]): it is a [`Database`], whose
//! snapshot `check` reads in and whose own findings ([`PgStore::inspect`],
//! [`PgStore::unreadable_namespaces`]) become notes here. Each note names its object by the
//! path `export` would write it to, so that both stores' reports read alike.

use std::net::IpAddr;

use super::PgStore;
use crate::error::Result;
use crate::model::candidates::Candidates;
use crate::model::layout::{NAMESPACES, object_path as path_of};
use crate::model::{Namespace, PoolName};
use crate::store::capability::{Capabilities, Database};
use crate::store::inspect::{Note, Severity};
use crate::store::{ObjectKind, Objects, Queries};
use crate::yaml;

impl Capabilities for PgStore {
    fn describe(&self) -> String {
        PgStore::describe(self).to_owned()
    }

    fn database(&self) -> Option<&dyn Database> {
        Some(self)
    }
}

impl Database for PgStore {
    fn snapshot(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        PgStore::snapshot(self, work)
    }

    fn inspect(&self) -> Result<Vec<Note>> {
        let mut notes = Database::unreadable_namespaces(self)?;
        self.row_notes(&mut notes)?;
        Ok(notes)
    }

    fn unreadable_namespaces(&self) -> Result<Vec<Note>> {
        Ok(PgStore::unreadable_namespaces(self)?
            .into_iter()
            .map(|(kind, ns, rows)| {
                Note::error(
                    &format!("{NAMESPACES}/{ns}/{}/", kind.dir()),
                    unreadable_namespace(&ns, kind, rows),
                )
            })
            .collect())
    }
}

/// Why `rows` objects of `kind` stored under `ns`, which is no namespace, are read by no
/// command ([`PgStore::unreadable_namespaces`]), and what to do.
fn unreadable_namespace(ns: &str, kind: ObjectKind, rows: i64) -> String {
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

impl PgStore {
    /// What [`PgStore::inspect`] finds, as notes.
    fn row_notes(&self, notes: &mut Vec<Note>) -> Result<()> {
        let inspected = self.inspect()?;
        for row in &inspected.not_host {
            notes.push(Note::error(
                &row_path(&row.namespace, &row.pool, &row.address),
                format!(
                    "the row's address is `{}`, not a host address (/32 or /128): it is a second key for its address, which look-ups miss; release it, or fix it in psql with set_masklen(address, 32)",
                    row.address
                ),
            ));
        }
        for (row, columns, manifest) in &inspected.disagreeing {
            notes.push(Note::error(
                &row_path(&row.namespace, &row.pool, &row.address),
                format!(
                    "the row's columns (owner {columns}) disagree with its manifest ({manifest}): ipamctl finds owners by the columns; release it and allocate again"
                ),
            ));
        }
        for (ns, name, columns, manifest) in &inspected.claims_disagreeing {
            let Some(scope) = scope_of(ns) else { continue };
            notes.push(Note::error(
                &path_of(ObjectKind::PrefixClaim, scope.as_ref(), name),
                format!(
                    "the prefix claim row's columns ({columns}) disagree with its manifest ({manifest}): the database arbitrates claims by the columns; release it and claim again"
                ),
            ));
        }
        for (ns, pool, ledger, rows) in &inspected.ledger_drift {
            let scope = scope_of(ns).flatten();
            notes.push(Note::error(
                &path_of(ObjectKind::Pool, scope.as_ref(), pool),
                format!(
                    "the count ledger (ipamctl.pool_counts) says {ledger} allocations, the table holds {rows}: `pool list` miscounts; fix it in psql: INSERT INTO ipamctl.pool_counts (namespace, pool, delta) VALUES ('{ns}', '{pool}', {})",
                    rows - ledger
                ),
            ));
        }
        for (ns, pool, hint) in &inspected.hints {
            if let Some(note) = self.hint_note(ns, pool, *hint)? {
                notes.push(note);
            }
        }
        Ok(())
    }

    /// A warning if the low-water hint `hint` of `pool` (in the namespace column `ns`) is
    /// above a free candidate; none for a pool whose manifest does not parse (its own
    /// finding).
    fn hint_note(&self, ns: &str, pool: &str, hint: IpAddr) -> Result<Option<Note>> {
        let Some(scope) = scope_of(ns) else {
            return Ok(None);
        };
        let Some(bytes) = self.get(ObjectKind::Pool, scope.as_ref(), pool)? else {
            return Ok(None);
        };
        let Some(manifest) = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| yaml::decode_pool(text).ok())
            .filter(|m| m.metadata.name == *pool)
        else {
            return Ok(None);
        };
        let candidates = Candidates::of_pool(&manifest.spec);
        let name = manifest.name();
        let lowest = self
            .free_candidates(scope.as_ref(), &name, &candidates, false)?
            .next()
            .transpose()?;
        Ok(lowest.filter(|free| *free < hint).map(|free| Note {
            severity: Severity::Warning,
            path: path_of(ObjectKind::Pool, scope.as_ref(), pool),
            message: format!(
                "the low-water hint (ipamctl.pool_hints) is {hint}, above the free candidate {free}: `allocate` hands out higher addresses than the lowest until a release lowers it; fix it in psql: UPDATE ipamctl.pool_hints SET low_water = NULL WHERE namespace = '{ns}' AND pool = '{pool}'"
            ),
        }))
    }
}
