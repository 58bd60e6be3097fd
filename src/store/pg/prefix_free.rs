//! A supernet's free space kept in the database (migration 9 in `schema.rs`), so that a
//! best-fit claim reads the two free blocks it needs by index instead of every claim of the
//! pool, and a prefix claim for a new owner is three round trips.
//!
//! `prefix_free` holds each pool's maximal free aligned blocks outside its claims and
//! excludes, exactly [`crate::model::prefix::free_blocks`]; `prefix_free_pools` the pool's
//! prefix and excludes they were computed for and the outside-writes epoch then. The blocks
//! answer a claim only if that row matches the pool as its locked row says and the epoch is
//! current; otherwise the claim computes them again from the claims ([`PgStore::rebuild`],
//! the old cost, once). They stay exact because:
//!
//! - every ipamctl claim and release of a prefix holds the pool's row `FOR UPDATE` and, in
//!   its own statement, splits the block that held the claimed prefix into the prefix's
//!   buddies ([`crate::model::prefix::buddies`]) or merges the released prefix with each
//!   free buddy in turn: the buddy allocator's two moves, which keep the blocks maximal;
//! - a claim the exclusion constraint refused, or a claimed prefix that no block held,
//!   drops the pool's row (the blocks were wrong: computed again next time);
//! - every other write of a claim (an `import`, which holds no pool lock: ipamctl's own
//!   statement; psql, `COPY`, other tools: a statement trigger) bumps the epoch, which makes
//!   every pool's blocks stale. The trigger stays out of a statement's way only when its
//!   transaction says `ipamctl.counting = 'self'` *and* its role owns `ipamctl.objects`
//!   (migration 11): a role with write rights alone cannot switch it off.
//!
//! A writer that bypasses the triggers (`session_replication_role = replica`, which needs a
//! superuser, or a table owner's `DISABLE TRIGGER`) can leave the blocks wrong: a block that holds a claim is refused by the exclusion constraint,
//! which drops the blocks; a claim deleted that way stays taken for best fit until the
//! pool's blocks are next computed (any claim the constraint refuses, `apply` of another
//! prefix or excludes, or any write by another tool).

use std::sync::MutexGuard;

use ipnet::IpNet;
use postgres::SimpleQueryRow;

use super::prefetch::{hex, lit};
use super::typed::Typed;
use super::{PgStore, Session, ns_key};
use crate::error::Result;
use crate::model::kind::PREFIX_CLAIM_KIND;
use crate::model::prefix::{buddies, free_blocks};
use crate::model::{Namespace, Owner, PoolName};

/// What a prefix claim's first round trip read for the unit: the owner's candidate claims
/// and, for a best-fit claim, the pool's free space.
#[derive(Debug)]
pub(super) struct Ahead {
    /// (namespace, pool, owner name) the rows were read for.
    key: (String, String, String),
    /// (name, manifest) of each claim of the pool whose owner name, as its canonical lines
    /// spell it, is the owner's or cannot be told.
    holders: Vec<(String, Vec<u8>)>,
    /// For the length asked: the free space as [`free_space`] read it.
    free: Option<(u8, Read)>,
}

/// The free space as the two statements of [`free_space`] read it: the pool's row of
/// `prefix_free_pools` (prefix, excludes, epoch current), and the blocks.
#[derive(Debug)]
struct Read {
    basis: Option<(IpNet, Vec<IpNet>, bool)>,
    blocks: Vec<IpNet>,
}

/// Two statements (each after a `;`): the pool's `prefix_free_pools` row with whether its
/// epoch is current, and its best-fit block for `len` and its largest block (either may be
/// missing, the same block may come twice).
fn free_space(nsk: &str, pool: &str, len: u8) -> String {
    let (n, p) = (lit(nsk), lit(pool));
    format!(
        ";\nSELECT text(s.cidr), s.excludes::text, s.epoch = e.epoch
         FROM ipamctl.prefix_free_pools s, ipamctl.prefix_free_epoch e
         WHERE s.namespace = {n} AND s.pool = {p};
         (SELECT text(block) FROM ipamctl.prefix_free
          WHERE namespace = {n} AND pool = {p} AND -masklen(block) >= -{len}
          ORDER BY -masklen(block), block LIMIT 1)
         UNION ALL
         (SELECT text(block) FROM ipamctl.prefix_free
          WHERE namespace = {n} AND pool = {p}
          ORDER BY masklen(block), block LIMIT 1)"
    )
}

/// The owner's candidate claims (see [`Ahead::holders`]), as one statement after a `;`.
fn holders(nsk: &str, pool: &str, owner_name: &str) -> String {
    format!(
        ";\nSELECT name, encode(manifest, 'hex') FROM ipamctl.objects
         WHERE kind = {} AND namespace = {} AND pool = {}
           AND (ipamctl.claim_owner_name(manifest) = {o} OR ipamctl.claim_owner_name(manifest) IS NULL)",
        lit(PREFIX_CLAIM_KIND),
        lit(nsk),
        lit(pool),
        o = lit(owner_name)
    )
}

/// The rows of [`free_space`]'s two statements.
fn read(basis: &[SimpleQueryRow], blocks: &[SimpleQueryRow]) -> Read {
    let basis = basis.first().and_then(|r| {
        let cidr = r.get(0)?.parse().ok()?;
        let excludes = r
            .get(1)?
            .trim_matches(['{', '}'])
            .split(',')
            .filter(|e| !e.is_empty())
            .map(|e| e.trim_matches('"').parse().ok())
            .collect::<Option<Vec<IpNet>>>()?;
        Some((cidr, excludes, r.get(2) == Some("t")))
    });
    let blocks = blocks
        .iter()
        .filter_map(|r| r.get(0)?.parse().ok())
        .collect();
    Read { basis, blocks }
}

/// The excludes as `prefix_free_pools` keeps them: truncated, ascending, once each.
fn normal(excludes: &[IpNet]) -> Vec<IpNet> {
    let mut out: Vec<IpNet> = excludes.iter().map(IpNet::trunc).collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn texts(nets: impl IntoIterator<Item = IpNet>) -> Vec<String> {
    nets.into_iter().map(|n| n.to_string()).collect()
}

impl PgStore {
    /// [`crate::store::Locks::lock_prefix_claim`]: the pool's row `FOR UPDATE`, as the
    /// unit's first round trip when nothing of it was sent yet, together with the owner's
    /// candidate claims and (for a best-fit claim of `len`) the pool's free space.
    pub(super) fn lock_prefix_claim_row(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
        len: Option<u8>,
    ) -> Result<()> {
        let nsk = ns_key(ns);
        let (n, p) = (lit(nsk), lit(pool.as_str()));
        let mut sql = format!(
            ";\nSELECT encode(manifest, 'hex') FROM ipamctl.pools WHERE namespace = {n} AND name = {p} FOR UPDATE"
        );
        sql.push_str(&holders(nsk, pool.as_str(), owner.name()));
        if let Some(len) = len {
            sql.push_str(&free_space(nsk, pool.as_str(), len));
        }
        let Some((mut session, statements)) = self.send_ahead(&sql)? else {
            return self.lock_pool_row(ns, pool, crate::store::LockMode::Exclusive);
        };
        let key = (nsk.to_owned(), pool.to_string());
        let mut statements = statements.into_iter();
        let (Some(lock), Some(held)) = (statements.next(), statements.next()) else {
            return Err(self.short_answer());
        };
        if let Some(m) = lock.first().and_then(|r| r.get(0)) {
            session.locked_pools.insert(key.clone(), hex(m));
        }
        session.kept_pools.insert(key);
        let free = match len {
            Some(len) => match (statements.next(), statements.next()) {
                (Some(basis), Some(blocks)) => Some((len, read(&basis, &blocks))),
                _ => return Err(self.short_answer()),
            },
            None => None,
        };
        session.prefix_ahead = Some(Ahead {
            key: (nsk.to_owned(), pool.to_string(), owner.name().to_owned()),
            holders: held
                .iter()
                .filter_map(|r| Some((r.get(0)?.to_owned(), hex(r.get(1)?))))
                .collect(),
            free,
        });
        session.only_prefetch = true;
        Ok(())
    }

    /// The owner's candidate claims (name, manifest): as the unit's first round trip read
    /// them, if it did, else read now.
    pub(super) fn prefix_holders(
        &self,
        ns: &str,
        pool: &str,
        owner_name: &str,
    ) -> Result<Vec<(String, Vec<u8>)>> {
        {
            let mut session = self.session();
            if let Some(ahead) = session.prefix_ahead.as_mut()
                && ahead.key == (ns.to_owned(), pool.to_owned(), owner_name.to_owned())
            {
                return Ok(std::mem::take(&mut ahead.holders));
            }
        }
        let rows = self.single(|c| {
            c.all(
                "SELECT name, manifest FROM ipamctl.objects
                 WHERE kind = 'IPPrefixClaim' AND namespace = $1 AND pool = $2
                   AND (ipamctl.claim_owner_name(manifest) = $3
                        OR ipamctl.claim_owner_name(manifest) IS NULL)",
                &[&ns, &pool, &owner_name],
            )
        })?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// [`crate::store::Queries::prefix_free_space`]: the pool's kept blocks if they were
    /// computed for `cidr` and `excludes` at the current epoch, else computed again from the
    /// claims and kept. `None` unless the unit holds the pool's row `FOR UPDATE`.
    pub(super) fn kept_free_space(
        &self,
        ns: &str,
        pool: &str,
        cidr: IpNet,
        excludes: &[IpNet],
        len: u8,
    ) -> Result<Option<Vec<IpNet>>> {
        let key = (ns.to_owned(), pool.to_owned());
        let ahead = {
            let mut session = self.session();
            if !session.kept_pools.contains(&key) {
                return Ok(None);
            }
            take_free(&mut session, &key, len)
        };
        let read = match ahead {
            Some(read) => read,
            None => {
                let sql = free_space(ns, pool, len);
                let sql = sql.trim_start_matches(';');
                let answer = self.in_unit("a supernet's free space", |c| c.simple_query(sql))?;
                let statements = super::prefetch::by_statement(answer);
                match statements.as_slice() {
                    [basis, blocks] => read(basis, blocks),
                    _ => return Err(self.short_answer()),
                }
            }
        };
        let excludes = normal(excludes);
        let current =
            matches!(&read.basis, Some((c, e, true)) if *c == cidr.trunc() && *e == excludes);
        if current {
            return Ok(Some(read.blocks));
        }
        self.rebuild(ns, pool, cidr.trunc(), &excludes).map(Some)
    }

    /// Computes the pool's free blocks from its claims and `excludes` and keeps them, with
    /// the epoch read in the same statement as the claims: a write by another tool after it
    /// makes them stale.
    fn rebuild(&self, ns: &str, pool: &str, cidr: IpNet, excludes: &[IpNet]) -> Result<Vec<IpNet>> {
        let (epoch, mut taken) = self.claimed_prefixes(ns, pool)?;
        taken.extend(excludes);
        let blocks = free_blocks(cidr, &taken);
        let (names, cidr_text, excludes_text) = (
            texts(blocks.iter().copied()),
            cidr.to_string(),
            texts(excludes.iter().copied()),
        );
        self.in_unit("keeping a supernet's free space", |c| {
            c.exec(
                "DELETE FROM ipamctl.prefix_free WHERE namespace = $1 AND pool = $2",
                &[&ns, &pool],
            )?;
            c.exec(
                "WITH blocks AS (
                     INSERT INTO ipamctl.prefix_free (namespace, pool, block)
                     SELECT $1, $2, b::cidr FROM unnest($3::text[]) b
                 )
                 INSERT INTO ipamctl.prefix_free_pools (namespace, pool, cidr, excludes, epoch)
                 VALUES ($1, $2, $4::cidr, $5::text[]::cidr[], $6)
                 ON CONFLICT (namespace, pool) DO UPDATE
                 SET cidr = EXCLUDED.cidr, excludes = EXCLUDED.excludes, epoch = EXCLUDED.epoch",
                &[&ns, &pool, &names, &cidr_text, &excludes_text, &epoch],
            )
        })?;
        Ok(blocks)
    }
}

/// The free space the unit's first round trip read for (`key`, `len`), taken once.
fn take_free(
    session: &mut MutexGuard<'_, Session>,
    key: &(String, String),
    len: u8,
) -> Option<Read> {
    let ahead = session.prefix_ahead.as_mut()?;
    if (ahead.key.0.as_str(), ahead.key.1.as_str()) != (key.0.as_str(), key.1.as_str()) {
        return None;
    }
    match ahead.free.take() {
        Some((l, read)) if l == len => Some(read),
        _ => None,
    }
}

/// The parameters the claim and release statements keep the free space with: the buddies
/// of `prefix` and their parents, longest first ([`buddies`]), as text.
pub(super) fn chain(prefix: IpNet) -> (Vec<String>, Vec<String>) {
    buddies(prefix)
        .into_iter()
        .map(|(b, a)| (b.to_string(), a.to_string()))
        .unzip()
}

/// A prefix claim's insert, its event, and the pool's free space kept with it: `$1` kind,
/// `$2` namespace, `$3` name, `$4` pool, `$5` manifest, `$6` prefix, `$7` client, `$8`
/// whether the unit holds the pool's row `FOR UPDATE` (else the epoch is bumped), `$9` the
/// prefix's buddies. The block that holds the prefix (the greatest block not above it, in
/// `inet` order, if it holds it) is replaced by the buddies longer than it; if the insert
/// was refused or no block held the prefix, the pool's blocks are dropped.
pub(super) const CLAIM: &str = "
WITH claimed AS (
    INSERT INTO ipamctl.objects (kind, namespace, name, pool, manifest, prefix)
    VALUES ($1, $2, $3, $4, $5, $6::text::inet) ON CONFLICT DO NOTHING
    RETURNING namespace, name, manifest
), event AS (
    INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
    SELECT $7, 'claimed', namespace, $1, name, manifest FROM claimed
), split AS (
    DELETE FROM ipamctl.prefix_free f
    WHERE $8 AND EXISTS (SELECT FROM claimed)
      AND f.namespace = $2 AND f.pool = $4 AND f.block >>= $6::text::cidr
      AND f.block = (SELECT g.block FROM ipamctl.prefix_free g
                     WHERE g.namespace = $2 AND g.pool = $4 AND g.block <= $6::text::cidr
                     ORDER BY g.block DESC LIMIT 1)
    RETURNING f.block
), pieces AS (
    INSERT INTO ipamctl.prefix_free (namespace, pool, block)
    SELECT $2, $4, b::cidr FROM unnest($9::text[]) b, split
    WHERE masklen(b::cidr) > masklen(split.block)
    ON CONFLICT DO NOTHING
), stale AS (
    DELETE FROM ipamctl.prefix_free_pools
    WHERE $8 AND namespace = $2 AND pool = $4 AND NOT EXISTS (SELECT FROM split)
), bumped AS (
    UPDATE ipamctl.prefix_free_epoch SET epoch = epoch + 1
    WHERE NOT $8 AND EXISTS (SELECT FROM claimed)
)
SELECT count(*) FROM claimed";

/// A prefix claim's delete, its event, and the pool's free space kept with it: `$1`
/// namespace, `$2` name, `$3` client, `$4` pool, `$5` prefix, `$6` whether the unit holds
/// the pool's row `FOR UPDATE` (else the epoch is bumped), `$7` and `$8` the prefix's
/// buddies and their parents, `$9` how many. The prefix merges with each buddy in turn
/// that is a free block and inside the pool; the block it makes is added. If a block
/// overlaps the prefix already, or it is outside the pool or on an exclude (the blocks
/// were wrong), the pool's blocks are dropped instead.
pub(super) const RELEASE: &str = "
WITH gone AS (
    DELETE FROM ipamctl.objects
    WHERE kind = 'IPPrefixClaim' AND namespace = $1 AND name = $2
    RETURNING namespace, name, manifest
), event AS (
    INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
    SELECT $3, 'released', namespace, 'IPPrefixClaim', name, manifest FROM gone
), state AS (
    SELECT s.cidr,
           s.cidr >>= $5::text::cidr AND NOT ($5::text::cidr && ANY (s.excludes))
           -- no block inside the prefix (by the key: from it to its last address) ...
           AND NOT EXISTS (SELECT FROM ipamctl.prefix_free f
                           WHERE f.namespace = $1 AND f.pool = $4 AND f.block >= $5::text::cidr
                             AND f.block <= set_masklen(broadcast($5::text::cidr),
                                                        CASE family($5::text::cidr) WHEN 4 THEN 32 ELSE 128 END)::cidr)
           -- ... nor one that holds it (the greatest block not above it)
           AND NOT coalesce((SELECT g.block >>= $5::text::cidr FROM ipamctl.prefix_free g
                             WHERE g.namespace = $1 AND g.pool = $4 AND g.block <= $5::text::cidr
                             ORDER BY g.block DESC LIMIT 1), false) AS sound
    FROM ipamctl.prefix_free_pools s
    WHERE $6 AND s.namespace = $1 AND s.pool = $4 AND EXISTS (SELECT FROM gone)
), chain AS (
    SELECT b::cidr AS b, a::cidr AS a, i FROM unnest($7::text[], $8::text[]) WITH ORDINALITY c(b, a, i)
), stop AS (
    SELECT coalesce((SELECT min(c.i) FROM chain c
                     WHERE NOT (state.cidr >>= c.a)
                        OR NOT EXISTS (SELECT FROM ipamctl.prefix_free f
                                       WHERE f.namespace = $1 AND f.pool = $4 AND f.block = c.b)),
                    $9 + 1) AS i
    FROM state WHERE state.sound
), merged AS (
    DELETE FROM ipamctl.prefix_free f USING chain c, stop
    WHERE f.namespace = $1 AND f.pool = $4 AND f.block = c.b AND c.i < stop.i
), added AS (
    INSERT INTO ipamctl.prefix_free (namespace, pool, block)
    SELECT $1, $4, coalesce((SELECT c.a FROM chain c WHERE c.i = stop.i - 1), $5::text::cidr)
    FROM stop
    ON CONFLICT DO NOTHING
), stale AS (
    DELETE FROM ipamctl.prefix_free_pools s USING state
    WHERE s.namespace = $1 AND s.pool = $4 AND NOT state.sound
), bumped AS (
    UPDATE ipamctl.prefix_free_epoch SET epoch = epoch + 1
    WHERE NOT $6 AND EXISTS (SELECT FROM gone)
)
SELECT count(*) FROM gone";
