//! The threads that own the store connections, and the one bridge between them and the
//! async edge.
//!
//! Claims and releases go to the engine's executor ([`crate::engine::executor::Executor::run`]),
//! which runs for as long as the server does on stores it opened for its workers: the
//! batch's machinery (groups of one transaction on a database, the file store's watch of
//! the allocation directories, the hand-off from a lost connection) serves every request.
//! Queries go to a few reader threads, each with its own store. A request's answer comes
//! back on a oneshot channel the handler awaits; nothing on a runtime thread blocks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::engine::executor::{Done, Executor, Front, Halt, Job, Request};
use crate::engine::request::Outcome;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::registry::{Config, Location};

/// How many reader threads (each one store connection) answer the queries.
const READERS: usize = 2;

/// How long a server that failed to start waits for the threads it did start.
const STOP_AFTER_FAILED_START: Duration = Duration::from_secs(5);

/// A query as a reader runs it: given where to run and whether this is its last try, it
/// answers its client and says so, or (on a connection it found lost) answers nothing and
/// asks to run again on a store opened anew.
type Read = Box<dyn FnMut(On<'_>, bool) -> Answered + Send>;

/// Where a [`Read`] runs: on the reader's store, or nowhere, the store lost and opening it
/// again refused (the client is told why: the database is down, say).
enum On<'a> {
    Store(&'a (dyn Store + Sync)),
    Unopened(Error),
}

/// Whether a [`Read`] answered its client.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answered {
    Yes,
    RunAgain,
}

/// A claim or a release on its way to the executor, and where its outcome goes.
type Claim = (Result<Request>, oneshot::Sender<Outcome<Done>>);

/// A request handed to the executor.
pub struct Pending(Option<oneshot::Receiver<Outcome<Done>>>);

impl Pending {
    /// The request's outcome once it is whole (a group's once it committed).
    pub async fn wait(self) -> Outcome<Done> {
        let outcome = match self.0 {
            Some(rx) => rx.await.ok(),
            None => None,
        };
        // Never ran: the executor stopped before it took the request.
        outcome.unwrap_or_else(|| Outcome {
            result: Err(stopping()),
            warnings: Default::default(),
            notes: Vec::new(),
        })
    }
}

/// The executor's thread and the readers.
pub struct Work {
    claims: Mutex<Option<crossbeam_channel::Sender<Claim>>>,
    reads: Mutex<Option<Sender<Read>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Work {
    /// Opens the stores at `at` (`workers` connections for the executor on a database) on
    /// the threads that own them; fails as opening the store fails (exit 3 for a state
    /// directory that is not one), before the server listens.
    pub fn start(at: &Location, workers: usize) -> Result<Work> {
        let stop = Arc::new(AtomicBool::new(false));
        let (claims_tx, claims_rx) = crossbeam_channel::unbounded::<Claim>();
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<()>>(READERS + 1);
        let mut threads = Vec::new();
        {
            let (at, stop, ready) = (at.clone(), Arc::clone(&stop), ready_tx.clone());
            threads.push(spawn("ipamctl-executor", move || {
                executor(&at, workers.max(1), &claims_rx, &stop, &ready);
            })?);
        }
        let (reads_tx, reads_rx) = std::sync::mpsc::channel::<Read>();
        let reads_rx = Arc::new(Mutex::new(reads_rx));
        for _ in 0..READERS {
            let (at, rx, ready) = (at.clone(), Arc::clone(&reads_rx), ready_tx.clone());
            threads.push(spawn("ipamctl-reader", move || reader(&at, &rx, &ready))?);
        }
        drop(ready_tx);
        let work = Work {
            claims: Mutex::new(Some(claims_tx)),
            reads: Mutex::new(Some(reads_tx)),
            stop,
            threads,
        };
        for _ in 0..=READERS {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    work.stop(STOP_AFTER_FAILED_START);
                    return Err(e);
                }
                Err(_) => {
                    work.stop(STOP_AFTER_FAILED_START);
                    return Err(Error::io(
                        "ipamctl serve",
                        std::io::Error::other("a worker died"),
                    ));
                }
            }
        }
        Ok(work)
    }

    /// Hands `request` to the executor at once (requests run in the order they are
    /// handed in); its outcome comes with [`Pending::wait`].
    pub fn submit(&self, request: Result<Request>) -> Pending {
        let (tx, rx) = oneshot::channel();
        let sent = lock(&self.claims)
            .as_ref()
            .is_some_and(|claims| claims.send((request, tx)).is_ok());
        Pending(sent.then_some(rx))
    }

    /// Runs `read` on a reader's store. A run that failed on a connection the database
    /// dropped (a restart, `pg_terminate_backend`: the reader learns of it only by using
    /// it) runs once more on a connection opened anew, unless its outcome is unknown: the
    /// transaction it failed in was rolled back as the connection went, and what an
    /// operation of several units (`createVpc`) committed before stands, so the second run
    /// is what the client's own retry would be (a create answers `UNCHANGED` for what
    /// stands, a delete finishes what is left), without the error between.
    pub async fn read<T: Send + 'static>(
        &self,
        mut read: impl FnMut(&(dyn Store + Sync)) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        let mut tx = Some(tx);
        let job: Read = Box::new(move |on, last| {
            let result = match on {
                On::Store(store) => {
                    let result = read(store);
                    let lost = matches!(&result, Err(e) if !matches!(e, Error::OutcomeUnknown { .. }))
                        && crate::engine::executor::lost(store);
                    if lost && !last {
                        return Answered::RunAgain;
                    }
                    result
                }
                On::Unopened(e) => Err(e),
            };
            if let Some(tx) = tx.take() {
                let _ = tx.send(result);
            }
            Answered::Yes
        });
        let sent = lock(&self.reads)
            .as_ref()
            .is_some_and(|reads| reads.send(job).is_ok());
        if !sent {
            return Err(stopping());
        }
        rx.await.unwrap_or_else(|_| Err(stopping()))
    }

    /// Stops the executor (the requests it holds finish, each whole) and the readers, and
    /// waits for their threads, at most `within` (a store that hangs does not hold the
    /// process: what it was doing is then as a killed command's).
    pub fn stop(mut self, within: Duration) {
        self.stop.store(true, Ordering::Relaxed);
        lock(&self.claims).take();
        lock(&self.reads).take();
        let threads: Vec<_> = self.threads.drain(..).collect();
        let (done, joined) = std::sync::mpsc::channel();
        let joiner = std::thread::spawn(move || {
            for thread in threads {
                let _ = thread.join();
            }
            let _ = done.send(());
        });
        if joined.recv_timeout(within).is_ok() {
            let _ = joiner.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn stopping() -> Error {
    Error::OutcomeUnknown {
        message: "the request did not run (the server is stopping, or opening its lost database connections again): ask again".into(),
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error::io("ipamctl serve", e))
}

/// How the server opens its stores: warnings noticed on the way go to stderr.
fn config(workers: usize) -> Config<'static> {
    Config {
        workers,
        warn: &|w| super::log::warning(w),
        long_lived: true,
    }
}

/// How long the executor and the readers wait before they open a lost database again.
const REOPEN: Duration = Duration::from_secs(1);

/// The executor's thread: opens the workers' stores and runs the claims that come until
/// the channel closes or `stop` is set. When every connection is lost (a database
/// restarted), it opens them again and goes on: the request that found them all lost did
/// not run (its client is told so), the ones after it wait.
fn executor(
    at: &Location,
    workers: usize,
    claims: &crossbeam_channel::Receiver<Claim>,
    stop: &AtomicBool,
    ready: &SyncSender<Result<()>>,
) {
    let mut stores = match crate::store::registry::open_workers(at, &config(workers)) {
        Ok(stores) => stores,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let prepare = |(request, reply): Claim| Job {
        meta: reply,
        request,
    };
    let conclude = |outcome: Outcome<Done>| outcome;
    let front = Front {
        prepare: &prepare,
        conclude: &conclude,
    };
    loop {
        let all_lost = || crate::engine::executor::all_lost(&stores);
        let executor = Executor {
            stores: &stores,
            stop,
            closed: &all_lost,
            ordered: false,
        };
        let halt = executor.run(claims, &front, &mut |finished, _| {
            // A client gone before its answer: the claim stands, as a killed command's would.
            let _ = finished.meta.send(finished.outcome);
            Ok(())
        });
        if !matches!(halt, Some(Halt::Closed { .. })) {
            return;
        }
        super::log::warning("every connection to the database was lost; opening them again");
        stores = loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match crate::store::registry::open_workers(at, &config(workers)) {
                Ok(stores) => break stores,
                Err(e) => {
                    super::log::warning(&format!("{e} (trying again)"));
                    std::thread::sleep(REOPEN);
                }
            }
        };
    }
}

/// A reader's thread: opens its store and runs the queries that come; a store whose
/// connection is lost is opened again before the next query.
fn reader(at: &Location, reads: &Mutex<Receiver<Read>>, ready: &SyncSender<Result<()>>) {
    let mut store = match crate::store::registry::open(at, &config(1)) {
        Ok(store) => store,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    // Ok once the store answers again or was never lost; the refusal of opening it again.
    let reopen = |store: &mut Box<dyn Store + Sync>| -> Result<()> {
        if crate::engine::executor::all_lost(std::slice::from_ref(store)) {
            *store = crate::store::registry::open(at, &config(1))?;
        }
        Ok(())
    };
    loop {
        let mut read = match lock(reads).recv() {
            Ok(read) => read,
            Err(_) => return,
        };
        if read(On::Store(&*store), false) == Answered::RunAgain {
            match reopen(&mut store) {
                Ok(()) => read(On::Store(&*store), true),
                Err(e) => read(On::Unopened(e), true),
            };
            // Opened again or just tried (a database that stays down is not waited for
            // twice, `connect_timeout` each, in one request): the next request finds out.
            continue;
        }
        let _ = reopen(&mut store);
    }
}
