//! Listening: one accept loop per `--listen` address, each connection served by hyper
//! (HTTP/1.1, headers read within `--read-timeout`, so a slow client holds only its own
//! connection), over TLS (rustls) when `--tls-cert`/`--tls-key` are given. On SIGTERM or
//! SIGINT the loops stop accepting and the connections in flight are drained, bounded by
//! `--shutdown-timeout`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use super::Config;
use super::http::State;
use super::log::say;
use crate::error::{Error, Result};

/// The TLS configuration of `--tls-cert` and `--tls-key` (PEM); exit 2 naming the file
/// that holds no certificate or key.
pub fn tls_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let invalid = |path: &Path, what: &str, e: &dyn std::fmt::Display| Error::Usage {
        message: format!("{}: {what}: {e}", path.display()),
        hint: Some("give PEM files: --tls-cert cert.pem --tls-key key.pem".into()),
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| invalid(cert, "no certificate", &e))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| invalid(cert, "no certificate", &e))?;
    if certs.is_empty() {
        return Err(invalid(
            cert,
            "no certificate",
            &"the file holds no CERTIFICATE block",
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| invalid(key, "no private key", &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| Error::Usage {
            message: format!("the TLS certificate and key do not make a server: {e}"),
            hint: Some("check that --tls-key is the key of --tls-cert".into()),
        })?;
    let mut config = config;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves until a signal, then drains.
pub async fn serve(
    config: &Config,
    state: State,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Result<()> {
    let router = super::routes::router(state, &config.cors_origins);
    let mut listeners = Vec::new();
    for addr in &config.listen {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| Error::io(format!("--listen {addr}"), e))?;
        listeners.push(listener);
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    for l in &listeners {
        let at = l.local_addr().map_err(|e| Error::io("--listen", e))?;
        say(&format!("listening on {scheme}://{at}"));
    }
    let graceful = Arc::new(GracefulShutdown::new());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut loops = Vec::new();
    for listener in listeners {
        let accept = Accept {
            router: router.clone(),
            tls: tls.clone().map(TlsAcceptor::from),
            read_timeout: config.limits.read_timeout,
        };
        let (stop, graceful) = (stop_rx.clone(), Arc::clone(&graceful));
        loops.push(tokio::spawn(accept.run(listener, stop, graceful)));
    }
    signal().await?;
    say("stopping: no new connections; finishing the requests in flight");
    let _ = stop_tx.send(true);
    for l in loops {
        let _ = l.await;
    }
    // The accept loops held the only other references.
    let drained = async {
        if let Ok(graceful) = Arc::try_unwrap(graceful) {
            graceful.shutdown().await;
        }
    };
    match tokio::time::timeout(config.shutdown_timeout, drained).await {
        Ok(()) => say("stopped"),
        Err(_) => say(&format!(
            "stopped: requests still in flight after --shutdown-timeout {} were cut",
            humantime::format_duration(config.shutdown_timeout)
        )),
    }
    Ok(())
}

/// Waits for SIGTERM or SIGINT.
async fn signal() -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let io = |e| Error::io("signal handler", e);
    let mut term = signal(SignalKind::terminate()).map_err(io)?;
    let mut int = signal(SignalKind::interrupt()).map_err(io)?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

/// One listener's accept loop.
struct Accept {
    router: axum::Router,
    tls: Option<TlsAcceptor>,
    read_timeout: std::time::Duration,
}

impl Accept {
    async fn run(
        self,
        listener: TcpListener,
        mut stop: tokio::sync::watch::Receiver<bool>,
        graceful: Arc<GracefulShutdown>,
    ) {
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    // Out of file descriptors and the like: the next accept may succeed.
                    Err(_) => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = stop.changed() => return,
            };
            let _ = stream.set_nodelay(true);
            let (router, tls, watcher) =
                (self.router.clone(), self.tls.clone(), graceful.watcher());
            let timeout = self.read_timeout;
            tokio::spawn(async move {
                let _ = serve_one(router, tls, watcher, timeout, stream, peer).await;
            });
        }
    }
}

/// Serves one connection (after its TLS handshake, within `timeout`).
async fn serve_one(
    router: axum::Router,
    tls: Option<TlsAcceptor>,
    watcher: hyper_util::server::graceful::Watcher,
    timeout: std::time::Duration,
    stream: tokio::net::TcpStream,
    _peer: SocketAddr,
) -> std::result::Result<(), ()> {
    let service = TowerToHyperService::new(router);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .keep_alive(true);
    match tls {
        Some(acceptor) => {
            let stream = tokio::time::timeout(timeout, acceptor.accept(stream))
                .await
                .map_err(|_| ())?
                .map_err(|_| ())?;
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            watcher.watch(conn).await.map_err(|_| ())
        }
        None => {
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            watcher.watch(conn).await.map_err(|_| ())
        }
    }
}
