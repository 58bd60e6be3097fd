//! `init`'s migration: the missing migrations of [`schema::MIGRATIONS`] applied in one
//! transaction with a row each in `ipamctl.schema_version`, after checking that the
//! recorded history is whole: no version missing below the latest recorded one, and no
//! migration's objects present without its row (versions deleted by hand, which would
//! otherwise make `init` run a migration again over its own tables).

use postgres::Client;

use super::schema;
use super::timeouts::Timeouts;

/// What a migration run found or did.
pub enum Outcome {
    /// The schema is now [`schema::LATEST`]; the version before (`None`: there was none).
    Migrated(Option<i32>),
    /// The schema is this version, newer than this binary's: nothing was written.
    Newer(i32),
    /// These versions are missing from the history: nothing was written.
    Damaged(Vec<i32>),
}

/// Why a migration run failed: in the bootstrap (a race of concurrent inits creating the
/// schema, which another try cures), or once the version table was locked.
pub enum Failed {
    Bootstrap(postgres::Error),
    Migration(postgres::Error),
}

/// For each version, a query whose `true` says that version's objects are there.
const MARKERS: &[(i32, &str)] = &[
    (1, "SELECT to_regclass('ipamctl.allocations') IS NOT NULL"),
    (2, "SELECT to_regclass('ipamctl.pool_counts') IS NOT NULL"),
    (
        3,
        "SELECT EXISTS (SELECT FROM information_schema.columns WHERE table_schema = 'ipamctl'
                AND table_name = 'allocations' AND column_name = 'creation_timestamp')",
    ),
    (4, "SELECT to_regclass('ipamctl.objects') IS NOT NULL"),
    (
        5,
        "SELECT EXISTS (SELECT FROM pg_trigger WHERE tgname = 'allocations_counted_insert'
                AND pg_get_triggerdef(oid) LIKE '%ipamctl.counting%')",
    ),
    (
        6,
        "SELECT EXISTS (SELECT FROM pg_constraint WHERE conname = 'allocations_host_address')",
    ),
    (
        7,
        "SELECT EXISTS (SELECT FROM pg_constraint WHERE conname = 'objects_prefix_claims_disjoint')",
    ),
    (
        8,
        "SELECT to_regclass('ipamctl.objects_prefix_claim_owners') IS NOT NULL",
    ),
    (9, "SELECT to_regclass('ipamctl.prefix_free') IS NOT NULL"),
    (
        10,
        "SELECT to_regclass('ipamctl.allocations_one_per_mac') IS NOT NULL",
    ),
    (
        11,
        "SELECT EXISTS (SELECT FROM pg_trigger WHERE tgname = 'objects_prefix_claims_agree')",
    ),
    (
        12,
        "SELECT to_regclass('ipamctl.allocations_one_per_owner_name') IS NOT NULL",
    ),
    (
        13,
        "SELECT to_regprocedure('ipamctl.allocation_expires(bytea)') IS NOT NULL",
    ),
];

/// Applies the missing migrations in one transaction, or finds why not.
pub fn migrate(client: &mut Client, id: &str, timeouts: &Timeouts) -> Result<Outcome, Failed> {
    let mut tx = client.transaction().map_err(Failed::Bootstrap)?;
    tx.batch_execute(timeouts.set_local().trim_start_matches("; "))
        .and_then(|()| tx.batch_execute(schema::BOOTSTRAP))
        // Concurrent inits queue here; readers of the version are not blocked.
        .and_then(|()| tx.batch_execute("LOCK TABLE ipamctl.schema_version IN EXCLUSIVE MODE"))
        .map_err(Failed::Bootstrap)?;
    let recorded: Vec<i32> = tx
        .query(
            "SELECT version FROM ipamctl.schema_version ORDER BY version",
            &[],
        )
        .map_err(Failed::Migration)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let before = recorded.last().copied();
    let current = before.unwrap_or(0);
    if current > schema::LATEST {
        return Ok(Outcome::Newer(current));
    }
    let mut missing: Vec<i32> = (1..current).filter(|v| !recorded.contains(v)).collect();
    if current < schema::LATEST {
        for (version, probe) in MARKERS.iter().filter(|(v, _)| *v > current) {
            let there: bool = tx.query_one(*probe, &[]).map_err(Failed::Migration)?.get(0);
            if there {
                missing.push(*version);
            }
        }
        // A version is missing if its objects, or a later version's, are there.
        if let Some(&last) = missing.iter().filter(|v| **v > current).max() {
            missing.retain(|v| *v < current);
            missing.extend(current + 1..=last);
        }
    }
    if !missing.is_empty() {
        return Ok(Outcome::Damaged(missing));
    }
    for (version, sql) in schema::MIGRATIONS {
        if *version > current {
            tx.batch_execute(sql).map_err(Failed::Migration)?;
            tx.execute(
                "INSERT INTO ipamctl.schema_version (version, client) VALUES ($1, $2)",
                &[version, &id],
            )
            .map_err(Failed::Migration)?;
        }
    }
    tx.commit().map_err(Failed::Migration)?;
    Ok(Outcome::Migrated(before))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_migration_has_a_marker() {
        let marked: Vec<i32> = super::MARKERS.iter().map(|(v, _)| *v).collect();
        let migrations: Vec<i32> = super::schema::MIGRATIONS.iter().map(|(v, _)| *v).collect();
        assert_eq!(marked, migrations);
    }
}
