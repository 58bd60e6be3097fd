//! Claims and guarded releases in PostgreSQL ([`Claims`]), arbitrated by the allocations
//! table's primary key and unique owner constraint, and the audit log their statements
//! write ([`Audit`]).

use super::rows::{ALLOCATION_KIND, delete_allocation, owner_columns, parse};
use super::typed::{Param, Typed};
use super::{PgStore, ns_key};
use crate::error::{Error, Result};
use crate::model::kind::PREFIX_CLAIM_KIND;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::{AllocationManifest, Namespace};
use crate::store::read::read_allocation;
use crate::store::{Audit, Claim, Claims, Event, MacChange, ObjectKind, Objects, Release};
use crate::yaml;

impl Claims for PgStore {
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
        let params: [&dyn Param; 14] = [
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
        ];
        let count: i64 = match self.kept_count(CLAIM, &params)? {
            Some(count) => count,
            None => match self.prepared_one(CLAIM, &params)? {
                Some(row) => row.get(0),
                None => self.run(|c| c.one(CLAIM, &params))?.get(0),
            },
        };
        let claimed = count > 0;
        if claimed {
            if let Some(siblings) = &self.siblings {
                siblings.claimed(nsk, pool);
            }
            return Ok(Claim::Claimed);
        }
        self.refused(ns, manifest)
    }

    fn claim_copy(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim> {
        // The same statement: a copy reads no gap query, so it moves no hint either.
        self.claim(ns, manifest)
    }

    fn release(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        lapsed: Option<std::time::Duration>,
        before_delete: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Release> {
        // The row as it is now; then the `DELETE`, guarded by the owner's columns (and for
        // a lease by its lapse, on the server's clock), decides.
        match read_allocation(self, ns, &expected.metadata.name)? {
            Some(Ok(now)) if now == *expected => {}
            None => return Ok(Release::Gone),
            Some(_) => return Ok(Release::Changed),
        }
        before_delete()?;
        let nsk = ns_key(ns);
        let id = self.client_id.as_str();
        let owner = owner_columns(&expected.spec.owner);
        let deleted = self.run(|c| {
            delete_allocation(
                c,
                nsk,
                expected.spec.pool.as_str(),
                expected.spec.address,
                Some(owner),
                (&expected.metadata.name, lapsed),
                id,
            )
        })?;
        Ok(if deleted {
            Release::Deleted
        } else {
            Release::Changed
        })
    }

    fn renew(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        updated: &AllocationManifest,
    ) -> Result<bool> {
        let nsk = ns_key(ns);
        let pool = expected.spec.pool.as_str();
        let new = yaml::encode(updated).into_bytes();
        let id = self.client_id.as_str();
        let object = expected.metadata.name.as_str();
        let address = expected.spec.address;
        self.run(|c| {
            // The row as stored, locked, judged by what it says; the update is then guarded
            // by those very bytes.
            let Some(row) = c.opt(
                "SELECT manifest FROM ipamctl.allocations
                 WHERE namespace = $1 AND pool = $2 AND address = $3 FOR UPDATE",
                &[&nsk, &pool, &address],
            )?
            else {
                return Ok(false);
            };
            let old: Vec<u8> = row.get(0);
            if parse(&old).ok().as_ref() != Some(expected) {
                return Ok(false);
            }
            let row = c.one(
                RENEW,
                &[
                    &nsk,
                    &pool,
                    &address,
                    &old,
                    &new,
                    &id,
                    &ALLOCATION_KIND,
                    &object,
                ],
            )?;
            Ok(row.get::<_, i64>(0) > 0)
        })
    }

    fn set_mac(
        &self,
        ns: Option<&Namespace>,
        expected: &AllocationManifest,
        updated: &AllocationManifest,
    ) -> Result<MacChange> {
        let nsk = ns_key(ns);
        let pool = expected.spec.pool.as_str();
        let new = yaml::encode(updated).into_bytes();
        let id = self.client_id.as_str();
        let object = expected.metadata.name.as_str();
        let address = expected.spec.address;
        // The unique index arbitrates the new MAC; a refusal rolls back to the savepoint
        // only, so that the holder can be read in the same unit.
        let changed = self.run(|c| {
            // The row as stored (perhaps not in ipamctl's spelling: written by hand), locked,
            // and judged by what it says; the update is then guarded by those very bytes.
            let Some(row) = c.opt(
                "SELECT manifest FROM ipamctl.allocations
                 WHERE namespace = $1 AND pool = $2 AND address = $3 FOR UPDATE",
                &[&nsk, &pool, &address],
            )?
            else {
                return Ok(Some(false));
            };
            let old: Vec<u8> = row.get(0);
            if parse(&old).ok().as_ref() != Some(expected) {
                return Ok(Some(false));
            }
            c.batch_execute("SAVEPOINT mac_set")?;
            match c.one(
                SET_MAC,
                &[
                    &nsk,
                    &pool,
                    &address,
                    &old,
                    &new,
                    &id,
                    &ALLOCATION_KIND,
                    &object,
                ],
            ) {
                Ok(row) => {
                    c.batch_execute("RELEASE SAVEPOINT mac_set")?;
                    Ok(Some(row.get::<_, i64>(0) > 0))
                }
                Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
                    c.batch_execute("ROLLBACK TO SAVEPOINT mac_set")?;
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        })?;
        match changed {
            Some(true) => Ok(MacChange::Changed),
            Some(false) => Ok(MacChange::Moved),
            None => {
                let mac = updated
                    .spec
                    .mac
                    .expect("only a MAC can be refused by its index");
                match self.mac_holder(ns, &expected.spec.pool, mac)? {
                    Some(holder) => Ok(MacChange::MacHeld(Box::new(holder))),
                    // Released since the refusal: the caller may try again.
                    None => Ok(MacChange::Moved),
                }
            }
        }
    }
}

impl PgStore {
    /// Why a claim's insert of `manifest` inserted nothing: the address is taken, or the
    /// owner holds one, or its name is held under another uid (migration 12), or its MAC is
    /// held (migration 10). Read by statements that see every commit made before they
    /// started, including the one that beat the insert.
    fn refused(&self, ns: Option<&Namespace>, manifest: &AllocationManifest) -> Result<Claim> {
        let owner = &manifest.spec.owner;
        match self.owner_row(ns, &manifest.spec.pool, owner)? {
            Some((_, Ok(held))) if held.spec.owner == *owner => {
                Ok(Claim::OwnerHolds(Box::new(held)))
            }
            Some((_, Ok(held))) if held.spec.owner.is_namesake(owner) => {
                Ok(Claim::NameHeld(Box::new(held)))
            }
            Some((name, Err(why))) => Err(Error::invalid(
                self.locate(ObjectKind::Allocation, ns, &name),
                why,
            )),
            _ => match manifest.spec.mac {
                Some(mac) => Ok(match self.mac_holder(ns, &manifest.spec.pool, mac)? {
                    Some(holder) => Claim::MacHeld(Box::new(holder)),
                    None => Claim::AddressTaken,
                }),
                None => Ok(Claim::AddressTaken),
            },
        }
    }

    /// The allocation of `pool` whose manifest spells `mac` as ipamctl writes it (the
    /// unique index's expression), if any.
    fn mac_holder(
        &self,
        ns: Option<&Namespace>,
        pool: &crate::model::PoolName,
        mac: crate::model::mac::Mac,
    ) -> Result<Option<AllocationManifest>> {
        let nsk = ns_key(ns);
        let text = mac.to_string();
        let row = self.single(|c| {
            c.opt(
                "SELECT manifest FROM ipamctl.allocations
                 WHERE namespace = $1 AND pool = $2 AND ipamctl.allocation_mac(manifest) = $3",
                &[&nsk, &pool.as_str(), &text.as_str()],
            )
        })?;
        Ok(row.and_then(|r| parse(r.get::<_, &[u8]>(0)).ok()))
    }
}

/// A MAC changed in place, and its event, in one statement: `$1` namespace, `$2` pool, `$3`
/// address, `$4` the manifest expected, `$5` the new one, `$6` client, `$7` kind, `$8`
/// object name. Counts the rows changed (0: the row is not the expected one any more).
/// A lease renewed: the manifest rewritten if it is still the bytes read, logged as a
/// `renewed` event (migration 13).
const RENEW: &str = "
WITH changed AS (
    UPDATE ipamctl.allocations SET manifest = $5
    WHERE namespace = $1 AND pool = $2 AND address = $3 AND manifest = $4
    RETURNING namespace, manifest
), event AS (
    INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
    SELECT $6, 'renewed', namespace, $7, $8, manifest FROM changed
)
SELECT count(*) FROM changed";

const SET_MAC: &str = "
WITH changed AS (
    UPDATE ipamctl.allocations SET manifest = $5
    WHERE namespace = $1 AND pool = $2 AND address = $3 AND manifest = $4
    RETURNING namespace, manifest
), event AS (
    INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
    SELECT $6, 'mac changed', namespace, $7, $8, manifest FROM changed
)
SELECT count(*) FROM changed";

impl Audit for PgStore {
    /// The newest event's `at` (the server's `now()` when its change's transaction began)
    /// and the server's clock, held back to the start of the oldest other transaction that
    /// has written and not yet ended: its events, dated when it began, are not visible yet,
    /// so the clock is not past their second until it commits or rolls back. (Its start is
    /// visible to the same role, or with `pg_read_all_stats`; a transaction that has not
    /// written yet has no `backend_xid`, and an ipamctl write is one statement after its
    /// reads.)
    fn changed(&self, scopes: Option<&[Option<Namespace>]>) -> Result<crate::store::Changed> {
        let keys: Option<Vec<String>> =
            scopes.map(|s| s.iter().map(|ns| ns_key(ns.as_ref()).to_owned()).collect());
        let row = self.single(|c| {
            // The activity a transaction reads is a snapshot kept until it ends, and the
            // reading transaction stays open between calls.
            c.exec("SELECT pg_stat_clear_snapshot()", &[])?;
            c.one(
                "SELECT floor(extract(epoch FROM max(at)))::bigint,
                        floor(extract(epoch FROM least(clock_timestamp(), (
                            SELECT min(xact_start) FROM pg_stat_activity
                            WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()
                              AND datname = current_database()
                        ))))::bigint
                 FROM ipamctl.events
                 WHERE $2 OR namespace = ANY($1)",
                &[&keys.unwrap_or_default(), &scopes.is_none()],
            )
        })?;
        Ok(crate::store::Changed {
            newest: row.get(0),
            now: row.get(1),
        })
    }

    fn allocation_events(&self, ns: Option<&Namespace>) -> Result<Vec<Event>> {
        self.events(ns, ALLOCATION_KIND, |bytes| parse(bytes).ok())
    }

    fn prefix_claim_events(
        &self,
        ns: Option<&Namespace>,
    ) -> Result<Vec<Event<PrefixClaimManifest>>> {
        self.events(ns, PREFIX_CLAIM_KIND, |bytes| {
            yaml::decode_prefix_claim(std::str::from_utf8(bytes).ok()?).ok()
        })
    }
}

impl PgStore {
    /// The `claimed` and `released` events of objects of `kind` in scope `ns`, oldest
    /// first, their manifests read by `decode`. A manifest that does not decode was never
    /// written by ipamctl: left out.
    fn events<M>(
        &self,
        ns: Option<&Namespace>,
        kind: &str,
        decode: impl Fn(&[u8]) -> Option<M>,
    ) -> Result<Vec<Event<M>>> {
        let ns = ns_key(ns);
        let rows = self.single(|c| {
            c.all(
                "SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                        client, action, manifest
                 FROM ipamctl.events
                 WHERE namespace = $1 AND kind = $2 AND action IN ('claimed', 'released', 'mac changed')
                 ORDER BY id",
                &[&ns, &kind],
            )
        })?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(Event {
                    at: r.get(0),
                    who: r.get(1),
                    action: r.get(2),
                    manifest: decode(r.get::<_, &[u8]>(3))?,
                })
            })
            .collect())
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
