//! The `ipamctl` binary: parse, run, report the error, exit with its code.

use std::io::ErrorKind;
use std::process::ExitCode;

use ipamctl::cli::output::diagnostic;
use ipamctl::error::exit;
use ipamctl::{Error, cli::Cli};

fn main() -> ExitCode {
    #[cfg(feature = "failpoints")]
    let _scenario = fail::FailScenario::setup();
    // A call from the completion script (`COMPLETE=bash ipamctl -- ipamctl pool show v`)
    // prints the candidates and exits here.
    clap_complete::CompleteEnv::with_factory(<Cli as clap::CommandFactory>::command)
        .var("COMPLETE")
        .complete();
    let cli = Cli::parse_args();
    let code = match ipamctl::run(cli) {
        Ok(code) => code,
        // `ipamctl list | head` closing the pipe early is not an error.
        Err(Error::Io { source, .. }) if source.kind() == ErrorKind::BrokenPipe => exit::OK,
        Err(err) => {
            diagnostic(&format!("error: {err}"));
            if let Some(hint) = err.hint() {
                diagnostic(&format!("hint: {hint}"));
            }
            err.exit_code()
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
