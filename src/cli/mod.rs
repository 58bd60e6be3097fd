//! The command line: clap's argument types (their `///` docs are the `--help` text), one
//! handler per command under [`cmd`] (parse, call one engine function, render), and what
//! only people and shells read: tables and documents ([`output`]), completion, man pages,
//! schemas, maps and reports.

pub mod args;
pub mod cmd;
pub mod complete;
pub mod docs;
pub mod host_args;
pub mod map;
pub mod output;
pub mod remote;
pub mod report;
pub mod schema;
pub mod serve_args;
pub mod token_args;

pub use args::*;
pub use host_args::*;
pub use token_args::*;

impl Cli {
    /// Parses the process's arguments (exit 2 with clap's message on bad usage). The command
    /// line beats the environment, as in git, kubectl and psql: `-d DIR` overrides an
    /// exported `IPAMCTL_STORE`, and `--store URL` an exported `IPAMCTL_STATE_DIR`; only both
    /// flags together name two stores.
    pub fn parse_args() -> Cli {
        let matches = <Cli as clap::CommandFactory>::command().get_matches();
        let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
            Ok(cli) => cli,
            Err(e) => e.exit(),
        };
        // Global arguments given after the subcommand are recorded in its matches.
        let mut deepest = &matches;
        while let Some((_, sub)) = deepest.subcommand() {
            deepest = sub;
        }
        let source = |id: &str| {
            deepest
                .value_source(id)
                .or_else(|| matches.value_source(id))
        };
        let from_line = |id: &str| source(id) == Some(clap::parser::ValueSource::CommandLine);
        let from_env = |id: &str| source(id) == Some(clap::parser::ValueSource::EnvVariable);
        if from_line("state_dir") && from_env("store") {
            cli.global.store = None;
        }
        if from_line("store") && from_env("state_dir") {
            cli.global.state_dir = None;
        }
        // `--server` on the line beats an exported store, and a store on the line an
        // exported `IPAMCTL_SERVER`.
        if from_line("server") && from_env("store") {
            cli.global.store = None;
        }
        if from_line("server") && from_env("state_dir") {
            cli.global.state_dir = None;
        }
        if from_env("server") && (from_line("store") || from_line("state_dir")) {
            cli.global.server = None;
        }
        cli
    }
}
