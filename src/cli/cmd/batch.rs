//! `ipamctl allocate -f FILE` and `ipamctl release -f FILE`: many requests in one process.
//!
//! Each request is read with serde into the engine's input and made a typed request by the
//! constructor the single command uses (`batch_request.rs`, [`crate::engine::request`]),
//! then run by the engine as the single command's is, and nothing else: every request
//! meets the same validation, locks, arbiters and unit of work as one `ipamctl allocate`
//! would. Its warnings and notes come back as values, printed once per request (a group
//! run again one by one prints only the second run's). What one process saves is the start, the connection, and what the
//! store keeps between requests.
//!
//! A request is a JSON object on a line of its own, or an item of a YAML list
//! (`batch_read.rs`). A request that is not valid is that request's failure, exit 2, named
//! by its line; the requests after it still run, as after any other failed request. Each
//! result is printed as it comes (`batch_print.rs`), and nothing of it is kept.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use serde_json::Value;

use super::batch_print::{Outcome, Printer};
use super::batch_read::{Read, requests};
use super::batch_request::{Done, Kind, Typed};
use crate::cli::output;
use crate::cli::{AllocateArgs, GlobalArgs, ReleaseArgs};
use crate::engine::request::Defaults;
use crate::error::{Error, Result};
use crate::store::Store;

/// `allocate -f FILE` on `stores` (one per connection the batch uses; one for a state
/// directory): returns the batch's exit code (see [`Printer::exit_code`]).
pub fn allocate(
    stores: &[Box<dyn Store + Sync>],
    g: &GlobalArgs,
    args: &AllocateArgs,
    file: &str,
    out: &mut dyn Write,
) -> Result<i32> {
    let defaults = Defaults {
        namespace: g.namespace.as_deref(),
        dry_run: args.dry_run,
        ignore_not_found: false,
    };
    each(stores, g, file, (Kind::Allocate, &defaults), out)
}

/// `release -f FILE`.
pub fn release(
    stores: &[Box<dyn Store + Sync>],
    g: &GlobalArgs,
    args: &ReleaseArgs,
    file: &str,
    out: &mut dyn Write,
) -> Result<i32> {
    let defaults = Defaults {
        namespace: g.namespace.as_deref(),
        dry_run: args.dry_run,
        ignore_not_found: args.ignore_not_found,
    };
    each(stores, g, file, (Kind::Release, &defaults), out)
}

/// Which requests a batch holds, and what its command line gives them.
type Context<'a> = (Kind, &'a Defaults<'a>);

/// Reads the requests of `file` and runs each through `run`, printing each result as it
/// comes, in input order ([`Printer`]; the table a block of rows at a time). SIGINT or
/// SIGTERM stop the batch between two requests (exit 130, saying how many ran), also while
/// it waits for its next line. A stdout closed by its reader stops it too (exit 1): a result
/// nobody reads must not be followed by requests run unseen, nor by exit 0.
///
/// One worker thread per store runs the requests: a state directory's batch has one, so its
/// requests run one after another in input order; a database's has one per connection
/// (`--jobs`), each request still its own unit of work on its worker's connection, so that
/// the commits of requests in flight group; on one connection, the requests run in groups of
/// one transaction ([`crate::store::Units::grouped`]). Requests are handed out in input
/// order, at most a group's worth in flight per worker, and the results are printed in
/// input order as the ones before them are done (a group's once it committed). Two
/// requests of one batch race exactly as two processes do: the store's arbiter decides, as
/// for any claims.
///
/// What the batch holds at any time is bounded whatever the number of requests: one read
/// ahead, the requests in flight and the results that wait for an earlier one (a group's
/// worth a worker), and one block of the table.
fn each(
    stores: &[Box<dyn Store + Sync>],
    g: &GlobalArgs,
    file: &str,
    context: Context<'_>,
    out: &mut dyn Write,
) -> Result<i32> {
    let requests = requests(file)?;
    for store in stores {
        store.batch(stores.len());
    }
    let stop = super::stop_on_signal()?;
    // The requests are read on a thread of their own, so that a signal is seen while a pipe
    // keeps the batch waiting for its next line (a read is restarted after the handler).
    // One read ahead at most: a pipe still feeds the batch as it goes.
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::spawn(move || requests.feed(&mut |request| tx.send(request).is_ok()));
    let mut printer = Printer::new(g);
    let failed_to_print = dispatch(stores, context, &mut printer, out, &rx, &stop);
    if let Some(store) = stores.first() {
        store.batch_done();
    }
    if let Some(e) = failed_to_print {
        return Err(e);
    }
    if stop.load(Ordering::Relaxed) {
        // The rest of the table of the requests that ran: what they got is not lost.
        printer.finish(out)?;
        let (index, failed) = (printer.done(), printer.failed());
        return Err(Error::Interrupted {
            message: format!(
                "stopped after {index} of the batch's requests ({failed} failed); each of them is whole"
            ),
            hint: "run the same batch again: a request that was done answers `existing`".into(),
        });
    }
    printer.end(out)
}

/// Hands the requests `rx` reads to one worker per store, in input order and at most one in
/// flight per worker, and prints their results in input order as the ones before them are
/// done. Stops reading at a signal or at a result it could not print (returned), once the
/// requests in flight are done: each of them is whole.
fn dispatch(
    stores: &[Box<dyn Store + Sync>],
    context: Context<'_>,
    printer: &mut Printer,
    out: &mut dyn Write,
    rx: &Receiver<Read>,
    stop: &AtomicBool,
) -> Option<Error> {
    let tick = Duration::from_millis(100);
    // A worker's group is made of the requests already handed out when it is ready for more.
    let most: usize = stores.iter().map(|s| s.group_size().max(1)).sum();
    // How many results were printed (or, after a failure to print, passed over).
    let mut printed = 0;
    let mut failed_to_print = None;
    let (work_tx, work_rx) = std::sync::mpsc::channel::<(usize, Read)>();
    let queue = (Mutex::new(work_rx), AtomicUsize::new(stores.len()), stop);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Outcome>();
    std::thread::scope(|scope| {
        for store in stores {
            let (queue, done_tx) = (&queue, done_tx.clone());
            scope.spawn(move || work(&**store, context, queue, &done_tx));
        }
        drop(done_tx);
        let mut pending = BTreeMap::new();
        let mut sent = 0;
        let mut reading = true;
        loop {
            // Print what is done, in input order.
            while let Some(o) = pending.remove(&printed) {
                printed += 1;
                if failed_to_print.is_none() {
                    failed_to_print = printer.print(out, &o).map_err(|e| unread(e, printed)).err();
                }
            }
            if failed_to_print.is_some() || stop.load(Ordering::Relaxed) {
                reading = false;
            }
            let in_flight = sent - printed - pending.len();
            if !reading && in_flight == 0 {
                break;
            }
            if !reading || in_flight >= most {
                if let Ok(o) = done_rx.recv_timeout(tick) {
                    pending.insert(o.index, o);
                }
                continue;
            }
            match rx.recv_timeout(tick) {
                // No request starts once stdout's reader is gone (one in flight finishes).
                Ok(_) if output::reader_gone() => {
                    failed_to_print.get_or_insert(unread(output::closed(), sent));
                    reading = false;
                }
                Ok(read) => {
                    if work_tx.send((sent, read)).is_ok() {
                        sent += 1;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => reading = false,
            }
            while let Ok(o) = done_rx.try_recv() {
                pending.insert(o.index, o);
            }
        }
        drop(work_tx);
    });
    failed_to_print
}

/// A request as a worker holds it: its place, and the typed request (or why the line is
/// none: that is its result, and it never reaches the store).
struct Job {
    index: usize,
    line: Option<usize>,
    owner: Option<String>,
    request: Result<Typed>,
}

/// One worker: runs the requests it is handed on its store until the queue closes, a group
/// of them at a time where the store groups ([`crate::store::Units::grouped`]): the
/// requests already waiting when one is done join its group, and the group's results are
/// sent once it committed. A worker whose store is lost ([`crate::store::Units::lost`]: its
/// connection closed, say by `pg_terminate_backend`) stops taking requests, unless it is
/// the last one `working` counts: the others run the rest, instead of this one failing
/// each at once (one connection of four lost used to fail 1,390 of 3,000 requests). The
/// last one goes on, so that every request still gets its result.
fn work(
    store: &(dyn Store + Sync),
    context: Context<'_>,
    (queue, working, stop): &(Mutex<Receiver<(usize, Read)>>, AtomicUsize, &AtomicBool),
    done: &Sender<Outcome>,
) {
    let size = store.group_size();
    // A group takes no more after a signal, or once stdout's reader is gone (`dispatch`).
    let more = || !stop.load(Ordering::Relaxed) && !output::reader_gone();
    let next = |wait: bool| (wait || more()).then(|| take(queue, wait, context))?;
    let one = |job: &Job| match &job.request {
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
        let results: Vec<Option<crate::engine::request::Outcome<Done>>> = match grouped {
            Ok(()) => results,
            // Each request that succeeded in the group may or may not stand now.
            Err(Error::OutcomeUnknown { message }) => results
                .into_iter()
                .map(|r| {
                    r.map(|mut r| {
                        if r.result.is_ok() {
                            r.result = Err(Error::OutcomeUnknown {
                                message: message.clone(),
                            });
                        }
                        r
                    })
                })
                .collect(),
            // Nothing of the group stands: each request runs again on its own, and only
            // what that run noticed is told.
            Err(_) => jobs.iter().map(one).collect(),
        };
        for (job, result) in jobs.into_iter().zip(results) {
            let outcome = Outcome {
                index: job.index,
                line: job.line,
                owner: job.owner,
                result: match (job.request, result) {
                    (Ok(_), Some(result)) => {
                        super::tell(&result);
                        result.result
                    }
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => unreachable!("a typed request ran"),
                },
            };
            if done.send(outcome).is_err() {
                return;
            }
        }
        let others = |n: usize| (n > 1).then(|| n - 1);
        if store.lost()
            && working
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, others)
                .is_ok()
        {
            return;
        }
    }
}

/// The next request of `queue` as a [`Job`]: waiting for it, or only if one is there.
fn take(
    queue: &Mutex<Receiver<(usize, Read)>>,
    wait: bool,
    (kind, defaults): Context<'_>,
) -> Option<Job> {
    // A worker that panicked holding the lock leaves the queue as it was. Without `wait`,
    // a lock held is a worker waiting in `recv` for a request: none is queued, and blocking
    // on the lock here (mid-group) would wait for the end of the input, which the
    // dispatcher sends only once this group's results came.
    let (index, (line, request)) = if wait {
        let queue = queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        queue.recv().ok()?
    } else {
        let queue = match queue.try_lock() {
            Ok(queue) => queue,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        queue.try_recv().ok()?
    };
    let owner = request
        .as_ref()
        .ok()
        .and_then(|r| r.get("owner"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let request = request.and_then(|r| kind.request(r, defaults));
    Some(Job {
        index,
        line,
        owner,
        request,
    })
}

/// A result that could not be printed because the reader closed stdout (`| head -1`): the
/// batch stops there, and says so, instead of the exit 0 a closed pipe is for a listing.
fn unread(e: Error, done: usize) -> Error {
    match e {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe => Error::Io {
            path: output::STDOUT.into(),
            source: std::io::Error::other(format!(
                "closed by its reader: stopped after {done} of the batch's requests, \
                 each of them whole; run the same batch again to see every result"
            )),
        },
        e => e,
    }
}
