//! The unit of work on PostgreSQL: one transaction per command, run again after a
//! serialization failure or a deadlock (at most [`super::MAX_ATTEMPTS`] runs, with a
//! growing, jittered pause), and a failed `COMMIT` told apart from an outcome unknown.

use std::time::Duration;

use postgres::Client;

use super::{COMMIT, MAX_ATTEMPTS, PgStore, one_line, retryable};
use crate::error::{Error, Result};

impl PgStore {
    /// A failed `COMMIT` as an error: the server's refusal (a serialization failure, say)
    /// rolled it back; a connection lost with the `COMMIT` sent leaves the outcome unknown
    /// ([`Error::OutcomeUnknown`]): the server may have committed before it went. So does
    /// an error of SQLSTATE class 08 (connection exception: what PgBouncer sends when its
    /// server connection died) or 57 (operator intervention: `FATAL 57P01` from
    /// `pg_terminate_backend` or a fast shutdown): the server may send it right after the
    /// commit, and the client then reads it as `COMMIT`'s answer.
    pub(super) fn commit_failed(&self, e: &postgres::Error) -> Error {
        self.note_if_lost(e);
        let lost = |code: &str| code.starts_with("08") || code.starts_with("57");
        if e.as_db_error().is_some_and(|db| !lost(db.code().code())) {
            return self.error(e);
        }
        Error::OutcomeUnknown {
            message: format!(
                "PostgreSQL ({}): the connection was lost while committing ({}): the change may or may not have been made",
                self.shown,
                one_line(e)
            ),
        }
    }

    /// Runs `f` on the connection; a write outside a unit of work gets a transaction of its
    /// own, so its change and its event row commit together (every write outside a unit
    /// comes here: the reading transaction plain reads leave open is never committed).
    pub(super) fn run<T>(
        &self,
        f: impl FnOnce(&mut Client) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut session = self.session();
        if session.joined() {
            drop(session);
            let mut session = self.conn()?;
            return f(&mut session.client).map_err(|e| self.error(&e));
        }
        self.begin_in(&mut session, &self.begin)?;
        let client = &mut session.client;
        match f(client) {
            Ok(value) => {
                if let Err(e) = client.batch_execute(COMMIT) {
                    // Refused before its `COMMIT` ran, the transaction is still open.
                    session.open = true;
                    return Err(self.commit_failed(&e));
                }
                Ok(value)
            }
            Err(e) => {
                // A failed rollback means the connection is gone: the server rolls back.
                let _ = client.batch_execute("ROLLBACK");
                Err(self.error(&e))
            }
        }
    }

    /// Runs one statement: in a unit, a read or a change (and its event row, in one
    /// `WITH`); outside one, a read only, in the reading transaction ([`PgStore::conn`]).
    pub(super) fn single<T>(
        &self,
        f: impl FnOnce(&mut Client) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        f(&mut self.conn()?.client).map_err(|e| self.error(&e))
    }

    /// Requires a surrounding unit of work (row locks mean nothing outside one).
    pub(super) fn in_unit<T>(
        &self,
        what: &str,
        f: impl FnOnce(&mut Client) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut session = self.conn()?;
        if !session.in_txn {
            return Err(Error::Database {
                message: format!("internal error: {what} outside a transaction"),
                sqlstate: None,
            });
        }
        f(&mut session.client).map_err(|e| self.error(&e))
    }

    /// Runs `work` in one read-only transaction that sees one snapshot of the whole
    /// database (REPEATABLE READ), as `export` needs.
    pub fn snapshot(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let begin = format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY{}",
            self.timeouts.set_local()
        );
        self.unit_as(&begin, work)
    }

    /// [`crate::store::Units::atomically`]: BEGIN, the work, COMMIT; again after 40001/40P01.
    pub(super) fn unit(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.unit_as(&self.begin, work)
    }

    /// A unit of work opened by `begin`.
    pub(super) fn unit_as(&self, begin: &str, work: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        {
            let session = self.session();
            if session.in_txn {
                drop(session);
                return work();
            }
            if session.group.is_some() {
                drop(session);
                return self.grouped_unit(work);
            }
        }
        retrying(
            || {
                {
                    // Sent with the unit's first statement, or never if it sends none.
                    let mut session = self.session();
                    session.begin_pending = Some(begin.to_owned());
                    session.start_unit();
                }
                let done = work();
                let mut session = self.session();
                session.end_unit();
                if session.begin_pending.take().is_some() {
                    // Nothing was sent: there is no transaction to end.
                    return done;
                }
                if done.is_ok() && std::mem::take(&mut session.only_prefetch) {
                    // Answered by the claim's first round trip (an owner that holds an
                    // address), which wrote nothing: no `COMMIT` to wait for. The
                    // transaction is left to the next `BEGIN` or the connection's close.
                    session.open = true;
                    return done;
                }
                let end = if done.is_ok() { COMMIT } else { "ROLLBACK" };
                match (done, session.client.batch_execute(end)) {
                    (Ok(()), Ok(())) => Ok(()),
                    (Ok(()), Err(e)) => {
                        // Refused before its `COMMIT` ran, the transaction is still open.
                        session.open = true;
                        Err(self.commit_failed(&e))
                    }
                    // The work's own error is the one to report; a failed rollback only
                    // means the connection is gone, and the server rolls back then.
                    (Err(e), _) => Err(e),
                }
            },
            |e| matches!(e, Error::Database { sqlstate: Some(code), .. } if retryable(code)),
        )
    }
}

/// Runs `run` again after a growing pause while it fails with an error that `again` says
/// another run can cure, at most [`MAX_ATTEMPTS`] runs in all.
pub(super) fn retrying<T, E>(
    mut run: impl FnMut() -> std::result::Result<T, E>,
    again: impl Fn(&E) -> bool,
) -> std::result::Result<T, E> {
    let mut attempt = 1;
    loop {
        match run() {
            Err(e) if attempt < MAX_ATTEMPTS && again(&e) => {
                std::thread::sleep(backoff(attempt));
                attempt += 1;
            }
            done => return done,
        }
    }
}

/// The pause before attempt `n` (from 1): 5 ms doubling, at most 320 ms, with jitter so that
/// the transactions that collided do not collide again.
fn backoff(n: u32) -> Duration {
    let base = 5u64 << n.min(6);
    let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) % base.max(1);
    Duration::from_millis(base + jitter)
}
