//! `POST /v1/chat/completions`, streamed (SSE) or whole.

mod job;
mod stream;
mod whole;

use super::error::ApiError;
use super::AppState;
use crate::server::Connection;
use crate::stats::SimCounters;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::Extension;
use job::ChatJob;
use std::sync::Arc;

/// Message of every injected server error.
const INJECTED_FAILURE: &str = "Simulated engine failure (injected fault).";

/// What vLLM answers once its engine core has died under a live API process.
const ENGINE_DEAD: &str = "EngineCore encountered an issue. See stack trace (above) for the root cause.";

pub(super) async fn create(
    State(app): State<Arc<AppState>>,
    Extension(connection): Extension<Connection>,
    body: Bytes,
) -> Response {
    let legacy = app.config.legacy_error_shape;
    if app.windows.failing() {
        SimCounters::bump(&app.counters.engine_failures);
        return ApiError::internal(ENGINE_DEAD).render(legacy);
    }
    let job = match ChatJob::prepare(&app, &body) {
        Ok(job) => job,
        Err(error) => return error.render(legacy),
    };
    if job.faults.http_500 {
        SimCounters::bump(&app.counters.http_500);
        return ApiError::internal(INJECTED_FAILURE).render(legacy);
    }
    match job.stream {
        Some(settings) => {
            app.counters.streaming(settings.interval);
            stream::respond(app, connection, job, settings)
        }
        None => whole::respond(&app, &connection, job).await.unwrap_or_else(|error| error.render(legacy)),
    }
}
