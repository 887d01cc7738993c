//! `GET /health`: 200 with an empty body while the server is up. During an outage the
//! port is closed, so health checks fail by connection refusal, as with a dead server.

use axum::http::StatusCode;

pub(super) async fn health() -> StatusCode {
    StatusCode::OK
}

/// `GET /version`, as vLLM answers it: `{"version": "..."}`.
pub(super) async fn version() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "version": concat!("vllm-sim-", env!("CARGO_PKG_VERSION")) }))
}
