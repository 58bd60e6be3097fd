//! Dispatch: one module per subcommand, each turning arguments into calls on the core and
//! rendering the result.

pub(crate) mod allocate;
mod apply;
pub(crate) mod batch;
pub(crate) mod batch_print;
pub(crate) mod batch_read;
pub(crate) mod batch_request;
mod check;
pub(crate) mod completions;
mod dhcp;
mod dhcp_leases;
mod dhcp_options;
mod diff;
mod dns;
mod export;
mod history;
mod import;
mod init;
pub(crate) mod list;
pub(crate) mod mac;
pub(crate) mod metrics;
pub(crate) mod pool;
pub(crate) mod pool_map;
mod pool_status;
pub(crate) mod quota;
mod reconcile;
pub(crate) mod release;
mod renew;
mod report;
mod schema;
mod serve;
pub(crate) mod subnet;
pub(crate) mod supernet;
mod token;
pub(crate) mod vpc;

use std::io::Write;

use crate::cli::{Cli, Command, FormatArg, GlobalArgs, OutputFormat, PoolCommand};
use crate::engine::request::field::{address, flag, owner_filter, prefix, uid};
use crate::engine::scope::{Scope, Verb};
use crate::engine::warning::{Warning, Warnings};
use crate::error::{Error, Result, exit};
use crate::model::{Namespace, PoolRef};
use crate::store::Store;
use crate::store::registry::{self, Config, Location};

/// Runs a parsed command line, writing to stdout; returns the exit code on success.
pub fn run(cli: Cli) -> Result<i32> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let code = run_to(cli, &mut out)?;
    out.flush()
        .map_err(|e| Error::io(crate::cli::output::STDOUT, e))?;
    Ok(code)
}

/// Runs a parsed command line, writing its output to `out`.
pub fn run_to(mut cli: Cli, out: &mut dyn Write) -> Result<i32> {
    cli.global.output = data_format(&cli)?;
    if cli.global.server.is_some() && !crate::cli::remote::runs_locally(&cli.command) {
        return crate::cli::remote::run(&cli, out);
    }
    let g = &cli.global;
    let done = match cli.command {
        // The one command whose exit code is a result, not an error: findings exit 1.
        Command::Check(args) => return check::run(&*open(g)?, g, &args, out),
        // Exit 1 when something changed, as `git diff --exit-code`.
        Command::Diff(args) => return diff::run(&*open_dir(g, "diff")?, g, &args, out),
        // Report mode is a CI gate: leaks found exit 1.
        Command::Reconcile(args) => return reconcile::run(&*open(g)?, g, &args, out),
        // Drift found exits 1, as `check`'s findings do.
        Command::Dhcp(crate::cli::DhcpCommand::Leases(args)) => {
            return dhcp_leases::run(&*open(g)?, g, &args, out);
        }
        Command::History(args) => history::run(&*open(g)?, g, &args, out),
        Command::Init(args) => init::run(g, &args, out),
        Command::Completions(args) => completions::run(&args, g.output, out),
        Command::Schema(args) => schema::run(&args, g.output, out),
        Command::Token(command) => token::run(g, &command, out),
        Command::Renew(args) => renew::run(&*open(g)?, g, &args, out),
        Command::Apply(args) => apply::run(&*open(g)?, g, &args, out),
        Command::Allocate(args) => match &args.file {
            Some(file) => return batch::allocate(&open_batch(g, args.jobs)?, g, &args, file, out),
            None => {
                no_jobs_without_file(args.jobs)?;
                allocate::run(&*open(g)?, g, &args, out)
            }
        },
        Command::Release(args) => match &args.file {
            Some(file) => return batch::release(&open_batch(g, args.jobs)?, g, &args, file, out),
            None => {
                no_jobs_without_file(args.jobs)?;
                release::run(&*open(g)?, g, &args, out)
            }
        },
        Command::List(args) => list::run(&*open(g)?, g, &args, out),
        Command::Pool(command) => pool::run(&*open(g)?, g, &command, out),
        Command::Vpc(command) => vpc::run(&*open(g)?, g, &command, out),
        Command::Subnet(command) => subnet::run(&*open(g)?, g, &command, out),
        Command::Quota(command) => quota::run(&*open(g)?, g, &command, out),
        Command::Mac(command) => mac::run(&*open(g)?, g, &command, out),
        Command::Report => report::run(&*open(g)?, g, out),
        Command::Metrics(args) => metrics::run(g, &args, out),
        Command::Serve(args) => serve::run(g, &args, out),
        Command::Dhcp(command) => dhcp::run(&*open(g)?, g, &command, out),
        Command::Dns(command) => dns::run(&*open(g)?, g, &command, out),
        Command::Export(args) => export::run(&*open_database(g, "export")?, g, &args, out),
        Command::Import(args) => import::run(&*open_database(g, "import")?, g, &args, out),
    };
    done.map(|()| exit::OK)
}

/// `-o` as the commands that render data see it. svg is an image only `pool show --map`
/// draws (it reads [`GlobalArgs::format`]); anywhere else it is exit 2.
fn data_format(cli: &Cli) -> Result<Option<OutputFormat>> {
    Ok(match cli.global.format {
        None => None,
        Some(FormatArg::Table) => Some(OutputFormat::Table),
        Some(FormatArg::Wide) => Some(OutputFormat::Wide),
        Some(FormatArg::Json) => Some(OutputFormat::Json),
        Some(FormatArg::Yaml) => Some(OutputFormat::Yaml),
        Some(FormatArg::Name) => Some(OutputFormat::Name),
        Some(FormatArg::Svg) => match &cli.command {
            Command::Pool(PoolCommand::Show(args)) if args.map => None,
            _ => {
                return Err(Error::Usage {
                    message: "`-o svg` is only for the address map of `pool show --map`".into(),
                    hint: Some("ipamctl pool show POOL --map -o svg > pool.svg".into()),
                });
            }
        },
        // Read from `GlobalArgs::format` by `report`, the one command with an HTML form.
        Some(FormatArg::Html) => match &cli.command {
            Command::Report => None,
            _ => {
                return Err(Error::Usage {
                    message: "`-o html` is only for `report`".into(),
                    hint: Some("ipamctl report -o html > ipam.html".into()),
                });
            }
        },
        // Read from `GlobalArgs::format` by `diff`, the one command with a Markdown form.
        Some(FormatArg::Markdown) => match &cli.command {
            Command::Diff(_) => None,
            _ => {
                return Err(Error::Usage {
                    message: "`-o markdown` is only for `diff`".into(),
                    hint: Some("ipamctl diff -o markdown > comment.md".into()),
                });
            }
        },
    })
}

/// The store the global options select ([`location`]), opened by the store registry.
fn open(g: &GlobalArgs) -> Result<Box<dyn Store + Sync>> {
    registry::open(&location(g)?, &config(1))
}

/// The stores a batch (`-f`) runs on: `jobs` connections to a database (default
/// [`BATCH_JOBS`]), or the one state directory, whose batch runs one request at a time.
fn open_batch(g: &GlobalArgs, jobs: Option<u16>) -> Result<Vec<Box<dyn Store + Sync>>> {
    registry::open_workers(&location(g)?, &config(jobs.unwrap_or(BATCH_JOBS).into()))
}

/// `--jobs` is for a batch: clap's `requires = "file"` is not checked when an argument
/// that conflicts with `-f` (a pool, `--owner`) is given, which is always.
pub(crate) fn no_jobs_without_file(jobs: Option<u16>) -> Result<()> {
    match jobs {
        Some(_) => Err(Error::Usage {
            message: "--jobs runs a batch on several connections: it needs `-f FILE`".into(),
            hint: Some("ipamctl --store URL allocate -f requests.jsonl --jobs 2".into()),
        }),
        None => Ok(()),
    }
}

/// How many connections a database's batch uses unless `--jobs` says: one, so that the
/// requests run in input order, each seeing what the ones before it did.
const BATCH_JOBS: u16 = 1;

/// How the registry opens a store for `workers` workers: what getting a database ready
/// noticed (a password file others may read) is printed before it connects.
fn config(workers: usize) -> Config<'static> {
    Config {
        workers,
        warn: &|w| {
            let mut warnings = Warnings::default();
            warnings.push(Warning::new(w));
            crate::cli::output::warn(&warnings);
        },
        long_lived: false,
    }
}

/// The database, for the commands that only a database has (`export`, `import`): refused
/// before anything is opened when the options name a state directory.
fn open_database(g: &GlobalArgs, command: &str) -> Result<Box<dyn Store + Sync>> {
    let at = location(g)?;
    if !at.is_database() {
        return Err(Error::Usage {
            message: format!(
                "`{command}` moves state between a database and a state directory: it needs `--store URL`"
            ),
            hint: Some(format!("ipamctl --store postgresql://… {command} DIR")),
        });
    }
    registry::open(&at, &config(1))
}

/// The state directory, for the commands that only a state directory has (`diff`):
/// refused before anything is opened when the options name a database.
fn open_dir(g: &GlobalArgs, command: &str) -> Result<Box<dyn Store + Sync>> {
    let at = location(g)?;
    if at.is_database() {
        let why = "a database has no git history; `history` reads its events table";
        return Err(Error::Usage {
            message: format!("`{command}` reads a state directory; {why}"),
            hint: Some(
                "drop `--store` (and unset IPAMCTL_STORE), or `ipamctl --store URL list`".into(),
            ),
        });
    }
    registry::open(&at, &config(1))
}

/// Where the store is ([`Location::choose`]: `--store` or `-d`, never both).
fn location(g: &GlobalArgs) -> Result<Location> {
    Location::choose(g.state_dir.clone(), g.store.as_deref())
}

/// `-n`, validated.
fn namespace(g: &GlobalArgs) -> Result<Option<Namespace>> {
    crate::engine::request::field::namespace(g.namespace.as_deref())
}

/// The pool named on the command line, in the `-n` scope.
fn pool_ref(g: &GlobalArgs, pool: &str) -> Result<PoolRef> {
    crate::engine::request::field::pool_ref(g.namespace.as_deref(), pool)
}

/// The scopes a command over many pools covers: `-n NS` alone, else every scope (see
/// [`crate::engine::scopes::scopes`]).
fn scopes(store: &dyn Store, g: &GlobalArgs) -> Result<Vec<Option<Namespace>>> {
    crate::engine::scopes::scopes(store, &Scope::everything(), Verb::Read, namespace(g)?)
}

/// The scopes of a command that asks the store about every scope at once when not given
/// `-n`: `None` then; with `-n NS`, [`scopes`] (exit 3 if it holds nothing).
pub(super) fn named_scopes(
    store: &dyn Store,
    g: &GlobalArgs,
) -> Result<Option<Vec<Option<Namespace>>>> {
    crate::engine::scopes::named_scopes(store, &Scope::everything(), Verb::Read, namespace(g)?)
}

/// Prints what a request noticed (its warnings, then its notes), once, and gives its
/// result.
fn told<T>(outcome: crate::engine::request::Outcome<T>) -> Result<T> {
    tell(&outcome);
    outcome.result
}

/// Prints a request's warnings, then its notes, on stderr.
fn tell<T>(outcome: &crate::engine::request::Outcome<T>) {
    crate::cli::output::warn(&outcome.warnings);
    for note in &outcome.notes {
        crate::cli::output::diagnostic(note);
    }
}

/// A flag that SIGINT or SIGTERM sets while a long command runs (`vpc delete`), which it
/// looks at between two steps, to stop there and say what it did and how to finish. A
/// second signal ends the process at once, as without the flag.
fn stop_on_signal() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        let installed = signal_hook::flag::register_conditional_shutdown(
            signal,
            crate::error::exit::INTERRUPTED,
            std::sync::Arc::clone(&stop),
        )
        .and_then(|_| signal_hook::flag::register(signal, std::sync::Arc::clone(&stop)));
        installed.map_err(|e| Error::io("signal handler", e))?;
    }
    Ok(stop)
}
