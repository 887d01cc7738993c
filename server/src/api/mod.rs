//! `/api/v1`: the versioned JSON API for scripts and pipelines. Every route authenticates a
//! bearer token ([`auth`]), checks the same role its page's server functions check, and calls
//! the same `engine` function; errors have one shape ([`error`]); lists are paged by key.
//! The OpenAPI document ([`openapi`]) is generated from the handlers' annotations.

pub mod auth;
pub mod datasets;
pub mod endpoints;
pub mod error;
pub mod exports;
pub mod openapi;
pub mod page;
pub mod runs;
pub mod samples;

use crate::state::AppState;
use axum::{
    middleware,
    routing::{get, post},
    Router,
};
use error::ApiError;

pub const PREFIX: &str = "/api/v1";

/// The API's routes, authenticated, plus the public OpenAPI document and its page.
pub fn routes(state: AppState) -> Router<AppState> {
    let authenticated = Router::new()
        .route("/api/v1/runs", get(runs::list).post(runs::create))
        .route("/api/v1/runs/{id}", get(runs::get))
        .route("/api/v1/runs/{id}/pause", post(runs::pause))
        .route("/api/v1/runs/{id}/resume", post(runs::resume))
        .route("/api/v1/runs/{id}/cancel", post(runs::cancel))
        .route("/api/v1/runs/{id}/retry", post(runs::retry))
        .route("/api/v1/runs/{id}/events", get(runs::events))
        .route("/api/v1/runs/{id}/samples", get(samples::list))
        .route("/api/v1/samples/{id}", get(samples::get))
        .route("/api/v1/samples/{id}/decision", post(samples::decide))
        .route("/api/v1/exports", get(exports::list).post(exports::start))
        .route("/api/v1/exports/{id}", get(exports::get))
        .route("/api/v1/exports/{id}/files", get(exports::files))
        .route("/api/v1/exports/{id}/files/{name}", get(exports::download))
        .route("/api/v1/endpoints", get(endpoints::list).post(endpoints::create))
        .route("/api/v1/endpoints/{id}/check", post(endpoints::check))
        .route("/api/v1/datasets", get(datasets::list).post(datasets::import))
        .route("/api/v1/datasets/{id}", get(datasets::get))
        .layer(middleware::from_fn_with_state(state, auth::authenticate));
    Router::new()
        .route(openapi::DOCUMENT_PATH, get(openapi::document))
        .route(openapi::PAGE_PATH, get(openapi::page))
        .merge(authenticated)
        .fallback(no_such_route)
}

async fn no_such_route(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "{} is not an API route; the routes are listed at {}",
        uri.path(),
        openapi::PAGE_PATH
    ))
}
