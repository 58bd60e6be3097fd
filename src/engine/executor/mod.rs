//! The executor: runs typed requests ([`Request`]: an `allocate` or a `release`, built by
//! [`crate::engine::request`]'s constructors) on one store or several, and hands back each
//! request's [`Finished`] outcome in input order, its warnings and notes as values. The
//! single command runs one request ([`Executor::one`]); a batch (`allocate -f`,
//! `release -f`) feeds a stream of them through a channel ([`Executor::run`]) and prints
//! what comes back; a server will feed its requests the same way. Nothing here prints.
//!
//! What [`Executor::run`] owns:
//! - **Workers.** One thread per store: a state directory's batch has one, so its requests
//!   run one after another in input order; a database's has one per connection (`--jobs`).
//!   Requests are handed out in input order, at most a group's worth in flight per worker,
//!   and come back in input order as the ones before them are done (a group's once it
//!   committed). Two requests race exactly as two processes do: the store's arbiter decides.
//! - **Groups** ([`crate::store::Units::grouped`]): on one connection, the requests waiting
//!   when one is done join its group, one transaction under savepoints; on the file store,
//!   the group's directory `fsync`s are deferred to its end. A group that fails as a whole
//!   runs each of its requests again on its own, and only what that run noticed is told; a
//!   group whose commit's outcome is unknown makes each success in it unknown.
//! - **The hand-off** ([`crate::store::Units::lost`]): a worker whose connection is lost
//!   stops taking requests unless it is the last one working; the others run the rest,
//!   and the requests its group held (undone with the connection: nothing of them stands)
//!   go back into the queue for them. The last one runs what it holds on its own, each
//!   failing as the connection did (nothing done, exit 1), and a server then opens its
//!   connections again.
//! - **The stop flag** (set by SIGINT or SIGTERM in the front end), and a front end's
//!   reader gone (`closed`): no request starts after either; the ones in flight finish, each
//!   whole.
//!
//! What it holds at any time is bounded whatever the number of requests: the requests in
//! flight and the outcomes that wait for an earlier one (a group's worth a worker).

mod worker;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use crossbeam_channel::{Receiver as Input, select};

use crate::engine::request::{AllocateRequest, Claimed, Freed, Outcome, ReleaseRequest};
use crate::error::{Error, Result};
use crate::store::Store;

/// How long the dispatcher waits for a request or an outcome before it looks at the stop
/// flag and `closed` again.
const TICK: Duration = Duration::from_millis(100);

/// One typed request.
pub enum Request {
    Allocate(Box<AllocateRequest>),
    Release(Box<ReleaseRequest>),
}

/// What one request did.
#[derive(Debug)]
pub enum Done {
    /// An `allocate`'s claim.
    Claimed(Claimed),
    /// A `release`'s, and whether it was a dry run.
    Freed(Freed, bool),
}

impl Request {
    /// Runs the request on `store`, on its own (its own unit of work).
    fn run(&self, store: &(dyn Store + Sync)) -> Outcome<Done> {
        match self {
            Request::Allocate(request) => done(request.run(store), Done::Claimed),
            Request::Release(request) => {
                let dry_run = request.dry_run();
                done(request.run(store), |freed| Done::Freed(freed, dry_run))
            }
        }
    }
}

/// `outcome` with its result made a [`Done`] by `make`.
fn done<T>(outcome: Outcome<T>, make: impl FnOnce(T) -> Done) -> Outcome<Done> {
    Outcome {
        result: outcome.result.map(make),
        warnings: outcome.warnings,
        notes: outcome.notes,
    }
}

/// A request as the executor takes it: what the front end keeps of it (`meta`, handed back
/// with its outcome), and the typed request, or why the input stands for none (that is its
/// outcome, and it never reaches a store).
pub struct Job<M> {
    pub meta: M,
    pub request: Result<Request>,
}

/// One request's outcome, in input order, as the front end's `conclude` made it.
pub struct Finished<M, O> {
    /// The request's place in the input, from 0.
    pub index: usize,
    pub meta: M,
    pub outcome: O,
}

/// What a front end gives [`Executor::run`] to run on the workers: `prepare` makes what
/// the input brings a [`Job`], and `conclude` makes a request's outcome what the front end
/// keeps of it (a batch: the values it prints), so that neither weighs on the thread that
/// delivers the outcomes in order.
pub struct Front<'a, J, M, O> {
    pub prepare: &'a (dyn Fn(J) -> Job<M> + Sync),
    pub conclude: &'a (dyn Fn(Outcome<Done>) -> O + Sync),
}

/// Why [`Executor::run`] stopped taking requests before its input ended (besides the stop
/// flag, which the caller holds).
#[derive(Debug)]
pub enum Halt {
    /// `closed` said the front end's reader is gone, with `started` requests handed out.
    Closed { started: usize },
    /// The front end refused an outcome (`deliver` failed): its error.
    Refused(Error),
}

/// Runs requests on `stores` (one per worker), until `stop` is set or `closed` says the
/// reader of the outcomes is gone.
pub struct Executor<'a> {
    pub stores: &'a [Box<dyn Store + Sync>],
    pub stop: &'a AtomicBool,
    pub closed: &'a (dyn Fn() -> bool + Sync),
    /// Outcomes are delivered in input order (a batch prints them so), or each as soon as
    /// it is whole (a server: one client's answer never waits for another's).
    pub ordered: bool,
}

/// What the queue holds: a request as the input brought it, or one a worker whose
/// connection was lost handed back, made a [`Job`] already (`worker::hand_off`).
enum Taken<J, M> {
    Fresh(J),
    Again(Job<M>),
}

/// The queue's channel, each request with its place in the input.
type Queued<J, M> = (usize, Taken<J, M>);

/// How a worker takes its requests: the queue, the workers still taking, and whether the
/// requests waiting may still start.
struct Queue<'a, J, M> {
    rx: Mutex<Receiver<Queued<J, M>>>,
    /// The way back into the queue for a lost worker's requests, while any is in flight:
    /// the dispatcher takes it before it closes the queue (a sender left here would keep
    /// the workers waiting for more).
    again: Mutex<Option<Sender<Queued<J, M>>>>,
    working: AtomicUsize,
    more: &'a (dyn Fn() -> bool + Sync),
}

/// Whether every store of `stores` can run nothing more ([`crate::store::Units::lost`]:
/// each connection closed, a database restarted): a long-running front end (the server)
/// then opens them again, and [`Executor::run`] given this as `closed` stops for it.
pub fn all_lost(stores: &[Box<dyn Store + Sync>]) -> bool {
    !stores.is_empty() && stores.iter().all(|s| lost(&**s))
}

/// Whether `store` can run nothing more, as [`all_lost`] asks of each: a request that
/// failed on it may run again on a store opened anew (the server's readers).
pub fn lost(store: &(dyn Store + Sync)) -> bool {
    store.lost()
}

impl Executor<'_> {
    /// The single command: `request` alone on `store`, as a batch's worker runs each.
    pub fn one(store: &(dyn Store + Sync), request: &Request) -> Outcome<Done> {
        request.run(store)
    }

    /// Runs the requests `input` brings, each made a [`Job`] by `front.prepare` on the
    /// worker that runs it (its outcome made the front end's by `front.conclude` there), and
    /// hands each outcome to `deliver` in input order, every one that started,
    /// with whether the run has halted by then ([`Halt`]: the front end may pass it over
    /// then, as a batch does once its stdout is gone). Stops taking requests when `input`
    /// ends, at the stop flag, when `closed` says so, or at an outcome `deliver` refused
    /// (the first such halt is returned), once the requests in flight are done: each of
    /// them is whole.
    /// Tells the stores a batch runs on them ([`crate::store::Units::batch`]) for the time
    /// of the run.
    pub fn run<J: Send, M: Send, O: Send>(
        &self,
        input: &Input<J>,
        front: &Front<'_, J, M, O>,
        deliver: &mut dyn FnMut(Finished<M, O>, bool) -> Result<()>,
    ) -> Option<Halt> {
        for store in self.stores {
            store.batch(self.stores.len());
        }
        let halt = self.dispatch(input, front, deliver);
        if let Some(store) = self.stores.first() {
            store.batch_done();
        }
        halt
    }

    /// Hands what `input` reads to one worker per store, in input order and at most a
    /// group's worth in flight per worker, and delivers the outcomes (in input order if
    /// `ordered`). It waits on the input and the outcomes at once: a request is handed out,
    /// and an outcome delivered, as soon as it comes.
    fn dispatch<J: Send, M: Send, O: Send>(
        &self,
        input: &Input<J>,
        front: &Front<'_, J, M, O>,
        deliver: &mut dyn FnMut(Finished<M, O>, bool) -> Result<()>,
    ) -> Option<Halt> {
        // A worker's group is made of the requests already handed out when it is ready.
        let most: usize = self.stores.iter().map(|s| s.group_size().max(1)).sum();
        let (work_tx, work_rx) = std::sync::mpsc::channel::<Queued<J, M>>();
        // A group takes no more after a signal, or once the reader is gone.
        let more = || !self.stop.load(Ordering::Relaxed) && !(self.closed)();
        let queue = Queue {
            rx: Mutex::new(work_rx),
            again: Mutex::new(Some(work_tx.clone())),
            working: AtomicUsize::new(self.stores.len()),
            more: &more,
        };
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<Finished<M, O>>();
        let mut order = Order {
            ordered: self.ordered,
            pending: BTreeMap::new(),
            delivered: 0,
            halt: None,
        };
        std::thread::scope(|scope| {
            for store in self.stores {
                let (queue, done_tx) = (&queue, done_tx.clone());
                scope.spawn(move || worker::work(&**store, queue, front, &done_tx));
            }
            drop(done_tx);
            let mut sent = 0;
            let mut reading = true;
            loop {
                order.deliver_ready(deliver);
                if order.halt.is_some() || self.stop.load(Ordering::Relaxed) {
                    reading = false;
                }
                let in_flight = sent - order.delivered - order.pending.len();
                if !reading && in_flight == 0 {
                    break;
                }
                if !reading || in_flight >= most {
                    if let Ok(f) = done_rx.recv_timeout(TICK) {
                        order.take(f);
                    }
                    continue;
                }
                select! {
                    recv(input) -> job => match job {
                        // No request starts once the reader is gone (one in flight finishes).
                        Ok(_) if (self.closed)() => {
                            order.halt.get_or_insert(Halt::Closed { started: sent });
                            reading = false;
                        }
                        Ok(job) => {
                            if work_tx.send((sent, Taken::Fresh(job))).is_ok() {
                                sent += 1;
                            }
                        }
                        Err(_) => reading = false,
                    },
                    recv(done_rx) -> f => {
                        if let Ok(f) = f {
                            order.take(f);
                        }
                    }
                    default(TICK) => {}
                }
            }
            // Nothing is in flight: no worker hands anything back from here on.
            drop(
                (queue.again.lock())
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take(),
            );
            drop(work_tx);
        });
        order.halt
    }
}

/// The outcomes the dispatcher holds until they may be delivered, and what it delivered.
struct Order<M, O> {
    ordered: bool,
    /// Outcomes taken and not yet delivered (when `ordered`, those waiting for an earlier
    /// one).
    pending: BTreeMap<usize, Finished<M, O>>,
    /// How many outcomes were delivered.
    delivered: usize,
    /// The first halt: a refused outcome, or the reader gone.
    halt: Option<Halt>,
}

impl<M, O> Order<M, O> {
    /// Takes an outcome a worker sent.
    fn take(&mut self, f: Finished<M, O>) {
        self.pending.insert(f.index, f);
    }

    /// Delivers what may be: the outcomes next in input order, or every one held.
    fn deliver_ready(&mut self, deliver: &mut dyn FnMut(Finished<M, O>, bool) -> Result<()>) {
        loop {
            let next = if self.ordered {
                self.pending.remove(&self.delivered)
            } else {
                self.pending.pop_first().map(|(_, f)| f)
            };
            let Some(f) = next else { return };
            self.delivered += 1;
            let refused = deliver(f, self.halt.is_some()).err();
            if self.halt.is_none() {
                self.halt = refused.map(Halt::Refused);
            }
        }
    }
}
