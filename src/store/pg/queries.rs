//! Typed queries in PostgreSQL ([`Queries`]): the owner's row (or its namesake's) by its
//! unique keys, owner
//! filters on the owner indexes, a supernet's claimed prefixes and its owner's claim in one
//! statement, the gap query for free candidates (`free.rs`) and counts from the pool's
//! count ledger.

use std::net::IpAddr;

use ipnet::IpNet;
use postgres::Client;
use postgres::types::{FromSql, Type};

use super::rows::parse;
use super::typed::Typed;
use super::{PgStore, ns_key, schema};
use crate::error::Result;
use crate::model::candidates::Candidates;
use crate::model::prefix_claim::parse_prefix_claim_name;
use crate::model::{Namespace, Owner, OwnerFilter, PoolName, allocation_name};
use crate::store::{Found, FreeIter, ObjectKind, OwnerLookup, PrefixLookup, Queries};
use crate::yaml;

/// How many ledger rows a pool's count may have before the reader that summed them folds
/// them into one (migration 2 in `schema.rs`).
const FOLD_AFTER: i64 = 64;

/// The two columns [`taken`] reads, for pool `$2` of scope `$1`: every claim's prefix
/// column, and the names of the claims whose prefix column is empty (rows not written by
/// ipamctl, whose name spells the prefix).
const CLAIMED: &str = "(SELECT array_agg(prefix) FROM ipamctl.objects
                         WHERE kind = 'IPPrefixClaim' AND namespace = $1 AND pool = $2
                           AND prefix IS NOT NULL),
                        (SELECT array_agg(name) FROM ipamctl.objects
                         WHERE kind = 'IPPrefixClaim' AND namespace = $1 AND pool = $2
                           AND prefix IS NULL)";

impl Queries for PgStore {
    fn clock(&self) -> Result<crate::model::Timestamp> {
        // The server's clock when the statement ran (not the transaction's start: a unit
        // may run long), in whole seconds as `expiresAt` keeps them.
        let row = self.single(|c| {
            c.one(
                "SELECT floor(extract(epoch FROM statement_timestamp()))::bigint",
                &[],
            )
        })?;
        let secs: i64 = row.get(0);
        Ok(crate::model::Timestamp::from_secs(
            u64::try_from(secs).unwrap_or(0),
        ))
    }

    fn find_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<OwnerLookup> {
        let mut lookup = OwnerLookup::default();
        if let Some((name, parsed)) = self.owner_row(ns, pool, owner)? {
            match parsed {
                Ok(m) if m.spec.owner == *owner => lookup.held = Some(m),
                Ok(m) if m.spec.owner.is_namesake(owner) => lookup.namesake = Some(m),
                // A row whose manifest disagrees with its columns (migration 6 refuses
                // such writes; `check --store` reports one made before it).
                Ok(_) => {}
                Err(why) => lookup.broken.push((name, why)),
            }
        }
        Ok(lookup)
    }

    fn find_allocations(
        &self,
        ns: Option<&Namespace>,
        pool: Option<&PoolName>,
        filter: &OwnerFilter,
    ) -> Result<Vec<Found>> {
        let found = self.find(Some(ns_key(ns)), pool, filter)?;
        Ok(found.into_iter().map(|(_, f)| f).collect())
    }

    fn find_allocations_everywhere(
        &self,
        pool: Option<&PoolName>,
        filter: &OwnerFilter,
    ) -> Result<Vec<(Option<Namespace>, Found)>> {
        self.find(None, pool, filter)
    }

    fn find_prefix_owner(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<PrefixLookup> {
        // One statement on the indexes of migration 8, answered as one row of arrays (no
        // row message per claim): every claim's prefix (the column the exclusion constraint
        // compares, from an index-only scan, sent binary), and the name and manifest only
        // of the rows whose owner name, as their canonical lines spell it, is the owner's
        // or cannot be told (NULL), so that a pool of 50,000 claims sends its prefixes and
        // one or two manifests, never 50,000 of them. Where the prefix column is empty (a
        // row not written by ipamctl), the name spells the prefix instead.
        let row = self.single(|c| {
            c.one(
                &format!(
                    "SELECT {CLAIMED}, h.names, h.manifests
                 FROM (SELECT array_agg(name) AS names, array_agg(manifest) AS manifests
                       FROM ipamctl.objects
                       WHERE kind = 'IPPrefixClaim' AND namespace = $1 AND pool = $2
                         AND (ipamctl.claim_owner_name(manifest) = $3
                              OR ipamctl.claim_owner_name(manifest) IS NULL)) h"
                ),
                &[&ns_key(ns), &pool.as_str(), &owner.name()],
            )
        })?;
        let mut lookup = PrefixLookup {
            taken: taken(&row, 0),
            ..PrefixLookup::default()
        };
        let names: Option<Vec<&str>> = row.get(2);
        let manifests: Option<Vec<&[u8]>> = row.get(3);
        let rows = names
            .unwrap_or_default()
            .into_iter()
            .zip(manifests.unwrap_or_default());
        holder(&mut lookup, rows, owner);
        Ok(lookup)
    }

    fn find_prefix_holder(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<PrefixLookup> {
        let rows = self.prefix_holders(ns_key(ns), pool.as_str(), owner.name())?;
        let mut lookup = PrefixLookup {
            taken_left_out: true,
            ..PrefixLookup::default()
        };
        holder(
            &mut lookup,
            rows.iter().map(|(n, m)| (n.as_str(), m.as_slice())),
            owner,
        );
        Ok(lookup)
    }

    fn prefix_free_space(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        cidr: IpNet,
        excludes: &[IpNet],
        len: u8,
    ) -> Result<Option<Vec<IpNet>>> {
        self.kept_free_space(ns_key(ns), pool.as_str(), cidr, excludes, len)
    }

    fn free_candidates<'a>(
        &'a self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        candidates: &Candidates,
        whole_pool: bool,
    ) -> Result<FreeIter<'a>> {
        Ok(Box::new(super::free::Free::new(
            self,
            ns_key(ns),
            pool.as_str(),
            candidates,
            whole_pool,
        )))
    }

    fn count(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<u64> {
        // Counted in the database (an index-only scan), never listed: a quota's count of a
        // namespace's allocations (`engine::quota`) would otherwise fetch every row's name.
        let nsk = ns_key(ns);
        let row = match kind {
            ObjectKind::Allocation => self.single(|c| {
                c.one(
                    "SELECT count(*) FROM ipamctl.allocations WHERE namespace = $1",
                    &[&nsk],
                )
            })?,
            ObjectKind::Pool => self.single(|c| {
                c.one(
                    "SELECT count(*) FROM ipamctl.pools WHERE namespace = $1",
                    &[&nsk],
                )
            })?,
            other => {
                let k = super::objects::object_kind(other);
                self.single(|c| {
                    c.one(
                        "SELECT count(*) FROM ipamctl.objects WHERE kind = $1 AND namespace = $2",
                        &[&k, &nsk],
                    )
                })?
            }
        };
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }

    fn count_held(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        candidates: &Candidates,
    ) -> Result<Option<(u64, u64)>> {
        // Everything, minus what lies in the gaps between candidate spans (few addresses:
        // the network, broadcast, gateway and excludes), each gap a range of the key.
        let mut gaps: Vec<(u128, u128)> = Vec::new();
        let mut next = Some(0u128);
        for (lo, hi) in candidates.spans() {
            if let Some(start) = next
                && lo > start
            {
                gaps.push((start, lo - 1));
            }
            next = hi.checked_add(1);
        }
        let v6 = candidates.is_v6();
        let top = if v6 { u128::MAX } else { u128::from(u32::MAX) };
        if let Some(start) = next.filter(|&s| s <= top) {
            gaps.push((start, top));
        }
        let (los, his): (Vec<IpAddr>, Vec<IpAddr>) = gaps
            .iter()
            .map(|&(lo, hi)| {
                (
                    crate::model::candidates::address(v6, lo),
                    crate::model::candidates::address(v6, hi),
                )
            })
            .unzip();
        let ns = ns_key(ns);
        let row = self.single(|c| {
            c.one(
                "SELECT (SELECT coalesce(sum(delta), 0)::bigint FROM ipamctl.pool_counts
                         WHERE namespace = $1 AND pool = $2),
                        (SELECT coalesce(sum((SELECT count(*) FROM ipamctl.allocations
                                              WHERE namespace = $1 AND pool = $2
                                                AND address BETWEEN g.lo AND g.hi)), 0)::bigint
                         FROM unnest($3::inet[], $4::inet[]) AS g(lo, hi)),
                        (SELECT count(*) FROM ipamctl.pool_counts
                         WHERE namespace = $1 AND pool = $2)",
                &[&ns, &pool.as_str(), &los, &his],
            )
        })?;
        let all = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        let outside = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
        if row.get::<_, i64>(2) > FOLD_AFTER {
            self.fold_counts(ns, pool.as_str());
        }
        Ok(Some((all, all.saturating_sub(outside))))
    }
}

impl PgStore {
    /// The prefixes the claims of pool (`ns`, `pool`) hold (see [`taken`]), in one
    /// statement with the free space's outside-writes epoch (migration 9) as it reads them.
    pub(super) fn claimed_prefixes(&self, ns: &str, pool: &str) -> Result<(i64, Vec<IpNet>)> {
        let row = self.single(|c| {
            c.one(
                &format!("SELECT {CLAIMED}, (SELECT epoch FROM ipamctl.prefix_free_epoch)"),
                &[&ns, &pool],
            )
        })?;
        Ok((row.get(2), taken(&row, 0)))
    }

    /// The allocations of scope `ns` (of every scope if `None`; of `pool` only, if given)
    /// whose owner passes `filter`, with their scope: one statement, on the owner-uid index
    /// when a uid is asked for.
    fn find(
        &self,
        ns: Option<&str>,
        pool: Option<&PoolName>,
        filter: &OwnerFilter,
    ) -> Result<Vec<(Option<Namespace>, Found)>> {
        let pool = pool.map(PoolName::as_str);
        let (kind, name) = match &filter.kind_name {
            Some((k, n)) => (Some(k.as_str()), Some(n.as_str())),
            None => (None, None),
        };
        let uid = filter.uid.as_ref().map(|u| u.as_str());
        let rows = self.single(|c| {
            c.all(
                "SELECT namespace, pool, address, manifest FROM ipamctl.allocations
                 WHERE ($1::text IS NULL OR namespace = $1)
                   AND ($2::text IS NULL OR pool = $2)
                   AND ($3::text IS NULL OR owner_kind = $3)
                   AND ($4::text IS NULL OR CASE WHEN $5 THEN left(owner_name, length($4)) = $4
                                                 ELSE owner_name = $4 END)
                   AND ($6::text IS NULL OR owner_uid = $6)",
                &[&ns, &pool, &kind, &name, &filter.prefix, &uid],
            )
        })?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                let scope = match r.get::<_, &str>(0) {
                    "" => None,
                    ns => Some(Namespace::new(ns).ok()?),
                };
                let pool = PoolName::new(r.get::<_, &str>(1)).ok()?;
                let address = r.get::<_, IpAddr>(2);
                let found = Found {
                    name: allocation_name(&pool, address),
                    parsed: parse(r.get::<_, &[u8]>(3)),
                };
                Some((scope, found))
            })
            .collect())
    }

    /// Folds the pool's count ledger into one row, after a reader summed many: the sum stays
    /// exact whether or not the fold happens, only shorter to read.
    fn fold_counts(&self, ns: &str, pool: &str) {
        self.housekeep(|c| c.exec(schema::FOLD, &[&ns, &pool]).map(drop));
    }

    /// Runs advice-only writes (count folds) in a transaction of their own that
    /// commits asynchronously (`synchronous_commit` off for it alone): what a server crash
    /// loses of them is only advice, and the command does not wait for a second WAL flush
    /// after its own durable commit (with the durable defaults, as long as that commit).
    /// Never inside a unit of work, whose transaction a failed statement would abort; a
    /// failure (a read-only user, a standby, a lost race) is ignored.
    fn housekeep(
        &self,
        work: impl FnOnce(&mut Client) -> std::result::Result<(), postgres::Error>,
    ) {
        let mut session = self.session();
        if session.joined() || session.version_pending {
            return;
        }
        // A transaction left open (the reading one) ends first; the reads after this run
        // in a new one, begun with this one's end: one round trip each way.
        let end_open = if std::mem::take(&mut session.open) {
            "ROLLBACK; "
        } else {
            ""
        };
        // Whatever fails below, a `ROLLBACK` before the next `BEGIN` does no harm.
        session.open = true;
        let client = &mut session.client;
        if client
            .batch_execute(&format!(
                "{end_open}BEGIN; SET LOCAL synchronous_commit TO off{}",
                self.timeouts.set_local()
            ))
            .is_err()
        {
            return;
        }
        let end = if work(client).is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        let _ = client.batch_execute(&format!("{end}; {}", self.begin));
    }
}

/// The claimed prefixes of a row whose column `at` is the array of the claims' `prefix`
/// column and `at + 1` the array of the names of the claims without one (a row not written
/// by ipamctl: the name spells the prefix), ascending.
fn taken(row: &postgres::Row, at: usize) -> Vec<IpNet> {
    let prefixes: Option<Vec<Prefix>> = row.get(at);
    let mut taken: Vec<IpNet> = prefixes
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.0)
        .collect();
    let unspelt: Option<Vec<&str>> = row.get(at + 1);
    taken.extend(
        unspelt
            .unwrap_or_default()
            .into_iter()
            .filter_map(parse_prefix_claim_name)
            .map(|(_, net)| net),
    );
    taken.sort_unstable();
    taken
}

/// Decodes the candidate claims `rows` (name, manifest) of a prefix look-up into `lookup`:
/// the first whose owner is `owner` is held, one that does not decode is broken.
fn holder<'a>(
    lookup: &mut PrefixLookup,
    rows: impl Iterator<Item = (&'a str, &'a [u8])>,
    owner: &Owner,
) {
    for (name, bytes) in rows {
        let decoded = std::str::from_utf8(bytes)
            .map_err(|_| "is not UTF-8 text".to_owned())
            .and_then(yaml::decode_prefix_claim);
        match decoded {
            Ok(m) if m.spec.owner == *owner => {
                lookup.held.get_or_insert(m);
            }
            Ok(_) => {}
            Err(why) => lookup.broken.push((name.to_owned(), why)),
        }
    }
}

/// A prefix as PostgreSQL sends an `inet` in binary (family, mask length, `is_cidr`, address
/// length, address bytes): the `postgres` crate's `IpAddr` drops the mask length.
struct Prefix(IpNet);

impl<'a> FromSql<'a> for Prefix {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Prefix, Box<dyn std::error::Error + Sync + Send>> {
        let bad = || -> Box<dyn std::error::Error + Sync + Send> { "malformed inet value".into() };
        let [_, len, _, nb, address @ ..] = raw else {
            return Err(bad());
        };
        let address = match (usize::from(*nb), address) {
            (4, &[a, b, c, d]) => IpAddr::from([a, b, c, d]),
            (16, bytes) => IpAddr::from(<[u8; 16]>::try_from(bytes).map_err(|_| bad())?),
            _ => return Err(bad()),
        };
        IpNet::new(address, *len)
            .map(|net| Prefix(net.trunc()))
            .map_err(|_| bad())
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::INET
    }
}
