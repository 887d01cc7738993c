//! The generation engine: runs, their queue of samples in PostgreSQL, and the workers that
//! stream each sample from vLLM servers under an adaptive concurrency limit.
//!
//! - `queue`: claiming, lease renewal and expiry, settling tries (PostgreSQL is the queue);
//!   it lives in `crate::samples`, the one owner of a sample's state changes.
//! - `worker`: one per process; finds running runs and drives them.
//! - `endpoint`: one per endpoint and process, shared by its runs: the server's load, whether
//!   it serves (`availability`), its capacity and each run's share of it (`capacity`).
//! - `driver`: one per run and endpoint; keeps the endpoint busy within the run's share.
//! - `attempt`: one try of one sample, from request to settled state (`write_back` holds a
//!   finished try while the database is away; `chunking` picks how many tokens a streamed
//!   chunk carries).
//! - `controller`: the adaptive concurrency rule; `spec_window` the draft's acceptance over the
//!   last minute, read beside the load.
//!
//! A run's own life (created, paused, completed, retried) is `crate::runs`.

mod attempt;
mod availability;
mod backoff;
mod capacity;
mod chunking;
mod classify;
mod controller;
pub mod conversation;
mod driver;
mod endpoint;
mod held;
pub use crate::samples::queue;
mod spec_window;
pub use crate::samples::token_ids;
mod worker;
mod write_back;

pub use controller::{Controller, Decision, Observation, ServerSignals};
pub use endpoint::ADAPTIVE_START;
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
    /// Claims, leases and the run's per-second record: what keeps requests flowing.
    pub pool: PgPool,
    /// Tries' results (`settle`, `release`), on connections of their own (`worker::results_pool`).
    pub results: PgPool,
    pub metrics: Arc<EngineMetrics>,
    /// Live worker processes, so a run's limit can be split between them.
    pub live_workers: Arc<AtomicU32>,
    /// The samples this process is working on, whose leases it renews.
    pub held: held::HeldSamples,
    /// Memory for results waiting for the database to come back.
    pub hold_budget: write_back::HoldBudget,
    pub options: WorkerOptions,
}
