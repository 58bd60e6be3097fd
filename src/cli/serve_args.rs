//! `ipamctl serve`'s flags (its `--help`): where to listen, TLS, the tokens, and every limit
//! a client could otherwise make the server spend without bound.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

// `serve`'s arguments (help text on the `Serve` variant: see `Command`'s docs).
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// An address to listen on, HOST:PORT (repeatable); port 0 picks a free port, which the
    /// `listening on` line names.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    pub listen: Vec<String>,

    /// The server's certificate chain (PEM); with `--tls-key`, serve HTTPS.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of `--tls-cert` (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Serve plain HTTP on an address other than loopback (behind a proxy that terminates
    /// TLS); refused (exit 2) without it.
    #[arg(long)]
    pub insecure: bool,

    /// The tokens file (`ipamctl token create`): the bearers the server knows.
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,

    /// How long the requests in flight may take to finish after SIGTERM or SIGINT.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: std::time::Duration,

    /// How each request's log line (stderr) is written.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    pub log_format: LogFormatArg,

    /// Release lapsed leases (`allocate --ttl`) every DURATION while serving, as
    /// `reconcile --expired --apply --grace` (`--reap-grace`) would, in every namespace;
    /// each is judged again as it is released, so a renewal that lands first keeps it.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub reap_interval: Option<std::time::Duration>,

    /// With `--reap-interval`: how long after `expiresAt` a lease is released.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = humantime::parse_duration, requires = "reap_interval")]
    pub reap_grace: std::time::Duration,

    /// A browser origin allowed to call the API (repeatable); no CORS headers without one.
    #[arg(long, value_name = "ORIGIN")]
    pub cors_origin: Vec<String>,

    /// Connections to the database the claims run on (a state directory runs one at a time).
    /// Requests waiting together share one transaction a connection, so fewer connections
    /// make larger groups and spend less of the database's CPU a claim: on 2 cores with the
    /// database beside the server, 2 answered 32 clients 1.2x faster than 4
    /// (`bench/serve-workers`, docs/src/performance.md). Raise it where the database has
    /// cores to spare.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: u16,

    /// The largest request body, in bytes (413 above it).
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,

    /// The deepest a query may nest.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub max_depth: usize,

    /// A query's largest complexity (one per field, as it runs).
    #[arg(long, value_name = "N", default_value_t = 5000)]
    pub max_complexity: usize,

    /// The most fields a document may write.
    #[arg(long, value_name = "N", default_value_t = 5000)]
    pub max_fields: usize,

    /// The most aliases a document may write.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_aliases: usize,

    /// The most claims one request may ask for: `allocate` fields (aliased or not) and
    /// `allocateMany` inputs, counted together.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_claims: usize,

    /// The time a client has to send a request's headers, and its body (408 after).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub read_timeout: std::time::Duration,

    /// The most requests served at once (503 above it).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_in_flight: usize,

    /// The longest one request may run.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub request_timeout: std::time::Duration,

    /// Print the GraphQL schema (SDL) on stdout and exit.
    #[arg(long)]
    pub print_schema: bool,
}

/// `--log-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormatArg {
    /// `key=value` pairs.
    Text,
    /// One JSON object a line.
    Json,
}
