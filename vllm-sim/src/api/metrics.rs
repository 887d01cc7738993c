//! `GET /metrics`: Prometheus text exposition format 0.0.4.

use super::AppState;
use crate::metrics::CONTENT_TYPE;
use crate::stats::SimCounters;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use std::sync::Arc;

pub(super) async fn render(State(app): State<Arc<AppState>>) -> impl IntoResponse {
    SimCounters::bump(&app.counters.metrics_scrapes);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], app.metrics.render())
}
