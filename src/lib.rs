//! ipamctl: IPv4 pools and allocations kept as Kubernetes-style YAML manifests in a state
//! directory, claimed by exclusive file creation so that concurrent processes never collide.
//!
//! The binary (`src/main.rs`) only parses arguments and calls [`run`]; everything else,
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

pub mod alloc;
pub mod check;
pub mod cli;
pub mod cmd;
pub mod complete;
pub mod conflict;
pub mod cooldown;
pub mod diff;
pub mod docs;
pub mod error;
pub mod explain;
pub mod git;
pub mod map;
pub mod model;
pub mod output;
mod parallel;
pub mod pool;
pub mod reconcile;
pub mod report;
pub mod schema;
pub mod selector;
pub mod store;
pub mod subnet;
pub mod transfer;
pub mod yaml;

pub use cmd::run;
pub use error::{Error, Result};
