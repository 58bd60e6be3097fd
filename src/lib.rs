//! ipamctl: IPv4 and IPv6 pools and allocations kept as Kubernetes-style YAML manifests in a
//! state directory (or a PostgreSQL database), claimed by exclusive creation so that
//! concurrent processes never collide.
//!
//! Five layers, each a folder, each importing only the layers below it (`tests/layers.rs`
//! reads the sources and fails on an import that points up):
//!
//! ```text
//! cli/     clap arguments, one handler per command, output, completion, docs, maps, reports
//! engine/  the use cases, each taking its own locks and unit of work
//! store/   the Store trait, typed reads; fs/ and pg/, which never import each other
//! yaml/    the codec: the only code that knows the YAML library
//! model/   every value type and its validation; pure, no I/O
//! ```
//!
//! [`error`] sits beside them all: the typed errors and the one map to exit codes. The
//! binary (`src/main.rs`) only parses arguments and calls [`run`]; everything else,
//! including what integration tests, benchmarks and the man-page generator use, is here.

#![forbid(unsafe_code)]

/// Expands to a fail point when built with `--features failpoints`; to nothing otherwise.
/// Enabled at run time with `FAILPOINTS=<name>=return`, which aborts the process on the
/// spot, as a crash would. `tests/crash.rs` walks every point of every write path.
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name, |_| std::process::abort());
    };
}

pub mod cli;
pub mod engine;
pub mod error;
pub mod model;
pub mod serve;
pub mod store;
pub mod yaml;

pub use cli::cmd::run;
pub use error::{Error, Result};
