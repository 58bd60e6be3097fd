//! What the handlers share ([`Shared`]: the schema, the caller check, the store's threads,
//! the limits, the counts), and the endpoints besides `/graphql`: `/healthz`, `/readyz` and
//! `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::api::IpamSchema;
use super::auth::{Authenticator, Caller};
use super::log::LogFormat;
use super::stats::Stats;
use super::work::Work;
use super::{Config, Limits};
use crate::error::Error;

/// What every handler shares.
pub struct Shared {
    pub schema: IpamSchema,
    pub auth: Authenticator,
    pub work: Arc<Work>,
    pub limits: Limits,
    pub stats: Stats,
    pub log: LogFormat,
    /// `--max-in-flight` permits.
    pub in_flight: Semaphore,
}

pub type State = Arc<Shared>;

/// The state of a server configured by `config`.
pub fn state(config: &Config, work: Arc<Work>, auth: Authenticator) -> State {
    Arc::new(Shared {
        schema: super::api::build(&config.limits, Some(Arc::clone(&work))),
        auth,
        work,
        limits: config.limits.clone(),
        stats: Stats::default(),
        log: config.log_format,
        in_flight: Semaphore::new(config.limits.in_flight),
    })
}

/// 200 while the process serves; says nothing about the state.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// How long `/readyz` waits for the store.
const READY_WAIT: Duration = Duration::from_secs(2);

/// 200 while the store answers, 503 otherwise.
pub async fn readyz(Extract(state): Extract<State>) -> Response {
    let asked = state.work.read(|store| store.scopes().map(|_| ()));
    match tokio::time::timeout(READY_WAIT, asked).await {
        Ok(Ok(())) => (StatusCode::OK, "ready\n").into_response(),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the store does not answer\n",
        )
            .into_response(),
    }
}

/// The pools' metrics (`ipamctl metrics`'s) and the server's own; needs a caller.
pub async fn metrics(Extract(state): Extract<State>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    // `read` on the cluster scope: the metrics count every namespace's addresses.
    let allowed = caller(&state, &headers).and_then(|caller| {
        let scope = &caller.scope;
        if scope.cluster() && scope.holds(crate::engine::scope::Verb::Read) {
            Ok(caller)
        } else {
            Err(Error::Forbidden {
                message: "/metrics needs a token with `read` on the cluster scope (`ipamctl token create … --verbs read --cluster`)".into(),
            })
        }
    });
    let caller = match allowed {
        Ok(caller) => caller,
        Err(e) => {
            let response = refused(&e);
            let line = super::log::Line {
                token: "-",
                operation: "metrics",
                namespace: "-",
                outcome: super::errors::code(&e),
                status: response.status().as_u16(),
                duration: started.elapsed(),
            };
            super::log::request(state.log, &line);
            return response;
        }
    };
    let pools = state
        .work
        .read(|store| {
            let scopes = store.scopes()?;
            let mut warnings = crate::engine::warning::Warnings::default();
            let collected = crate::engine::metrics::collect(store, &scopes, None, &mut warnings)?;
            Ok(crate::engine::metrics::exposition(&collected))
        })
        .await;
    let (status, body, outcome) = match pools {
        Ok(text) => (
            StatusCode::OK,
            text + &state.stats.exposition(),
            "OK".to_owned(),
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("error: {e}\n"),
            super::errors::code(&e).to_owned(),
        ),
    };
    super::log::request(
        state.log,
        &super::log::Line {
            token: &caller.name,
            operation: "metrics",
            namespace: "-",
            outcome: &outcome,
            status: status.as_u16(),
            duration: started.elapsed(),
        },
    );
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// The caller of a request with `headers`.
pub fn caller(state: &Shared, headers: &HeaderMap) -> crate::error::Result<Caller> {
    state.auth.caller(
        headers
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes),
    )
}

/// A plain-text refusal of a request that is not GraphQL (401 for no caller).
fn refused(e: &Error) -> Response {
    let status = match e {
        Error::Unauthenticated { .. } => StatusCode::UNAUTHORIZED,
        Error::Forbidden { .. } => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut response = (status, format!("error: {e}\n")).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// A response of `status` with a JSON `body` of content type `content_type`.
pub fn json(status: StatusCode, content_type: &'static str, body: &serde_json::Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
