//! The generation engine: runs, their queue of samples in PostgreSQL, and the workers that
//! stream each sample from vLLM servers under an adaptive concurrency limit.
//!
//! - `queue`: claiming, lease renewal and expiry, settling tries (PostgreSQL is the queue).
//! - `worker`: one per process; finds running runs and drives them.
//! - `driver`: one per run and endpoint; keeps the endpoint busy within its limit.
//! - `attempt`: one try of one sample, from request to settled state.
//! - `controller`: the adaptive concurrency rule.
//! - `runs`: creating, pausing, resuming, cancelling and re-queueing runs.

mod attempt;
mod backoff;
mod classify;
mod controller;
pub mod conversation;
mod driver;
mod held;
pub mod queue;
pub mod runs;
mod worker;

pub use controller::{Controller, Decision, Observation, ServerSignals};
pub use worker::{Worker, WorkerOptions};

use crate::metrics::EngineMetrics;
use domain::generation::RunSettings;
use sqlx::PgPool;
use std::sync::{atomic::AtomicU32, Arc};
use uuid::Uuid;

/// What every task working on one run shares.
pub(crate) struct RunContext {
    pub run_id: i64,
    pub settings: RunSettings,
    pub worker_id: Uuid,
    pub pool: PgPool,
    pub http: reqwest::Client,
    pub metrics: Arc<EngineMetrics>,
    /// Live worker processes, so a run's limit can be split between them.
    pub live_workers: Arc<AtomicU32>,
    /// The samples this process is working on, whose leases it renews.
    pub held: held::HeldSamples,
    pub options: WorkerOptions,
}
