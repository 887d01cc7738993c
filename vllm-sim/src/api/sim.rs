//! The simulator's own endpoints: `POST /sim/control` changes faults and starts outages
//! while running; `GET /sim/stats` reports counters as JSON.

use super::error::ApiError;
use super::AppState;
use crate::faults::FaultSettings;
use crate::server::Connection;
use crate::stats::SimStats;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderValue};
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
    if let Some(faults) = request.faults {
        if let Err(message) = faults.validate() {
            return ApiError::bad_request(message, Some("faults")).render(legacy);
        }
        app.set_faults(faults);
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
