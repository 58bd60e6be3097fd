//! The PostgreSQL store: the same pools and allocations in tables whose constraints are the
//! arbiters, through the synchronous `postgres` client (one connection per process).
//!
//! # Protocol
//!
//! - A claim is one `INSERT … ON CONFLICT DO NOTHING RETURNING` into `allocations`, whose
//!   primary key (namespace, pool, address) and unique (namespace, pool, owner kind, name,
//!   uid) decide every race. Nothing returned means the address is taken or the owner holds
//!   one; the owner is then looked up ([`crate::store::Claim`]). No advisory lock, no
//!   counter, nothing that needs `SERIALIZABLE`: it runs at the default READ COMMITTED, in
//!   which an insert that meets a concurrent, uncommitted insert of the same key waits for
//!   it and then does nothing (if it committed) or goes ahead (if it rolled back).
//! - Every command that changes something is one transaction ([`crate::store::Units::atomically`]):
//!   `allocate` reads the pool's row `FOR SHARE` and holds it until its claim commits;
//!   `apply`, `pool delete` and `vpc delete` take it `FOR UPDATE`, so a claim is always
//!   checked against the pool as it stands (the file store's invariant 6).
//! - The lowest free address comes from an indexed gap query (`free.rs`) that starts at a
//!   per-pool low-water hint: advice, moved down by every release in the release's own
//!   transaction, moved up after a claim only if no release happened since it was read.
//! - Every change appends a row to `events` in the same statement (a data-modifying `WITH`).
//! - Serialization failures and deadlocks (SQLSTATE 40001, 40P01) roll the transaction back
//!   and run it again, at most [`MAX_ATTEMPTS`] times with a growing, jittered pause
//!   (`unit.rs`).
//! - Round trips: every statement waits for its answer (the synchronous client does not
//!   pipeline), so what can share one goes in one simple query: the schema version check
//!   with the first `BEGIN` (and its `SET LOCAL`s); a claim's locks with everything it
//!   reads before it claims (`prefetch.rs`). A claim for a new owner is then three round
//!   trips (that batch, the claim, `COMMIT`), one for an owner that holds an address one
//!   (the batch wrote nothing, so its transaction is left to end with the next `BEGIN` or
//!   the connection: [`Session::open`]).
//! - A batch on one connection (`allocate -f`) runs its requests in groups, up to 32 units in
//!   one transaction, each under a savepoint of its own (`group.rs`).
//! - A connection that breaks mid-command is one `error:` line: exit 1 before the `COMMIT`
//!   was sent (the transaction never committed, so nothing is half-done), exit 6
//!   ([`crate::error::exit::UNKNOWN`]) once it was, when the server may have committed:
//!   the outcome is unknown, and running the command again is safe (a claim is idempotent
//!   per owner, a release per address).

mod claims;
mod connect;
pub mod conninfo;
mod findings;
mod free;
mod grants;
mod group;
pub mod inspect;
mod locks;
mod migrate;
mod objects;
mod prefetch;
mod prefix_free;
mod queries;
mod revive;
mod rows;
pub mod schema;
mod siblings;
mod timeouts;
mod typed;
mod unit;

use unit::retrying;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use postgres::Client;

use crate::error::{Error, Result};
use crate::model::Namespace;

use conninfo::ConnInfo;
use timeouts::Timeouts;

/// How many times a transaction is tried when the server reports a serialization failure
/// or a deadlock. Under SERIALIZABLE (CockroachDB's default), claims on one pool read
/// overlapping key ranges and insert into them, so each round of retries lets only some of
/// them commit: 16 processes claiming at once on a loaded 2-core machine needed more than 8
/// tries (`serialization_failures_are_retried_under_serializable`). The pauses grow to
/// 320 ms (plus jitter), so 16 tries wait at most about 6 s in all.
pub const MAX_ATTEMPTS: u32 = 16;

/// How every transaction that may change allocations begins. ipamctl's two statements that
/// insert or delete allocation rows (a claim, a release) append their pool's count-ledger
/// row themselves, in the statement; the setting tells the ledger's triggers (migration 5)
/// to leave them alone. A PL/pgSQL trigger costs the fresh backend of every ipamctl process
/// 1.7 to 2.9 ms (loading the language, planning its insert): more than a quarter of a
/// claim. Writers that do not set it (psql, `COPY`, other tools) are still counted.
const BEGIN: &str = "BEGIN; SET LOCAL ipamctl.counting TO 'self'";

/// How a unit of work (or a group of them) commits. `COMMIT` of a transaction that a failed
/// statement aborted is answered `ROLLBACK`, not an error, and the client cannot tell the
/// two answers apart: the `SELECT` before it fails in an aborted transaction, so a unit
/// that returned success over a statement that failed is never taken for committed.
const COMMIT: &str = "SELECT 1; COMMIT";

/// A pool's low-water hint as a claim read it: the address, and the release epoch then;
/// and what the gap queries from it handed out since.
#[derive(Clone, Debug)]
struct HintRead {
    low_water: Option<IpAddr>,
    epoch: i64,
    /// The address handed out last, that no claim has tried yet.
    untried: Option<IpAddr>,
    /// An address was handed out and passed over for a later one (a claimer that lost
    /// races puts some off): a claim no longer proves every candidate below it taken, so
    /// it moves no hint.
    passed_over: bool,
}

/// The connection and what this process is doing on it.
struct Session {
    client: Client,
    /// Inside [`crate::store::Units::atomically`]: statements join its transaction.
    in_txn: bool,
    /// Hints read by the gap queries of the current unit, by (namespace, pool): a claim
    /// moves one up in its own statement if it is unchanged.
    hints_read: HashMap<(String, String), HintRead>,
    /// The manifests of the pools the current unit has locked, by (namespace, name), as
    /// the locking statement read them: no other transaction can change a locked row, so
    /// a read of the pool in the same unit is answered from here.
    locked_pools: HashMap<(String, String), Vec<u8>>,
    /// The schema version is not checked yet: the first statement checks it, or folds the
    /// check into its own round trip (`prefetch.rs`).
    version_pending: bool,
    /// The unit's `BEGIN`, not sent yet: the unit's first statement sends it (or folds it
    /// into its own round trip); a unit that sends none needs no `COMMIT` either.
    begin_pending: Option<String>,
    /// What a claim's locking round trip read ahead for the unit (`prefetch.rs`).
    prefetched: prefetch::Prefetched,
    /// The pools whose rows the unit holds `FOR UPDATE`, by (namespace, name): a prefix
    /// claim or release written under it keeps the pool's free space (`prefix_free.rs`).
    kept_pools: HashSet<(String, String)>,
    /// What a prefix claim's locking round trip read ahead for the unit (`prefix_free.rs`).
    prefix_ahead: Option<prefix_free::Ahead>,
    /// In a unit: nothing but the claim's locking round trip has been sent, which writes
    /// nothing, so a unit that ends there needs no `COMMIT` of its own (see [`Session::open`]).
    only_prefetch: bool,
    /// The server has a transaction open that nothing needs any more: one that only read
    /// (a unit answered by its first round trip, or the reading transaction of plain reads
    /// outside a unit). Plain reads run in it, under its timeouts; the next `BEGIN` is sent
    /// after a `ROLLBACK` that ends it, in the same round trip; the connection's close ends it
    /// at the latest. (A `ROLLBACK` with no transaction open is a warning, so a failure that
    /// leaves it unclear whether one is open sets it too.)
    open: bool,
    /// A batch's group of units under way in one transaction (`group.rs`).
    group: Option<group::Group>,
    /// Whether a claim's look-ups are kept for the connection's life ([`PgStore::keep_lookups`]).
    kept: group::Kept,
    /// How many units a group holds: 1 (no groups) unless a batch chose more.
    group_size: usize,
}

impl Session {
    /// Statements join a transaction begun (or to be begun) for them: a unit's or a group's.
    fn joined(&self) -> bool {
        self.in_txn || self.group.is_some()
    }

    /// What a unit of work starts with: nothing it read or locked before.
    fn start_unit(&mut self) {
        self.in_txn = true;
        self.hints_read.clear();
        self.prefetched = prefetch::Prefetched::default();
        self.prefix_ahead = None;
        self.only_prefetch = false;
    }

    /// What a unit of work leaves: its locks go with its transaction (or savepoint).
    fn end_unit(&mut self) {
        self.in_txn = false;
        self.locked_pools.clear();
        self.kept_pools.clear();
        self.prefetched = prefetch::Prefetched::default();
        self.prefix_ahead = None;
    }
}

/// A PostgreSQL database holding ipamctl's schema.
pub struct PgStore {
    session: Mutex<Session>,
    /// The connection, for messages: `host=… port=… dbname=… user=…`, never the password.
    shown: String,
    /// Who makes the changes, for the audit log: `user@host` of this client.
    client_id: String,
    /// How every unit of work that may change allocations begins: [`BEGIN`] and the
    /// timeouts' `SET LOCAL`s, in one simple query.
    begin: String,
    /// The timeouts every transaction sets.
    timeouts: Timeouts,
    /// The `hint:` of a database without this ipamctl's schema.
    init_hint: String,
    /// The addresses the other workers of this store's batch handed out, when it has
    /// siblings ([`PgStore::open_batch`]).
    siblings: Option<Arc<siblings::Siblings>>,
    /// An error said the connection is gone (closed, or ended by the server: SQLSTATE
    /// class 08 or 57P): nothing more can run on it ([`crate::store::Units::lost`]). A flag
    /// of its own, since the synchronous client notices a closed connection only in a call.
    lost: std::sync::atomic::AtomicBool,
    /// Where a long-lived store opens its connection anew once it is lost (`revive.rs`).
    revival: Option<Target>,
}

/// A connection string made ready to connect: parsed, completed from the environment and
/// libpq's defaults, its password looked up. What the look-up had to say (a password file
/// that others may read, ignored as libpq ignores it) is in [`Target::warnings`], for the
/// caller to show before it connects: a connection refused for want of that password
/// follows it.
#[derive(Clone)]
pub struct Target {
    /// The `--store` value as given, for hints (masked before it is shown).
    store: String,
    info: ConnInfo,
    password: Option<String>,
    warnings: Vec<String>,
    /// This process's user name, looked up once (it is the default `user` and half of the
    /// audit log's `user@host`).
    os_user: Option<String>,
}

impl Target {
    /// Parses and completes `store` (the `--store` value as given); exit 2 if it does not
    /// parse. Reads the environment and the password file, connects to nothing.
    pub fn new(store: &str) -> Result<Target> {
        let info = ConnInfo::parse(store).map_err(|e| Error::invalid("--store", e))?;
        let os_user = whoami::username().ok();
        let info = info
            .with_env(|var| std::env::var(var).ok())
            .with_defaults(os_user.as_deref().unwrap_or("postgres"));
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let found = info.password_lookup(home.as_deref());
        Ok(Target {
            store: store.to_owned(),
            info,
            password: found.password,
            warnings: found.warning.into_iter().collect(),
            os_user,
        })
    }

    /// What was noticed while getting ready, each as the line after `warning: ` reads.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// Connects to `target`: the client, the connection as messages show it, and the
/// timeouts its transactions set.
fn connect(target: &Target) -> Result<(Client, String, Timeouts)> {
    let shown = target.info.describe();
    let prepared = connect::prepare(&target.info, target.password.as_deref())
        .map_err(|e| Error::invalid("--store", e))?;
    let timeouts = prepared.timeouts.clone();
    let client = connect::connect(prepared).map_err(|failed| match failed {
        connect::Failed::Error(e) => Error::Database {
            message: format!("cannot connect to PostgreSQL ({shown}): {}", one_line(&e)),
            sqlstate: e.code().map(|c| c.code().to_owned()),
        },
        connect::Failed::TimedOut(after) => Error::Database {
            message: format!(
                "cannot connect to PostgreSQL ({shown}): gave up after {} s waiting for the server to finish the connection handshake (connect_timeout, per host)",
                after.as_secs()
            ),
            sqlstate: None,
        },
    })?;
    Ok((client, shown, timeouts))
}

/// The text of a client error on one line, the server's message without its DETAIL lines.
fn one_line(e: &postgres::Error) -> String {
    let text = match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                let more = s.to_string();
                if !text.contains(&more) {
                    text = format!("{text}: {more}");
                }
                source = s.source();
            }
            text
        }
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Is this SQLSTATE one that running the transaction again can cure? A serialization
/// failure, a deadlock, or a kept look-up gone missing ([`group::MISSING_STATEMENT`]).
fn retryable(code: &str) -> bool {
    code == "40001" || code == "40P01" || code == group::MISSING_STATEMENT
}

/// The namespace column's value: `''` for the cluster scope.
fn ns_key(ns: Option<&Namespace>) -> &str {
    ns.map_or("", Namespace::as_str)
}

/// Who is making changes: `user@host`, the user as [`Target::new`] looked it up (a second
/// look-up would read the password database again).
fn client_id(target: &Target) -> String {
    let user = target.os_user.as_deref().unwrap_or("unknown");
    let host = whoami::hostname().unwrap_or_else(|_| "unknown".into());
    format!("{user}@{host}")
}

impl PgStore {
    /// Connects to the database `target` names and checks that it holds a schema this
    /// ipamctl knows: none is exit 3 with a hint to run `init`; a newer one is refused
    /// before anything is read or written.
    pub fn open(target: &Target) -> Result<PgStore> {
        let (client, shown, timeouts) = connect(target)?;
        let init_hint = format!(
            "run `ipamctl --store '{}' init`",
            conninfo::mask(&target.store).replace('\'', "'\\''")
        );
        Ok(PgStore::new(
            client,
            shown,
            timeouts,
            init_hint,
            client_id(target),
        ))
    }

    /// `n` connections to the database `target` names, for the `n` workers of one batch
    /// (`allocate -f --jobs N`): with more than one, they share what each handed out
    /// (`siblings.rs`), so that none picks an address another has not committed yet.
    pub fn open_batch(target: &Target, n: usize) -> Result<Vec<PgStore>> {
        let shared = (n > 1).then(|| Arc::new(siblings::Siblings::default()));
        (0..n)
            .map(|_| {
                let mut store = PgStore::open(target)?;
                store.siblings.clone_from(&shared);
                Ok(store)
            })
            .collect()
    }

    /// Checks the schema version now, if no statement has yet (`examples/pg_floor.rs`
    /// times this: the connection and the first query every command makes).
    pub fn check_version(&self) -> Result<()> {
        self.conn().map(drop)
    }

    /// What the schema version read says: `Ok` for this ipamctl's, else the error every
    /// command refuses to work with before it has read or written anything.
    fn version_is(&self, version: Option<i32>) -> Result<()> {
        let shown = &self.shown;
        match version {
            Some(v) if v > schema::LATEST => Err(too_new(shown, v)),
            Some(v) if v == schema::LATEST => Ok(()),
            _ => Err(Error::NoSchema {
                message: match version {
                    Some(v) => format!(
                        "the ipamctl schema in the database ({shown}) is version {v}; this ipamctl needs version {}",
                        schema::LATEST
                    ),
                    None => format!("the database ({shown}) has no ipamctl schema"),
                },
                hint: self.init_hint.clone(),
            }),
        }
    }

    /// The version query's failure: no `ipamctl` schema, or no version table in it, is
    /// no version; anything else is the error.
    fn version_failed(&self, e: &postgres::Error) -> Result<()> {
        match e.code().map(|c| c.code()) {
            Some("3F000" | "42P01") => self.version_is(None),
            _ => Err(self.error(e)),
        }
    }

    /// The failure of a batch that checked the version *and* used the schema's objects (a
    /// claim's first round trip): an object missing (an undefined schema, table, function
    /// or column) may be an older schema's doing, so the version is asked on its own, and
    /// an older one is named with the command that upgrades it.
    pub(super) fn version_failed_with_objects(&self, e: &postgres::Error) -> Result<()> {
        if !matches!(
            e.code().map(|c| c.code()),
            Some("3F000" | "42P01" | "42883" | "42703")
        ) {
            return Err(self.error(e));
        }
        let asked = {
            let mut session = self.session();
            session.open = false;
            session
                .client
                .simple_query(&format!("ROLLBACK; {}", schema::VERSION_QUERY))
        };
        match asked {
            Ok(messages) => self.version_is(messages.iter().find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
                _ => None,
            })),
            Err(again) => self.version_failed(&again),
        }
    }

    /// The session, ready for a statement: the schema version checked (once per
    /// connection) and a transaction open, each in the statement's round trip where it can
    /// be: in a unit, the unit's `BEGIN` sent if still pending; outside one, the reading
    /// transaction that gives plain reads the timeouts of [`Timeouts`] (`SET LOCAL` needs a
    /// transaction; PgBouncer ignores startup `options`), opened with the version check at no
    /// cost of its own and left open for the reads after. Every write outside a unit goes
    /// through [`PgStore::run`], which commits it.
    fn conn(&self) -> Result<MutexGuard<'_, Session>> {
        let mut session = self.session();
        session.only_prefetch = false;
        if let Some(begin) = session.begin_pending.take() {
            self.begin_in(&mut session, &begin)?;
        } else if !session.joined() && !session.open {
            self.begin_in(&mut session, &self.begin)?;
            session.open = true;
        }
        Ok(session)
    }

    /// Sends `begin` (after the `ROLLBACK` of a transaction left open, and with the schema
    /// version check if still pending) in one round trip.
    fn begin_in(&self, session: &mut Session, begin: &str) -> Result<()> {
        let mut sql = String::new();
        if std::mem::take(&mut session.open) {
            sql.push_str("ROLLBACK; ");
        }
        sql.push_str(begin);
        if !session.version_pending {
            return match session.client.batch_execute(&sql) {
                Ok(()) => Ok(()),
                Err(e) => {
                    session.open = true;
                    Err(self.error(&e))
                }
            };
        }
        sql.push_str("; ");
        sql.push_str(schema::VERSION_QUERY);
        let answer = session.client.simple_query(&sql);
        // Whatever happened, a `ROLLBACK` before the next `BEGIN` does no harm.
        session.open = true;
        let version = match answer {
            Ok(messages) => messages.iter().find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => {
                    Some(r.get(0).and_then(|v| v.parse::<i32>().ok()))
                }
                _ => None,
            }),
            Err(e) => {
                self.version_failed(&e)?;
                return Err(self.error(&e));
            }
        };
        self.version_is(version.flatten())?;
        session.version_pending = false;
        session.open = false;
        Ok(())
    }

    /// Creates or upgrades the schema (idempotent): every missing migration, in one
    /// transaction with its version row. Returns the version before (`None`: there was no
    /// schema) and the store's description. A newer schema is refused, nothing written.
    pub fn init(target: &Target) -> Result<(Option<i32>, i32, String)> {
        let (mut client, shown, timeouts) = connect(target)?;
        let id = client_id(target);
        // Two inits creating the schema at once: one of them loses a catalog race (a unique
        // violation); the second try finds the schema there.
        // Only a race of the bootstrap is retried: once the version table is locked, a
        // migration that finds its objects there means a damaged history, which waiting
        // does not mend.
        let migrated = retrying(
            || migrate::migrate(&mut client, &id, &timeouts),
            |e| match e {
                migrate::Failed::Bootstrap(e) => e
                    .code()
                    .is_some_and(|c| retryable(c.code()) || matches!(c.code(), "23505" | "42P07")),
                migrate::Failed::Migration(e) => e.code().is_some_and(|c| retryable(c.code())),
            },
        );
        match migrated {
            Ok(migrate::Outcome::Migrated(before)) => Ok((before, schema::LATEST, shown)),
            Ok(migrate::Outcome::Newer(newer)) => Err(too_new(&shown, newer)),
            Ok(migrate::Outcome::Damaged(missing)) => Err(damaged(&shown, &missing)),
            Err(migrate::Failed::Bootstrap(e) | migrate::Failed::Migration(e)) => {
                Err(database(&shown, &e, &timeouts))
            }
        }
    }

    fn new(
        client: Client,
        shown: String,
        timeouts: Timeouts,
        init_hint: String,
        client_id: String,
    ) -> PgStore {
        PgStore {
            session: Mutex::new(Session::fresh(client)),
            init_hint,
            shown,
            client_id,
            begin: format!("{BEGIN}{}", timeouts.set_local()),
            timeouts,
            siblings: None,
            lost: Default::default(),
            revival: None,
        }
    }

    /// The connection, for messages (no password).
    pub fn describe(&self) -> &str {
        &self.shown
    }

    fn session(&self) -> MutexGuard<'_, Session> {
        // A panic while holding it cannot leave the connection half-used in a way the next
        // statement would not report: take it anyway.
        self.session.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A client error as an [`Error::Database`] naming this store.
    fn error(&self, e: &postgres::Error) -> Error {
        self.note_if_lost(e);
        database(&self.shown, e, &self.timeouts)
    }

    /// Notes that the connection is gone if `e` says so.
    fn note_if_lost(&self, e: &postgres::Error) {
        let gone = |code: &str| code.starts_with("08") || code.starts_with("57P");
        if e.is_closed() || e.as_db_error().is_some_and(|db| gone(db.code().code())) {
            self.lost.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// A client error as one line naming the server; a timeout of [`Timeouts`] says what it
/// waited for.
fn database(shown: &str, e: &postgres::Error, timeouts: &Timeouts) -> Error {
    let expired = e
        .as_db_error()
        .and_then(|db| timeouts.expired(db.code().code(), db.message()));
    // A permission error names the grant that is missing.
    let denied = e
        .as_db_error()
        .filter(|db| db.code().code() == "42501")
        .and_then(|db| {
            let role = grants::role_of(shown);
            grants::missing(db.message(), db.detail(), role)
                .or_else(|| grants::not_owner(db.message(), role))
        });
    Error::Database {
        message: match (expired, denied) {
            (Some(why), _) => format!("PostgreSQL ({shown}): {why}"),
            (None, Some(grant)) => format!("PostgreSQL ({shown}): {}: {grant}", one_line(e)),
            (None, None) => format!("PostgreSQL ({shown}): {}", one_line(e)),
        },
        sqlstate: e.code().map(|c| c.code().to_owned()),
    }
}

fn too_new(shown: &str, version: i32) -> Error {
    Error::Database {
        message: format!(
            "the ipamctl schema in the database ({shown}) is version {version}, newer than this ipamctl knows ({}); nothing was changed",
            schema::LATEST
        ),
        sqlstate: None,
    }
}

/// The refusal of `init` on a damaged version history, naming the missing versions.
fn damaged(shown: &str, missing: &[i32]) -> Error {
    let list: Vec<String> = missing.iter().map(i32::to_string).collect();
    let (noun, verb) = if missing.len() == 1 {
        ("version", "is")
    } else {
        ("versions", "are")
    };
    Error::Database {
        message: format!(
            "the ipamctl schema's version history in the database ({shown}) is damaged: {noun} {} {verb} missing from ipamctl.schema_version while later versions or their objects are there; nothing was changed (restore the rows, e.g. INSERT INTO ipamctl.schema_version (version, client) VALUES ({}, 'repair'), once the schema is known to be whole)",
            list.join(", "),
            list.join(", 'repair'), (")
        ),
        sqlstate: None,
    }
}
