//! The command line: clap's argument types (their `///` docs are the `--help` text), one
//! handler per command under [`cmd`] (parse, call one engine function, render), and what
//! only people and shells read: tables and documents ([`output`]), completion, man pages,
//! schemas, maps and reports.

pub mod args;
pub mod cmd;
pub mod complete;
pub mod docs;
pub mod map;
pub mod output;
pub mod report;
pub mod schema;

pub use args::*;
