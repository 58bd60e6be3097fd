//! Object bytes in PostgreSQL ([`Objects`]): pools and allocations in their tables, subnets
//! and cooldown records in `objects`; each method one statement (a change and its event row
//! in one data-modifying `WITH`), joining the transaction of the surrounding unit of work
//! (a change outside one gets a transaction of its own).

use std::net::IpAddr;

use super::rows::{POOL_KIND, delete_allocation};
use super::typed::Typed;
use super::{PgStore, ns_key};
use crate::error::{Error, Result};
use crate::model::kind::PREFIX_CLAIM_KIND;
use crate::model::{Namespace, PoolName, allocation_name, parse_allocation_name};
use crate::store::{Claim, Claims, ObjectKind, Objects};
use crate::yaml;

/// The `kind` column of `ipamctl.objects` for the kinds kept there.
/// A subnet's or cooldown record's delete (`$1` kind, `$2` namespace, `$3` name). A
/// subnet's frees its gateway, reserved, network and broadcast addresses, perhaps below the
/// pool's low-water hint: the hint is dropped, as an `apply` of the pool drops it.
const DELETE_OBJECT: &str = "
WITH gone AS (
    DELETE FROM ipamctl.objects WHERE kind = $1 AND namespace = $2 AND name = $3
    RETURNING namespace, pool, manifest
), hint AS (
    UPDATE ipamctl.pool_hints h SET low_water = NULL, epoch = h.epoch + 1
    FROM gone
    WHERE $1 = 'Subnet' AND h.namespace = gone.namespace AND h.pool = gone.pool
), event AS (
    INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
    SELECT $4, 'pool updated', namespace, $1, $3, manifest FROM gone WHERE $1 = 'Subnet'
)
SELECT count(*) FROM gone";

/// A subnet written: the layout of its pool changed, logged as `pool updated` of kind
/// `Subnet` (the events' actions are fixed by the schema), so that what is derived from the
/// layout (`dns export`'s serials, [`crate::store::Audit::changed`]) sees it.
const SUBNET_EVENT: &str = "
INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
VALUES ($1, 'pool updated', $2, $3, $4, $5)";

pub(super) fn object_kind(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Subnet => crate::model::subnet::SUBNET_KIND,
        ObjectKind::Cooldown => crate::model::cooldown::COOLDOWN_KIND,
        ObjectKind::PrefixClaim => PREFIX_CLAIM_KIND,
        ObjectKind::Quota => crate::model::kind::QUOTA_KIND,
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
            // From the record, not its name: a prefix's record (`<pool>-<address>-<length>`)
            // can read as another pool's address.
            ObjectKind::Cooldown => {
                let text =
                    std::str::from_utf8(bytes).map_err(|_| invalid("is not UTF-8 text".into()))?;
                let record = yaml::decode_cooldown(text).map_err(invalid)?;
                Ok(record.spec.pool.to_string())
            }
            ObjectKind::PrefixClaim => {
                let text =
                    std::str::from_utf8(bytes).map_err(|_| invalid("is not UTF-8 text".into()))?;
                let claim = yaml::decode_prefix_claim(text).map_err(invalid)?;
                Ok(claim.spec.pool.to_string())
            }
            // A quota is a namespace's, of no pool.
            ObjectKind::Quota => Ok(String::new()),
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
        // A prefix claim's prefix, which the exclusion constraint compares (see schema V7);
        // `object_pool` decoded the manifest, whose name spells it.
        let prefix: Option<String> = match kind {
            ObjectKind::PrefixClaim => crate::model::prefix_claim::parse_prefix_claim_name(name)
                .map(|(_, net)| net.to_string()),
            _ => None,
        };
        if kind == ObjectKind::Subnet {
            self.forget_prefetched_subnets();
        }
        let kept = self.keeps_free_space(n, &pool);
        let buddies = match kind {
            ObjectKind::PrefixClaim => crate::model::prefix_claim::parse_prefix_claim_name(name)
                .map(|(_, net)| super::prefix_free::chain(net).0)
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        self.run(|c| {
            // DO NOTHING without a target also takes the exclusion constraint's refusal:
            // the claim then reads and decides again.
            let written = if create_only && kind == ObjectKind::PrefixClaim {
                // A claim is an event of the audit log, as an allocation's is (`history`),
                // and the pool's free space is kept with it.
                let row = c.one(
                    super::prefix_free::CLAIM,
                    &[
                        &k,
                        &n,
                        &name,
                        &pool,
                        &bytes,
                        &prefix,
                        &self.client_id.as_str(),
                        &kept,
                        &buddies,
                    ],
                )?;
                u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)
            } else if create_only {
                c.exec(
                    "INSERT INTO ipamctl.objects (kind, namespace, name, pool, manifest, prefix)
                     VALUES ($1, $2, $3, $4, $5, $6::text::inet) ON CONFLICT DO NOTHING",
                    &[&k, &n, &name, &pool, &bytes, &prefix],
                )?
            } else {
                c.exec(
                    "INSERT INTO ipamctl.objects (kind, namespace, name, pool, manifest, prefix)
                     VALUES ($1, $2, $3, $4, $5, $6::text::inet)
                     ON CONFLICT (kind, namespace, name)
                     DO UPDATE SET pool = EXCLUDED.pool, manifest = EXCLUDED.manifest,
                                   prefix = EXCLUDED.prefix",
                    &[&k, &n, &name, &pool, &bytes, &prefix],
                )?
            };
            if kind == ObjectKind::Subnet && written > 0 {
                c.exec(
                    SUBNET_EVENT,
                    &[&self.client_id.as_str(), &n, &k, &name, &bytes],
                )?;
            }
            if kind == ObjectKind::PrefixClaim && !create_only {
                // A claim replaced in place: no pool's kept free space can vouch for it.
                c.exec(
                    "UPDATE ipamctl.prefix_free_epoch SET epoch = epoch + 1",
                    &[],
                )?;
            }
            Ok(written > 0)
        })
    }

    /// Whether the unit holds the row of pool (`ns`, `pool`) `FOR UPDATE`, so that a prefix
    /// claim or release written now keeps the pool's free space (`prefix_free.rs`).
    fn keeps_free_space(&self, ns: &str, pool: &str) -> bool {
        let session = self.session();
        session.in_txn
            && session
                .kept_pools
                .contains(&(ns.to_owned(), pool.to_owned()))
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

    /// Forgets what a lock read of the pool: this unit is about to change it.
    fn forget_locked_pool(&self, ns: &str, name: &str) {
        self.session()
            .locked_pools
            .remove(&(ns.to_owned(), name.to_owned()));
    }
}

impl Objects for PgStore {
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
            ObjectKind::Subnet
            | ObjectKind::Cooldown
            | ObjectKind::PrefixClaim
            | ObjectKind::Quota => {
                if kind == ObjectKind::Subnet
                    && let Some(answer) = self.prefetched_subnet(ns, name)
                {
                    return Ok(answer);
                }
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
            ObjectKind::Subnet | ObjectKind::Cooldown | ObjectKind::PrefixClaim => {
                self.put_object(kind, ns, name, bytes, true)
            }
            // What the unit listed of the quotas is listed again after a write of one.
            ObjectKind::Quota => {
                self.session().prefetched.quotas.clear();
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
            ObjectKind::Subnet | ObjectKind::Cooldown | ObjectKind::PrefixClaim => {
                self.put_object(kind, ns, name, bytes, false).map(|_| ())
            }
            ObjectKind::Quota => {
                self.session().prefetched.quotas.clear();
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
                self.run(|c| {
                let row = c.one(
                    "WITH gone AS (
                         DELETE FROM ipamctl.pools WHERE namespace = $1 AND name = $2
                         RETURNING namespace, name, manifest
                     ), hint AS (
                         DELETE FROM ipamctl.pool_hints h USING gone
                         WHERE h.namespace = gone.namespace AND h.pool = gone.name
                     ), free AS (
                         DELETE FROM ipamctl.prefix_free f USING gone
                         WHERE f.namespace = gone.namespace AND f.pool = gone.name
                     ), kept AS (
                         DELETE FROM ipamctl.prefix_free_pools s USING gone
                         WHERE s.namespace = gone.namespace AND s.pool = gone.name
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
                self.run(|c| delete_allocation(c, ns, pool, address, None, (name, None), id))
            }
            ObjectKind::PrefixClaim => {
                let Some((pool, prefix)) =
                    crate::model::prefix_claim::parse_prefix_claim_name(name)
                else {
                    return Ok(false);
                };
                let kept = self.keeps_free_space(ns, pool);
                let (buddies, parents) = super::prefix_free::chain(prefix);
                let levels = i64::try_from(buddies.len()).unwrap_or(0);
                let prefix = prefix.to_string();
                self.run(|c| {
                    let row = c.one(
                        super::prefix_free::RELEASE,
                        &[
                            &ns, &name, &id, &pool, &prefix, &kept, &buddies, &parents, &levels,
                        ],
                    )?;
                    Ok(row.get::<_, i64>(0) > 0)
                })
            }
            ObjectKind::Subnet | ObjectKind::Cooldown | ObjectKind::Quota => {
                if kind == ObjectKind::Subnet {
                    self.forget_prefetched_subnets();
                }
                let k = object_kind(kind);
                self.run(|c| {
                    // A prefix claim's release is an event of the audit log (above), and so
                    // is a subnet's removal (its pool's layout); a cooldown record's is not.
                    let row = c.one(DELETE_OBJECT, &[&k, &ns, &name, &id])?;
                    Ok(row.get::<_, i64>(0) > 0)
                })
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
            ObjectKind::Subnet
            | ObjectKind::Cooldown
            | ObjectKind::PrefixClaim
            | ObjectKind::Quota => {
                if kind == ObjectKind::Subnet
                    && let Some(names) = self.prefetched_subnet_names(ns)
                {
                    return Ok(names);
                }
                if kind == ObjectKind::Quota
                    && let Some(names) = self.session().prefetched.quotas.get(ns)
                {
                    return Ok(names.clone());
                }
                let k = object_kind(kind);
                let rows = self.single(|c| {
                    c.all(
                        "SELECT name FROM ipamctl.objects WHERE kind = $1 AND namespace = $2",
                        &[&k, &ns],
                    )
                })?;
                let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
                let mut session = self.session();
                if kind == ObjectKind::Quota && session.in_txn {
                    session
                        .prefetched
                        .quotas
                        .insert(ns.to_owned(), names.clone());
                }
                Ok(names)
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
                 UNION SELECT namespace FROM ipamctl.pools
                 UNION SELECT namespace FROM ipamctl.objects WHERE kind = 'Quota'",
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
}
