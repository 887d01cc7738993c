//! `/api/v1`: the versioned JSON API for scripts and pipelines. Every route authenticates a
//! bearer token ([`auth`]), checks the same role its page's server functions check, and calls
//! the same `engine` function; errors have one shape ([`error`]); lists are paged by key.
//! The OpenAPI document ([`openapi`]) is generated from the handlers' annotations.

pub mod acceptance;
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
    routing::{delete, get, post},
    Router,
};
use error::ApiError;

pub const PREFIX: &str = "/api/v1";

/// The API's routes, authenticated, plus the public OpenAPI document and its page.
pub fn routes(state: AppState) -> Router<AppState> {
    let authenticated = Router::new()
        .route("/runs", get(runs::list).post(runs::create))
        .route("/runs/{id}", get(runs::get))
        .route("/runs/{id}/pause", post(runs::pause))
        .route("/runs/{id}/resume", post(runs::resume))
        .route("/runs/{id}/cancel", post(runs::cancel))
        .route("/runs/{id}/retry", post(runs::retry))
        .route("/runs/{id}/events", get(runs::events))
        .route("/runs/{id}/samples", get(samples::list))
        .route("/runs/{id}/samples/counts", get(samples::counts))
        .route("/runs/{id}/samples/decision", post(samples::decide_all))
        .route("/runs/{id}/acceptance", get(acceptance::run))
        .route("/evaluations", get(acceptance::evaluations))
        .route("/acceptance/compare", get(acceptance::compare))
        .route("/acceptance/loop", get(acceptance::lineage_loop))
        .route("/drafts", get(acceptance::drafts).post(acceptance::register_draft))
        .route("/exports/{id}/drafts", get(acceptance::export_drafts))
        .route("/datasets/{id}/quotas", get(acceptance::quotas))
        .route("/samples/{id}", get(samples::get))
        .route("/samples/{id}/decision", post(samples::decide))
        .route("/exports", get(exports::list).post(exports::start))
        .route("/exports/{id}", get(exports::get))
        .route("/exports/{id}/cancel", post(exports::cancel))
        .route("/exports/{id}/files", get(exports::files))
        .route("/exports/{id}/files/{name}", get(exports::download))
        .route("/endpoints", get(endpoints::list).post(endpoints::create))
        .route("/endpoints/{id}", delete(endpoints::delete))
        .route("/endpoints/{id}/check", post(endpoints::check))
        .route("/datasets", get(datasets::list).post(datasets::import))
        .route("/datasets/uploads", post(datasets::upload))
        .route("/datasets/{id}", get(datasets::get))
        .route("/datasets/{id}/rows", get(datasets::rows))
        .layer(middleware::from_fn_with_state(state, auth::authenticate));
    let api = Router::new()
        .route("/openapi.json", get(openapi::document))
        .route("/docs", get(openapi::page))
        .merge(authenticated)
        .fallback(no_such_route);
    // Nested, so the API's own fallback answers unknown API paths in the API's error shape.
    Router::new().nest(PREFIX, api)
}

async fn no_such_route(uri: axum::extract::OriginalUri) -> ApiError {
    ApiError::not_found(format!(
        "{} is not an API route; the routes are listed at {}",
        uri.path(),
        openapi::PAGE_PATH
    ))
}
