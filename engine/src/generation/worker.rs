//! A worker process's generation loop: announce itself, keep its leases alive, return dead
//! workers' samples to the queue, and drive every running run on every one of its endpoints.

use super::{
    driver::{self, Phase},
    endpoint::{self, Endpoint},
    held::HeldSamples,
    queue,
    write_back::HoldBudget,
    RunContext,
};
use crate::{endpoints, metrics::EngineMetrics, samples::tally, Result};
use domain::generation::{RunSettings, RunStatus};
use sqlx::PgPool;
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::Instrument;
use uuid::Uuid;

#[derive(Clone, Copy, Debug)]
pub struct WorkerOptions {
    /// How long a claimed sample stays leased without renewal. Renewed every third of it.
    pub lease: Duration,
    /// How often limits are revised, metrics recorded and run states re-read.
    pub tick: Duration,
    /// Most samples claimed in one query.
    pub claim_batch: u32,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self { lease: Duration::from_secs(30), tick: Duration::from_secs(1), claim_batch: 64 }
    }
}

pub struct Worker {
    pub id: Uuid,
    pool: PgPool,
    results: PgPool,
    http: reqwest::Client,
    metrics: Arc<EngineMetrics>,
    options: WorkerOptions,
    live_workers: Arc<AtomicU32>,
    held: HeldSamples,
    hold_budget: HoldBudget,
}

/// Connections a worker process writes tries' results on.
const RESULT_CONNECTIONS: u32 = 8;

/// A pool of its own for tries' results, beside the one that claims samples, renews leases and
/// records each second (and, in `serve`, answers the web app). A batch of a vLLM server's
/// requests often ends in one step (every answer cut at the same `max_tokens`), and its
/// results used to queue for the shared pool's connections ahead of the claim that refills the
/// batch: with PostgreSQL short of CPU, the real vLLM server was left with a handful of requests
/// for seconds at a time while the writes drained. Results now wait only for each other (a
/// write that cannot get a connection in time is held like one the database refused for being
/// away: `write_back`). The pool is the given one's twin (database, timeouts) but for its size.
fn results_pool(pool: &PgPool) -> PgPool {
    pool.options()
        .clone()
        .max_connections(RESULT_CONNECTIONS)
        .min_connections(0)
        .connect_lazy_with((*pool.connect_options()).clone())
}

/// An endpoint this worker drives runs on, and how to stop watching it.
struct Watched {
    endpoint: Arc<Endpoint>,
    stop: CancellationToken,
}

/// A run this worker drives: the phase its drivers follow and the settings they were started
/// with (a retry pass that changes them restarts the drivers).
struct Driven {
    phase: watch::Sender<Phase>,
    settings: RunSettings,
    tasks: TaskTracker,
}

impl Worker {
    pub fn new(
        pool: PgPool,
        http: reqwest::Client,
        metrics: Arc<EngineMetrics>,
        options: WorkerOptions,
    ) -> Self {
        Self {
            id: Uuid::new_v4(),
            results: results_pool(&pool),
            pool,
            http,
            options,
            live_workers: Arc::new(AtomicU32::new(1)),
            held: HeldSamples::default(),
            hold_budget: HoldBudget::new(metrics.results_held.clone(), metrics.results_given_up.clone()),
            metrics,
        }
    }

    /// Runs until `stop` is cancelled, then hands every sample it holds back to the queue.
    pub async fn run(self, stop: CancellationToken) -> Result<()> {
        self.register().await?;
        tracing::info!(worker.id = %self.id, "generation worker started");
        let housekeeping = tokio::spawn(self.housekeeping(stop.clone()));
        let mut driven: HashMap<i64, Driven> = HashMap::new();
        let mut endpoints: HashMap<i64, Watched> = HashMap::new();
        let mut tick = tokio::time::interval(self.options.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.follow_runs(&mut driven, &mut endpoints).await {
                tracing::warn!(error = %e, "reading runs failed; retrying next second");
            }
            // An endpoint no run uses any more is no longer watched.
            endpoints.retain(|_, watched| {
                let used = watched.endpoint.has_members();
                if !used {
                    watched.stop.cancel();
                }
                used
            });
        }
        for run in driven.values() {
            let _ = run.phase.send(Phase::Abort);
        }
        for run in driven.values() {
            run.tasks.close();
            run.tasks.wait().await;
        }
        for watched in endpoints.values() {
            watched.stop.cancel();
        }
        let _ = housekeeping.await;
        let released =
            queue::release_all(&self.pool, self.id, "the worker stopped; another worker continues").await?;
        sqlx::query!("DELETE FROM workers WHERE id = $1", self.id).execute(&self.pool).await?;
        tracing::info!(worker.id = %self.id, released, "generation worker stopped");
        Ok(())
    }

    async fn register(&self) -> Result<()> {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into());
        sqlx::query!(
            "INSERT INTO workers (id, host, pid) VALUES ($1, $2, $3)",
            self.id,
            host,
            std::process::id() as i32
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Heartbeat, lease renewal, expired-lease reaping, folding the sample tally and the
    /// live-worker count.
    fn housekeeping(
        &self,
        stop: CancellationToken,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (pool, id, lease, live, held) =
            (self.pool.clone(), self.id, self.options.lease, self.live_workers.clone(), self.held.clone());
        async move {
            let every = (lease / 3).max(Duration::from_millis(200));
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let result: Result<()> = async {
                    sqlx::query!("UPDATE workers SET heartbeat_at = now() WHERE id = $1", id)
                        .execute(&pool)
                        .await?;
                    queue::renew_leases(&pool, id, lease, &held.ids()).await?;
                    let reaped = queue::reap_expired_leases(&pool).await?;
                    if reaped > 0 {
                        tracing::info!(reaped, "returned samples of a stopped worker to the queue");
                    }
                    tally::fold(&pool, tally::FOLD_ABOVE).await?;
                    let stale = lease.as_secs_f64().max(1.0) * 2.0;
                    sqlx::query!(
                        "DELETE FROM workers WHERE heartbeat_at < now() - make_interval(secs => $1)",
                        stale
                    )
                    .execute(&pool)
                    .await?;
                    let n = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM workers"#)
                        .fetch_one(&pool)
                        .await?;
                    live.store(n.max(1) as u32, Ordering::Relaxed);
                    Ok(())
                }
                .await;
                if let Err(e) = result {
                    tracing::warn!(error = %e, "worker housekeeping failed; leases may expire if this persists");
                }
            }
        }
    }

    /// Starts drivers for newly running runs and tells existing ones what their run's state
    /// now asks of them.
    async fn follow_runs(
        &self,
        driven: &mut HashMap<i64, Driven>,
        endpoints: &mut HashMap<i64, Watched>,
    ) -> Result<()> {
        let known: Vec<i64> = driven.keys().copied().collect();
        let runs = sqlx::query!(
            r#"SELECT id, status AS "status: RunStatus", settings FROM runs WHERE status = 'running' OR id = ANY($1)"#,
            &known
        )
        .fetch_all(&self.pool)
        .await?;
        for run in &runs {
            let settings: RunSettings = match domain::stored::from_stored(run.settings.clone()) {
                Ok(settings) => settings,
                Err(e) => {
                    tracing::error!(run.id = run.id, error = %e, "run settings unreadable; skipping the run");
                    continue;
                }
            };
            let phase = match run.status {
                RunStatus::Running => Phase::Active,
                RunStatus::Paused | RunStatus::Completed => Phase::Draining,
                RunStatus::Cancelled => Phase::Abort,
            };
            let restart = driven.get(&run.id).is_some_and(|d| d.settings != settings || d.tasks.is_empty());
            if restart {
                if let Some(old) = driven.remove(&run.id) {
                    let _ = old.phase.send(Phase::Draining);
                }
            }
            match driven.get(&run.id) {
                Some(existing) => {
                    let _ = existing.phase.send_if_modified(|p| std::mem::replace(p, phase) != phase);
                }
                None if phase == Phase::Active => {
                    let started = self.start(run.id, settings, endpoints).await?;
                    driven.insert(run.id, started);
                }
                None => {}
            }
            if phase == Phase::Active && crate::runs::complete_if_done(&self.pool, run.id).await? {
                tracing::info!(run.id = run.id, "run completed");
            }
        }
        driven.retain(|_, d| !(d.tasks.is_empty() && *d.phase.borrow() != Phase::Active));
        Ok(())
    }

    async fn start(
        &self,
        run_id: i64,
        settings: RunSettings,
        endpoints: &mut HashMap<i64, Watched>,
    ) -> Result<Driven> {
        let context = Arc::new(RunContext {
            run_id,
            settings: settings.clone(),
            worker_id: self.id,
            pool: self.pool.clone(),
            results: self.results.clone(),
            metrics: self.metrics.clone(),
            live_workers: self.live_workers.clone(),
            held: self.held.clone(),
            hold_budget: self.hold_budget.clone(),
            options: self.options,
        });
        let (phase, phase_rx) = watch::channel(Phase::Active);
        let tasks = TaskTracker::new();
        for endpoint_id in &settings.endpoint_ids {
            let watched = match endpoints.get(endpoint_id) {
                Some(watched) => watched,
                None => {
                    let target = endpoints::target(&self.pool, *endpoint_id).await?;
                    let client = match target.client(self.http.clone()) {
                        Ok(client) => client,
                        Err(e) => {
                            tracing::error!(run.id = run_id, endpoint = %target.name, error = %e, "endpoint unusable");
                            continue;
                        }
                    };
                    endpoint::ensure_capacity(&self.pool, target.id).await?;
                    let earlier = endpoint::earlier_pace(&self.pool, target.id).await?;
                    let stop = CancellationToken::new();
                    let process = endpoint::Process {
                        pool: self.pool.clone(),
                        worker_id: self.id,
                        live_workers: self.live_workers.clone(),
                        tick: self.options.tick,
                    };
                    let endpoint = Endpoint::start(&target, client, process, earlier, stop.clone());
                    endpoints.entry(*endpoint_id).or_insert(Watched { endpoint, stop })
                }
            };
            let membership = watched.endpoint.join(&settings);
            let span = tracing::info_span!("drive", run.id = run_id, endpoint.id = *endpoint_id, worker.id = %self.id);
            tasks.spawn(driver::drive(context.clone(), membership, phase_rx.clone()).instrument(span));
        }
        tracing::info!(run.id = run_id, worker.id = %self.id, endpoints = settings.endpoint_ids.len(), "driving run");
        Ok(Driven { phase, settings, tasks })
    }
}
