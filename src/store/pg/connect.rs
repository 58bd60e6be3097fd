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

/// How long a connection attempt may take when the string sets no `connect_timeout`.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What `sslmode` asks of the certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verify {
    Nothing,
    Chain,
    ChainAndName,
}

/// The `postgres` configuration for `info` (defaults and password already filled in),
/// or why it cannot be built (never quoting the password).
pub fn config(info: &ConnInfo, password: Option<&str>) -> Result<(postgres::Config, Tls), String> {
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
    if let Some(o) = info.get("options") {
        config.options(o);
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
            Ok((config, Tls::Rustls(Box::new(rustls_config(verify, roots)?))))
        }
        _ => {
            config.ssl_mode(SslMode::Disable);
            Ok((config, Tls::None))
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

/// Connects with `config` and `tls`.
pub fn connect(config: &postgres::Config, tls: Tls) -> Result<postgres::Client, postgres::Error> {
    match tls {
        Tls::None => config.connect(postgres::NoTls),
        Tls::Rustls(c) => config.connect(tokio_postgres_rustls::MakeRustlsConnect::new(*c)),
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
