//! `ipamctl completions`: shell completion scripts, generated from the clap definitions.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::{Shell as Target, generate};

use crate::cli::{Cli, CompletionsArgs, Shell};
use crate::error::Result;

pub fn run(args: &CompletionsArgs, out: &mut dyn Write) -> Result<()> {
    let target = match args.shell {
        Shell::Bash => Target::Bash,
        Shell::Zsh => Target::Zsh,
        Shell::Fish => Target::Fish,
    };
    let mut buf = Vec::new();
    generate(target, &mut Cli::command(), "ipamctl", &mut buf);
    crate::output::write(out, &String::from_utf8_lossy(&buf))
}
