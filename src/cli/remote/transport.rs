//! The one connection of a `--server` command: HTTP/1.1 (kept alive across a batch's
//! requests) over TCP, or TLS verified against the system's roots or `--cacert`, with every
//! wait bounded. Its failures are typed by when they happen: before anything was sent
//! ([`Error::Unreachable`], [`Error::Tls`]: nothing happened), or after a mutation was
//! sent and before its answer came ([`Error::OutcomeUnknown`], as a lost `COMMIT` on
//! PostgreSQL: asking again is safe).
//!
//! hyper's client half, on the tokio runtime, rustls (ring) and tokio-rustls that
//! `ipamctl serve` already builds: a small current-thread runtime drives one request at a
//! time, so the command stays synchronous, as the engine is. The token is a header marked
//! sensitive and is never printed, logged or put in an error.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// How long connecting (TCP and TLS) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an answer may take once the request is sent: longer than the server's own
/// `--request-timeout` (30 s by default), so that its answer, not ours, says a request ran
/// too long.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(90);

/// A byte stream to the server, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Where the server is, parsed from `--server`.
struct Endpoint {
    /// As given, for messages.
    url: String,
    host: String,
    port: u16,
    /// The `Host` header.
    authority: String,
    /// The path the server's routes hang under (`""` at the root).
    base: String,
    tls: bool,
}

impl Endpoint {
    fn parse(url: &str) -> Result<Endpoint> {
        let bad = |why: &str| Error::Usage {
            message: format!("--server `{url}` {why}"),
            hint: Some("--server https://ipam.example.net:8443".into()),
        };
        let uri: Uri = url.parse().map_err(|_| bad("is not a URL"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad("is not an http:// or https:// URL")),
        };
        let authority = uri.authority().ok_or_else(|| bad("names no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("carries credentials: give the token with --token-file"));
        }
        let host = authority.host().trim_matches(['[', ']']).to_owned();
        Ok(Endpoint {
            url: url.trim_end_matches('/').to_owned(),
            port: authority.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            authority: authority.as_str().to_owned(),
            base: uri.path().trim_end_matches('/').to_owned(),
            host,
            tls,
        })
    }
}

/// The client of one command: its endpoint, credentials, TLS and open connection.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    at: Endpoint,
    /// `Bearer TOKEN`, marked sensitive.
    bearer: Option<HeaderValue>,
    tls: Option<tokio_rustls::TlsConnector>,
    sender: Option<SendRequest<Full<Bytes>>>,
}

/// What a server answered: its status and body.
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
}

impl Client {
    /// A client of `url` presenting `token`, verifying TLS with `cacert` (PEM) or the
    /// system's roots. Connects on the first request.
    pub fn new(url: &str, token: Option<&str>, cacert: Option<&Path>) -> Result<Client> {
        let at = Endpoint::parse(url)?;
        let tls = if at.tls {
            Some(tokio_rustls::TlsConnector::from(Arc::new(tls_config(
                cacert,
            )?)))
        } else {
            None
        };
        let bearer = token
            .map(|t| {
                let mut value = HeaderValue::from_str(&format!("Bearer {t}"))
                    .map_err(|_| Error::usage("the token holds characters no header can carry"))?;
                value.set_sensitive(true);
                Ok::<_, Error>(value)
            })
            .transpose()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("tokio runtime", e))?;
        Ok(Client {
            runtime,
            at,
            bearer,
            tls,
            sender: None,
        })
    }

    /// The server's URL, as given.
    pub fn url(&self) -> &str {
        &self.at.url
    }

    /// Sends `body` (JSON) to `POST /graphql`. `changes` says whether the request may change
    /// the state: a lost answer is then [`Error::OutcomeUnknown`].
    pub fn post_graphql(&mut self, body: Vec<u8>, changes: bool) -> Result<Answer> {
        let request = self
            .request(Method::POST, "/graphql")
            .header(header::CONTENT_TYPE, "application/json")
            .header(
                header::ACCEPT,
                "application/graphql-response+json, application/json",
            )
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::usage(format!("--server {}: {e}", self.at.url)))?;
        self.send(request, changes)
    }

    /// `GET path` (with its query), for an endpoint that is not GraphQL (`/metrics`); it
    /// changes nothing, so a lost answer is [`Error::Unreachable`].
    pub fn get(&mut self, path: &str) -> Result<Answer> {
        let request = self
            .request(Method::GET, path)
            .header(header::ACCEPT, "text/plain")
            .body(Full::new(Bytes::new()))
            .map_err(|e| Error::usage(format!("--server {}: {e}", self.at.url)))?;
        self.send(request, false)
    }

    fn request(&self, method: Method, path: &str) -> hyper::http::request::Builder {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.at.base))
            .header(header::HOST, &self.at.authority);
        if let Some(bearer) = &self.bearer {
            builder = builder.header(header::AUTHORIZATION, bearer.clone());
        }
        builder
    }

    fn send(&mut self, request: Request<Full<Bytes>>, changes: bool) -> Result<Answer> {
        let mut sender = match self.sender.take() {
            Some(s) if !s.is_closed() => s,
            _ => self.connect()?,
        };
        if self.runtime.block_on(sender.ready()).is_err() {
            // A kept-alive connection the server has since closed: nothing was sent on it.
            sender = self.connect()?;
            self.runtime
                .block_on(sender.ready())
                .map_err(|e| Error::Unreachable {
                    message: format!("cannot reach the server {}: {e}", self.at.url),
                })?;
        }
        let exchange = async {
            let response = sender.send_request(request).await?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>(Answer { status, body })
        };
        let answered = self
            .runtime
            .block_on(async { tokio::time::timeout(ANSWER_TIMEOUT, exchange).await });
        let why = match answered {
            Ok(Ok(answer)) => {
                self.sender = Some(sender);
                return Ok(answer);
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!(
                "no answer within {}",
                humantime::format_duration(ANSWER_TIMEOUT)
            ),
        };
        let url = &self.at.url;
        Err(if changes {
            Error::OutcomeUnknown {
                message: format!(
                    "the connection to {url} was lost after the request was sent ({why}): it may or may not have been done"
                ),
            }
        } else {
            Error::Unreachable {
                message: format!("the server {url} did not answer ({why})"),
            }
        })
    }

    /// Opens a connection (TCP, then TLS for https), within [`CONNECT_TIMEOUT`].
    fn connect(&mut self) -> Result<SendRequest<Full<Bytes>>> {
        let at = &self.at;
        let tls = self.tls.clone();
        self.runtime.block_on(async {
            let unreachable = |why: String| Error::Unreachable {
                message: format!("cannot reach the server {}: {why}", at.url),
            };
            let tcp = tokio::time::timeout(
                CONNECT_TIMEOUT,
                TcpStream::connect((at.host.as_str(), at.port)),
            )
            .await
            .map_err(|_| {
                unreachable(format!(
                    "no answer to connect within {}",
                    humantime::format_duration(CONNECT_TIMEOUT)
                ))
            })?
            .map_err(|e| unreachable(e.to_string()))?;
            let _ = tcp.set_nodelay(true);
            let io: Box<dyn Io> =
                match tls {
                    None => Box::new(tcp),
                    Some(connector) => {
                        let name = rustls::pki_types::ServerName::try_from(at.host.clone())
                            .map_err(|e| Error::Tls {
                                message: format!("TLS with {}: {e}", at.url),
                            })?;
                        let stream =
                            tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp))
                                .await
                                .map_err(|_| {
                                    unreachable(format!(
                                        "no TLS handshake within {}",
                                        humantime::format_duration(CONNECT_TIMEOUT)
                                    ))
                                })?
                                .map_err(|e| Error::Tls {
                                    message: format!("TLS with {} failed: {e}", at.url),
                                })?;
                        Box::new(stream)
                    }
                };
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            // Driven while a request is under way (the runtime runs only in `block_on`).
            tokio::spawn(connection);
            Ok(sender)
        })
    }
}

/// rustls with ring, trusting `cacert`'s certificates or else the system's roots.
fn tls_config(cacert: Option<&Path>) -> Result<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match cacert {
        Some(file) => {
            let bad = |why: String| Error::invalid(file.display().to_string(), why);
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
                .map_err(|e| bad(e.to_string()))?
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if certs.is_empty() {
                return Err(bad("no PEM certificate in it".into()));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| bad(e.to_string()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A system root rustls cannot parse is one fewer to trust, not a failure.
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls {
            message: format!("TLS: {e}"),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
