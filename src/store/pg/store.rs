//! [`Store`] on PostgreSQL: each method one statement (a change and its event row in one
//! data-modifying `WITH`), joining the transaction of the surrounding unit of work.

use std::net::IpAddr;

use postgres::Client;

use super::typed::Typed;
use super::{PgStore, ns_key, schema};
use crate::error::{Error, Result};
use crate::model::candidates::Candidates;
use crate::model::{
    AllocationManifest, Namespace, Owner, OwnerFilter, PoolName, allocation_name,
    parse_allocation_name,
};
use crate::store::{
    Claim, Event, Found, FreeIter, LockGuard, LockMode, ObjectKind, OwnerLookup, Parsed, Store,
};
use crate::yaml;

/// A pool's manifest kind, as the events table names it.
const POOL_KIND: &str = "IPAMPool";
/// An allocation's manifest kind, as the events table names it.
const ALLOCATION_KIND: &str = "IPAllocation";

/// Decodes a stored allocation manifest.
fn parse(bytes: &[u8]) -> Parsed {
    std::str::from_utf8(bytes)
        .map_err(|_| "is not UTF-8 text".to_owned())
        .and_then(yaml::decode_allocation)
}

/// The owner's three key columns: kind, name, uid (`''` for none).
fn owner_columns(owner: &Owner) -> (&'static str, &str, &str) {
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
fn delete_allocation(
    client: &mut Client,
    ns: &str,
    pool: &str,
    address: IpAddr,
    owner: Option<(&str, &str, &str)>,
    name: &str,
    client_id: &str,
) -> std::result::Result<bool, postgres::Error> {
    let (guarded, kind, oname, uid) = match owner {
        Some((k, n, u)) => (true, k, n, u),
        None => (false, "", "", ""),
    };
    let row = client.one(
        "WITH gone AS (
             DELETE FROM ipamctl.allocations
             WHERE namespace = $1 AND pool = $2 AND address = $3
               AND (NOT $4 OR (owner_kind = $5 AND owner_name = $6 AND owner_uid = $7))
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
        ],
    )?;
    Ok(row.get::<_, i64>(0) > 0)
}

/// The `kind` column of `ipamctl.objects` for the kinds kept there.
fn object_kind(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Subnet => crate::model::subnet::SUBNET_KIND,
        ObjectKind::Cooldown => crate::model::cooldown::COOLDOWN_KIND,
        ObjectKind::Pool | ObjectKind::Allocation => {
            unreachable!("pools and allocations have tables")
        }
    }
}

impl PgStore {
    /// The pool a subnet or cooldown record belongs to, read from its manifest or name.
    fn object_pool(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<String> {
        let invalid = |why: String| Error::invalid(self.locate(kind, ns, name), why);
        match kind {
            ObjectKind::Cooldown => parse_allocation_name(name)
                .map(|(pool, _)| pool.to_owned())
                .ok_or_else(|| invalid("is not named `<pool>-<a-b-c-d>`".into())),
            _ => {
                let text =
                    std::str::from_utf8(bytes).map_err(|_| invalid("is not UTF-8 text".into()))?;
                let subnet = yaml::decode_subnet(text).map_err(invalid)?;
                Ok(subnet.spec.pool.to_string())
            }
        }
    }

    /// Writes a subnet or cooldown record (`create_only`: only if absent); whether it did.
    fn put_object(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
        create_only: bool,
    ) -> Result<bool> {
        let pool = self.object_pool(kind, ns, name, bytes)?;
        let (k, n) = (object_kind(kind), ns_key(ns));
        self.single(|c| {
            let written = if create_only {
                c.exec(
                    "INSERT INTO ipamctl.objects (kind, namespace, name, pool, manifest)
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                    &[&k, &n, &name, &pool, &bytes],
                )?
            } else {
                c.exec(
                    "INSERT INTO ipamctl.objects (kind, namespace, name, pool, manifest)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (kind, namespace, name)
                     DO UPDATE SET pool = EXCLUDED.pool, manifest = EXCLUDED.manifest",
                    &[&k, &n, &name, &pool, &bytes],
                )?
            };
            Ok(written > 0)
        })
    }

    /// Writes a pool's manifest, creating or replacing it (`create_only`: only if absent),
    /// resetting its low-water hint (a changed pool may have new low candidates) and logging
    /// `pool created`/`pool updated`. Returns whether anything was written.
    fn put_pool(&self, ns: &str, name: &str, bytes: &[u8], create_only: bool) -> Result<bool> {
        self.forget_locked_pool(ns, name);
        let id = self.client_id.as_str();
        self.run(|client| {
            let existed = client
                .opt(
                    "SELECT 1 FROM ipamctl.pools WHERE namespace = $1 AND name = $2 FOR UPDATE",
                    &[&ns, &name],
                )?
                .is_some();
            if existed && create_only {
                return Ok(false);
            }
            let (statement, action) = if existed {
                (
                    "UPDATE ipamctl.pools SET manifest = $3, updated_at = now()
                     WHERE namespace = $1 AND name = $2",
                    "pool updated",
                )
            } else {
                (
                    "INSERT INTO ipamctl.pools (namespace, name, manifest) VALUES ($1, $2, $3)
                     ON CONFLICT DO NOTHING",
                    "pool created",
                )
            };
            if client.exec(statement, &[&ns, &name, &bytes])? == 0 {
                // Created by someone else since the look-up: as the file store's create.
                return Ok(false);
            }
            client.exec(
                "INSERT INTO ipamctl.pool_hints (namespace, pool) VALUES ($1, $2)
                 ON CONFLICT (namespace, pool)
                 DO UPDATE SET low_water = NULL, epoch = ipamctl.pool_hints.epoch + 1",
                &[&ns, &name],
            )?;
            client.exec(
                "INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[&id, &action, &ns, &POOL_KIND, &name, &bytes],
            )?;
            Ok(true)
        })
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
        if session.in_txn {
            return;
        }
        let client = &mut session.client;
        // One round trip to begin: the two statements in one simple query.
        if client
            .batch_execute("BEGIN; SET LOCAL synchronous_commit TO off")
            .is_err()
        {
            let _ = client.batch_execute("ROLLBACK");
            return;
        }
        let end = if work(client).is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        let _ = client.batch_execute(end);
    }
}

impl Store for PgStore {
    fn locate(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> String {
        let kind = kind.resource();
        match ns {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        }
    }

    fn get(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<Option<Vec<u8>>> {
        let ns = ns_key(ns);
        let row = match kind {
            ObjectKind::Pool => {
                let session = self.session();
                if let Some(bytes) = session.locked_pools.get(&(ns.to_owned(), name.to_owned())) {
                    return Ok(Some(bytes.clone()));
                }
                drop(session);
                self.single(|c| {
                    c.opt(
                        "SELECT manifest FROM ipamctl.pools WHERE namespace = $1 AND name = $2",
                        &[&ns, &name],
                    )
                })?
            }
            ObjectKind::Allocation => {
                let Some((pool, address)) = parse_allocation_name(name) else {
                    return Ok(None);
                };
                self.single(|c| {
                    c.opt(
                        "SELECT manifest FROM ipamctl.allocations
                         WHERE namespace = $1 AND pool = $2 AND address = $3",
                        &[&ns, &pool, &address],
                    )
                })?
            }
            ObjectKind::Subnet | ObjectKind::Cooldown => {
                let k = object_kind(kind);
                self.single(|c| {
                    c.opt(
                        "SELECT manifest FROM ipamctl.objects
                         WHERE kind = $1 AND namespace = $2 AND name = $3",
                        &[&k, &ns, &name],
                    )
                })?
            }
        };
        Ok(row.map(|r| r.get(0)))
    }

    fn create(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<bool> {
        match kind {
            ObjectKind::Pool => self.put_pool(ns_key(ns), name, bytes, true),
            ObjectKind::Allocation => {
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    Error::invalid(self.locate(kind, ns, name), "is not UTF-8 text")
                })?;
                let manifest = yaml::decode_allocation(text)
                    .map_err(|e| Error::invalid(self.locate(kind, ns, name), e))?;
                Ok(matches!(self.claim(ns, &manifest)?, Claim::Claimed))
            }
            ObjectKind::Subnet | ObjectKind::Cooldown => {
                self.put_object(kind, ns, name, bytes, true)
            }
        }
    }

    fn replace(
        &self,
        kind: ObjectKind,
        ns: Option<&Namespace>,
        name: &str,
        bytes: &[u8],
    ) -> Result<()> {
        match kind {
            ObjectKind::Pool => self.put_pool(ns_key(ns), name, bytes, false).map(|_| ()),
            ObjectKind::Allocation => Err(Error::usage(
                "allocations are never replaced: release the address and allocate it again",
            )),
            ObjectKind::Subnet | ObjectKind::Cooldown => {
                self.put_object(kind, ns, name, bytes, false).map(|_| ())
            }
        }
    }

    fn delete(&self, kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> Result<bool> {
        let ns = ns_key(ns);
        let id = self.client_id.as_str();
        match kind {
            ObjectKind::Pool => {
                self.forget_locked_pool(ns, name);
                self.single(|c| {
                let row = c.one(
                    "WITH gone AS (
                         DELETE FROM ipamctl.pools WHERE namespace = $1 AND name = $2
                         RETURNING namespace, name, manifest
                     ), hint AS (
                         DELETE FROM ipamctl.pool_hints h USING gone
                         WHERE h.namespace = gone.namespace AND h.pool = gone.name
                     ), event AS (
                         INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
                         SELECT $3, 'pool deleted', namespace, $4, name, manifest FROM gone
                     )
                     SELECT count(*) FROM gone",
                    &[&ns, &name, &id, &POOL_KIND],
                )?;
                Ok(row.get::<_, i64>(0) > 0)
            })
            }
            ObjectKind::Allocation => {
                let Some((pool, address)) = parse_allocation_name(name) else {
                    return Ok(false);
                };
                self.run(|c| delete_allocation(c, ns, pool, address, None, name, id))
            }
            ObjectKind::Subnet | ObjectKind::Cooldown => {
                let k = object_kind(kind);
                self.single(|c| {
                    c.exec(
                        "DELETE FROM ipamctl.objects WHERE kind = $1 AND namespace = $2 AND name = $3",
                        &[&k, &ns, &name],
                    )
                })
                .map(|n| n > 0)
            }
        }
    }

    fn list(&self, kind: ObjectKind, ns: Option<&Namespace>) -> Result<Vec<String>> {
        let ns = ns_key(ns);
        match kind {
            ObjectKind::Pool => {
                let rows = self.single(|c| {
                    c.all(
                        "SELECT name FROM ipamctl.pools WHERE namespace = $1",
                        &[&ns],
                    )
                })?;
                Ok(rows.iter().map(|r| r.get(0)).collect())
            }
            ObjectKind::Allocation => {
                let rows = self.single(|c| {
                    c.all(
                        "SELECT pool, address FROM ipamctl.allocations WHERE namespace = $1",
                        &[&ns],
                    )
                })?;
                Ok(rows
                    .iter()
                    .filter_map(|r| {
                        let pool = PoolName::new(r.get::<_, &str>(0)).ok()?;
                        Some(allocation_name(&pool, r.get::<_, IpAddr>(1)))
                    })
                    .collect())
            }
            ObjectKind::Subnet | ObjectKind::Cooldown => {
                let k = object_kind(kind);
                let rows = self.single(|c| {
                    c.all(
                        "SELECT name FROM ipamctl.objects WHERE kind = $1 AND namespace = $2",
                        &[&k, &ns],
                    )
                })?;
                Ok(rows.iter().map(|r| r.get(0)).collect())
            }
        }
    }

    fn scopes(&self) -> Result<Vec<Option<Namespace>>> {
        let rows = self.single(|c| {
            // The allocations' namespaces by a skip scan of the primary key (one index probe
            // per namespace), not a pass over every row.
            c.all(
                "WITH RECURSIVE ns AS (
                     (SELECT namespace FROM ipamctl.allocations ORDER BY namespace LIMIT 1)
                     UNION ALL
                     SELECT (SELECT a.namespace FROM ipamctl.allocations a
                             WHERE a.namespace > ns.namespace ORDER BY a.namespace LIMIT 1)
                     FROM ns WHERE ns.namespace IS NOT NULL
                 )
                 SELECT namespace FROM ns WHERE namespace IS NOT NULL
                 UNION SELECT namespace FROM ipamctl.pools",
                &[],
            )
        })?;
        let mut scopes = vec![None];
        scopes.extend(
            rows.iter()
                .map(|r| r.get::<_, &str>(0))
                .filter(|ns| !ns.is_empty())
                .filter_map(|ns| Namespace::new(ns).ok().map(Some)),
        );
        scopes.sort();
        scopes.dedup();
        Ok(scopes)
    }

    fn lock_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mode: LockMode,
    ) -> Result<LockGuard> {
        let ns = ns_key(ns);
        let statement = match mode {
            LockMode::Shared => {
                "SELECT manifest FROM ipamctl.pools WHERE namespace = $1 AND name = $2 FOR SHARE"
            }
            LockMode::Exclusive => {
                "SELECT manifest FROM ipamctl.pools WHERE namespace = $1 AND name = $2 FOR UPDATE"
            }
        };
        let row = self.in_unit("a pool lock", |c| c.opt(statement, &[&ns, &pool.as_str()]))?;
        // The row lock is the transaction's: it goes with COMMIT or ROLLBACK. Until then the
        // row cannot change but by this unit, so its manifest answers the unit's reads.
        if let Some(row) = row {
            self.session()
                .locked_pools
                .insert((ns.to_owned(), pool.to_string()), row.get(0));
        }
        Ok(Box::new(()))
    }

    fn lock_scope(&self, ns: Option<&Namespace>) -> Result<LockGuard> {
        let ns = ns_key(ns);
        self.in_unit("a scope lock", |c| {
            c.exec(
                "INSERT INTO ipamctl.scope_locks (namespace) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&ns],
            )?;
            c.opt(
                "SELECT 1 FROM ipamctl.scope_locks WHERE namespace = $1 FOR UPDATE",
                &[&ns],
            )
        })?;
        Ok(Box::new(()))
    }

    fn lock_owner(
        &self,
        _ns: Option<&Namespace>,
        _pool: &PoolName,
        _owner: &Owner,
    ) -> Result<LockGuard> {
        // The unique owner constraint arbitrates claims, and a release deletes only the row
        // of the owner it read: there is nothing to serialise.
        Ok(Box::new(()))
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
                Ok(m) => lookup.held = Some(m),
                Err(why) => lookup.broken.push((name, why)),
            }
        }
        Ok(lookup)
    }

    fn record_claim(
        &self,
        _ns: Option<&Namespace>,
        _pool: &PoolName,
        _owner: &Owner,
        _address: IpAddr,
    ) {
        // The claim's own statement moved the pool's hint (see `claim`): nothing is left.
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

    fn atomically(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.unit(work)
    }

    fn allocation_events(&self, ns: Option<&Namespace>) -> Result<Vec<Event>> {
        let ns = ns_key(ns);
        let rows = self.single(|c| {
            c.all(
                "SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                        client, action, manifest
                 FROM ipamctl.events
                 WHERE namespace = $1 AND kind = $2 AND action IN ('claimed', 'released')
                 ORDER BY id",
                &[&ns, &ALLOCATION_KIND],
            )
        })?;
        // A manifest that does not parse was never written by ipamctl: left out.
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(Event {
                    at: r.get(0),
                    who: r.get(1),
                    action: r.get(2),
                    manifest: parse(r.get::<_, &[u8]>(3)).ok()?,
                })
            })
            .collect())
    }

    fn claim(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim> {
        let nsk = ns_key(ns);
        let pool = manifest.spec.pool.as_str();
        let (kind, name, uid) = owner_columns(&manifest.spec.owner);
        let bytes = yaml::encode(manifest).into_bytes();
        let id = self.client_id.as_str();
        let object = manifest.metadata.name.as_str();
        let created = manifest.metadata.creation_timestamp.map(|t| t.to_string());
        // The pool's hint moves past the address if this unit's gap queries read it, handed
        // out this address and passed none over, and it is unchanged since (no release
        // bumped its epoch, no other claim moved it).
        let address = manifest.spec.address;
        let read = {
            let mut session = self.session();
            let key = (nsk.to_owned(), pool.to_owned());
            session.hints_read.get_mut(&key).and_then(|read| {
                let latest = read.untried == Some(address);
                if latest {
                    read.untried = None;
                }
                (latest && !read.passed_over).then_some((read.epoch, read.low_water))
            })
        };
        let next = crate::model::candidates::ordinal(address)
            .checked_add(1)
            .filter(|&n| address.is_ipv6() || n <= u128::from(u32::MAX))
            .map(|n| crate::model::candidates::address(address.is_ipv6(), n));
        let (to, epoch, low_water) = match read {
            Some((epoch, low_water)) => (next, epoch, low_water),
            None => (None, 0, None),
        };
        let claimed = self.run(|c| {
            let row = c.one(
                CLAIM,
                &[
                    &nsk,
                    &pool,
                    &address,
                    &kind,
                    &name,
                    &uid,
                    &bytes,
                    &id,
                    &ALLOCATION_KIND,
                    &object,
                    &created,
                    &to,
                    &epoch,
                    &low_water,
                ],
            )?;
            Ok(row.get::<_, i64>(0) > 0)
        })?;
        if claimed {
            return Ok(Claim::Claimed);
        }
        // Nothing inserted: the address is taken, or the owner holds one. This statement
        // sees every commit made before it started, including the one that beat us.
        match self.owner_row(ns, &manifest.spec.pool, &manifest.spec.owner)? {
            Some((_, Ok(held))) => Ok(Claim::OwnerHolds(Box::new(held))),
            Some((name, Err(why))) => Err(Error::invalid(
                self.locate(ObjectKind::Allocation, ns, &name),
                why,
            )),
            None => Ok(Claim::AddressTaken),
        }
    }

    fn free_candidates<'a>(
        &'a self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        candidates: &Candidates,
        _taken: &[IpAddr],
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

    fn release(&self, ns: Option<&Namespace>, expected: &AllocationManifest) -> Result<bool> {
        let nsk = ns_key(ns);
        let id = self.client_id.as_str();
        let owner = owner_columns(&expected.spec.owner);
        self.run(|c| {
            delete_allocation(
                c,
                nsk,
                expected.spec.pool.as_str(),
                expected.spec.address,
                Some(owner),
                &expected.metadata.name,
                id,
            )
        })
    }
}

/// A claim, in one statement: the row if the address and the owner are both free (the
/// unique constraints arbitrate), its ledger row and its event; and the pool's low-water
/// hint moved to `$12` (the address after the claimed one) if it still says what the gap
/// query read (`$13` epoch, `$14` address). Runs in a transaction begun with
/// [`super::BEGIN`] (the ledger's triggers leave its counting to it).
///
/// The hint moves in the claim's transaction, so it is never ahead of a claim that rolled
/// back, and costs no second commit. Its row is locked `SKIP LOCKED` and only once the row
/// is in (the lock sits above the join with `claimed`): claims of one pool never queue on
/// the hint, the one that finds it locked leaves it lower (advice), and a release lowering
/// it waits for the claim's commit, which then waits for nothing.
const CLAIM: &str = "
WITH claimed AS (
    INSERT INTO ipamctl.allocations
        (namespace, pool, address, owner_kind, owner_name, owner_uid, manifest,
         creation_timestamp)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $11::text::timestamptz)
    ON CONFLICT DO NOTHING
    RETURNING namespace, pool, manifest
), counted AS (
    INSERT INTO ipamctl.pool_counts (namespace, pool, delta)
    SELECT namespace, pool, 1 FROM claimed
), event AS (
    INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
    SELECT $8, 'claimed', namespace, $9, $10, manifest FROM claimed
), advanced AS (
    UPDATE ipamctl.pool_hints SET low_water = $12
    WHERE namespace = $1 AND pool = $2
      AND EXISTS (SELECT FROM ipamctl.pool_hints
                  WHERE namespace = $1 AND pool = $2 AND epoch = $13
                    AND low_water IS NOT DISTINCT FROM $14
                    AND (low_water IS NULL OR low_water < $12)
                    AND EXISTS (SELECT FROM claimed)
                  FOR UPDATE SKIP LOCKED)
)
SELECT count(*) FROM claimed";

/// How many ledger rows a pool's count may have before the reader that summed them folds
/// them into one (migration 2 in `schema.rs`).
const FOLD_AFTER: i64 = 64;

impl PgStore {
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

    /// Forgets what a lock read of the pool: this unit is about to change it.
    fn forget_locked_pool(&self, ns: &str, name: &str) {
        self.session()
            .locked_pools
            .remove(&(ns.to_owned(), name.to_owned()));
    }

    /// Folds the pool's count ledger into one row, after a reader summed many: the sum stays
    /// exact whether or not the fold happens, only shorter to read.
    fn fold_counts(&self, ns: &str, pool: &str) {
        self.housekeep(|c| c.exec(schema::FOLD, &[&ns, &pool]).map(drop));
    }

    /// The owner's allocation row in the pool: its object name and manifest.
    fn owner_row(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<Option<(String, Parsed)>> {
        let ns = ns_key(ns);
        let (kind, name, uid) = owner_columns(owner);
        let row = self.single(|c| {
            c.opt(
                "SELECT address, manifest FROM ipamctl.allocations
                 WHERE namespace = $1 AND pool = $2
                   AND owner_kind = $3 AND owner_name = $4 AND owner_uid = $5",
                &[&ns, &pool.as_str(), &kind, &name, &uid],
            )
        })?;
        Ok(row.map(|r| {
            let object = allocation_name(pool, r.get::<_, IpAddr>(0));
            (object, parse(r.get::<_, &[u8]>(1)))
        }))
    }
}
