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
use crate::server::Outages;
use crate::stats::{SimCounters, SimStats};
use axum::http::StatusCode;
use axum::response::IntoResponse;
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
}

pub(crate) fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new()
        .route("/v1/chat/completions", post(chat::create))
        .route("/v1/models", get(models::list))
        .route("/tokenize", post(tokenize::tokenize))
        .route("/health", get(health::health))
        .route("/sim/control", post(sim::control))
        .route("/sim/stats", get(sim::stats));
    if !state.config.no_metrics {
        router = router.route("/metrics", get(metrics::render));
    }
    router.fallback(not_found).with_state(state)
}

/// FastAPI's answer for a path it does not serve.
async fn not_found() -> impl IntoResponse {
    (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"})))
}
