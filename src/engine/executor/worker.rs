//! One worker of the executor: runs the requests it is handed on its store, a group at a
//! time where the store groups.

use crossbeam_channel::Sender;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Done, Finished, Front, Job, Queue, TICK, Taken};
use crate::engine::request::Outcome;
use crate::engine::warning::Warnings;
use crate::error::Error;
use crate::store::Store;

/// How often a worker whose store is lost tries to open it anew ([`wait_to_revive`]).
const REVIVE_EVERY: Duration = Duration::from_secs(1);

/// Runs the requests of `queue` on `store` until the queue closes, a group of them at a
/// time where the store groups ([`crate::store::Units::grouped`]): the requests already
/// waiting when one is done join its group, and the group's outcomes are sent once it
/// committed. A worker whose store is lost ([`crate::store::Units::lost`]: its connection
/// closed, say by `pg_terminate_backend`) stops taking requests, unless it is the last one
/// `working` counts: the others run the rest, instead of this one failing each at once (one
/// connection of four lost used to fail 1,390 of 3,000 requests), and the group it found the
/// connection lost with goes back into the queue for them ([`hand_off`]). The last one goes
/// on, so that every request still gets its outcome. A store that opens its connection anew
/// ([`crate::store::Units::revive`]: a server's) goes on instead, running that group again;
/// one refused for now comes back once it opens ([`wait_to_revive`]).
pub(super) fn work<J, M, O>(
    store: &(dyn Store + Sync),
    queue: &Queue<'_, J, M>,
    front: &Front<'_, J, M, O>,
    done: &Sender<Finished<M, O>>,
) {
    let size = store.group_size();
    let next = |wait: bool| (wait || (queue.more)()).then(|| take(queue, wait, front.prepare))?;
    let one = |job: &(usize, Job<M>)| match &job.1.request {
        Ok(request) => Some(request.run(store)),
        Err(_) => None,
    };
    while let Some(first) = next(true) {
        let mut jobs = vec![first];
        let mut results = Vec::new();
        let grouped = store.grouped(&mut || {
            while let Some(job) = jobs.get(results.len()) {
                results.push(one(job));
                if jobs.len() < size
                    && let Some(job) = next(false)
                {
                    jobs.push(job);
                }
            }
            Ok(())
        });
        // Undone with its connection: nothing of the group stands. A store opened anew runs
        // it again here, one request at a time as below; else another worker runs it.
        if matches!(&grouped, Err(e) if !matches!(e, Error::OutcomeUnknown { .. }))
            && store.lost()
            && store.revive() != Some(true)
        {
            match hand_off(queue, jobs) {
                Ok(()) if wait_to_revive(store, queue) => continue,
                Ok(()) => return,
                Err(back) => jobs = back,
            }
        }
        let results = match grouped {
            Ok(()) => results,
            // Each request that succeeded in the group may or may not stand now.
            Err(Error::OutcomeUnknown { message }) => unknown(results, &message),
            // Nothing of the group stands: each request runs again on its own, and only
            // what that run noticed is told.
            Err(_) => jobs.iter().map(one).collect(),
        };
        for ((index, job), result) in jobs.into_iter().zip(results) {
            let outcome = match (job.request, result) {
                (Ok(_), Some(outcome)) => outcome,
                (Err(e), _) => failed(e),
                (Ok(_), None) => unreachable!("a typed request ran"),
            };
            let finished = Finished {
                index,
                meta: job.meta,
                outcome: (front.conclude)(outcome),
            };
            if done.send(finished).is_err() {
                return;
            }
        }
        if store.lost()
            && store.revive() != Some(true)
            && leave(queue)
            && !wait_to_revive(store, queue)
        {
            return;
        }
    }
}

/// Hands `jobs` back into the queue for the other workers, and stops this one taking more,
/// unless it is the last one working (or the queue is closing): then `jobs` come back.
/// Only a group that failed whole on a lost connection is handed back, so running it again
/// elsewhere is what the client's own retry would be: its transaction was undone.
fn hand_off<J, M>(
    queue: &Queue<'_, J, M>,
    jobs: Vec<(usize, Job<M>)>,
) -> Result<(), Vec<(usize, Job<M>)>> {
    let again = queue
        .again
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(tx) = again.as_ref() else {
        return Err(jobs);
    };
    if !leave(queue) {
        return Err(jobs);
    }
    for (index, job) in jobs {
        // The receiver is the queue's own, which outlives every worker.
        let _ = tx.send((index, Taken::Again(job)));
    }
    Ok(())
}

/// Stops this worker counting among those `working`, unless it is the last one: whether
/// it did.
fn leave<J, M>(queue: &Queue<'_, J, M>) -> bool {
    let others = |n: usize| (n > 1).then(|| n - 1);
    (queue.working)
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, others)
        .is_ok()
}

/// A worker that left the others its share, its store lost and not opened anew: tries
/// again every [`REVIVE_EVERY`] until the store opens (the worker then counts among those
/// working again: true) or the queue closes (false, as for a store that never opens anew:
/// the worker stops). A server's worker whose database refused it for a moment (a restart,
/// `max_connections`) so comes back, where it stopped and left the server on fewer
/// connections until every one was lost.
fn wait_to_revive<J, M>(store: &(dyn Store + Sync), queue: &Queue<'_, J, M>) -> bool {
    if store.revive().is_none() {
        return false;
    }
    let closing = || {
        (queue.again.lock())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_none()
    };
    loop {
        for _ in 0..REVIVE_EVERY.div_duration_f64(TICK) as u32 {
            if closing() {
                return false;
            }
            std::thread::sleep(TICK);
        }
        if store.revive() == Some(true) {
            queue.working.fetch_add(1, Ordering::SeqCst);
            return true;
        }
    }
}

/// The outcomes of a group whose commit's outcome is unknown: each success made unknown.
fn unknown(results: Vec<Option<Outcome<Done>>>, message: &str) -> Vec<Option<Outcome<Done>>> {
    let unknown = |mut r: Outcome<Done>| {
        if r.result.is_ok() {
            r.result = Err(Error::OutcomeUnknown {
                message: message.to_owned(),
            });
        }
        r
    };
    results.into_iter().map(|r| r.map(unknown)).collect()
}

/// The outcome of an input that stands for no request.
fn failed(e: Error) -> Outcome<Done> {
    Outcome {
        result: Err(e),
        warnings: Warnings::default(),
        notes: Vec::new(),
    }
}

/// The next request of `queue`, made a [`Job`] by `prepare`: waiting for it, or only if one
/// is there.
fn take<J, M>(
    queue: &Queue<'_, J, M>,
    wait: bool,
    prepare: &(dyn Fn(J) -> Job<M> + Sync),
) -> Option<(usize, Job<M>)> {
    // A worker that panicked holding the lock leaves the queue as it was. Without `wait`,
    // a lock held is a worker waiting in `recv` for a request: none is queued, and blocking
    // on the lock here (mid-group) would wait for the end of the input, which the
    // dispatcher sends only once this group's outcomes came.
    let (index, input) = if wait {
        let rx = queue
            .rx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        rx.recv().ok()?
    } else {
        let rx = match queue.rx.try_lock() {
            Ok(rx) => rx,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        rx.try_recv().ok()?
    };
    let job = match input {
        Taken::Fresh(input) => prepare(input),
        Taken::Again(job) => job,
    };
    Some((index, job))
}
