//! HTTP routes: vLLM's OpenAI-compatible API plus the simulator's `/sim` controls.

mod chat;
mod error;
mod health;
mod metrics;
mod models;
mod sim;
mod tokenize;

pub use sim::ControlRequest;

use crate::clock::SimClock;
use crate::config::SimConfig;
use crate::engine::EngineHandle;
use crate::faults::FaultSettings;
use crate::metrics::Metrics;
use crate::outage::{proxy_response, OutageWindows};
use crate::server::Outages;
use crate::stats::{SimCounters, SimStats};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};

/// What every handler shares.
pub(crate) struct AppState {
    pub config: SimConfig,
    pub clock: SimClock,
    pub engine: EngineHandle,
    pub metrics: Arc<Metrics>,
    pub counters: Arc<SimCounters>,
    /// Starts as configured; `/sim/control` replaces it while running.
    pub faults: RwLock<FaultSettings>,
    /// Chat requests seen, numbering each request's fault draw.
    pub chat_requests: AtomicU64,
    pub outages: Outages,
    /// Proxy-fronted restarts and failing engines in force.
    pub windows: OutageWindows,
}

impl AppState {
    pub fn stats(&self) -> SimStats {
        SimStats::collect(&self.metrics, &self.counters)
    }

    pub fn faults(&self) -> FaultSettings {
        self.faults.read().expect("never poisoned").clone()
    }

    pub fn set_faults(&self, faults: FaultSettings) {
        *self.faults.write().expect("never poisoned") = faults;
    }

    /// Cuts every open connection, then answers `status` on every route for `simulated` time.
    pub fn unavailable_for(&self, simulated: std::time::Duration, status: StatusCode) {
        let until = std::time::Instant::now() + self.clock.real(simulated);
        self.windows.start_unavailable(until, status);
        self.outages.cut_connections();
    }

    /// Fails every request, new and streaming, for `simulated` time.
    pub fn failing_for(&self, simulated: std::time::Duration) {
        self.windows.start_failing(std::time::Instant::now() + self.clock.real(simulated));
    }
}

pub(crate) fn router(state: Arc<AppState>) -> Router {
    let mut served = Router::new()
        .route("/v1/chat/completions", post(chat::create))
        .route("/v1/models", get(models::list))
        .route("/tokenize", post(tokenize::tokenize))
        .route("/health", get(health::health))
        .route("/version", get(health::version));
    if !state.config.no_metrics {
        served = served.route("/metrics", get(metrics::render));
    }
    // The simulator's own controls stay reachable during an outage, so a test can watch it.
    let controls =
        Router::new().route("/sim/control", post(sim::control)).route("/sim/stats", get(sim::stats));
    served
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), behind_proxy))
        .merge(controls)
        .with_state(state)
}

/// While the engine restarts behind its proxy, the proxy answers every request itself.
async fn behind_proxy(State(app): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    match app.windows.unavailable() {
        Some(status) => {
            crate::stats::SimCounters::bump(&app.counters.unavailable_answers);
            if request.uri().path() == "/v1/chat/completions" {
                crate::stats::SimCounters::bump(&app.counters.unavailable_chat_answers);
            }
            proxy_response(status)
        }
        None => next.run(request).await,
    }
}

/// FastAPI's answer for a path it does not serve.
async fn not_found() -> impl IntoResponse {
    (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"})))
}
