use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// A model a vLLM server offers, with its context length when the server reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedModel {
    pub id: String,
    pub max_model_len: Option<u32>,
}

/// A registered vLLM server as the UI sees it (the API key itself never leaves the server).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointSummary {
    pub id: i64,
    pub name: String,
    pub base_url: String,
    pub has_api_key: bool,
    pub models: Vec<ServedModel>,
    pub checked_at: Option<OffsetDateTime>,
    pub check_error: Option<String>,
    pub created_at: OffsetDateTime,
    /// Whether the server runs a speculative-decoding draft (its `/metrics` has `spec_decode`
    /// counters), as the last connection test saw; `None` when its `/metrics` could not be read.
    #[serde(default)]
    pub runs_draft: Option<bool>,
    /// The draft's acceptance length over about the last minute, while runs use the server.
    #[serde(default)]
    pub draft_acceptance: Option<WindowAcceptance>,
    /// The server's adaptive limit and load as the workers last saw them (none until a run
    /// has used it).
    pub capacity: Option<EndpointCapacity>,
    /// The running and paused runs that use it, with their part of its capacity.
    pub runs: Vec<EndpointRun>,
}

/// An endpoint's concurrency limit (shared by the runs on it), whether it serves, and its load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointCapacity {
    pub limit: u32,
    pub limit_reason: String,
    pub limit_changed_at: OffsetDateTime,
    pub healthy: bool,
    /// Why it is down, while it is.
    pub health_reason: Option<String>,
    pub running: Option<u32>,
    pub waiting: Option<u32>,
    /// 0–1.
    pub kv_usage: Option<f64>,
    pub generation_tps: Option<f64>,
    pub observed_at: Option<OffsetDateTime>,
}

/// A server's acceptance length over a recent window of its counters (`1 + Δaccepted ÷ Δdrafts`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowAcceptance {
    pub length: f64,
    /// The window's length.
    pub seconds: f64,
}

/// A run using an endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointRun {
    pub run_id: i64,
    pub name: String,
    pub paused: bool,
    pub weight: u32,
    /// Its part of the endpoint's capacity (or its fixed limit).
    pub share: u32,
}
