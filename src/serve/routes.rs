//! The routes: `/graphql` ([`super::graphql`]), `/healthz`, `/readyz` and `/metrics`
//! ([`super::http`]), and the layers every request passes: the `Authorization` header
//! marked sensitive before anything could log it; CORS only for the origins
//! `--cors-origin` names.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::routing::get;

use super::http::{State, healthz, metrics, readyz};

/// The routes, with their layers.
pub fn router(state: State, cors_origins: &[String]) -> Router {
    let mut router = Router::new()
        .route(
            "/graphql",
            get(super::graphql::handle).post(super::graphql::handle),
        )
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state);
    if !cors_origins.is_empty() {
        let origins: Vec<HeaderValue> = cors_origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        router = router.layer(
            tower_http::cors::CorsLayer::new()
                .allow_origin(origins)
                .allow_methods([axum::http::Method::GET, axum::http::Method::POST])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT]),
        );
    }
    router.layer(
        tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
            header::COOKIE,
        ]),
    )
}
