//! The engine's errors as the API gives them: a GraphQL error whose `extensions` carry
//! `code` (the contract's name for the failure), `exit` (the command line's exit code for
//! the same failure) and `hint` (the command line's hint), with the command line's message.

use async_graphql::{ErrorExtensions, SimpleObject};

use crate::error::Error;

/// The contract's code for `e`. Exhaustive on purpose, as [`Error::exit_code`] is.
pub fn code(e: &Error) -> &'static str {
    match e {
        Error::Usage { .. } | Error::Invalid { .. } => "BAD_REQUEST",
        Error::NoStateDir { .. } | Error::NotFound { .. } | Error::NoSchema { .. } => "NOT_FOUND",
        Error::Conflict { .. } => "CONFLICT",
        Error::Exhausted { .. } | Error::NoRoom { .. } => "EXHAUSTED",
        Error::OutcomeUnknown { .. } => "OUTCOME_UNKNOWN",
        Error::Unauthenticated { .. } => "UNAUTHENTICATED",
        Error::Forbidden { .. } => "FORBIDDEN",
        Error::Limit { .. } => "LIMIT",
        Error::QuotaExceeded { .. } => "QUOTA_EXCEEDED",
        Error::Interrupted { .. } => "INTERRUPTED",
        Error::Answered { .. } | Error::Unreachable { .. } | Error::Tls { .. } => "INTERNAL",
        Error::Io { .. }
        | Error::ReadOnly { .. }
        | Error::Corrupt { .. }
        | Error::Database { .. } => "INTERNAL",
    }
}

/// `e` as a GraphQL error.
pub fn graphql(e: &Error) -> async_graphql::Error {
    async_graphql::Error::new(e.to_string()).extend_with(|_, ext| {
        ext.set("code", code(e));
        ext.set("exit", e.exit_code());
        if let Some(hint) = e.hint() {
            ext.set("hint", hint);
        }
    })
}

/// `e` as a GraphQL error, with `notes` (what the command line prints on stderr before
/// the error: an exhausted pool's `--explain` lines) in its `extensions` when there are any.
pub fn graphql_noted(e: &Error, notes: &[String]) -> async_graphql::Error {
    let error = graphql(e);
    if notes.is_empty() {
        return error;
    }
    let notes = notes.to_vec();
    error.extend_with(|_, ext| ext.set("notes", notes.clone()))
}

/// An engine result made a resolver's.
pub trait Graphql<T> {
    fn gql(self) -> async_graphql::Result<T>;
}

impl<T> Graphql<T> for crate::error::Result<T> {
    fn gql(self) -> async_graphql::Result<T> {
        self.map_err(|e| graphql(&e))
    }
}

/// A failure, as a command line would report it.
#[derive(SimpleObject, Debug)]
pub struct RequestError {
    pub code: String,
    pub exit: i32,
    pub message: String,
    pub hint: Option<String>,
}

impl From<&Error> for RequestError {
    fn from(e: &Error) -> RequestError {
        RequestError {
            code: code(e).into(),
            exit: e.exit_code(),
            message: e.to_string(),
            hint: e.hint().map(str::to_owned),
        }
    }
}
