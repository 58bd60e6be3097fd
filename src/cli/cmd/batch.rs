//! `ipamctl allocate -f FILE` and `ipamctl release -f FILE`: many requests in one process.
//!
//! Each request is turned into the command line it stands for and parsed by the very clap
//! types of `allocate` and `release`, then run by their `decide` (the code the single
//! command runs, and nothing else): every request meets the same validation, locks,
//! arbiters and unit of work as one `ipamctl allocate` would. What one process saves is
//! the start, the connection, and what the store keeps between requests.
//!
//! A request is a JSON object on a line of its own, or an item of a YAML list. A field maps
//! to the flag of the same name ([`ALLOCATE`], [`RELEASE`]): a new flag is one line there.
//! A line that is not a valid request (bad JSON, an unknown field, a value of the wrong
//! type, a flag value clap refuses) is that request's failure, exit 2, named by its line;
//! the requests after it still run, as after any other failed request.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use clap::{Args, FromArgMatches};
use serde::Serialize;
use serde_json::Value;

use super::batch_read::{Read, requests};
use crate::cli::output;
use crate::cli::{AllocateArgs, GlobalArgs, OutputFormat, ReleaseArgs};
use crate::error::{Error, Result, exit};
use crate::store::Store;
use crate::yaml;

/// How a request's field becomes part of a command line.
#[derive(Clone, Copy)]
enum Flag {
    /// A positional argument (several for a list), in the table's order.
    Positional,
    /// `--name VALUE`, once per item of a list.
    Value(&'static str),
    /// `--name` when the field is `true`.
    Switch(&'static str),
}

/// The fields of an `allocate` request and their flags.
const ALLOCATE: &[(&str, Flag)] = &[
    ("pool", Flag::Positional),
    ("pools", Flag::Positional),
    ("namespace", Flag::Value("--namespace")),
    ("owner", Flag::Value("--owner")),
    ("uid", Flag::Value("--uid")),
    ("subnet", Flag::Value("--subnet")),
    ("subnets", Flag::Value("--subnet")),
    ("address", Flag::Value("--address")),
    ("within", Flag::Value("--within")),
    ("reserved", Flag::Value("--reserved")),
    ("zone", Flag::Value("--zone")),
    ("mac", Flag::Value("--mac")),
    ("prefixLength", Flag::Value("--prefix-length")),
    ("prefix", Flag::Value("--prefix")),
    ("dryRun", Flag::Switch("--dry-run")),
];

/// The fields of a `release` request and their flags.
const RELEASE: &[(&str, Flag)] = &[
    ("pool", Flag::Positional),
    ("address", Flag::Positional),
    ("namespace", Flag::Value("--namespace")),
    ("owner", Flag::Value("--owner")),
    ("uid", Flag::Value("--uid")),
    ("kind", Flag::Value("--kind")),
    ("force", Flag::Switch("--force")),
    ("ignoreNotFound", Flag::Switch("--ignore-not-found")),
    ("dryRun", Flag::Switch("--dry-run")),
];

/// `allocate -f FILE` on `stores` (one per connection the batch uses; one for a state
/// directory): returns the batch's exit code (see [`exit_code`]).
pub fn allocate(
    stores: &[Box<dyn Store + Sync>],
    g: &GlobalArgs,
    args: &AllocateArgs,
    file: &str,
    out: &mut dyn Write,
) -> Result<i32> {
    let inherited = Inherited {
        namespace: g.namespace.as_deref(),
        switches: &[],
        dry_run: args.dry_run,
    };
    let command = || {
        let command = clap::Command::new("allocate").no_binary_name(true);
        GlobalArgs::augment_args(AllocateArgs::augment_args(command))
    };
    let run = |store: &(dyn Store + Sync), command: &mut clap::Command, argv, g: &GlobalArgs| {
        let parsed = parse::<AllocateArgs>(command, argv)?;
        let g = GlobalArgs {
            namespace: parsed.1,
            ..g.clone()
        };
        let got = super::allocate::decide(store, &g, &parsed.0)?;
        Ok(Done::allocated(got))
    };
    each(stores, g, file, ALLOCATE, &inherited, &command, &run, out)
}

/// `release -f FILE`.
pub fn release(
    stores: &[Box<dyn Store + Sync>],
    g: &GlobalArgs,
    args: &ReleaseArgs,
    file: &str,
    out: &mut dyn Write,
) -> Result<i32> {
    let switches: &[&str] = if args.ignore_not_found {
        &["ignoreNotFound"]
    } else {
        &[]
    };
    let inherited = Inherited {
        namespace: g.namespace.as_deref(),
        switches,
        dry_run: args.dry_run,
    };
    let command = || {
        let command = clap::Command::new("release").no_binary_name(true);
        GlobalArgs::augment_args(ReleaseArgs::augment_args(command))
    };
    let run = |store: &(dyn Store + Sync), command: &mut clap::Command, argv, g: &GlobalArgs| {
        let (parsed, namespace) = parse::<ReleaseArgs>(command, argv)?;
        let g = GlobalArgs {
            namespace,
            ..g.clone()
        };
        let freed = super::release::decide(store, &g, &parsed)?;
        Ok(Done::released(freed, parsed.dry_run))
    };
    each(stores, g, file, RELEASE, &inherited, &command, &run, out)
}

/// How one request runs: on a store, with the command's clap types (one per worker), given
/// its command line and the batch's global options.
type Run<'a> = dyn Fn(&(dyn Store + Sync), &mut clap::Command, Vec<String>, &GlobalArgs) -> Result<Done>
    + Sync
    + 'a;

/// What the batch's own command line gives the requests that do not say otherwise.
struct Inherited<'a> {
    namespace: Option<&'a str>,
    /// Switch fields the command line sets: a request that leaves one out gets it.
    switches: &'a [&'static str],
    /// `--dry-run` on the command line: every request is a dry run, whatever it says (a
    /// preview that a request's `"dryRun": false` turned into a real release would lose
    /// addresses).
    dry_run: bool,
}

/// Parses one request's command line with the command's clap types; the namespace apart,
/// as it is a global option.
fn parse<T: FromArgMatches>(
    command: &mut clap::Command,
    argv: Vec<String>,
) -> Result<(T, Option<String>)> {
    let matches = command
        .try_get_matches_from_mut(argv)
        .map_err(|e| Error::usage(clap_message(&e)))?;
    let args = T::from_arg_matches(&matches).map_err(|e| Error::usage(clap_message(&e)))?;
    let namespace = matches.get_one::<String>("namespace").cloned();
    Ok((args, namespace))
}

/// clap's error as one line, without its `error: ` and usage: its first paragraph, the
/// lines that name what is missing (`the following required arguments were not provided:`
/// and the next line) joined by spaces.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let paragraph: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let joined = paragraph.join(" ");
    joined.strip_prefix("error: ").unwrap_or(&joined).to_owned()
}

/// What one request did.
pub enum Done {
    /// `allocate`: the addresses (one per pool) or the prefix, and what was done.
    Held(Vec<String>, &'static str, output::Action),
    /// `release`: what was released (nothing: `unchanged`).
    Freed(Vec<String>, &'static str, output::Action),
}

impl Done {
    fn allocated(got: super::allocate::Got) -> Done {
        use super::allocate::Got;
        use super::prefix::Claimed;
        use crate::cli::output::Action;
        match got {
            Got::Addresses(allocated) => {
                let actions: Vec<Action> = allocated.iter().map(super::allocate::action).collect();
                let action = [Action::Created, Action::WouldCreate]
                    .into_iter()
                    .find(|a| actions.contains(a))
                    .unwrap_or(Action::Existing);
                let key = if allocated.len() == 1 {
                    "address"
                } else {
                    "addresses"
                };
                let addresses = allocated
                    .iter()
                    .map(|a| a.manifest().spec.address.to_string())
                    .collect();
                Done::Held(addresses, key, action)
            }
            Got::Prefix(Claimed::Held(m, created)) => {
                let action = if created {
                    Action::Created
                } else {
                    Action::Existing
                };
                Done::Held(vec![m.spec.prefix.to_string()], "prefix", action)
            }
            Got::Prefix(Claimed::Would(p)) => {
                Done::Held(vec![p.to_string()], "prefix", Action::WouldCreate)
            }
        }
    }

    fn released(freed: super::release::Freed, dry_run: bool) -> Done {
        use crate::cli::output::Action;
        let mut what: Vec<String> = freed
            .addresses
            .iter()
            .map(|m| m.spec.address.to_string())
            .collect();
        what.extend(freed.prefixes.iter().map(|m| m.spec.prefix.to_string()));
        let key = match (freed.addresses.len(), freed.prefixes.len()) {
            (1, 0) => "address",
            (0, 1) => "prefix",
            _ => "addresses",
        };
        let action = if what.is_empty() {
            Action::Unchanged
        } else {
            Action::Released.planned(dry_run)
        };
        Done::Freed(what, key, action)
    }
}

/// One request's result, in input order.
pub struct Outcome {
    /// The request's place in the input, from 0.
    pub index: usize,
    /// The line it starts on, from 1 (unknown for a YAML list not written one item a line).
    pub line: Option<usize>,
    /// The request's `owner` field as given, if any.
    pub owner: Option<String>,
    /// What it did, or why it failed.
    pub result: Result<Done>,
}

/// The exit code of a batch: 0 when every request succeeded; else the code the failed
/// requests share, or 1 ([`exit::FAILURE`]) when theirs differ.
pub fn exit_code(outcomes: &[Outcome]) -> i32 {
    let mut codes = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(Error::exit_code));
    match codes.next() {
        None => exit::OK,
        Some(first) if codes.all(|c| c == first) => first,
        Some(_) => exit::FAILURE,
    }
}

/// Reads the requests of `file` and runs each through `run`, printing each result as it
/// comes with `-o json` and `-o name` (the table and YAML once all are done, by
/// [`render`]). SIGINT or SIGTERM stop the batch between two requests (exit 130, saying how
/// many ran), also while it waits for its next line. A stdout closed by its reader stops it
/// too (exit 1): a result nobody reads must not be followed by requests run unseen, nor by
/// exit 0.
///
/// One worker thread per store runs the requests: a state directory's batch has one, so its
/// requests run one after another in input order; a database's has one per connection
/// (`--jobs`), each request still its own unit of work on its worker's connection, so that
/// the commits of requests in flight group; on one connection, the requests run in groups of
/// one transaction ([`crate::store::Units::grouped`]). Requests are handed out in input
/// order, at most a group's worth in flight per worker, and the results are printed in
/// input order as the ones before them are done (a group's once it committed). Two requests of one batch race exactly as two processes do: the store's
/// arbiter decides, as for any claims.
#[allow(clippy::too_many_arguments)]
fn each(
    stores: &[Box<dyn Store + Sync>],
    g: &GlobalArgs,
    file: &str,
    fields: &[(&str, Flag)],
    inherited: &Inherited<'_>,
    command: &(dyn Fn() -> clap::Command + Sync),
    run: &Run<'_>,
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
    std::thread::spawn(move || {
        for request in requests {
            if tx.send(request).is_err() {
                return;
            }
        }
    });
    let (outcomes, failed_to_print) =
        dispatch(stores, g, fields, inherited, command, run, out, &rx, &stop);
    if let Some(store) = stores.first() {
        store.batch_done();
    }
    if let Some(e) = failed_to_print {
        return Err(e);
    }
    if stop.load(Ordering::Relaxed) {
        // The table (or YAML) of the requests that ran: what they got is not lost.
        show(g, &outcomes, out)?;
        let failed = outcomes.iter().filter(|o| o.result.is_err()).count();
        let index = outcomes.len();
        return Err(Error::Interrupted {
            message: format!(
                "stopped after {index} of the batch's requests ({failed} failed); each of them is whole"
            ),
            hint: "run the same batch again: a request that was done answers `existing`".into(),
        });
    }
    render(g, &outcomes, out)
}

/// Hands the requests `rx` reads to one worker per store, in input order and at most one in
/// flight per worker, and prints their results in input order as the ones before them are
/// done. Stops reading at a signal or at a result it could not print (returned), once the
/// requests in flight are done: each of them is whole.
#[allow(clippy::too_many_arguments)]
fn dispatch(
    stores: &[Box<dyn Store + Sync>],
    g: &GlobalArgs,
    fields: &[(&str, Flag)],
    inherited: &Inherited<'_>,
    command: &(dyn Fn() -> clap::Command + Sync),
    run: &Run<'_>,
    out: &mut dyn Write,
    rx: &Receiver<Read>,
    stop: &AtomicBool,
) -> (Vec<Outcome>, Option<Error>) {
    let tick = Duration::from_millis(100);
    // A worker's group is made of the requests already handed out when it is ready for more.
    let most: usize = stores.iter().map(|s| s.group_size().max(1)).sum();
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut failed_to_print = None;
    let (work_tx, work_rx) = std::sync::mpsc::channel::<(usize, Read)>();
    let queue = (Mutex::new(work_rx), AtomicUsize::new(stores.len()), stop);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Outcome>();
    std::thread::scope(|scope| {
        for store in stores {
            let (queue, done_tx) = (&queue, done_tx.clone());
            let mut command = command();
            let context = (g, fields, inherited, run);
            scope.spawn(move || work(&**store, &mut command, context, queue, &done_tx));
        }
        drop(done_tx);
        let mut pending = BTreeMap::new();
        let mut sent = 0;
        let mut reading = true;
        loop {
            // Print what is done, in input order.
            while let Some(o) = pending.remove(&outcomes.len()) {
                if failed_to_print.is_none() {
                    failed_to_print = stream(out, g.output, &o)
                        .map_err(|e| unread(e, outcomes.len() + 1))
                        .err();
                }
                outcomes.push(o);
            }
            if failed_to_print.is_some() || stop.load(Ordering::Relaxed) {
                reading = false;
            }
            let in_flight = sent - outcomes.len() - pending.len();
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
    (outcomes, failed_to_print)
}

/// A request as a worker holds it: its place, and the command line it stands for (or why
/// it stands for none: that is its result, and it never reaches the store).
struct Job {
    index: usize,
    line: Option<usize>,
    owner: Option<String>,
    argv: Result<Vec<String>>,
}

/// One worker: runs the requests it is handed on its store until the queue closes, a group
/// of them at a time where the store groups ([`crate::store::Units::grouped`]): the
/// requests already waiting when one is done join its group, and the group's results are
/// sent once it committed. A worker whose store is lost ([`crate::store::Units::lost`]: its
/// connection closed, say by `pg_terminate_backend`) stops taking requests, unless it is
/// the last one `working` counts: the others run the rest, instead of this one failing
/// each at once (one connection of four lost used to fail 1,390 of 3,000 requests). The
/// last one goes on, so that every request still gets its result.
#[allow(clippy::too_many_arguments)]
fn work(
    store: &(dyn Store + Sync),
    command: &mut clap::Command,
    (g, fields, inherited, run): (&GlobalArgs, &[(&str, Flag)], &Inherited<'_>, &Run<'_>),
    (queue, working, stop): &(Mutex<Receiver<(usize, Read)>>, AtomicUsize, &AtomicBool),
    done: &Sender<Outcome>,
) {
    let size = store.group_size();
    // A group takes no more after a signal, or once stdout's reader is gone (`dispatch`).
    let more = || !stop.load(Ordering::Relaxed) && !output::reader_gone();
    let next = |wait: bool| (wait || more()).then(|| take(queue, wait, fields, inherited))?;
    let mut one = |job: &Job| match &job.argv {
        Ok(argv) => Some(run(store, command, argv.clone(), g)),
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
        let results: Vec<Option<Result<Done>>> = match grouped {
            Ok(()) => results,
            // Each request that succeeded in the group may or may not stand now.
            Err(Error::OutcomeUnknown { message }) => results
                .into_iter()
                .map(|r| match r {
                    Some(Ok(_)) => Some(Err(Error::OutcomeUnknown {
                        message: message.clone(),
                    })),
                    r => r,
                })
                .collect(),
            // Nothing of the group stands: each request runs again on its own.
            Err(_) => jobs.iter().map(&mut one).collect(),
        };
        for (job, result) in jobs.into_iter().zip(results) {
            let outcome = Outcome {
                index: job.index,
                line: job.line,
                owner: job.owner,
                result: match (job.argv, result) {
                    (Ok(_), Some(result)) => result,
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => unreachable!("a request with a command line ran"),
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
    fields: &[(&str, Flag)],
    inherited: &Inherited<'_>,
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
    let argv = request.and_then(|r| argv(&r, fields, inherited));
    Some(Job {
        index,
        line,
        owner,
        argv,
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

/// The command line `request` stands for: each field as its flag, the batch's namespace and
/// switches where the request sets none.
fn argv(
    request: &Value,
    fields: &[(&str, Flag)],
    inherited: &Inherited<'_>,
) -> Result<Vec<String>> {
    let Some(object) = request.as_object() else {
        return Err(Error::usage("a request is an object of fields"));
    };
    if let Some(unknown) = object.keys().find(|k| !fields.iter().any(|(f, _)| f == k)) {
        let known: Vec<&str> = fields.iter().map(|(f, _)| *f).collect();
        return Err(Error::usage(format!(
            "unknown field `{unknown}`; a request has {}",
            known.join(", ")
        )));
    }
    // Two fields for one flag, a single value and a list: a request gives one of them, or
    // what it asks for is a guess (`pool` and `pools` together would claim in both).
    let given = |f: &str| object.get(f).is_some_and(|v| !v.is_null());
    for (one, many) in [("pool", "pools"), ("subnet", "subnets")] {
        if given(one) && given(many) {
            return Err(Error::usage(format!(
                "`{one}` and `{many}` are one field: give `{one}` (a name) or `{many}` (a list)"
            )));
        }
    }
    let (mut flags, mut positional) = (Vec::new(), Vec::new());
    for &(name, flag) in fields {
        let value = object.get(name);
        match (flag, value) {
            (Flag::Switch(s), None | Some(Value::Null | Value::Bool(_)))
                if name == "dryRun" && inherited.dry_run =>
            {
                flags.push(s.into());
            }
            (Flag::Switch(s), None) if inherited.switches.contains(&name) => flags.push(s.into()),
            (Flag::Value("--namespace"), None) => {
                if let Some(ns) = inherited.namespace {
                    flags.push(format!("--namespace={ns}"));
                }
            }
            (_, None | Some(Value::Null)) => {}
            (Flag::Switch(s), Some(Value::Bool(on))) => {
                if *on {
                    flags.push(s.into());
                }
            }
            (Flag::Switch(_), Some(_)) => {
                return Err(Error::usage(format!("`{name}` is true or false")));
            }
            (Flag::Positional, Some(v)) => positional.extend(scalars(name, v)?),
            (Flag::Value(f), Some(v)) => {
                flags.extend(scalars(name, v)?.into_iter().map(|s| format!("{f}={s}")));
            }
        }
    }
    // After `--`, a pool named like a flag is still a pool.
    flags.push("--".into());
    flags.extend(positional);
    Ok(flags)
}

/// A field's value as flag values: a string or number, or a list of them.
fn scalars(name: &str, value: &Value) -> Result<Vec<String>> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(Error::usage(format!(
            "`{name}` is a string or a list of strings"
        ))),
    };
    match value {
        // No value at all: never the same as leaving the field out (`"address": []` is not
        // "any address").
        Value::Array(items) if items.is_empty() => Err(Error::usage(format!(
            "`{name}` is an empty list; leave the field out, or give it a value"
        ))),
        Value::Array(items) => items.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

/// One result as JSON (and YAML): `{index, line, owner, address|addresses|prefix, action}`
/// or `{index, line, owner, error: {exit, message, hint}}`.
#[derive(Serialize)]
struct Shown<'a> {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
    #[serde(flatten)]
    what: serde_json::Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<output::Action>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Failed>,
}

#[derive(Serialize)]
struct Failed {
    exit: i32,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

fn shown(o: &Outcome) -> Shown<'_> {
    let mut what = serde_json::Map::new();
    let (action, error) = match &o.result {
        Ok(Done::Held(values, key, action) | Done::Freed(values, key, action)) => {
            let value = match (*key, values.as_slice()) {
                ("addresses", _) => Value::from(values.clone()),
                (_, [one]) => Value::from(one.clone()),
                _ => Value::from(values.clone()),
            };
            what.insert((*key).to_owned(), value);
            (Some(*action), None)
        }
        Err(e) => (
            None,
            Some(Failed {
                exit: e.exit_code(),
                message: e.to_string(),
                hint: e.hint().map(str::to_owned),
            }),
        ),
    };
    Shown {
        index: o.index,
        line: o.line,
        owner: o.owner.as_deref(),
        what,
        action,
        error,
    }
}

/// Prints one result as soon as it is known: a JSON line (`-o json`), or the result's
/// `kind/name`-like words (`-o name`: the addresses or prefix, one a line; a failure on
/// stderr as an `error:` line naming the request).
fn stream(out: &mut dyn Write, format: Option<OutputFormat>, o: &Outcome) -> Result<()> {
    match format {
        Some(OutputFormat::Json) => {
            let line = serde_json::to_string(&shown(o)).expect("results serialize to JSON");
            output::line(out, &line)?;
            out.flush().map_err(|e| Error::io(output::STDOUT, e))
        }
        Some(OutputFormat::Name) => match &o.result {
            Ok(Done::Held(values, ..) | Done::Freed(values, ..)) => {
                let text: String = values.iter().map(|v| format!("{v}\n")).collect();
                output::write(out, &text)
            }
            Err(e) => {
                let at = o.line.map(|l| format!(" (line {l})")).unwrap_or_default();
                output::diagnostic(&format!("error: request {}{at}: {e}", o.index));
                Ok(())
            }
        },
        _ => Ok(()),
    }
}

/// The whole batch's output once it is done: a table (the default), or one YAML list (by
/// [`show`]); then a summary of the failures on stderr. Returns the batch's exit code.
fn render(g: &GlobalArgs, outcomes: &[Outcome], out: &mut dyn Write) -> Result<i32> {
    show(g, outcomes, out)?;
    let unchanged =
        |o: &&Outcome| matches!(o.result, Ok(Done::Freed(_, _, output::Action::Unchanged)));
    let nothing = outcomes.iter().filter(unchanged).count();
    super::release::note_nothing_released(nothing, outcomes.len());
    let failed = outcomes.iter().filter(|o| o.result.is_err()).count();
    let code = exit_code(outcomes);
    if failed > 0 {
        output::diagnostic(&format!(
            "error: {failed} of {} requests failed (exit {code})",
            outcomes.len()
        ));
    }
    Ok(code)
}

/// The table or YAML list of `outcomes` (nothing for `-o json` and `-o name`, which
/// printed each as it came).
fn show(g: &GlobalArgs, outcomes: &[Outcome], out: &mut dyn Write) -> Result<()> {
    let written = match g.output {
        Some(OutputFormat::Json | OutputFormat::Name) => Ok(()),
        Some(OutputFormat::Yaml) => {
            let shown: Vec<Shown<'_>> = outcomes.iter().map(shown).collect();
            output::write(out, &yaml::encode(&shown))
        }
        None | Some(OutputFormat::Table | OutputFormat::Wide) => {
            let rows = outcomes.iter().map(row).collect();
            let headers = ["LINE", "OWNER", "ADDRESS", "RESULT"];
            output::write(out, &output::table(&headers, rows, &[0], g.no_headers))
        }
    };
    // Every request ran: a reader that stopped reading the table early (`| head -1`) does
    // not turn the batch's exit code into 0.
    match written {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written,
    }
}

fn row(o: &Outcome) -> Vec<String> {
    let place = o
        .line
        .map_or_else(|| format!("#{}", o.index), |l| l.to_string());
    // As given, which may be no valid owner: escaped, so that no control character of the
    // input reaches the terminal or splits the row.
    let owner = o
        .owner
        .as_deref()
        .map_or_else(|| "-".into(), |s| s.escape_debug().to_string());
    match &o.result {
        Ok(Done::Held(values, _, action) | Done::Freed(values, _, action)) => {
            let what = if values.is_empty() {
                "-".to_owned()
            } else {
                values.join(",")
            };
            vec![place, owner, what, action.to_string()]
        }
        Err(e) => vec![
            place,
            owner,
            "-".into(),
            format!("error (exit {}): {e}", e.exit_code()),
        ],
    }
}
