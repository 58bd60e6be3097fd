//! A claim's first round trip: everything `allocate` asks before it claims, in one simple
//! query. The schema version (if not checked yet), the unit's `BEGIN` with its `SET
//! LOCAL`s, each pool's row `FOR SHARE`, the owner's row in each pool and each pool's
//! low-water hint (with whether its address is free) go as one batch of statements, their
//! values as quoted literals (a simple query takes no parameters; every value is a
//! validated name, and quoted anyway). The locks are taken exactly where the unit would
//! have taken them, before anything is read: what the batch reads is what the unit's own
//! statements would have read under them, and the look-ups that follow are answered from
//! here (the owner's row and the hint each once; the scope's stored subnets, which every claim
//! keeps clear of, for the whole unit). So a claim for a new owner is three round trips
//! (this, the claim, `COMMIT`), and one for an owner that holds an address one: this batch
//! writes nothing, so a unit it answered ends without a `COMMIT` to wait for (`open` in
//! `mod.rs`).

use std::collections::HashMap;
use std::net::IpAddr;

use std::sync::MutexGuard;

use postgres::{SimpleQueryMessage, SimpleQueryRow};

use super::rows::owner_columns;
use super::{PgStore, Session, ns_key, schema};
use crate::error::{Error, Result};
use crate::model::kind::QUOTA_KIND;
use crate::model::subnet::SUBNET_KIND;
use crate::model::{Namespace, Owner, PoolName};

/// An owner's row as the batch read it: its address and manifest, or none.
pub(super) type OwnerRow = Option<(IpAddr, Vec<u8>)>;

/// A pool's hint row as the batch read it: (low water, epoch, its address is free), or no
/// row.
pub(super) type HintRow = Option<(Option<IpAddr>, i64, bool)>;

/// A scope's stored subnets as the batch read them: (name, manifest) of each.
pub(super) type Subnets = Vec<(String, Vec<u8>)>;

/// A batch's answer ([`PgStore::send_ahead`]): the session, and the rows of each statement
/// after the unit's `BEGIN`.
pub(super) type Answered<'a> = (MutexGuard<'a, Session>, Vec<Vec<SimpleQueryRow>>);

/// What the batch read, each answer taken once by the look-up it stands for.
#[derive(Debug, Default)]
pub(super) struct Prefetched {
    /// By (namespace, pool, owner kind, name, uid).
    owners: HashMap<(String, String, String, String, String), OwnerRow>,
    /// By (namespace, pool).
    hints: HashMap<(String, String), HintRow>,
    /// The stored subnets of the claim's scope (namespace, then (name, manifest) of each):
    /// those of the claim's pools cannot change while their rows are locked (every change
    /// of a subnet locks its pool's row `FOR UPDATE`), so they answer every look-up of the
    /// unit, until it writes a subnet itself.
    pub(super) subnets: Option<(String, Subnets)>,
    /// The quotas' names the unit listed or the batch read, by namespace: a new owner's
    /// claim asks for them (`engine::quota::admit`), and a quota written clears them.
    pub(super) quotas: HashMap<String, Vec<String>>,
}

pub(super) use super::typed::lit;

/// The rows of each statement of a simple query's answer, in order.
pub(super) fn by_statement(
    messages: Vec<SimpleQueryMessage>,
) -> Vec<Vec<postgres::SimpleQueryRow>> {
    let mut statements = Vec::new();
    let mut rows = Vec::new();
    for m in messages {
        match m {
            SimpleQueryMessage::Row(r) => rows.push(r),
            SimpleQueryMessage::CommandComplete(_) => statements.push(std::mem::take(&mut rows)),
            _ => {}
        }
    }
    statements
}

/// A hint row as text: (low water, epoch, its address is free).
fn hint_row(r: &postgres::SimpleQueryRow) -> (Option<IpAddr>, i64, bool) {
    (
        r.get(0).and_then(|a| a.parse().ok()),
        r.get(1).and_then(|e| e.parse().ok()).unwrap_or(0),
        r.get(2) == Some("t"),
    )
}

pub(super) fn hex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .filter_map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// The look-ups of a claim's first round trip, by name: each pool's row `FOR SHARE`, the
/// owner's row in it, its hint row (with whether the hint's address is free); the scope's
/// stored subnets; and the owner's row locked `FOR KEY SHARE`, which a claim in several
/// pools reads instead (see [`lookups`]). `$n` are the arguments ([`lookups`] spells them).
pub(super) const LOOKUPS: [(&str, &str); 5] = [
    (
        "lock",
        "SELECT encode(manifest, 'hex') FROM ipamctl.pools WHERE namespace = $1 AND name = $2 FOR SHARE",
    ),
    // The owner's row, or its namesake's (`rows::OWNER_OR_NAMESAKE`, spelled out: these
    // are constants).
    (
        "owner",
        "SELECT host(address), encode(manifest, 'hex') FROM ipamctl.allocations
         WHERE namespace = $1 AND pool = $2 AND owner_kind = $3 AND owner_name = $4
           AND (owner_uid || '' = $5 OR owner_kind <> 'VPC')
         ORDER BY owner_uid || '' = $5 DESC LIMIT 1",
    ),
    (
        "hint",
        "SELECT host(h.low_water), h.epoch,
                NOT EXISTS (SELECT 1 FROM ipamctl.allocations a
                            WHERE a.namespace = h.namespace AND a.pool = h.pool
                              AND a.address = h.low_water)
         FROM ipamctl.pool_hints h WHERE h.namespace = $1 AND h.pool = $2",
    ),
    (
        "subnets",
        "SELECT name, encode(manifest, 'hex') FROM ipamctl.objects WHERE kind = $1 AND namespace = $2",
    ),
    (
        "owner_kept",
        "SELECT host(address), encode(manifest, 'hex') FROM ipamctl.allocations
         WHERE namespace = $1 AND pool = $2 AND owner_kind = $3 AND owner_name = $4
           AND (owner_uid || '' = $5 OR owner_kind <> 'VPC')
         ORDER BY owner_uid || '' = $5 DESC LIMIT 1
         FOR KEY SHARE",
    ),
];

/// How a unit's look-ups are spelled: as statements with quoted literals, or as `EXECUTE`s
/// of the statements its group prepared (`group.rs`), named `ipamctl_<id>_<look-up>`.
#[derive(Clone, Copy, Debug)]
pub(super) enum Spelling {
    Literal,
    Execute(u32),
}

/// One look-up of [`LOOKUPS`] with `args`, spelled so.
fn spell(spelling: Spelling, which: usize, args: &[&str]) -> String {
    let (name, sql) = LOOKUPS[which];
    match spelling {
        Spelling::Execute(id) => {
            let args: Vec<String> = args.iter().map(|a| lit(a)).collect();
            format!(";\nEXECUTE ipamctl_{id:08x}_{name}({})", args.join(", "))
        }
        Spelling::Literal => {
            // `$n` replaced in one pass: an argument's own text is never read again.
            let mut out = String::from(";\n");
            let mut rest = sql;
            while let Some(at) = rest.find('$') {
                out.push_str(&rest[..at]);
                let digits = rest[at + 1..]
                    .bytes()
                    .take_while(u8::is_ascii_digit)
                    .count();
                let n: usize = rest[at + 1..at + 1 + digits].parse().unwrap_or(0);
                match n.checked_sub(1).and_then(|i| args.get(i)) {
                    Some(arg) => out.push_str(&lit(arg)),
                    None => out.push_str(&rest[at..=at + digits]),
                }
                rest = &rest[at + 1 + digits..];
            }
            out.push_str(rest);
            out
        }
    }
}

/// The batch's statements for `pools`, after its `BEGIN`: for each pool, its row `FOR
/// SHARE`, the owner's row, the hint row; then the scope's stored subnets (after the
/// locks, so that what it reads of the pools' subnets holds until the unit ends) and its
/// quotas' names.
///
/// A claim in several pools (dual stack) locks the owner's row in each `FOR KEY SHARE`:
/// each statement reads as of its own start (`READ COMMITTED`), so without the lock a
/// release of the owner that commits between two pools' look-ups would leave the claim
/// answering `existing` with a row already gone in the first pool and claiming anew in the
/// second (an owner holding one of its two addresses, and an address told to two owners).
/// Locked, a held row stays until the unit ends: a release waits for it (or, holding the
/// other pool's row, deadlocks with it, and the server breaks one, which runs again). A
/// claim in one pool reads one row, and its answer is the row as it stood, so it takes no
/// lock: its unit may then end without a `COMMIT`.
fn lookups(nsk: &str, pools: &[PoolName], owner: (&str, &str, &str), spelling: Spelling) -> String {
    let (kind, name, uid) = owner;
    let owner_lookup = if pools.len() > 1 { 4 } else { 1 };
    let mut sql = String::new();
    for pool in pools {
        let p = pool.as_str();
        sql.push_str(&spell(spelling, 0, &[nsk, p]));
        sql.push_str(&spell(spelling, owner_lookup, &[nsk, p, kind, name, uid]));
        sql.push_str(&spell(spelling, 2, &[nsk, p]));
    }
    sql.push_str(&spell(spelling, 3, &[SUBNET_KIND, nsk]));
    // The scope's quotas, by the same statement: a new owner's claim asks for them
    // (`engine::quota::admit`), and this answers it without a round trip of its own.
    sql.push_str(&spell(spelling, 3, &[QUOTA_KIND, nsk]));
    sql
}

/// Keeps what the batch's statements after its `BEGIN` read, in the session: each pool's
/// manifest (its row locked), the owner's row and the hint in each pool, the scope's
/// subnets. `None` if the answer has fewer statements than [`lookups`] sent.
fn keep(
    session: &mut Session,
    mut statements: impl Iterator<Item = Vec<postgres::SimpleQueryRow>>,
    nsk: &str,
    pools: &[PoolName],
    owner: (&str, &str, &str),
) -> Option<()> {
    let (kind, name, uid) = owner;
    for pool in pools {
        let (lock, held, hint) = match (statements.next(), statements.next(), statements.next()) {
            (Some(l), Some(o), Some(h)) => (l, o, h),
            _ => return None,
        };
        let key = (nsk.to_owned(), pool.to_string());
        if let Some(m) = lock.first().and_then(|r| r.get(0)) {
            session.locked_pools.insert(key.clone(), hex(m));
        }
        let owner_row = held
            .first()
            .and_then(|r| Some((r.get(0)?.parse().ok()?, hex(r.get(1)?))));
        session.prefetched.owners.insert(
            (
                nsk.to_owned(),
                pool.to_string(),
                kind.to_owned(),
                name.to_owned(),
                uid.to_owned(),
            ),
            owner_row,
        );
        let hint_row = hint.first().map(hint_row);
        session.prefetched.hints.insert(key, hint_row);
    }
    let subnets = statements.next()?;
    let subnets = subnets
        .iter()
        .filter_map(|r| Some((r.get(0)?.to_owned(), hex(r.get(1)?))))
        .collect();
    session.prefetched.subnets = Some((nsk.to_owned(), subnets));
    let quotas = statements.next()?;
    let quotas = quotas
        .iter()
        .filter_map(|r| Some(r.get(0)?.to_owned()))
        .collect();
    session.prefetched.quotas.insert(nsk.to_owned(), quotas);
    Some(())
}

impl PgStore {
    /// [`crate::store::Locks::lock_claim`] as the unit's first round trip (see the module
    /// docs). Only when nothing of the unit has been sent yet; otherwise `false`, and the
    /// caller locks as usual.
    pub(super) fn lock_claim_ahead(
        &self,
        ns: Option<&Namespace>,
        pools: &[PoolName],
        owner: &Owner,
    ) -> Result<bool> {
        let nsk = ns_key(ns);
        let (kind, name, uid) = owner_columns(owner);
        let (spelling, preparing) = self.lookup_spelling();
        let sent = self.send_ahead(&lookups(nsk, pools, (kind, name, uid), spelling));
        let Some((mut session, statements)) = self.lookups_sent(preparing, sent)? else {
            return Ok(false);
        };
        if keep(
            &mut session,
            statements.into_iter(),
            nsk,
            pools,
            (kind, name, uid),
        )
        .is_none()
        {
            return Err(self.short_answer());
        }
        session.only_prefetch = true;
        Ok(true)
    }

    /// Sends `lookups` (statements, each after a `;`, that read and lock and write
    /// nothing) as the unit's first round trip, after the unit's `BEGIN` with its `SET
    /// LOCAL`s, the schema version check if still pending and the end of a transaction left
    /// open. `None` when something of the unit was sent already (the caller asks as usual);
    /// else the session and the rows of each statement of `lookups`, in order.
    pub(super) fn send_ahead(&self, lookups: &str) -> Result<Option<Answered<'_>>> {
        let mut session = self.session();
        let Some(begin) = session.begin_pending.clone() else {
            return Ok(None);
        };
        let mut sql = String::new();
        let version = session.version_pending;
        if version {
            sql.push_str(schema::VERSION_QUERY);
            sql.push_str(";\n");
        }
        // A transaction left open (`Session::open`) ends first, in the same round trip.
        let begin = if std::mem::take(&mut session.open) {
            format!("ROLLBACK; {begin}")
        } else {
            begin
        };
        let begun = begin.split(';').filter(|s| !s.trim().is_empty()).count();
        sql.push_str(&begin);
        sql.push_str(lookups);
        // From here on the unit's transaction is open on the server (or the batch failed
        // before its `BEGIN`, when a `ROLLBACK` does no harm).
        session.begin_pending = None;
        let answer = match session.client.simple_query(&sql) {
            Ok(answer) => answer,
            Err(e) if version => {
                drop(session);
                self.version_failed_with_objects(&e)?;
                return Err(self.error(&e));
            }
            Err(e) => return Err(self.error(&e)),
        };
        let mut statements = by_statement(answer).into_iter();
        if version {
            let rows = statements.next().unwrap_or_default();
            let v = rows
                .first()
                .and_then(|r| r.get(0))
                .and_then(|v| v.parse::<i32>().ok());
            drop(session);
            self.version_is(v)?;
            session = self.session();
            session.version_pending = false;
        }
        Ok(Some((session, statements.skip(begun).collect())))
    }

    /// The error of a batch answered with fewer statements than it sent (never seen).
    pub(super) fn short_answer(&self) -> Error {
        Error::Database {
            message: format!(
                "PostgreSQL ({}): internal error: the claim's first round trip answered fewer statements than it sent",
                self.shown
            ),
            sqlstate: None,
        }
    }

    /// The owner's row the batch read for this unit, if it did (taken: asked again, the
    /// row is read again).
    pub(super) fn prefetched_owner(
        &self,
        ns: &str,
        pool: &str,
        owner: (&str, &str, &str),
    ) -> Option<OwnerRow> {
        let (kind, name, uid) = owner;
        self.session().prefetched.owners.remove(&(
            ns.to_owned(),
            pool.to_owned(),
            kind.to_owned(),
            name.to_owned(),
            uid.to_owned(),
        ))
    }

    /// The pool's hint row the batch read for this unit, if it did (taken once).
    pub(super) fn prefetched_hint(&self, ns: &str, pool: &str) -> Option<HintRow> {
        self.session()
            .prefetched
            .hints
            .remove(&(ns.to_owned(), pool.to_owned()))
    }
}

impl PgStore {
    /// The names of the scope's stored subnets, if this unit's batch read them.
    pub(super) fn prefetched_subnet_names(&self, ns: &str) -> Option<Vec<String>> {
        match &self.session().prefetched.subnets {
            Some((scope, subnets)) if scope == ns => {
                Some(subnets.iter().map(|(name, _)| name.clone()).collect())
            }
            _ => None,
        }
    }

    /// A stored subnet's manifest as this unit's batch read it: `Some(None)` if the batch
    /// read the scope and found no such subnet, `None` if it did not read the scope.
    pub(super) fn prefetched_subnet(&self, ns: &str, name: &str) -> Option<Option<Vec<u8>>> {
        match &self.session().prefetched.subnets {
            Some((scope, subnets)) if scope == ns => Some(
                subnets
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, m)| m.clone()),
            ),
            _ => None,
        }
    }

    /// Forgets the subnets the batch read: this unit is about to change one.
    pub(super) fn forget_prefetched_subnets(&self) {
        self.session().prefetched.subnets = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_look_up_quotes_each_argument_once_and_leaves_no_placeholder() {
        let sql = spell(Spelling::Literal, 1, &["ns", "p", "K", "o'$1x", "u"]);
        assert!(sql.contains("namespace = 'ns' AND pool = 'p'"), "{sql}");
        assert!(sql.contains("owner_name = 'o''$1x'"), "{sql}");
        assert!(sql.contains("owner_uid || '' = 'u'"), "{sql}");
        assert_eq!(sql.matches('$').count(), 1, "{sql}");
    }

    #[test]
    fn a_prepared_look_up_is_an_execute_of_the_groups_statement() {
        let sql = spell(Spelling::Execute(0xab), 0, &["ns", "p'q"]);
        assert_eq!(sql, ";\nEXECUTE ipamctl_000000ab_lock('ns', 'p''q')");
    }
}
