//! Man pages generated from the clap definitions: `ipamctl(1)` and one page per subcommand.
//! `tests/docs.rs` fails when the committed pages under `man/` are stale.

use clap::CommandFactory;

use crate::cli::Cli;

/// Every man page as (file name, roff source).
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    let mut pages = Vec::new();
    let mut root = Cli::command().name("ipamctl");
    // Propagates the global options into every subcommand, so each page lists them.
    root.build();
    collect(&root, "ipamctl", &mut pages);
    pages
}

fn collect(cmd: &clap::Command, name: &str, pages: &mut Vec<(String, Vec<u8>)>) {
    let cmd = cmd
        .clone()
        .name(name.to_owned())
        .bin_name(name.replace('-', " "));
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .expect("rendering into a Vec cannot fail");
    pages.push((format!("{name}.1"), buf));
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        collect(sub, &format!("{name}-{}", sub.get_name()), pages);
    }
}
