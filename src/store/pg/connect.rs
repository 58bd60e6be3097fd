//! Opening a connection: the parsed connection string turned into a `postgres::Config`, and
//! TLS through rustls (no system OpenSSL) with libpq's `sslmode` meanings:
//!
//! | sslmode | encrypted | certificate checked | host name checked |
//! |---|---|---|---|
//! | `disable` | no | | |
//! | `allow`, `prefer` (default) | if the server offers it | no | no |
//! | `require` | yes | no (as libpq without a root certificate) | no |
//! | `verify-ca` | yes | yes | no |
//! | `verify-full` | yes | yes | yes |
//!
//! Roots for `verify-*`: `sslrootcert`, else `~/.postgresql/root.crt`, else the system's
//! certificate store (`sslrootcert=system` asks for it explicitly). Unix-domain sockets never
//! use TLS, as with libpq.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use postgres::config::SslMode;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::conninfo::ConnInfo;
use super::timeouts::Timeouts;

/// How long a connection attempt may take when the string sets no `connect_timeout`.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What `sslmode` asks of the certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verify {
    Nothing,
    Chain,
    ChainAndName,
}

/// A connection made ready: the `postgres` configuration, its TLS, the timeouts of its
/// transactions, and how long the whole handshake may take.
pub struct Prepared {
    pub config: postgres::Config,
    pub tls: Tls,
    pub timeouts: Timeouts,
    /// `connect_timeout` for each host, as libpq applies it, bounding the TCP connect, the
    /// TLS handshake and the startup (authentication, the first `ReadyForQuery`) together.
    pub handshake: Duration,
}

/// The connection to make for `info` (defaults and password already filled in), or why
/// it cannot be made (never quoting the password).
pub fn prepare(info: &ConnInfo, password: Option<&str>) -> Result<Prepared, String> {
    let (config, tls, timeouts) = config(info, password)?;
    let hosts = config.get_hosts().len().max(1);
    let per_host = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    Ok(Prepared {
        config,
        tls,
        timeouts,
        handshake: per_host * u32::try_from(hosts).unwrap_or(u32::MAX),
    })
}

/// The `postgres` configuration for `info`, its TLS and its transactions' timeouts.
fn config(
    info: &ConnInfo,
    password: Option<&str>,
) -> Result<(postgres::Config, Tls, Timeouts), String> {
    let mut config = postgres::Config::new();
    let hosts = addresses(&mut config, info)?;
    if let Some(user) = info.get("user") {
        config.user(user);
    }
    if let Some(db) = info.get("dbname") {
        config.dbname(db);
    }
    if let Some(p) = password {
        config.password(p);
    }
    // The timeouts are set per transaction (`SET LOCAL`); the rest of `options` goes to
    // the server as given.
    let (timeouts, options) = Timeouts::from_options(info.get("options"))?;
    if let Some(o) = options {
        config.options(&o);
    }
    config.application_name(info.get("application_name").unwrap_or("ipamctl"));
    session_settings(&mut config, info)?;
    let sockets_only = !hosts.is_empty()
        && hosts.iter().all(|h| h.starts_with('/'))
        && info.get("hostaddr").is_none();
    let mode = info.get("sslmode").unwrap_or("prefer");
    let (ssl, verify) = match mode {
        "disable" => (SslMode::Disable, None),
        "allow" | "prefer" => (SslMode::Prefer, Some(Verify::Nothing)),
        "require" => (SslMode::Require, Some(Verify::Nothing)),
        "verify-ca" => (SslMode::Require, Some(Verify::Chain)),
        "verify-full" => (SslMode::Require, Some(Verify::ChainAndName)),
        other => {
            let _ = other;
            return Err(
                "`sslmode` is not one of disable, allow, prefer, require, verify-ca, verify-full"
                    .into(),
            );
        }
    };
    match verify {
        Some(verify) if !sockets_only => {
            config.ssl_mode(ssl);
            let roots = match verify {
                Verify::Nothing => None,
                Verify::Chain | Verify::ChainAndName => Some(roots(info.get("sslrootcert"))?),
            };
            let tls = Tls::Rustls(Box::new(rustls_config(verify, roots)?));
            Ok((config, tls, timeouts))
        }
        _ => {
            config.ssl_mode(SslMode::Disable);
            Ok((config, Tls::None, timeouts))
        }
    }
}

/// The hosts, addresses and ports of `info` into `config`; the hosts as given.
fn addresses<'a>(
    config: &mut postgres::Config,
    info: &'a ConnInfo,
) -> Result<Vec<&'a str>, String> {
    let hosts: Vec<&str> = info
        .get("host")
        .map(|h| h.split(',').collect())
        .unwrap_or_default();
    for host in &hosts {
        config.host(host);
    }
    if let Some(addrs) = info.get("hostaddr") {
        for addr in addrs.split(',') {
            let ip = addr
                .parse()
                .map_err(|_| "`hostaddr` is not an IP address (not shown)".to_owned())?;
            config.hostaddr(ip);
            if hosts.is_empty() {
                config.host(addr);
            }
        }
    }
    for port in info.get("port").unwrap_or("5432").split(',') {
        let port = port
            .parse()
            .map_err(|_| "`port` is not a port number (not shown)".to_owned())?;
        config.port(port);
    }
    Ok(hosts)
}

/// The settings of the session once connected: how long connecting may take, keepalives,
/// and `target_session_attrs`.
fn session_settings(config: &mut postgres::Config, info: &ConnInfo) -> Result<(), String> {
    let timeout = match info.get("connect_timeout") {
        Some(t) => {
            let secs: u64 = t.parse().map_err(|_| {
                format!(
                    "`connect_timeout` `{}` is not a number of seconds",
                    t.escape_debug()
                )
            })?;
            if secs == 0 {
                // libpq's 0 is "wait forever".
                return Err(
                    "`connect_timeout` 0 means no timeout at all to libpq: connecting would be unbounded; give a number of seconds (at least 2)"
                        .into(),
                );
            }
            Duration::from_secs(secs.max(2))
        }
        None => DEFAULT_CONNECT_TIMEOUT,
    };
    config.connect_timeout(timeout);
    // A server that vanishes without a FIN is noticed, not waited for forever.
    config.keepalives(true);
    config.keepalives_idle(Duration::from_secs(30));
    if let Some(t) = info.get("target_session_attrs") {
        config.target_session_attrs(match t {
            "any" => postgres::config::TargetSessionAttrs::Any,
            "read-write" => postgres::config::TargetSessionAttrs::ReadWrite,
            other => {
                return Err(format!(
                    "`target_session_attrs` `{}` is not supported (any, read-write)",
                    other.escape_debug()
                ));
            }
        });
    }
    Ok(())
}

/// The TLS connector a connection uses.
pub enum Tls {
    /// No TLS (a Unix-domain socket, or `sslmode=disable`).
    None,
    /// rustls, configured for the `sslmode`.
    Rustls(Box<rustls::ClientConfig>),
}

/// Why a connection was not made.
pub enum Failed {
    /// The client or the server said why.
    Error(postgres::Error),
    /// The handshake did not finish within [`Prepared::handshake`].
    TimedOut(Duration),
}

/// Connects as `prepared` says, giving up once the whole handshake (TCP, TLS, startup) has
/// taken [`Prepared::handshake`]: the client's own `connect_timeout` bounds only the TCP
/// connect, and a server or pooler that accepts and then says nothing (stopped, or out of
/// server connections) would otherwise be waited for forever. The attempt runs on a thread
/// of its own; one given up on is left to the process's exit.
pub fn connect(prepared: Prepared) -> Result<postgres::Client, Failed> {
    let Prepared {
        config,
        tls,
        handshake,
        ..
    } = prepared;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let client = match tls {
            Tls::None => config.connect(postgres::NoTls),
            Tls::Rustls(c) => config.connect(tokio_postgres_rustls::MakeRustlsConnect::new(*c)),
        };
        let _ = tx.send(client);
    });
    match rx.recv_timeout(handshake) {
        Ok(connected) => connected.map_err(Failed::Error),
        Err(_) => Err(Failed::TimedOut(handshake)),
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The trusted roots for `verify-ca`/`verify-full`.
fn roots(sslrootcert: Option<&str>) -> Result<RootCertStore, String> {
    let default = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".postgresql/root.crt"));
    let file = match sslrootcert {
        Some("system") => None,
        Some(f) => Some(PathBuf::from(f)),
        None => default.filter(|f| f.is_file()),
    };
    let mut store = RootCertStore::empty();
    match file {
        Some(file) => {
            for cert in read_certs(&file)? {
                store
                    .add(cert)
                    .map_err(|e| format!("{}: {e}", file.display()))?;
            }
        }
        None => {
            store.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    if store.is_empty() {
        return Err(
            "no trusted root certificate for `sslmode=verify-ca`/`verify-full`: set `sslrootcert`"
                .into(),
        );
    }
    Ok(store)
}

fn read_certs(file: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(file)
        .map_err(|e| format!("{}: {e}", file.display()))?
        .collect();
    certs.map_err(|e| format!("{}: {e}", file.display()))
}

fn rustls_config(
    verify: Verify,
    roots: Option<RootCertStore>,
) -> Result<rustls::ClientConfig, String> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = match (verify, roots) {
        (Verify::ChainAndName, Some(roots)) => {
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("TLS: {e}"))?
        }
        (Verify::Chain, Some(roots)) => Arc::new(ChainOnly(
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("TLS: {e}"))?,
        )),
        _ => Arc::new(Unverified(provider)),
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// `sslmode=require`: encryption without checking who is at the other end (libpq's
/// meaning without a root certificate). The handshake's signatures are still checked.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `sslmode=verify-ca`: the chain must lead to a trusted root; the name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
