//! The command line of `ipamctl token`: make, list and revoke the tokens a server accepts.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `ipamctl token ...`. Not deferred: `create`'s own repeatable `-n/--namespace` then
/// stands in for the global one (clap propagates a global argument only to a subcommand
/// that has no argument of its id, and a deferred subcommand has none yet).
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a token and print its secret, once, alone on stdout.
    ///
    /// The secret is `ipamctl_` and 64 hex digits (256 random bits); the file keeps only
    /// its SHA-256, so a lost secret cannot be shown again: revoke the token and make
    /// another. A name the file holds already is exit 4; a bad name, pattern or verb is
    /// exit 2; nothing is written then. The file is created (mode 0600) if there is none.
    /// `-o` is refused (exit 2): the secret is the only output.
    Create(TokenCreateArgs),
    /// List the tokens: name, namespaces, verbs, cluster scope and creation time, never a
    /// secret or its hash (`-o json|yaml` for a List, `-o name` for `token/<name>` lines).
    List(TokenFileArgs),
    /// Revoke a token: its record leaves the file and its secret authenticates nothing
    /// more (a running server notices within two seconds). An unknown name is exit 3.
    /// Prints `token/<name> revoked` (with `-o json|yaml`, the token with `status.action`).
    Revoke(TokenRevokeArgs),
}

/// The tokens file every `token` command names.
#[derive(Debug, Args)]
pub struct TokenFileArgs {
    /// The tokens file (the one `serve --tokens` reads).
    #[arg(long, value_name = "FILE", env = "IPAMCTL_TOKENS")]
    pub tokens: PathBuf,
}

// `ipamctl token create`.
#[derive(Debug, Args)]
pub struct TokenCreateArgs {
    /// The token's name, unique in the file (an RFC 1123 label, e.g. `tenant-acme`); the
    /// server's logs name a request's token by it.
    pub name: String,

    #[command(flatten)]
    pub file: TokenFileArgs,

    /// A namespace the token reaches (`acme/prod`), the namespaces beneath one (`acme/*`),
    /// or every namespace (`*`). Repeatable; here `-n` takes a pattern, and may be given
    /// more than once.
    #[arg(
        short = 'n',
        long = "namespace",
        id = "namespace",
        value_name = "PATTERN"
    )]
    pub namespaces: Vec<String>,

    /// What the token may do there, comma-separated: `read` (the queries), `claim`
    /// (allocate and release addresses, claim floating IPs), `admin` (create and delete
    /// VPCs and subnets; public pools with `--cluster`).
    #[arg(long, value_name = "VERBS", value_delimiter = ',', required = true)]
    pub verbs: Vec<String>,

    /// Add the cluster scope: the public pools (and, with `admin`, creating them).
    #[arg(long)]
    pub cluster: bool,
}

// `ipamctl token revoke`.
#[derive(Debug, Args)]
pub struct TokenRevokeArgs {
    /// The token's name.
    pub name: String,

    #[command(flatten)]
    pub file: TokenFileArgs,
}
