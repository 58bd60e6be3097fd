//! `ipamctl completions`: shell completion scripts, generated from the clap definitions.

use std::io::Write;

use clap::{CommandFactory, ValueEnum};
use clap_complete::{Shell as Target, generate};

use crate::cli::{Cli, CompletionsArgs, OutputFormat, Shell};
use crate::error::{Error, Result};

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
    let target = match args.shell {
        Shell::Bash => Target::Bash,
        Shell::Zsh => Target::Zsh,
        Shell::Fish => Target::Fish,
    };
    let mut buf = Vec::new();
    generate(target, &mut Cli::command(), "ipamctl", &mut buf);
    crate::output::write(out, &String::from_utf8_lossy(&buf))
}
