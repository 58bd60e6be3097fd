//! The command line as a client of `ipamctl serve` (`--server URL`): a front end, not a
//! store. A command that scripts and CI jobs use is validated here as locally, sent to the
//! server's `/graphql` as a typed request ([`documents`]: variables, never values written
//! into a document; `metrics` asks `GET /metrics`), and its answer printed by the local command's own printer, with the
//! same exit codes ([`transport`] says which failures of the connection are which). A
//! command that needs the state itself is exit 2, naming why.

mod claims;
mod documents;
mod metrics;
mod pools;
mod quotas;
mod reads;
mod subnets;
mod supernets;
mod transport;
mod vpcs;

use std::io::Write;

use crate::cli::{
    Cli, Command, GlobalArgs, MacCommand, PoolCommand, QuotaCommand, SubnetCommand, VpcCommand,
};
use crate::error::{Error, Result, exit};

/// Commands that never touch a store, run here whatever `--server` says.
pub fn runs_locally(command: &Command) -> bool {
    matches!(command, Command::Completions(_) | Command::Schema(_))
}

/// Runs `cli` on the server `--server` names; the exit code on success.
pub fn run(cli: &Cli, out: &mut dyn Write) -> Result<i32> {
    let g = &cli.global;
    if g.store.is_some() || g.state_dir.is_some() {
        return Err(Error::usage(
            "--server runs the command on a server: not with --store or --state-dir",
        ));
    }
    refuse_local_only(&cli.command)?;
    let mut client = client(g)?;
    match &cli.command {
        Command::Allocate(args) => match &args.file {
            Some(file) => return claims::allocate_batch(&mut client, g, args, file, out),
            None => claims::allocate(&mut client, g, args, out)?,
        },
        Command::Release(args) => match &args.file {
            Some(file) => return claims::release_batch(&mut client, g, args, file, out),
            None => claims::release(&mut client, g, args, out)?,
        },
        Command::List(args) => reads::list(&mut client, g, args, out)?,
        Command::Pool(PoolCommand::List) => reads::pool_list(&mut client, g, out)?,
        Command::Pool(PoolCommand::Show(args)) => reads::pool_show(&mut client, g, args, out)?,
        Command::Pool(PoolCommand::Create(args)) => pools::create(&mut client, g, args, out)?,
        Command::Pool(PoolCommand::Delete(args)) => pools::delete(&mut client, g, args, out)?,
        Command::Vpc(command) => vpc(&mut client, g, command, out)?,
        Command::Subnet(command) => subnet(&mut client, g, command, out)?,
        Command::Mac(MacCommand::Set(args)) => claims::set_mac(&mut client, g, args, out)?,
        Command::Metrics(args) => metrics::metrics(&mut client, g, args, out)?,
        Command::Quota(QuotaCommand::List(_)) => quotas::list(&mut client, g, out)?,
        _ => unreachable!("refused above"),
    }
    Ok(exit::OK)
}

/// `vpc …` through a server.
fn vpc(
    client: &mut transport::Client,
    g: &GlobalArgs,
    command: &VpcCommand,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        VpcCommand::Create(args) => vpcs::create(client, g, args, out),
        VpcCommand::Get(args) => vpcs::get(client, g, &args.name, out),
        VpcCommand::List => vpcs::list(client, g, out),
        VpcCommand::Delete(args) => vpcs::delete(client, g, args, out),
    }
}

/// `subnet …` through a server.
fn subnet(
    client: &mut transport::Client,
    g: &GlobalArgs,
    command: &SubnetCommand,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        SubnetCommand::Create(args) => subnets::create(client, g, args, out),
        SubnetCommand::List(args) => subnets::list(client, g, args.pool.as_deref(), out),
        SubnetCommand::Show(args) => subnets::show(client, g, args, out),
        SubnetCommand::Delete(args) => subnets::delete(client, g, args, out),
    }
}

/// The client `--server`, `--token-file` (else `IPAMCTL_TOKEN`) and `--cacert` describe.
fn client(g: &GlobalArgs) -> Result<transport::Client> {
    let url = g.server.as_deref().expect("run only with --server");
    let token = match &g.token_file {
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|e| Error::io(file, e))?;
            let token = text.trim().to_owned();
            if token.is_empty() {
                return Err(Error::invalid(file.display().to_string(), "holds no token"));
            }
            Some(token)
        }
        None => std::env::var("IPAMCTL_TOKEN")
            .ok()
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty()),
    };
    transport::Client::new(url, token.as_deref(), g.cacert.as_deref())
}

/// Exit 2 for a command this client does not run through a server, saying why.
fn refuse_local_only(command: &Command) -> Result<()> {
    let (name, why) = match command {
        Command::Allocate(_) | Command::Release(_) | Command::List(_) => return Ok(()),
        Command::Pool(_) => return Ok(()),
        Command::Vpc(_) | Command::Subnet(_) | Command::Metrics(_) | Command::Quota(_) => {
            return Ok(());
        }
        Command::Diff(_) => ("diff", "it compares a state directory with its git history"),
        Command::History(_) => ("history", "it reads the store's own history"),
        Command::Check(_) => (
            "check",
            "it reads (and with --fix repairs) the store itself",
        ),
        Command::Import(_) => ("import", "it moves state between two stores"),
        Command::Export(_) => ("export", "it moves state between two stores"),
        Command::Init(_) => ("init", "it creates a store"),
        Command::Serve(_) => ("serve", "it is the server"),
        Command::Token(_) => ("token", "it keeps a server's tokens file"),
        Command::Apply(_) => ("apply", "the API has no manifests' input"),
        Command::Mac(_) => return Ok(()),
        Command::Report => ("report", "it reads the store itself"),
        Command::Reconcile(_) => ("reconcile", "it reads the store itself"),
        Command::Renew(_) => ("renew", "the API has no renewal yet"),
        Command::Dhcp(_) => ("dhcp", "it reads the store itself"),
        Command::Dns(_) => ("dns", "it reads the store itself"),
        Command::Completions(_) | Command::Schema(_) => return Ok(()),
    };
    Err(Error::Usage {
        message: format!("`{name}` does not run through a server (`--server`): {why}"),
        hint: Some("run it where the state is, with --store URL or -d DIR".into()),
    })
}
