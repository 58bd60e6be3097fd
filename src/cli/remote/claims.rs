//! `allocate` and `release` through a server, one request or a batch (`-f`): each request
//! is read and validated by the engine's reader and constructor, as the local command's
//! (a request that is not valid never leaves the machine), sent as typed GraphQL input, and
//! its answer made the engine's value again ([`Claimed`], [`Freed`]) for the local
//! command's own printer.

use std::io::Write;

use serde_json::{Value, json};

use super::documents::{self, ALLOCATE, ALLOCATE_MANY, RELEASE};
use super::transport::Client;
use crate::cli::cmd::batch_print::{Outcome, Printer};
use crate::cli::cmd::batch_read::{Read, given_owner, requests};
use crate::cli::cmd::batch_request::Done;
use crate::cli::{AllocateArgs, GlobalArgs, ReleaseArgs};
use crate::engine::executor;
use crate::engine::request::{
    AllocateInput, AllocateRequest, Claimed, Freed, ReleaseInput, ReleaseRequest,
};
use crate::engine::scope::Scope;
use crate::error::{Error, Result};
use crate::yaml;

/// How many of a batch's claims one `allocateMany` carries (the server's `--max-claims`
/// is 1,000 by default).
const CLAIMS_PER_REQUEST: usize = 250;

/// `allocate` of one request.
pub fn allocate(
    client: &mut Client,
    g: &GlobalArgs,
    args: &AllocateArgs,
    out: &mut dyn Write,
) -> Result<()> {
    crate::cli::cmd::no_jobs_without_file(args.jobs)?;
    let input = crate::cli::cmd::allocate::input(g, args);
    let variables = json!({"input": allocate_variables(&input)?, "explain": input.explain});
    let data = documents::run(client, ALLOCATE, variables, true)?;
    for note in notes(&data["allocate"]) {
        crate::cli::output::diagnostic(&note);
    }
    let claimed = claimed(client.url(), &data["allocate"])?;
    crate::cli::cmd::allocate::show(claimed, g, out)
}

/// The variables of a claim, once the one constructor took it (exit 2 otherwise, before
/// anything is sent).
fn allocate_variables(input: &AllocateInput) -> Result<Value> {
    AllocateRequest::new(input, &Scope::everything())?;
    Ok(documents::allocate_input(input))
}

/// `release` of one request.
pub fn release(
    client: &mut Client,
    g: &GlobalArgs,
    args: &ReleaseArgs,
    out: &mut dyn Write,
) -> Result<()> {
    crate::cli::cmd::no_jobs_without_file(args.jobs)?;
    let input = crate::cli::cmd::release::input(g, args);
    let variables = json!({"input": release_variables(&input)?});
    let data = documents::run(client, RELEASE, variables, true)?;
    for note in notes(&data["releaseHeld"]) {
        crate::cli::output::diagnostic(&note);
    }
    let freed = freed(client.url(), &data["releaseHeld"])?;
    crate::cli::cmd::release::show(&freed, args, g, out)
}

fn release_variables(input: &ReleaseInput) -> Result<Value> {
    ReleaseRequest::new(input, &Scope::everything())?;
    documents::release_input(input)
}

/// `allocate -f FILE`: the requests a chunk at a time in `allocateMany`, each result printed
/// in input order as the local batch prints it; returns the batch's exit code.
pub fn allocate_batch(
    client: &mut Client,
    g: &GlobalArgs,
    args: &AllocateArgs,
    file: &str,
    out: &mut dyn Write,
) -> Result<i32> {
    let defaults = crate::cli::cmd::batch::allocate_defaults(g, args);
    let prepare = |line: Value| {
        let input = AllocateInput::read(line, &defaults)?;
        allocate_variables(&input)
    };
    let send = |client: &mut Client, inputs: Vec<Value>| -> Result<Vec<Told>> {
        let data = documents::run(client, ALLOCATE_MANY, json!({"inputs": inputs}), true)?;
        let url = client.url().to_owned();
        let outcomes = data["allocateMany"]
            .as_array()
            .ok_or_else(|| documents::bad_answer(&url, "no `allocateMany` list"))?;
        Ok(outcomes
            .iter()
            .map(|o| match o.get("error").filter(|e| !e.is_null()) {
                Some(e) => (Vec::new(), Err(documents::answered(e))),
                None => (
                    notes(&o["claim"]),
                    claimed(&url, &o["claim"]).map(|c| Done::from(executor::Done::Claimed(c))),
                ),
            })
            .collect())
    };
    batch(client, g, file, (&prepare, &send, CLAIMS_PER_REQUEST), out)
}

/// `release -f FILE`: one `releaseHeld` per request, on the one kept-alive connection.
pub fn release_batch(
    client: &mut Client,
    g: &GlobalArgs,
    args: &ReleaseArgs,
    file: &str,
    out: &mut dyn Write,
) -> Result<i32> {
    let defaults = crate::cli::cmd::batch::release_defaults(g, args);
    let prepare = |line: Value| {
        let input = ReleaseInput::read(line, &defaults)?;
        let variables = release_variables(&input)?;
        Ok(json!({"input": variables, "dryRun": input.dry_run}))
    };
    let send = |client: &mut Client, inputs: Vec<Value>| -> Result<Vec<Told>> {
        let mut done = Vec::new();
        for mut v in inputs {
            let dry_run = v["dryRun"].as_bool().unwrap_or(false);
            let variables = json!({"input": v["input"].take()});
            let result = match documents::run(client, RELEASE, variables, true) {
                Ok(data) => (
                    notes(&data["releaseHeld"]),
                    freed(client.url(), &data["releaseHeld"])
                        .map(|f| Done::from(executor::Done::Freed(f, dry_run))),
                ),
                // A token the server does not know, and the connection's failures, stop
                // the batch, as they stop `allocateMany`'s; any other is the request's.
                Err(e @ Error::Answered { .. }) if !unauthenticated(&e) => (Vec::new(), Err(e)),
                Err(e) => return Err(e),
            };
            done.push(result);
        }
        Ok(done)
    };
    batch(client, g, file, (&prepare, &send, 1), out)
}

/// A batch's two steps and how many requests one round trip carries: a request's input
/// made variables (or its failure), and the valid ones of a chunk sent, one result each.
type Steps<'a> = (
    &'a dyn Fn(Value) -> Result<Value>,
    &'a dyn Fn(&mut Client, Vec<Value>) -> Result<Vec<Told>>,
    usize,
);

/// A request's result, and the notes the command line prints on stderr before it.
type Told = (Vec<String>, Result<Done>);

/// Reads `file`'s requests (on a thread, one chunk ahead at most), sends them a chunk at a
/// time (a chunk is what has been read when the previous answer came, at most `per`), and
/// prints each result in input order with the local batch's [`Printer`].
fn batch(
    client: &mut Client,
    g: &GlobalArgs,
    file: &str,
    (prepare, send, per): Steps<'_>,
    out: &mut dyn Write,
) -> Result<i32> {
    let requests = requests(file)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Read>(per);
    std::thread::spawn(move || requests.feed(&mut |request| tx.send(request).is_ok()));
    let mut printer = Printer::new(g);
    let mut index = 0;
    while let Ok(first) = rx.recv() {
        let mut chunk = vec![first];
        while chunk.len() < per {
            match rx.try_recv() {
                Ok(read) => chunk.push(read),
                Err(_) => break,
            }
        }
        let prepared: Vec<_> = chunk
            .into_iter()
            .map(|(line, request)| {
                let owner = given_owner(&request);
                (line, owner, request.and_then(prepare))
            })
            .collect();
        let valid: Vec<Value> = prepared
            .iter()
            .filter_map(|(_, _, v)| v.as_ref().ok().cloned())
            .collect();
        let mut answers = if valid.is_empty() {
            Vec::new()
        } else {
            send(client, valid)?
        }
        .into_iter();
        for (line, owner, prepared) in prepared {
            let result = match prepared {
                Err(e) => Err(e),
                Ok(_) => {
                    let (notes, result) = answers.next().ok_or_else(|| {
                        documents::bad_answer(client.url(), "fewer outcomes than requests")
                    })?;
                    for note in notes {
                        crate::cli::output::diagnostic(&note);
                    }
                    result
                }
            };
            let o = Outcome {
                index,
                line,
                owner,
                result,
            };
            printer.print(out, &o)?;
            index += 1;
        }
    }
    printer.end(out)
}

/// An answer's `notes`: what the local command says on stderr besides its result.
fn notes(answer: &Value) -> Vec<String> {
    documents::texts(&answer["notes"])
}

fn unauthenticated(e: &Error) -> bool {
    matches!(e, Error::Answered { code, .. } if code == "UNAUTHENTICATED")
}

/// A `Claim` as the engine's [`Claimed`]: its objects decoded from their manifests.
fn claimed(url: &str, claim: &Value) -> Result<Claimed> {
    let held = claim["held"].as_array().cloned().unwrap_or_default();
    if let Some(prefix) = claim["prefix"].as_str() {
        let Some(h) = held.first() else {
            let prefix = prefix
                .parse()
                .map_err(|_| documents::bad_answer(url, "a prefix that is not one"))?;
            return Ok(Claimed::WouldPrefix(prefix));
        };
        let m = yaml::decode_prefix_claim(documents::manifest(url, h)?)
            .map_err(|e| documents::bad_answer(url, &e))?;
        return Ok(Claimed::Prefix(Box::new(m), h["action"] == "CREATED"));
    }
    let allocated = held
        .iter()
        .map(|h| documents::allocated(url, h))
        .collect::<Result<_>>()?;
    Ok(Claimed::Addresses(allocated))
}

/// A `Released` as the engine's [`Freed`].
fn freed(url: &str, released: &Value) -> Result<Freed> {
    let texts = |key: &str| documents::texts(&released[key]);
    Ok(Freed {
        addresses: texts("allocations")
            .iter()
            .map(|t| yaml::decode_allocation(t).map_err(|e| documents::bad_answer(url, &e)))
            .collect::<Result<_>>()?,
        prefixes: texts("prefixClaims")
            .iter()
            .map(|t| yaml::decode_prefix_claim(t).map_err(|e| documents::bad_answer(url, &e)))
            .collect::<Result<_>>()?,
        note: released["note"].as_str().map(str::to_owned),
    })
}

/// `mac set`.
pub fn set_mac(
    client: &mut Client,
    g: &GlobalArgs,
    args: &crate::cli::MacSetArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let input = crate::cli::cmd::mac::input(g, args);
    // Exit 2 on a field that is not valid, as locally, before anything is sent.
    crate::engine::mac::SetRequest::new(&input)?;
    let document =
        "mutation SetMac($input: SetMacInput!) { setMac(input: $input) { changed manifest } }";
    let variables = json!({"input": {
        "namespace": input.namespace,
        "pool": input.pool,
        "address": input.address,
        "owner": input.owner,
        "uid": input.uid,
        "mac": input.mac,
    }});
    let data = documents::run(client, document, variables, true)?;
    let url = client.url().to_owned();
    let changes = data["setMac"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let m = yaml::decode_allocation(documents::manifest(&url, c)?)
                .map_err(|e| documents::bad_answer(&url, &e))?;
            Ok((m, c["changed"].as_bool().unwrap_or(true)))
        })
        .collect::<Result<Vec<_>>>()?;
    let shown: Vec<_> = changes.iter().map(|(m, changed)| (m, *changed)).collect();
    crate::cli::cmd::mac::show(&shown, g, out)
}
