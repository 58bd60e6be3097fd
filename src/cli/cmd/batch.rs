//! `ipamctl allocate -f FILE` and `ipamctl release -f FILE`: many requests in one process.
//!
//! Each request is read with serde into the engine's input and made a typed request by the
//! constructor the single command uses (`batch_request.rs`, [`crate::engine::request`]),
//! then run by the engine's executor ([`crate::engine::executor`]: its workers, groups,
//! re-runs, hand-off and stop flag) as the single command's is, and nothing else: every
//! request meets the same validation, locks, arbiters and unit of work as one
//! `ipamctl allocate` would. Its warnings and notes come back as values, printed once per
//! request, in input order (a group run again one by one prints only the second run's).
//! What one process saves is the start, the connection, and what the store keeps between
//! requests. The batch itself is the input's reader, the executor and an ordered printer.
//!
//! A request is a JSON object on a line of its own, or an item of a YAML list
//! (`batch_read.rs`). A request that is not valid is that request's failure, exit 2, named
//! by its line; the requests after it still run, as after any other failed request. Each
//! result is printed as it comes (`batch_print.rs`), and nothing of it is kept.

use std::io::Write;
use std::sync::atomic::Ordering;

use super::batch_print::{Outcome, Printer};
use super::batch_read::{Read, given_owner, requests};
use super::batch_request::{Done, Kind};
use crate::cli::output;
use crate::cli::{AllocateArgs, GlobalArgs, ReleaseArgs};
use crate::engine::executor::{self, Executor, Finished, Front, Halt, Job};
use crate::engine::request::{self, Defaults};
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
    each(
        stores,
        g,
        file,
        (Kind::Allocate, &allocate_defaults(g, args)),
        out,
    )
}

/// What `allocate -f`'s command line gives the requests that leave it out.
pub(crate) fn allocate_defaults<'a>(g: &'a GlobalArgs, args: &AllocateArgs) -> Defaults<'a> {
    Defaults {
        namespace: g.namespace.as_deref(),
        dry_run: args.dry_run,
        ignore_not_found: false,
    }
}

/// What `release -f`'s command line gives the requests that leave it out.
pub(crate) fn release_defaults<'a>(g: &'a GlobalArgs, args: &ReleaseArgs) -> Defaults<'a> {
    Defaults {
        namespace: g.namespace.as_deref(),
        dry_run: args.dry_run,
        ignore_not_found: args.ignore_not_found,
    }
}

/// `release -f FILE`.
pub fn release(
    stores: &[Box<dyn Store + Sync>],
    g: &GlobalArgs,
    args: &ReleaseArgs,
    file: &str,
    out: &mut dyn Write,
) -> Result<i32> {
    each(
        stores,
        g,
        file,
        (Kind::Release, &release_defaults(g, args)),
        out,
    )
}

/// Which requests a batch holds, and what its command line gives them.
type Context<'a> = (Kind, &'a Defaults<'a>);

/// What the printer keeps of a request besides its outcome: its line and its `owner`.
type Meta = (Option<usize>, Option<String>);

/// Reads the requests of `file`, runs them with the engine's executor on `stores` (one
/// worker each: [`Executor::run`]) and prints each result as it comes, in input order
/// ([`Printer`]; the table a block of rows at a time). SIGINT or SIGTERM stop the batch
/// between two requests (exit 130, saying how many ran), also while it waits for its next
/// line. A stdout closed by its reader stops it too (exit 1): a result nobody reads must not
/// be followed by requests run unseen, nor by exit 0.
///
/// What the batch holds at any time is bounded whatever the number of requests: one read
/// ahead, what the executor holds, and one block of the table.
fn each(
    stores: &[Box<dyn Store + Sync>],
    g: &GlobalArgs,
    file: &str,
    context: Context<'_>,
    out: &mut dyn Write,
) -> Result<i32> {
    let requests = requests(file)?;
    let stop = super::stop_on_signal()?;
    // The requests are read on a thread of their own, so that a signal is seen while a pipe
    // keeps the batch waiting for its next line (a read is restarted after the handler).
    // One read ahead at most: a pipe still feeds the batch as it goes.
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || requests.feed(&mut |request| tx.send(request).is_ok()));
    let mut printer = Printer::new(g);
    let executor = Executor {
        stores,
        stop: &stop,
        closed: &output::reader_gone,
        ordered: true,
    };
    let prepare = |read: Read| job(read, context);
    // The printed values are made on the worker, as the request's result comes.
    let conclude = |o: request::Outcome<executor::Done>| request::Outcome {
        result: o.result.map(Done::from),
        warnings: o.warnings,
        notes: o.notes,
    };
    let front = Front {
        prepare: &prepare,
        conclude: &conclude,
    };
    let mut deliver = |f: Finished<Meta, request::Outcome<Done>>, halted: bool| {
        super::tell(&f.outcome);
        if halted {
            // Stdout is gone: what is left is passed over, its warnings told.
            return Ok(());
        }
        let ((line, owner), result) = (f.meta, f.outcome.result);
        let o = Outcome {
            index: f.index,
            line,
            owner,
            result,
        };
        printer
            .print(out, &o)
            .map_err(|e| unread(e, printer.done()))
    };
    let halt = executor.run(&rx, &front, &mut deliver);
    match halt {
        Some(Halt::Refused(e)) => return Err(e),
        Some(Halt::Closed { started }) => return Err(unread(output::closed(), started)),
        None => {}
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

/// A line read as the executor takes it: the typed request (or why the line is none), and
/// its line and `owner` as given, for the printer.
fn job(read: Read, (kind, defaults): Context<'_>) -> Job<Meta> {
    let (line, request) = read;
    let owner = given_owner(&request);
    Job {
        meta: (line, owner),
        request: request.and_then(|r| kind.request(r, defaults)),
    }
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
