//! `ipamctl completions`: the shell script that asks `ipamctl` for completions as the user
//! types (clap_complete's dynamic completion; `src/complete.rs` offers the names).

use std::io::Write;

use clap::ValueEnum;
use clap_complete::env::{Bash, EnvCompleter, Fish, Zsh};

use crate::cli::{CompletionsArgs, OutputFormat, Shell};
use crate::error::{Error, Result};

/// The environment variable the script sets when it calls `ipamctl` for candidates; `main`
/// hands such calls to clap_complete before parsing.
pub const VAR: &str = "COMPLETE";

pub fn run(
    args: &CompletionsArgs,
    format: Option<OutputFormat>,
    out: &mut dyn Write,
) -> Result<()> {
    if let Some(f @ (OutputFormat::Json | OutputFormat::Yaml | OutputFormat::Name)) = format {
        return Err(Error::Usage {
            message: format!(
                "`completions` prints a shell script, which has no `-o {}` form",
                f.to_possible_value()
                    .map_or_else(String::new, |v| v.get_name().to_owned())
            ),
            hint: Some("drop `-o`: ipamctl completions bash > ipamctl.bash".into()),
        });
    }
    crate::cli::output::write(out, &script(args.shell)?)
}

/// The completion script of `shell`: it calls `ipamctl` by name for the candidates, so the
/// same script serves every installation (`completions/` holds each, for the package).
pub fn script(shell: Shell) -> Result<String> {
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
    };
    let mut buf = Vec::new();
    completer
        .write_registration(VAR, "ipamctl", "ipamctl", "ipamctl", &mut buf)
        .map_err(|e| Error::io(crate::cli::output::STDOUT, e))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
