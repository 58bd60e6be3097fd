//! What several of the PostgreSQL store's methods share: how an allocation row's manifest
//! and owner columns are read and written, the guarded delete of an allocation, and the
//! owner's row.

use std::net::IpAddr;

use postgres::Client;

use super::typed::Typed;
use super::{PgStore, ns_key};
use crate::error::Result;
use crate::model::{Namespace, Owner, PoolName, allocation_name};
use crate::store::Parsed;
use crate::yaml;

/// A pool's manifest kind, as the events table names it.
pub(super) const POOL_KIND: &str = "IPAMPool";
/// An allocation's manifest kind, as the events table names it.
pub(super) const ALLOCATION_KIND: &str = "IPAllocation";

/// Decodes a stored allocation manifest.
pub(super) fn parse(bytes: &[u8]) -> Parsed {
    std::str::from_utf8(bytes)
        .map_err(|_| "is not UTF-8 text".to_owned())
        .and_then(yaml::decode_allocation)
}

/// The owner's three key columns: kind, name, uid (`''` for none).
///
/// A look-up by owner compares the uid as `owner_uid || '' = …`, which no index answers, so
/// that the planner always takes the owner's unique index (`allocations_one_per_owner`, on
/// namespace, pool, kind, name, uid) and never `allocations_owner_uid`: the statistics of
/// the last `ANALYZE` estimate a uid they have not seen (the empty uid of every claim made
/// since, in a pool loaded with uids) at one row, and that index then walks every such
/// allocation: 4.3 ms a look-up at 7,000 of them, the most of a batch claim's time
/// (`bench/batch-pg`, 2026-12-05).
pub(super) fn owner_columns(owner: &Owner) -> (&'static str, &str, &str) {
    (
        owner.kind().as_str(),
        owner.name(),
        owner.uid().map_or("", |u| u.as_str()),
    )
}

/// Deletes one allocation if `owner` (when given) still holds it, lowering the pool's hint,
/// counting it in the pool's ledger and logging the release in the same statement. Returns
/// whether a row went. Runs in a transaction begun with [`super::BEGIN`] (the ledger's
/// triggers leave its counting to it).
pub(super) fn delete_allocation(
    client: &mut Client,
    ns: &str,
    pool: &str,
    address: IpAddr,
    owner: Option<(&str, &str, &str)>,
    (name, lapsed): (&str, Option<std::time::Duration>),
    client_id: &str,
) -> std::result::Result<bool, postgres::Error> {
    // A lease's release (`reconcile --expired`): only while the row still lapses by the
    // server's clock, `grace` seconds ago (migration 13).
    let (lapse, grace) = match lapsed {
        Some(grace) => (true, i64::try_from(grace.as_secs()).unwrap_or(i64::MAX)),
        None => (false, 0),
    };
    let (guarded, kind, oname, uid) = match owner {
        Some((k, n, u)) => (true, k, n, u),
        None => (false, "", "", ""),
    };
    let row = client.one(
        "WITH gone AS (
             DELETE FROM ipamctl.allocations
             WHERE namespace = $1 AND pool = $2 AND address = $3
               AND (NOT $4 OR (owner_kind = $5 AND owner_name = $6 AND owner_uid = $7))
               AND (NOT $11 OR ipamctl.allocation_expires(manifest)
                               <= statement_timestamp() - $12::bigint * interval '1 second')
             RETURNING namespace, pool, address, manifest
         ), hint AS (
             UPDATE ipamctl.pool_hints h
             SET low_water = CASE WHEN h.low_water IS NULL OR h.low_water <= gone.address
                                  THEN h.low_water ELSE gone.address END,
                 epoch = h.epoch + 1
             FROM gone WHERE h.namespace = gone.namespace AND h.pool = gone.pool
         ), counted AS (
             INSERT INTO ipamctl.pool_counts (namespace, pool, delta)
             SELECT namespace, pool, -1 FROM gone
         ), event AS (
             INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
             SELECT $8, 'released', namespace, $9, $10, manifest FROM gone
         )
         SELECT count(*) FROM gone",
        &[
            &ns,
            &pool,
            &address,
            &guarded,
            &kind,
            &oname,
            &uid,
            &client_id,
            &ALLOCATION_KIND,
            &name,
            &lapse,
            &grace,
        ],
    )?;
    Ok(row.get::<_, i64>(0) > 0)
}

/// The rows of an owner look-up, after `FROM ipamctl.allocations`, for `$1` namespace, `$2`
/// pool and the owner's columns `$3`, `$4`, `$5` ([`owner_columns`]): the owner's row, or
/// else the row of its name under another uid (a namesake: the name is one identity per
/// pool for every kind but `VPC`, which the unique index of migration 12 keeps), one row.
pub(super) const OWNER_OR_NAMESAKE: &str = "WHERE namespace = $1 AND pool = $2
           AND owner_kind = $3 AND owner_name = $4
           AND (owner_uid || '' = $5 OR owner_kind <> 'VPC')
         ORDER BY owner_uid || '' = $5 DESC LIMIT 1";

impl PgStore {
    /// The owner's allocation row in the pool, or else its namesake's
    /// ([`OWNER_OR_NAMESAKE`]): its object name and manifest.
    pub(super) fn owner_row(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<Option<(String, Parsed)>> {
        let ns = ns_key(ns);
        let (kind, name, uid) = owner_columns(owner);
        if let Some(row) = self.prefetched_owner(ns, pool.as_str(), (kind, name, uid)) {
            return Ok(
                row.map(|(address, manifest)| (allocation_name(pool, address), parse(&manifest)))
            );
        }
        let row = self.single(|c| {
            c.opt(
                &format!("SELECT address, manifest FROM ipamctl.allocations {OWNER_OR_NAMESAKE}"),
                &[&ns, &pool.as_str(), &kind, &name, &uid],
            )
        })?;
        Ok(row.map(|r| {
            let object = allocation_name(pool, r.get::<_, IpAddr>(0));
            (object, parse(r.get::<_, &[u8]>(1)))
        }))
    }
}
