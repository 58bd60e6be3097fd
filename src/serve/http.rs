//! What the handlers share ([`Shared`]: the schema, the caller check, the store's threads,
//! the limits, the counts), and the endpoints besides `/graphql`: `/healthz`, `/readyz` and
//! `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Query, State as Extract};
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

/// `GET /metrics`'s parameters, each standing for `ipamctl metrics`'s flag of the same
/// name; a scrape without any gets the pools of every namespace the caller may read, and the
/// server's own figures.
#[derive(serde::Deserialize, Default, Debug)]
pub struct MetricsParams {
    /// `-n NS`: the pools and subnets of one namespace (not found outside the caller's
    /// scope, as one that holds nothing).
    namespace: Option<String>,
    /// `--check`: also `check`'s findings by severity (`ipamctl_check_problems`).
    #[serde(default)]
    check: bool,
    /// `false`: without the server's own request figures, as `ipamctl --server URL
    /// metrics` asks (the command line prints the store's figures alone).
    server: Option<bool>,
}

/// The pools' metrics (`ipamctl metrics`'s, for [`MetricsParams`]) and the server's own;
/// needs a caller with `read` on the cluster scope. A refusal or a failure is one
/// `error:` line, its status saying which (400, 401, 403, 404, else 500).
pub async fn metrics(
    Extract(state): Extract<State>,
    Query(params): Query<MetricsParams>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let (token, answered) = match metrics_caller(&state, &headers) {
        Err(e) => ("-".to_owned(), Err(e)),
        Ok(caller) => {
            let text = pools_exposition(&state, &caller, &params).await;
            let own = params.server != Some(false);
            let text = text.map(|t| {
                if own {
                    t + &state.stats.exposition()
                } else {
                    t
                }
            });
            (caller.name, text)
        }
    };
    let (status, body, outcome) = match answered {
        Ok(text) => (StatusCode::OK, text, "OK"),
        Err(e) => (status(&e), format!("error: {e}\n"), super::errors::code(&e)),
    };
    super::log::request(
        state.log,
        &super::log::Line {
            token: &token,
            operation: "metrics",
            namespace: params.namespace.as_deref().unwrap_or("-"),
            outcome,
            status: status.as_u16(),
            duration: started.elapsed(),
        },
    );
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    if status == StatusCode::OK {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
    } else if status == StatusCode::UNAUTHORIZED {
        headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// The caller of a `/metrics` request: `read` on the cluster scope (the metrics count the
/// cluster's pools), and the namespaces it reads.
fn metrics_caller(state: &Shared, headers: &HeaderMap) -> crate::error::Result<Caller> {
    let caller = caller(state, headers)?;
    let scope = &caller.scope;
    if scope.cluster() && scope.holds(crate::engine::scope::Verb::Read) {
        Ok(caller)
    } else {
        Err(Error::Forbidden {
            message: "/metrics needs a token with `read` on the cluster scope (`ipamctl token create … --verbs read --cluster`)".into(),
        })
    }
}

/// The store's metrics in the text exposition format, as `ipamctl metrics` computes them.
async fn pools_exposition(
    state: &Shared,
    caller: &Caller,
    params: &MetricsParams,
) -> crate::error::Result<String> {
    use crate::engine::metrics::{Problems, collect, exposition};
    let ns = crate::engine::request::field::namespace(params.namespace.as_deref())?;
    let scope = caller.scope.clone();
    let check = params.check;
    state
        .work
        .read(move |store| {
            // The namespaces the caller may read, as a query's: a tenant's token with the
            // cluster scope counts its own namespaces and the cluster's pools, never
            // another tenant's.
            let scopes = crate::engine::scopes::scopes(
                store,
                &scope,
                crate::engine::scope::Verb::Read,
                ns.clone(),
            )?;
            let problems = check
                .then(|| crate::engine::check::check(store))
                .transpose()?
                .map(|report| Problems::of(&report));
            let mut warnings = crate::engine::warning::Warnings::default();
            Ok(exposition(&collect(
                store,
                &scopes,
                problems,
                &mut warnings,
            )?))
        })
        .await
}

/// The HTTP status of a failure of an endpoint that is not GraphQL.
fn status(e: &Error) -> StatusCode {
    match super::errors::code(e) {
        "UNAUTHENTICATED" => StatusCode::UNAUTHORIZED,
        "FORBIDDEN" => StatusCode::FORBIDDEN,
        "NOT_FOUND" => StatusCode::NOT_FOUND,
        "BAD_REQUEST" | "LIMIT" => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The caller of a request with `headers`.
pub fn caller(state: &Shared, headers: &HeaderMap) -> crate::error::Result<Caller> {
    state.auth.caller(
        headers
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes),
    )
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
