//! Typed errors of the library and the one place that maps each to an exit code.

use std::io;
use std::path::PathBuf;

/// Exit codes, documented in README and `ipamctl(1)`.
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// A failure not listed below (I/O error and the like).
    pub const FAILURE: i32 = 1;
    /// Invalid usage or input.
    pub const INVALID: i32 = 2;
    /// Not found: the state directory, a pool.
    pub const NOT_FOUND: i32 = 3;
    /// Conflict with the current state.
    pub const CONFLICT: i32 = 4;
    /// The pool (or the requested range of it) has no free candidate left.
    pub const EXHAUSTED: i32 = 5;
    /// The outcome is unknown: the connection to the database was lost after the change
    /// was sent to be committed. Running the same command again is safe.
    pub const UNKNOWN: i32 = 6;
    /// Over a namespace's quota: nothing was claimed.
    pub const QUOTA: i32 = 7;
    /// Refused by a server: no token, a wrong or revoked one, or a verb the token lacks.
    pub const DENIED: i32 = 8;
    /// A server (`--server URL`) that cannot be reached: no answer to connect, a name that
    /// does not resolve, a connection refused; nothing was sent.
    pub const UNREACHABLE: i32 = 9;
    /// TLS with a server (`--server https://…`) failed: its certificate is not trusted by
    /// the system roots or `--cacert`, or names another host; nothing was sent.
    pub const TLS: i32 = 10;
    /// Stopped by SIGINT or SIGTERM between two steps (128 + SIGINT, as a shell reports it).
    pub const INTERRUPTED: i32 = 130;

    /// `code` if it is one of the codes above, else [`FAILURE`]: a server's `exit` is
    /// passed on only when it is one this ipamctl documents.
    pub fn documented(code: i32) -> i32 {
        const ALL: [i32; 12] = [
            OK,
            FAILURE,
            INVALID,
            NOT_FOUND,
            CONFLICT,
            EXHAUSTED,
            UNKNOWN,
            QUOTA,
            DENIED,
            UNREACHABLE,
            TLS,
            INTERRUPTED,
        ];
        if ALL.contains(&code) && code != OK {
            code
        } else {
            FAILURE
        }
    }
}

/// Everything that can go wrong, each variant carrying what the user needs to act.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line or a value on it is wrong.
    #[error("{message}")]
    Usage {
        message: String,
        hint: Option<String>,
    },
    /// A manifest (from `apply -f` or from the state directory) is invalid.
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
    /// No state directory was found; `hint` says what to do about the path it looked at.
    #[error("{message}")]
    NoStateDir { message: String, hint: String },
    /// A pool (or another named object) does not exist.
    #[error("{message}")]
    NotFound {
        message: String,
        hint: Option<String>,
    },
    /// The request conflicts with what the state directory holds.
    #[error("{message}")]
    Conflict {
        message: String,
        hint: Option<String>,
    },
    /// No candidate address is left.
    #[error("{what} is exhausted: no free address in {range}")]
    Exhausted { what: String, range: String },
    /// No free block of the length asked for is left (a supernet's prefix claim, a carved
    /// subnet).
    #[error("{what} has no free /{length}: {}", match largest {
        Some(block) => format!("the largest free block is {block}"),
        None => "it is full".into(),
    })]
    NoRoom {
        what: String,
        length: u8,
        largest: Option<ipnet::IpNet>,
    },
    /// An I/O operation on a path failed.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// The state directory cannot be written (a read-only mount, or files the user may not
    /// write): only commands that change the state need to.
    #[error("{}: cannot write: the state directory is read-only for this user ({source})", path.display())]
    ReadOnly { path: PathBuf, source: io::Error },
    /// A file the tool itself must trust is damaged (e.g. the state marker).
    #[error("{}: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    /// The database could not be reached, or refused or failed a statement. `message` names
    /// the server (never its password); `sqlstate` is the server's error code, if it sent one.
    #[error("{message}")]
    Database {
        message: String,
        sqlstate: Option<String>,
    },
    /// A long command stopped by SIGINT or SIGTERM between two steps: `message` says what
    /// was done, `hint` how to finish.
    #[error("{message}")]
    Interrupted { message: String, hint: String },
    /// The database has no ipamctl schema yet: `hint` says how to create it.
    #[error("{message}")]
    NoSchema { message: String, hint: String },
    /// The connection to the database was lost while its `COMMIT` was under way (or the
    /// `COMMIT` was answered by an error of SQLSTATE class 08 or 57, as a terminated backend
    /// sends after it committed): the change may or may not have been made. `message` says so, naming the server.
    #[error("{message}")]
    OutcomeUnknown { message: String },
    /// A server's caller gave no token, or one the server does not know (or revoked).
    #[error("{message}")]
    Unauthenticated { message: String },
    /// A server's caller lacks the verb in a namespace it may see (outside its scope is
    /// [`Error::NotFound`], never this).
    #[error("{message}")]
    Forbidden { message: String },
    /// A request over one of a server's limits (the message names the limit's flag).
    #[error("{message}")]
    Limit { message: String },
    /// A server (`--server URL`) could not be reached; nothing was sent.
    #[error("{message}")]
    Unreachable { message: String },
    /// TLS with a server failed before anything was sent.
    #[error("{message}")]
    Tls { message: String },
    /// A server's answer that the request failed: its `code`, its message and hint, and the
    /// command line's exit code for the same failure (`exit`), as the API's `RequestError`
    /// carries them.
    #[error("{message}")]
    Answered {
        code: String,
        exit: i32,
        message: String,
        hint: Option<String>,
    },
    /// A claim that would take a namespace over one of its quotas: nothing was claimed.
    #[error(
        "quota `{quota}` of namespace `{namespace}` allows {limit} {resource} and {used} are held; nothing was claimed"
    )]
    QuotaExceeded {
        namespace: String,
        quota: String,
        resource: &'static str,
        limit: u64,
        used: u64,
    },
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The process exit code for this error. Exhaustive on purpose: a new variant must decide.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage { .. } | Error::Invalid { .. } => exit::INVALID,
            Error::NoStateDir { .. } | Error::NotFound { .. } | Error::NoSchema { .. } => {
                exit::NOT_FOUND
            }
            Error::Conflict { .. } => exit::CONFLICT,
            Error::Exhausted { .. } | Error::NoRoom { .. } => exit::EXHAUSTED,
            Error::OutcomeUnknown { .. } => exit::UNKNOWN,
            Error::Interrupted { .. } => exit::INTERRUPTED,
            Error::Unauthenticated { .. } | Error::Forbidden { .. } => exit::DENIED,
            Error::Limit { .. } => exit::INVALID,
            Error::QuotaExceeded { .. } => exit::QUOTA,
            Error::Unreachable { .. } => exit::UNREACHABLE,
            Error::Tls { .. } => exit::TLS,
            Error::Answered { exit, .. } => exit::documented(*exit),
            Error::Io { .. }
            | Error::ReadOnly { .. }
            | Error::Corrupt { .. }
            | Error::Database { .. } => exit::FAILURE,
        }
    }

    /// An optional `hint:` line telling the user what to do next.
    pub fn hint(&self) -> Option<&str> {
        match self {
            Error::Usage { hint, .. }
            | Error::NotFound { hint, .. }
            | Error::Conflict { hint, .. } => hint.as_deref(),
            Error::NoStateDir { hint, .. }
            | Error::NoSchema { hint, .. }
            | Error::Interrupted { hint, .. } => Some(hint),
            Error::OutcomeUnknown { .. } => Some(
                "running the same command again is safe: a claim for the same owner answers with the address it holds, a release of an address no longer held does nothing, an apply of the same manifests changes nothing more",
            ),
            Error::Invalid { .. }
            | Error::Exhausted { .. }
            | Error::NoRoom { .. }
            | Error::Io { .. }
            | Error::Corrupt { .. }
            | Error::Database { .. }
            | Error::Unauthenticated { .. }
            | Error::Forbidden { .. }
            | Error::Unreachable { .. }
            | Error::Tls { .. }
            | Error::Limit { .. } => None,
            Error::Answered { hint, .. } => hint.as_deref(),
            Error::QuotaExceeded { .. } => Some(
                "release what the namespace no longer needs, or raise the quota (`ipamctl quota list` shows what is held)",
            ),
            Error::ReadOnly { .. } => Some(
                "only `allocate` for an owner that holds an address, and reading commands, work on a read-only state directory",
            ),
        }
    }

    /// A usage error without a hint.
    pub fn usage(message: impl Into<String>) -> Error {
        Error::Usage {
            message: message.into(),
            hint: None,
        }
    }

    /// A conflict without a hint.
    pub fn conflict(message: impl Into<String>) -> Error {
        Error::Conflict {
            message: message.into(),
            hint: None,
        }
    }

    /// An invalid-input error about `origin` (a file, or a flag like `--within`).
    pub fn invalid(origin: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Invalid {
            origin: origin.into(),
            message: message.into(),
        }
    }

    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
