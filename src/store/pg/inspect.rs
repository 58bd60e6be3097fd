//! What only the database can say about itself, for `ipamctl check --store`: rows whose
//! address is no host address, allocation and prefix claim rows whose columns disagree with
//! their manifest (possible only by hand, and only before migrations 6 and 11 or with their
//! triggers disabled),
//! pools whose count ledger disagrees with their rows, and each pool's low-water hint. The
//! rules over manifests are the engine's, the same as on a state directory; `findings.rs`
//! turns these into the notes `check` reports.

use std::net::IpAddr;

use super::PgStore;
use super::typed::Typed;
use crate::error::Result;
use crate::model::Namespace;
use crate::model::kind::{
    ALLOCATION_KIND, COOLDOWN_KIND, ObjectKind, POOL_KIND, PREFIX_CLAIM_KIND, SUBNET_KIND,
};

/// One allocation row, by its key columns as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowKey {
    /// `''` for the cluster scope.
    pub namespace: String,
    pub pool: String,
    /// The address as PostgreSQL shows it, with its prefix length if not a host's.
    pub address: String,
}

/// The database's own findings; see the module docs.
#[derive(Clone, Debug, Default)]
pub struct Inspected {
    /// Rows whose address has a prefix length short of 32 (128 for IPv6).
    pub not_host: Vec<RowKey>,
    /// Rows whose namespace, pool, address or owner columns are not what their manifest
    /// says, with the columns and the manifest's values, as text.
    pub disagreeing: Vec<(RowKey, String, String)>,
    /// Prefix claim rows whose namespace, name, pool or prefix columns are not what their
    /// manifest says: (namespace, name, the columns, the manifest's values), as text.
    pub claims_disagreeing: Vec<(String, String, String, String)>,
    /// (namespace, pool, the ledger's count, the rows' count) where the two differ.
    pub ledger_drift: Vec<(String, String, i64, i64)>,
    /// (namespace, pool, low-water hint) of every pool with one.
    pub hints: Vec<(String, String, IpAddr)>,
}

impl PgStore {
    /// Asks the database what [`Inspected`] holds, in the current unit's snapshot if any.
    pub fn inspect(&self) -> Result<Inspected> {
        self.single(|c| {
            let key = |r: &postgres::Row| RowKey {
                namespace: r.get(0),
                pool: r.get(1),
                address: r.get(2),
            };
            let not_host = c
                .all(
                    "SELECT namespace, pool, address::text FROM ipamctl.allocations
                     WHERE masklen(address) <> CASE family(address) WHEN 4 THEN 32 ELSE 128 END
                     ORDER BY 1, 2, 3",
                    &[],
                )?
                .iter()
                .map(key)
                .collect();
            let disagreeing = disagreeing(c)?;
            let claims_disagreeing = claims_disagreeing(c)?;
            let ledger_drift = c
                .all(
                    "SELECT namespace, pool, coalesce(ledger.n, 0)::bigint,
                            coalesce(rows.n, 0)::bigint
                     FROM (SELECT namespace, pool, sum(delta) AS n FROM ipamctl.pool_counts
                           GROUP BY namespace, pool HAVING sum(delta) <> 0) ledger
                     FULL JOIN (SELECT namespace, pool, count(*) AS n FROM ipamctl.allocations
                                GROUP BY namespace, pool) rows USING (namespace, pool)
                     WHERE ledger.n IS DISTINCT FROM rows.n
                     ORDER BY 1, 2",
                    &[],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                .collect();
            let hints = c
                .all(
                    "SELECT namespace, pool, low_water FROM ipamctl.pool_hints
                     WHERE low_water IS NOT NULL ORDER BY 1, 2",
                    &[],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            Ok(Inspected {
                not_host,
                disagreeing,
                claims_disagreeing,
                ledger_drift,
                hints,
            })
        })
    }
}

impl PgStore {
    /// Objects stored under a namespace that is none (a segment the state directory layout
    /// reserved since an older ipamctl wrote it, such as `macs`, or a hand's): (kind, the
    /// namespace as stored, how many), by namespace. No scope reaches them ([`Objects::scopes`]
    /// leaves them out), so `check` reports them and `export` says it leaves them out.
    ///
    /// [`Objects::scopes`]: crate::store::Objects::scopes
    pub fn unreadable_namespaces(&self) -> Result<Vec<(ObjectKind, String, i64)>> {
        let rows = self.single(|c| {
            c.all(
                "SELECT $1::text, namespace, count(*) FROM ipamctl.pools
                 WHERE namespace <> '' GROUP BY namespace
                 UNION ALL
                 SELECT $2::text, namespace, count(*) FROM ipamctl.allocations
                 WHERE namespace <> '' GROUP BY namespace
                 UNION ALL
                 SELECT kind, namespace, count(*) FROM ipamctl.objects
                 WHERE namespace <> '' GROUP BY kind, namespace
                 ORDER BY 2, 1",
                &[&POOL_KIND, &ALLOCATION_KIND],
            )
        })?;
        Ok(rows
            .iter()
            .filter(|r| Namespace::new(r.get::<_, &str>(1)).is_err())
            .filter_map(|r| {
                let kind = match r.get::<_, &str>(0) {
                    POOL_KIND => ObjectKind::Pool,
                    ALLOCATION_KIND => ObjectKind::Allocation,
                    SUBNET_KIND => ObjectKind::Subnet,
                    COOLDOWN_KIND => ObjectKind::Cooldown,
                    PREFIX_CLAIM_KIND => ObjectKind::PrefixClaim,
                    _ => return None,
                };
                Some((kind, r.get(1), r.get(2)))
            })
            .collect())
    }
}

/// Prefix claim rows whose columns disagree with their manifest; see
/// [`Inspected::claims_disagreeing`].
/// How many allocation rows one statement of [`disagreeing`] compares with their manifest.
/// Each row's manifest is read by six regular expressions (`ipamctl.manifest_columns`),
/// about 200 µs a row here: 136,000 rows in one statement ran past the 30 s
/// `statement_timeout` on a loaded 2-core machine (`bench/serve`'s `check --store`, whose
/// 100,000 took 22 s unloaded in one statement and 26 s in chunks of 20,000), where 5,000
/// take about a second.
const ROWS_A_STATEMENT: i64 = 5_000;

/// Allocation rows whose key or owner columns are not what their manifest says, compared
/// [`ROWS_A_STATEMENT`] rows at a time: the key of every such row's last is found first
/// (one pass over the primary key), then each range between two is compared on its own.
fn disagreeing(c: &mut postgres::Client) -> Result<Vec<(RowKey, String, String)>, postgres::Error> {
    let key = |r: &postgres::Row| RowKey {
        namespace: r.get(0),
        pool: r.get(1),
        address: r.get(2),
    };
    let bounds: Vec<RowKey> = c
        .all(
            "SELECT namespace, pool, address::text FROM (
                 SELECT namespace, pool, address,
                        row_number() OVER (ORDER BY namespace, pool, address) AS n
                 FROM ipamctl.allocations) r
             WHERE n % $1 = 0 ORDER BY n",
            &[&ROWS_A_STATEMENT],
        )?
        .iter()
        .map(key)
        .collect();
    let mut found = Vec::new();
    let mut after: Option<RowKey> = None;
    for upto in bounds.into_iter().map(Some).chain([None]) {
        // The range's bounds, each only when it has one: a condition `$1 IS NULL OR …`
        // kept the planner from the primary key, and every chunk compared every row.
        let mut bounds = Vec::new();
        let mut params: Vec<&dyn super::typed::Param> = Vec::new();
        for (bound, op) in [(&after, ">"), (&upto, "<=")] {
            if let Some(k) = bound {
                let n = params.len();
                bounds.push(format!(
                    "AND (a.namespace, a.pool, a.address) {op} (${}, ${}, ${}::text::inet)",
                    n + 1,
                    n + 2,
                    n + 3
                ));
                params.extend([
                    &k.namespace as &dyn super::typed::Param,
                    &k.pool,
                    &k.address,
                ]);
            }
        }
        let rows = c.all(
            &format!(
                "SELECT a.namespace, a.pool, host(a.address),
                        format('%s/%s uid %s', a.owner_kind, a.owner_name, nullif(a.owner_uid, '')),
                        format('namespace %s, pool %s, address %s, owner %s/%s uid %s',
                               nullif(m.namespace, ''), m.pool, m.address, m.owner_kind,
                               m.owner_name, nullif(m.owner_uid, ''))
                 FROM ipamctl.allocations a, ipamctl.manifest_columns(a.manifest) m
                 WHERE (m.namespace IS DISTINCT FROM a.namespace
                        OR m.pool IS DISTINCT FROM a.pool
                        OR m.address IS DISTINCT FROM host(a.address)
                        OR m.owner_kind IS DISTINCT FROM a.owner_kind
                        OR m.owner_name IS DISTINCT FROM a.owner_name
                        OR m.owner_uid IS DISTINCT FROM a.owner_uid) {}
                 ORDER BY 1, 2, 3",
                bounds.join(" ")
            ),
            &params,
        )?;
        found.extend(rows.iter().map(|r| (key(r), r.get(3), r.get(4))));
        after = upto;
    }
    Ok(found)
}

fn claims_disagreeing(
    c: &mut postgres::Client,
) -> Result<Vec<(String, String, String, String)>, postgres::Error> {
    Ok(c.all(
        "SELECT o.namespace, o.name,
                    format('pool %s, prefix %s', o.pool, o.prefix),
                    format('namespace %s, name %s, pool %s, prefix %s',
                           nullif(m.namespace, ''), m.name, m.pool, m.prefix)
             FROM ipamctl.objects o, ipamctl.claim_columns(o.manifest) m
             WHERE o.kind = 'IPPrefixClaim'
               AND ipamctl.claim_row_disagrees(o.namespace, o.name, o.pool, o.prefix,
                                               o.manifest)
             ORDER BY 1, 2",
        &[],
    )?
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect())
}
