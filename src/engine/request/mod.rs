//! Requests as engine values: [`AllocateRequest`] and [`ReleaseRequest`], each built by
//! one constructor from a plain input ([`AllocateInput`], [`ReleaseInput`]: text as a user
//! gives it) that holds every rule of its command. The command line converts clap's
//! arguments into the input, a batch line (`allocate -f`, `release -f`) deserializes into
//! it with serde ([`AllocateInput::read`], the batch's command line giving what a line
//! leaves out: [`Defaults`]), and a GraphQL input will build the same; so validation has
//! one home, and no front end builds a command line to reach the engine.
//!
//! A request runs on a store ([`AllocateRequest::run`], [`ReleaseRequest::run`]) and comes
//! back as an [`Outcome`]: its result, and its warnings and notes as values, which the
//! front end prints once per request (a batch's group run again one by one prints only
//! the second run's).
//!
//! Many requests run through the executor ([`crate::engine::executor`]): on one store or
//! several, the batch's worker threads and groups of one transaction, the re-run of a
//! failed group one by one, the hand-off from a lost connection and the stop flag, with
//! the outcomes in input order. The single command is the executor with one request, the
//! batch the executor plus an ordered printer, and the server will call the same.

mod allocate;
pub mod field;
mod input;
mod release;
mod select;
#[cfg(test)]
mod tests;

pub use allocate::{AllocateInput, AllocateRequest, Claimed};
pub use input::Defaults;
pub use release::{Freed, ReleaseInput, ReleaseRequest};
pub use select::{SelectInput, listed_prefix_claims, prefix_claims, query};

use crate::engine::warning::Warnings;
use crate::error::Result;

/// What one request came to: its result, and what was noticed on the way, also when it
/// failed. The front end prints the warnings (`warning: …`), then the notes (a dry run's
/// line, `--explain`'s), each once.
#[derive(Debug)]
pub struct Outcome<T> {
    pub result: Result<T>,
    pub warnings: Warnings,
    /// Lines for stderr, as they read.
    pub notes: Vec<String>,
}
