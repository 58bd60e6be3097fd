//! A batch's units grouped in one transaction ([`crate::store::Units::grouped`]): what a
//! one-connection batch saves of every request's `BEGIN` and `COMMIT`.
//!
//! # Protocol
//!
//! - The group's `BEGIN` (with its `SET LOCAL`s) is sent with the first statement of its
//!   first unit, as a single unit's is ([`super::Session::begin_pending`]); each unit then
//!   begins with a savepoint of its own (`SAVEPOINT u1`, `u2`, …), sent the same way, so a unit costs no round trip a single
//!   unit does not. Savepoints are never released (that would be a round trip of its own):
//!   they nest, one a unit, and the `COMMIT` ends them all. A group holds at most
//!   [`GROUP`] units, so their subtransactions stay within the server's cache of 64 per
//!   backend.
//! - A unit that fails is undone alone (`ROLLBACK TO SAVEPOINT u7`), its row locks with
//!   it, and its error is its request's; the group goes on. One that fails with a
//!   serialization failure or a deadlock (which a single unit would run again), or whose
//!   undoing fails (a lost connection), breaks the group: the rest of its units fail at
//!   once, the group rolls back, and the caller runs each of its requests again on its own.
//! - Nothing of the group is seen by anyone (not even as printed results: the caller holds
//!   them) before its `COMMIT`: a kill, a lost connection before the `COMMIT`, or a refused
//!   one leaves nothing of it. A connection lost *during* the `COMMIT` leaves every unit's
//!   outcome unknown ([`crate::error::Error::OutcomeUnknown`]), as it would a single one's.
//! - A group whose every unit was answered by its first round trip (owners that hold an
//!   address, asking again) wrote nothing: it ends with a `ROLLBACK`, which does not wait
//!   for the WAL to be flushed, where a `COMMIT` of its row locks would (2.7 to 5 ms on a
//!   durable cluster under load, all of a server's re-ask; `bench/serve`). A unit that sent
//!   anything more (a renewal, a claim) marks the group as one that writes, whose end is a
//!   `COMMIT`; a statement is sent only through [`super::Session`]'s `conn`, which clears
//!   the unit's `only_prefetch`, as a single unit's own ending relies on.
//! - A claim's look-ups (`prefetch.rs`) are spelled out, or prepared for the group from
//!   its second unit on and deallocated in its `COMMIT`'s round trip, so that nothing of a
//!   command outlives its transaction. A server's session ([`PgStore::keep_lookups`])
//!   instead prepares them once, in its first unit's first round trip, and its claim
//!   statement with its first claim ([`PgStore::kept_count`]), and keeps them: a
//!   `PREPARE` is not undone by a rollback, so once sent they stand; the one window is a
//!   transaction pooler that runs a later transaction on another server connection, where
//!   the `EXECUTE` fails ([`MISSING_STATEMENT`]), the unit (or group) runs again spelled
//!   out, and the session keeps nothing from then on.
//! - What a group costs others: its rows and row locks (the pools' rows `FOR SHARE`, the
//!   hint row its claims moved) last until its `COMMIT`, a group's length of time instead of
//!   a unit's. A claim of another transaction that picks an address the group holds
//!   uncommitted waits for that `COMMIT`, then moves on; two groups that each wait for the
//!   other are a deadlock, which the server breaks (after its `deadlock_timeout`) and the
//!   broken group runs again unit by unit. A batch's own workers (`--jobs`) each group
//!   too: they hand out addresses apart (`siblings.rs`), so they do not pick each other's
//!   uncommitted ones.

use std::collections::HashMap;

use postgres::{Row, Statement};

use super::prefetch::{Answered, LOOKUPS, Spelling};
use super::typed::{Param, typed};
use super::{PgStore, Session, retryable};
use crate::error::{Error, Result};

/// The most units a group holds.
pub const GROUP: usize = 32;

/// A group under way on a session.
#[derive(Default)]
pub(super) struct Group {
    /// What broke the group, if something did: its units fail at once, and its end rolls it
    /// back.
    broken: Option<String>,
    /// Statements prepared for the group by their text, and how many times each was asked
    /// for. Dropped with the group, before its `COMMIT` or `ROLLBACK`: the client then
    /// closes them on the server in the same transaction, so none outlives it (under
    /// PgBouncer's transaction pooling the next transaction may be another server
    /// connection's, where a name left behind would clash).
    prepared: HashMap<&'static str, (usize, Option<Statement>)>,
    /// How the units' look-ups are spelled (`prefetch.rs`).
    lookups: Lookups,
    /// How many units began: each unit's savepoint is named by its number, so that undoing
    /// a unit whose savepoint was never made fails (and breaks the group) instead of undoing
    /// the unit before it.
    units: usize,
    /// Whether a unit sent more than its claim's first round trip (which writes nothing):
    /// only then does the group's end need a `COMMIT`.
    writes: bool,
}

/// Where a group's look-ups stand (`prefetch.rs`'s [`LOOKUPS`]).
enum Lookups {
    /// Spelled with literals, by this many units so far.
    Literal(usize),
    /// Prepared under this id, once the round trip that prepared them was answered.
    Prepared(u32),
    /// Being prepared by the unit's first round trip now under way.
    Preparing,
    /// The round trip that prepared them failed: whether they exist is not known, so they
    /// are neither used nor deallocated (their names are the group's own: nothing else can
    /// meet them), and the group spells its look-ups with literals.
    Abandoned,
}

impl Default for Lookups {
    fn default() -> Lookups {
        Lookups::Literal(0)
    }
}

/// Where a long-lived session's look-ups stand ([`PgStore::keep_lookups`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kept {
    /// Not kept: a command's session (spelled out, or prepared for one group at a time),
    /// or one whose kept look-ups went missing.
    Off,
    /// To be prepared by the next unit's first round trip.
    Untried,
    /// Prepared under this id, or sent to be: a `PREPARE` is not undone with its
    /// transaction, so once sent it stands unless the round trip failed before it ran, and
    /// then the first `EXECUTE` finds it missing ([`MISSING_STATEMENT`]). `claim`: the
    /// claim's own statement too ([`PgStore::kept_count`]).
    Prepared { id: u32, claim: bool },
}

/// SQLSTATE `invalid_sql_statement_name`: an `EXECUTE` of a statement the server
/// connection does not hold. A kept look-up goes missing behind a transaction pooler
/// (PgBouncer's `pool_mode = transaction`), whose next transaction may run on another
/// server connection: the unit fails, the session stops keeping its look-ups, and the unit
/// runs again ([`super::retryable`]) spelled out.
pub(super) const MISSING_STATEMENT: &str = "26000";

/// How many times a statement is run in a group before it is prepared: preparing is a round
/// trip of its own, and saves the parse and most of the planning of each run after.
const PREPARE_AT: usize = 2;

impl PgStore {
    /// Prepares a claim's look-ups once for the connection's life, for a session that
    /// answers request after request (a server's: [`crate::store::registry::Config`]).
    ///
    /// A re-ask's first round trip is its `BEGIN` and the look-ups; spelled with literals,
    /// each is parsed and planned again, most of that round trip's time in the database
    /// (`bench/serve`). Kept, they are `EXECUTE`d, and from their sixth run on the
    /// database may plan them once. A command's session keeps nothing: it ends before the
    /// statements would pay for their `PREPARE`, and behind a transaction pooler
    /// (PgBouncer before 1.21 knows no `PREPARE` in SQL) each of its runs would leave five
    /// statements on a server connection others share. A server's session leaves them at
    /// most once, on the server connection its first unit ran on: the first unit that
    /// finds them missing turns keeping off ([`MISSING_STATEMENT`]). Their names carry a
    /// random id, so they never meet another client's.
    pub fn keep_lookups(&self) {
        let mut session = self.session();
        if session.kept == Kept::Off {
            session.kept = Kept::Untried;
        }
    }

    /// [`crate::store::Units::grouped`]: `work`'s units in one transaction.
    pub(super) fn group(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        {
            let mut session = self.session();
            if session.in_txn || session.group.is_some() {
                drop(session);
                return work();
            }
            session.group = Some(Group::default());
            session.begin_pending = Some(self.begin.clone());
        }
        let done = work();
        let mut session = self.session();
        let (broken, prepared, writes) = match session.group.take() {
            Some(group) => (group.broken, group.lookups, group.writes),
            None => (None, Lookups::default(), true),
        };
        if session.begin_pending.take().is_some() {
            // Nothing was sent: there is no transaction to end.
            return done;
        }
        let failed = match (done, broken) {
            (Ok(()), None) if !writes => {
                // Nothing to make durable: its locks go without waiting for a flush.
                // What the units read stands whether or not it arrives: a connection lost
                // here rolls back all the same, and the next `BEGIN` ends a transaction
                // left open.
                let end = format!("ROLLBACK; {}", deallocate(prepared));
                if session.client.batch_execute(&end).is_err() {
                    session.open = true;
                }
                return Ok(());
            }
            (Ok(()), None) => {
                let commit = format!("{}{}", deallocate(prepared), super::COMMIT);
                let committed = session.client.batch_execute(&commit);
                if committed.is_err() {
                    // Refused before its `COMMIT` ran (see [`super::COMMIT`]), the
                    // transaction is still open: the next `BEGIN` ends it first.
                    session.open = true;
                }
                return committed.map_err(|e| self.commit_failed(&e));
            }
            (Err(e), _) => e,
            (Ok(()), Some(why)) => Error::Database {
                message: why,
                sqlstate: None,
            },
        };
        // A failed rollback only means the connection is gone, and the server rolls back.
        let _ = session
            .client
            .batch_execute(&format!("ROLLBACK; {}", deallocate(prepared)));
        Err(failed)
    }

    /// How this unit's look-ups are spelled, and the id they are being prepared under when
    /// this unit prepares them: then their `PREPARE`s join the unit's pending `BEGIN` (a
    /// `SAVEPOINT`), which its first round trip sends ([`PgStore::lookups_sent`]).
    pub(super) fn lookup_spelling(&self) -> (Spelling, Option<u32>) {
        let mut session = self.session();
        let session = &mut *session;
        match (session.kept, session.begin_pending.as_mut()) {
            (Kept::Prepared { id, .. }, _) => return (Spelling::Execute(id), None),
            (Kept::Untried, Some(begin)) => {
                let id = prepare_lookups(begin);
                session.kept = Kept::Prepared { id, claim: false };
                return (Spelling::Execute(id), None);
            }
            _ => {}
        }
        let (Some(group), Some(begin)) = (session.group.as_mut(), session.begin_pending.as_mut())
        else {
            return (Spelling::Literal, None);
        };
        match group.lookups {
            Lookups::Prepared(id) => (Spelling::Execute(id), None),
            Lookups::Literal(n) if n + 1 >= PREPARE_AT => {
                let id = prepare_lookups(begin);
                group.lookups = Lookups::Preparing;
                (Spelling::Execute(id), Some(id))
            }
            Lookups::Literal(n) => {
                group.lookups = Lookups::Literal(n + 1);
                (Spelling::Literal, None)
            }
            Lookups::Preparing | Lookups::Abandoned => (Spelling::Literal, None),
        }
    }

    /// What the round trip that sent a unit's look-ups (`sent`) says of the statements it
    /// was to prepare under `preparing`: prepared if it was answered, else abandoned.
    pub(super) fn lookups_sent<'a>(
        &'a self,
        preparing: Option<u32>,
        sent: Result<Option<Answered<'a>>>,
    ) -> Result<Option<Answered<'a>>> {
        if let Err(Error::Database {
            sqlstate: Some(code),
            ..
        }) = &sent
            && code == MISSING_STATEMENT
        {
            self.session().kept = Kept::Off;
        }
        let Some(id) = preparing else {
            return sent;
        };
        let now = match &sent {
            Ok(Some(_)) => Lookups::Prepared(id),
            _ => Lookups::Abandoned,
        };
        match sent {
            Ok(Some((mut session, statements))) => {
                set_lookups(&mut session, now);
                Ok(Some((session, statements)))
            }
            other => {
                set_lookups(&mut self.session(), now);
                other
            }
        }
    }

    /// One unit of a group: `work` after its savepoint, undone alone if it fails.
    pub(super) fn grouped_unit(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let begun = {
            let mut session = self.session();
            if let Some(why) = session.group.as_ref().and_then(|g| g.broken.clone()) {
                return Err(Error::Database {
                    message: why,
                    sqlstate: None,
                });
            }
            let Some(group) = session.group.as_mut() else {
                return Err(Error::Database {
                    message: "internal error: a grouped unit outside a group".into(),
                    sqlstate: None,
                });
            };
            group.units += 1;
            let savepoint = format!("u{}", group.units);
            let pending = session.begin_pending.take();
            let begun = pending.is_none();
            session.begin_pending = Some(match pending {
                Some(begin) => format!("{begin}; SAVEPOINT {savepoint}"),
                None => format!("SAVEPOINT {savepoint}"),
            });
            session.start_unit();
            (begun, savepoint)
        };
        let (begun, savepoint) = begun;
        let done = work();
        let mut session = self.session();
        session.end_unit();
        if session.begin_pending.take().is_some() {
            // Nothing was sent: the group's `BEGIN`, if it was waiting, still is.
            if !begun {
                session.begin_pending = Some(self.begin.clone());
            }
            return done;
        }
        if !std::mem::take(&mut session.only_prefetch)
            && let Some(group) = session.group.as_mut()
        {
            group.writes = true;
        }
        let Err(e) = done else {
            return Ok(());
        };
        let breaks = matches!(&e, Error::Database { sqlstate: Some(code), .. } if retryable(code));
        let undone = if breaks {
            Ok(())
        } else {
            session
                .client
                .batch_execute(&format!("ROLLBACK TO SAVEPOINT {savepoint}"))
                .map_err(|r| self.error(&r).to_string())
        };
        if let (true, _) | (_, Err(_)) = (breaks, &undone) {
            let why = undone.err().unwrap_or_else(|| e.to_string());
            if let Some(group) = session.group.as_mut() {
                group.broken = Some(why);
            }
        }
        Err(e)
    }

    /// In a session that keeps its statements ([`Kept::Prepared`]): `sql`, which returns
    /// one row of one count, as an `EXECUTE` of a statement prepared once for the
    /// connection (`PREPARE` sent with its first run), its values spelled as literals in a
    /// simple query: an `EXECUTE` takes no bound parameters, and a statement the driver
    /// prepares is named `s0`, `s1`, …, which behind a transaction pooler could meet
    /// another client's on a shared server connection, where `ipamctl_<id>_claim` never
    /// does. `None` in a session that keeps nothing (the caller runs it as usual).
    pub(super) fn kept_count(
        &self,
        sql: &'static str,
        params: &[&dyn Param],
    ) -> Result<Option<i64>> {
        let Kept::Prepared { id, claim } = self.session().kept else {
            return Ok(None);
        };
        let Some(values) = params
            .iter()
            .map(|p| p.literal())
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        let mut session = self.conn()?;
        let mut text = String::new();
        if !claim {
            let types: Vec<_> = params
                .iter()
                .map(|p| p.sql_type().name().to_owned())
                .collect();
            text = format!(
                "PREPARE ipamctl_{id:08x}_claim({}) AS {sql};\n",
                types.join(", ")
            );
            session.kept = Kept::Prepared { id, claim: true };
        }
        text.push_str(&format!(
            "EXECUTE ipamctl_{id:08x}_claim({})",
            values.join(", ")
        ));
        let answer = match session.client.simple_query(&text) {
            Ok(answer) => answer,
            Err(e) => {
                if e.code().map(postgres::error::SqlState::code) == Some(MISSING_STATEMENT) {
                    session.kept = Kept::Off;
                }
                return Err(self.error(&e));
            }
        };
        let count = super::prefetch::by_statement(answer)
            .last()
            .and_then(|rows| rows.first())
            .and_then(|row| row.get(0))
            .and_then(|n| n.parse().ok());
        match count {
            Some(n) => Ok(Some(n)),
            None => Err(self.short_answer()),
        }
    }

    /// Runs `sql`, which returns one row, as a statement prepared for the group from its
    /// second run on; `None` outside a group or before then (the caller runs it as usual).
    pub(super) fn prepared_one(
        &self,
        sql: &'static str,
        params: &[&dyn Param],
    ) -> Result<Option<Row>> {
        let statement = {
            let mut session = self.session();
            let Some(group) = session.group.as_mut() else {
                return Ok(None);
            };
            let (runs, statement) = group.prepared.entry(sql).or_default();
            *runs += 1;
            if *runs < PREPARE_AT {
                return Ok(None);
            }
            statement.clone()
        };
        let mut session = self.conn()?;
        let typed = typed(params);
        let statement = match statement {
            Some(statement) => statement,
            None => {
                let types: Vec<_> = typed.iter().map(|(_, t)| t.clone()).collect();
                let statement = session
                    .client
                    .prepare_typed(sql, &types)
                    .map_err(|e| self.error(&e))?;
                if let Some(group) = session.group.as_mut() {
                    group
                        .prepared
                        .insert(sql, (PREPARE_AT, Some(statement.clone())));
                }
                statement
            }
        };
        let values: Vec<_> = typed.iter().map(|(v, _)| *v).collect();
        session
            .client
            .query_one(&statement, &values)
            .map(Some)
            .map_err(|e| self.error(&e))
    }
}

/// Appends to `begin` the `PREPARE`s of the look-ups under a new random id, and returns it.
fn prepare_lookups(begin: &mut String) -> u32 {
    let id = u32::from_be_bytes(
        uuid::Uuid::new_v4().as_bytes()[..4]
            .try_into()
            .unwrap_or_default(),
    );
    for (name, sql) in LOOKUPS {
        begin.push_str(&format!("; PREPARE ipamctl_{id:08x}_{name} AS {sql}"));
    }
    id
}

/// Sets where the group's look-ups stand, if a group is under way.
fn set_lookups(session: &mut Session, now: Lookups) {
    if let Some(group) = session.group.as_mut() {
        group.lookups = now;
    }
}

/// The `DEALLOCATE`s of a group's prepared look-ups, each followed by `; `: none unless
/// they were prepared for sure.
fn deallocate(lookups: Lookups) -> String {
    match lookups {
        Lookups::Prepared(id) => LOOKUPS
            .iter()
            .map(|(name, _)| format!("DEALLOCATE ipamctl_{id:08x}_{name}; "))
            .collect(),
        _ => String::new(),
    }
}
