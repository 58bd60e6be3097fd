//! A long-lived store's connection opened anew in place ([`crate::store::Units::revive`]):
//! a server's worker whose connection was dropped (`pg_terminate_backend`, a restarted
//! database, a pooler's `server_lifetime`) goes on with one of its own again, where it
//! used to stop and leave its share to the other workers until every connection was lost.
//!
//! # Protocol
//!
//! - Only a store opened for a long-lived front end is revived ([`PgStore::revive_from`],
//!   called by the registry for a server's workers): a command's connection lost is the
//!   command's error (exit 1: nothing done), and its batch's lost worker hands its share to
//!   the others (`engine/executor/`).
//! - A store is revived only between units, by the worker that owns it, once it is lost:
//!   the old connection's transaction was undone by the database as it closed, so nothing
//!   of the session's state (its unit, group, prefetched rows, locked pools) stands for
//!   anything. The session starts again as a new connection's, keeping only what the
//!   worker chose: its group size, and whether it keeps its look-ups prepared (which it
//!   prepares again on the new connection; one that stopped keeping them behind a
//!   transaction pooler does not start again).
//! - The connection is opened as the first one was, with its timeouts (`connect_timeout`
//!   bounds the wait) and the schema version checked by its first statement. A refusal
//!   leaves the store lost: the worker hands its requests on to the others and tries again
//!   every second, taking requests once it is open, until the executor stops (every worker
//!   lost: the server then opens them all again).

use std::sync::atomic::Ordering;

use postgres::Client;

use super::group::Kept;
use super::{PgStore, Session, Target, connect};
use crate::store::Units;

impl PgStore {
    /// Makes this store one that opens its connection anew, at `target`, once it is lost.
    pub fn revive_from(&mut self, target: Target) {
        self.revival = Some(target);
    }

    /// [`crate::store::Units::revive`].
    pub(super) fn revived(&self) -> Option<bool> {
        let target = self.revival.as_ref()?;
        if !self.lost() {
            return Some(true);
        }
        let Ok((client, _, _)) = connect(target) else {
            return Some(false);
        };
        let mut session = self.session();
        let kept = match session.kept {
            Kept::Off => Kept::Off,
            Kept::Untried | Kept::Prepared { .. } => Kept::Untried,
        };
        let group_size = session.group_size;
        *session = Session::fresh(client);
        session.kept = kept;
        session.group_size = group_size;
        self.lost.store(false, Ordering::Relaxed);
        Some(true)
    }
}

impl Session {
    /// A new connection's session: no unit under way, the schema version not checked yet.
    pub(super) fn fresh(client: Client) -> Session {
        Session {
            client,
            in_txn: false,
            hints_read: Default::default(),
            locked_pools: Default::default(),
            version_pending: true,
            begin_pending: None,
            prefetched: Default::default(),
            kept_pools: Default::default(),
            prefix_ahead: None,
            only_prefetch: false,
            open: false,
            group: None,
            kept: Kept::Off,
            group_size: 1,
        }
    }
}
