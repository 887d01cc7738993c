//! `vllm-sim`: a standalone simulator of a vLLM OpenAI-compatible server, for tests,
//! benchmarks and demos.
//!
//! It serves `/v1/chat/completions` (streamed and not), `/v1/models`, `/tokenize`, `/health`
//! and `/metrics` in vLLM's wire formats, and models what makes a real server hard to drive
//! well: continuous batching with a shared decode budget, a cap on running sequences, a
//! KV cache that fills and preempts, prefill cost, heavy-tailed completion lengths, aborts on
//! disconnect, and injected faults. A time scale runs all of it faster than real time.
//!
//! ```no_run
//! # async fn demo() -> Result<(), vllm_sim::SpawnError> {
//! let config = vllm_sim::SimConfig { time_scale: 50.0, ..Default::default() };
//! let sim = vllm_sim::spawn(config).await?;
//! println!("POST {}/v1/chat/completions", sim.base_url());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

mod api;
mod clock;
mod config;
mod draft;
mod engine;
mod faults;
mod hash;
mod lengths;
mod metrics;
mod outage;
mod profile;
mod prompt;
mod server;
mod stats;
mod text;
mod tokenizer;
mod wire;

pub use api::ControlRequest;
pub use config::{EngineSettings, InvalidConfig, LengthSettings, ReasoningField, SimConfig, BLOCK_SIZE};
pub use draft::{AcceptanceRule, DraftSettings};
pub use faults::FaultSettings;
pub use profile::Profile;
pub use stats::{FaultCounts, FinishedCounts, SimStats};

use api::AppState;
use clock::SimClock;
use metrics::Metrics;
use stats::SimCounters;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error(transparent)]
    InvalidConfig(#[from] InvalidConfig),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

/// Starts a simulator on an ephemeral port of 127.0.0.1.
pub async fn spawn(config: SimConfig) -> Result<RunningSim, SpawnError> {
    spawn_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), config).await
}

/// Starts a simulator listening on `addr`; it runs on the current Tokio runtime until
/// [`RunningSim::shutdown`] or until the handle is dropped.
pub async fn spawn_on(addr: SocketAddr, config: SimConfig) -> Result<RunningSim, SpawnError> {
    config.validate()?;
    let listener = server::bind(addr).map_err(|source| SpawnError::Bind { addr, source })?;
    let addr = listener.local_addr().map_err(|source| SpawnError::Bind { addr, source })?;

    let clock = SimClock::new(config.time_scale);
    let shutdown = CancellationToken::new();
    let metrics = Arc::new(Metrics::new(
        &config.model,
        config.engine.kv_cache_tokens / BLOCK_SIZE,
        config.draft.serves_draft(),
    ));
    let counters = Arc::new(SimCounters::default());
    let (engine, engine_task) =
        engine::start(&config.engine, clock, metrics.clone(), counters.clone(), shutdown.clone());
    let (outages, outage_requests) = server::outage_channel();
    let state = Arc::new(AppState {
        faults: config.faults.clone().into(),
        config,
        clock,
        engine,
        metrics,
        counters: counters.clone(),
        chat_requests: Default::default(),
        outages: outages.clone(),
        windows: Default::default(),
    });
    let server =
        server::Server { app: api::router(state.clone()), clock, counters, shutdown: shutdown.clone() };
    let server_task = tokio::spawn(server.run(listener, outages, outage_requests));
    Ok(RunningSim { addr, state, shutdown, tasks: vec![engine_task, server_task] })
}

/// A simulator running in this process. Dropping it stops the server.
pub struct RunningSim {
    addr: SocketAddr,
    state: Arc<AppState>,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningSim {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ip:port`, the base of every route (`/v1/chat/completions`, `/metrics`, ...).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The same counters as `GET /sim/stats`.
    pub fn stats(&self) -> SimStats {
        self.state.stats()
    }

    /// Replaces the fault settings, as `POST /sim/control` does.
    pub fn set_faults(&self, faults: FaultSettings) -> Result<(), InvalidConfig> {
        faults.validate().map_err(InvalidConfig::from)?;
        self.state.set_faults(faults);
        Ok(())
    }

    /// Closes the port and cuts every connection for `simulated` time, then listens again
    /// on the same address.
    pub fn go_down_for(&self, simulated: Duration) {
        self.state.outages.start(simulated);
    }

    /// Restarts "behind a proxy" for `simulated` time: open connections are cut, and every
    /// route, `/health` included, answers `status` (502, 503, 504) until the time is up.
    pub fn unavailable_for(&self, simulated: Duration, status: u16) -> Result<(), InvalidConfig> {
        let status = axum::http::StatusCode::from_u16(status)
            .ok()
            .filter(axum::http::StatusCode::is_server_error)
            .ok_or_else(|| InvalidConfig::from(format!("an outage answers a 5xx status, not {status}")))?;
        self.state.unavailable_for(simulated, status);
        Ok(())
    }

    /// Cuts every open connection at once (a reset), without closing the port.
    pub fn cut_connections(&self) {
        self.state.outages.cut_connections();
    }

    /// Fails every request for `simulated` time (HTTP 500, and an error chunk on open
    /// streams) while `/health` keeps answering 200.
    pub fn failing_for(&self, simulated: Duration) {
        self.state.failing_for(simulated);
    }

    /// Stops serving, cuts open connections and waits for the server's tasks to end.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
