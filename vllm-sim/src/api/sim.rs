//! The simulator's own endpoints: `POST /sim/control` changes faults and starts outages
//! while running; `GET /sim/stats` reports counters as JSON.

use super::error::ApiError;
use super::AppState;
use crate::faults::FaultSettings;
use crate::server::Connection;
use crate::stats::SimStats;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// Body of `POST /sim/control`; both parts are optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlRequest {
    /// Replaces the fault settings; omitted keys take their defaults (no fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<FaultSettings>,
    /// Go down for this many simulated milliseconds once this response is delivered: the
    /// port closes (connects are refused) and every open connection is cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_for_ms: Option<u64>,
    /// Restart behind a proxy for this many simulated milliseconds: every open connection is
    /// cut, and every route (`/health` included) answers `unavailable_status` meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_for_ms: Option<u64>,
    /// The proxy's answer during `unavailable_for_ms`: 502, 503 (the default) or 504, or any 5xx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_status: Option<u16>,
    /// Fail every request for this many simulated milliseconds: new ones get HTTP 500, open
    /// streams an error chunk; `/health` still answers 200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_for_ms: Option<u64>,
}

#[derive(Serialize)]
struct ControlResponse {
    faults: FaultSettings,
}

pub(super) async fn control(
    State(app): State<Arc<AppState>>,
    Extension(connection): Extension<Connection>,
    body: Bytes,
) -> Response {
    let legacy = app.config.legacy_error_shape;
    let request: ControlRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return ApiError::bad_request(error.to_string(), None).render(legacy),
    };
    let status = request.unavailable_status.unwrap_or(503);
    let Some(status) = StatusCode::from_u16(status).ok().filter(StatusCode::is_server_error) else {
        return ApiError::bad_request(
            format!("unavailable_status must be a 5xx status, got {status}"),
            Some("unavailable_status"),
        )
        .render(legacy);
    };
    if let Some(faults) = request.faults {
        if let Err(message) = faults.validate() {
            return ApiError::bad_request(message, Some("faults")).render(legacy);
        }
        app.set_faults(faults);
    }
    if let Some(millis) = request.unavailable_for_ms {
        app.unavailable_for(Duration::from_millis(millis), status);
    }
    if let Some(millis) = request.failing_for_ms {
        app.failing_for(Duration::from_millis(millis));
    }
    let mut response = Json(ControlResponse { faults: app.faults() }).into_response();
    if let Some(millis) = request.down_for_ms {
        connection.outage_after_close(Duration::from_millis(millis));
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

pub(super) async fn stats(State(app): State<Arc<AppState>>) -> Json<SimStats> {
    Json(app.stats())
}
