//! `ipamctl serve`: the GraphQL API over HTTP, a front end at the command line's rank. It
//! imports the engine, the store and the model, never `cli`; the command line's `serve`
//! only parses flags into a [`Config`] and calls [`run`].
//!
//! Async at the edge only: the runtime's threads parse HTTP and GraphQL and wait; every
//! request that touches the store is handed to threads that own their store connections
//! ([`work`]): the engine's executor for claims and releases, a few readers for the
//! queries. No lock and no transaction is ever held across an `.await`.

mod admin;
mod api;
pub mod auth;
mod done;
mod errors;
mod graphql;
mod held;
mod http;
mod limits;
mod listen;
mod log;
mod objects;
mod pool_map;
mod prefix_claims;
mod quota;
mod routes;
mod schema;
mod stats;
mod supernets;
mod work;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::store::registry::Location;

pub use limits::Limits;
pub use log::LogFormat;

/// Everything `ipamctl serve` is told, parsed.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the store is.
    pub location: Location,
    /// The addresses to listen on (port 0: a free one).
    pub listen: Vec<SocketAddr>,
    /// `--tls-cert` and `--tls-key` (PEM), both or neither.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// `--insecure`: plain HTTP on a non-loopback address.
    pub insecure: bool,
    /// `--tokens FILE`.
    pub tokens: Option<PathBuf>,
    /// How long the requests in flight may take to finish after SIGTERM.
    pub shutdown_timeout: Duration,
    /// `--reap-interval`, `--reap-grace`: release lapsed leases this often, this long
    /// after they lapse.
    pub reap: Option<(Duration, Duration)>,
    pub log_format: LogFormat,
    /// `--cors-origin`: the origins a browser may call from (none: no CORS headers).
    pub cors_origins: Vec<String>,
    /// How many connections to a database the claims run on (the executor's workers).
    pub workers: usize,
    pub limits: Limits,
}

/// The SDL of the schema (`ipamctl serve --print-schema`).
pub fn sdl() -> String {
    api::build(&Limits::default(), None).sdl()
}

/// Runs the server until SIGTERM or SIGINT, then drains it: exit 0 on a clean stop.
pub fn run(config: Config) -> Result<()> {
    refuse_plain_http(&config)?;
    let tls = config
        .tls
        .as_ref()
        .map(|(cert, key)| listen::tls_config(cert, key))
        .transpose()?;
    let auth = auth::Authenticator::load(config.tokens.as_deref())?;
    let work = Arc::new(work::Work::start(&config.location, config.workers)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ipamctl-serve")
        .build()
        .map_err(|e| Error::io("tokio runtime", e))?;
    if let Some((every, grace)) = config.reap {
        runtime.spawn(reap(Arc::clone(&work), every, grace));
    }
    let state = http::state(&config, Arc::clone(&work), auth);
    let served = runtime.block_on(listen::serve(&config, state, tls));
    // The requests are drained (or the time is up): the executor finishes what it holds.
    drop(runtime);
    if let Ok(work) = Arc::try_unwrap(work) {
        work.stop(config.shutdown_timeout);
    }
    served
}

/// The reaper (`--reap-interval`): every `every`, the lapsed leases of every namespace
/// released, `grace` after they lapsed ([`crate::engine::lease::reap`], on a reader's
/// store, with the server's own authority), and a line on stderr when it released any.
/// It stops with the runtime.
async fn reap(work: Arc<work::Work>, every: Duration, grace: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let reaped = work
            .read(move |store| {
                let mut warnings = crate::engine::warning::Warnings::default();
                crate::engine::lease::reap(store, None, None, grace, (true, false), &mut warnings)
            })
            .await;
        match reaped {
            Ok(done) => {
                let released = done
                    .lapsed
                    .iter()
                    .filter(|(_, v)| *v == crate::engine::lease::Reaped::Released)
                    .count();
                if released > 0 {
                    log::say(&format!(
                        "reaper: released {released} lapsed lease{}",
                        if released == 1 { "" } else { "s" }
                    ));
                }
            }
            Err(e) => log::warning(&format!("reaper: {e}")),
        }
    }
}

/// Plain HTTP on an address other hosts reach is refused unless `--insecure`: a bearer
/// token would cross the network in clear.
fn refuse_plain_http(config: &Config) -> Result<()> {
    if config.tls.is_some() || config.insecure {
        return Ok(());
    }
    match config.listen.iter().find(|a| !a.ip().is_loopback()) {
        Some(open) => Err(Error::Usage {
            message: format!(
                "`--listen {open}` is not a loopback address: without TLS, tokens would cross the network in clear"
            ),
            hint: Some(format!(
                "ipamctl serve --listen {open} --tls-cert cert.pem --tls-key key.pem (or --insecure behind a TLS proxy)"
            )),
        }),
        None => Ok(()),
    }
}
