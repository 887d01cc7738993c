//! One vLLM server as a worker process sees it, shared by every run the process drives there:
//! the server's load (`/metrics`, read once per tick whatever the number of runs), whether it
//! serves (`availability`: outages pause dispatch and fail no sample), and its capacity, the
//! adaptive concurrency limit that belongs to the server and is split between the runs on it
//! by weight (`capacity`).
//!
//! Across worker processes the capacity lives in `endpoint_capacity`: the process holding the
//! row's controller lease runs the controller and stores the limit and each run's share; the
//! others read the limit and compute the same split. The row also keeps how fast the
//! endpoint's streams generate per request (`chunking::Pace`), so that the next process on
//! the endpoint asks for long chunks from its first request.

use super::{
    availability::{blame, Availability, Blame, Sent, Ticket, Verdict},
    capacity::{self, Claim},
    chunking::Pace,
    controller::{Controller, Observation, ServerSignals},
    spec_window::SpecWindow,
};
use crate::{
    endpoints::EndpointTarget,
    vllm::{Failure, Progress, ServerLoad, SpanMarkers, VllmClient},
    Result,
};
use domain::{
    endpoint::WindowAcceptance,
    generation::{Concurrency, RunSettings},
};
use sqlx::PgPool;
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Where an endpoint's adaptive limit starts the first time a run uses it. vLLM's own batch is
/// 128 sequences by default on a CPU and 256 or 1,024 on GPUs, so 64 is inside every default
/// batch: a start at 16 spent the first 10 of a 30 s run doubling on the real vLLM server
/// (slow start waits for each step's requests to show in `/metrics`). A smaller server queues
/// the surplus, and the full-batch rule brings the limit down within three readings. Later
/// runs start from the limit the last one left.
pub const ADAPTIVE_START: u32 = 64;

/// The text that ends a reasoning span for vLLM's `deepseek_r1` and `qwen3` reasoning parsers.
const REASONING_END: &str = "</think>";
/// The text that opens a call for vLLM's `hermes` tool parser (Qwen's format).
const CALL_START: &str = "<tool_call>";

/// Ticks between two scrapes of `/metrics` while no adaptive controller reads the server: the
/// live view and the chunk size need no more. vLLM renders every metric it has (about 50 KB,
/// 9 ms of its API process on the real CPU server) on each scrape; where the server shares the
/// CPU with its model, as on a CPU server, that time comes out of generation.
const SLOW_SCRAPE_TICKS: u32 = 5;

/// A stored pace is written again when this process's differs from it by more than this
/// fraction, or when it is older than [`PACE_REFRESH`].
const PACE_CHANGE: f64 = 0.05;
const PACE_REFRESH: Duration = Duration::from_secs(600);

/// How long a failure waits for evidence before the server is probed for it.
const VERDICT_PATIENCE: Duration = Duration::from_secs(2);

/// What drivers read about their endpoint, published once per tick.
#[derive(Clone, Debug, Default)]
pub(crate) struct View {
    /// Whether to send requests at all.
    pub up: bool,
    pub down_reason: Option<String>,
    /// Each run's part of the endpoint, over all worker processes.
    pub shares: HashMap<i64, RunShare>,
    pub load: Option<ServerLoad>,
    pub rates: ServerRates,
    /// Tokens/s each running request generated at, at the last reading that told.
    pub per_request_tps: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunShare {
    pub limit: u32,
    pub reason: String,
}

/// The server's prompt and generation tokens/s since the previous scrape, computed once per
/// tick for the controller and every run's time series.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ServerRates {
    pub prompt: Option<f64>,
    pub generation: Option<f64>,
    /// The draft's acceptance over about the last minute (`spec_window`), for the Endpoints page.
    pub draft_acceptance: Option<WindowAcceptance>,
}

impl ServerRates {
    fn between(load: Option<&ServerLoad>, previous: Option<&ServerLoad>) -> Self {
        match (load, previous) {
            (Some(l), Some(p)) => Self {
                prompt: l.rate_since(p, |l| l.prompt_tokens_total),
                generation: l.rate_since(p, |l| l.generation_tokens_total),
                draft_acceptance: None,
            },
            _ => Self::default(),
        }
    }
}

/// What every endpoint of a worker process shares with it.
#[derive(Clone)]
pub(crate) struct Process {
    pub pool: PgPool,
    pub worker_id: Uuid,
    pub live_workers: Arc<AtomicU32>,
    pub tick: Duration,
}

/// A run this process drives on the endpoint.
#[derive(Clone, Debug)]
struct Member {
    concurrency: Concurrency,
    model: String,
    in_flight: u32,
}

#[derive(Default)]
struct Inner {
    availability: Availability,
    /// By membership: a run's drivers are replaced when its settings change, and the old
    /// one leaves after the new one has joined.
    members: HashMap<u64, Member>,
    next_member: u64,
    /// A failure is waiting for evidence: probe the server.
    probe_wanted: bool,
    /// Counted timeouts and server errors since the last tick, for the controller.
    failures: u32,
    /// Times to first token since the last tick.
    ttfts: Vec<f64>,
    /// How fast requests generate, from the chunks of this endpoint's streams.
    pace: Pace,
    /// By model: the ids of the tokens that end the reasoning and open a call, as the server's
    /// `/tokenize` gave them.
    span_markers: HashMap<String, SpanMarkers>,
}

pub(crate) struct Endpoint {
    pub id: i64,
    pub name: String,
    pub client: VllmClient,
    inner: Mutex<Inner>,
    /// Wakes the tries waiting for a verdict when new evidence arrives.
    evidence: Notify,
    view: watch::Sender<View>,
}

/// A run's place on an endpoint; it leaves when this is dropped.
pub(crate) struct Membership {
    endpoint: Arc<Endpoint>,
    id: u64,
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.endpoint.inner.lock().expect("endpoint state").members.remove(&self.id);
    }
}

impl Membership {
    pub fn endpoint(&self) -> &Arc<Endpoint> {
        &self.endpoint
    }

    /// The requests this run has outstanding on the endpoint in this process.
    pub fn set_in_flight(&self, in_flight: u32) {
        if let Some(member) = self.endpoint.inner.lock().expect("endpoint state").members.get_mut(&self.id) {
            member.in_flight = in_flight;
        }
    }
}

impl Endpoint {
    /// Starts watching the server, its streams' pace starting from `earlier` (what an earlier
    /// run or process left, [`earlier_pace`]); the watch ends with `stop`.
    pub fn start(
        target: &EndpointTarget,
        client: VllmClient,
        process: Process,
        earlier: Option<f64>,
        stop: CancellationToken,
    ) -> Arc<Self> {
        let (view, _) = watch::channel(View { up: true, ..View::default() });
        let pace = earlier.map(Pace::from_earlier).unwrap_or_default();
        let endpoint = Arc::new(Self {
            id: target.id,
            name: target.name.clone(),
            client,
            inner: Mutex::new(Inner { pace, ..Inner::default() }),
            evidence: Notify::new(),
            view,
        });
        let span = tracing::info_span!("endpoint", endpoint.id = target.id, endpoint.name = %target.name);
        tokio::spawn(tracing::Instrument::instrument(endpoint.clone().watch(process, earlier, stop), span));
        endpoint
    }

    pub fn join(self: &Arc<Self>, settings: &RunSettings) -> Membership {
        let member =
            Member { concurrency: settings.concurrency, model: settings.model.clone(), in_flight: 0 };
        let mut inner = self.inner.lock().expect("endpoint state");
        let id = inner.next_member;
        inner.next_member += 1;
        inner.members.insert(id, member);
        Membership { endpoint: self.clone(), id }
    }

    /// The ids of the tokens that end the model's reasoning and open a call, asked of the
    /// server once per model (a failed ask is asked again next time): they split a streamed
    /// chunk that holds the end of one span and the start of the next (`vllm::span_counts`).
    pub async fn span_markers(&self, model: &str) -> SpanMarkers {
        if let Some(known) = self.inner.lock().expect("endpoint state").span_markers.get(model) {
            return *known;
        }
        let (Ok(reasoning_end), Ok(call_start)) = (
            self.client.single_token(model, REASONING_END).await,
            self.client.single_token(model, CALL_START).await,
        ) else {
            return SpanMarkers::default();
        };
        let markers = SpanMarkers { reasoning_end, call_start };
        self.inner.lock().expect("endpoint state").span_markers.insert(model.to_string(), markers);
        markers
    }

    pub fn has_members(&self) -> bool {
        !self.inner.lock().expect("endpoint state").members.is_empty()
    }

    pub fn subscribe(&self) -> watch::Receiver<View> {
        self.view.subscribe()
    }

    /// Tokens/s each of the server's running requests generates at, when known: as this
    /// process's streams see it, or else from the server's `/metrics`.
    pub fn per_request_tps(&self) -> Option<f64> {
        let own = self.inner.lock().expect("endpoint state").pace.per_request_tps();
        own.or_else(|| self.view.borrow().per_request_tps)
    }

    /// A stream to this endpoint told how it goes.
    pub fn progress(&self, progress: Progress) {
        let mut inner = self.inner.lock().expect("endpoint state");
        match progress {
            Progress::FirstToken(ttft) => inner.ttfts.push(ttft.as_secs_f64()),
            Progress::Tokens { tokens, after } => inner.pace.observe(tokens, after),
        }
    }

    /// A request is being sent: its place in the order, for `served`.
    pub fn sending(&self) -> Sent {
        self.inner.lock().expect("endpoint state").availability.send()
    }

    /// The request `sent` came back from the server (whatever its outcome for the sample).
    pub fn served(&self, sent: Sent) {
        self.inner.lock().expect("endpoint state").availability.success(sent);
        self.evidence.notify_waiters();
    }

    /// Whose fault a failed try was: `Verdict::Counted` when the sample's own (it counts
    /// against the sample's attempts), `Verdict::Outage` when the server's (it does not).
    /// An ambiguous failure waits for the next evidence about the server.
    pub async fn judge(&self, failure: &Failure) -> Verdict {
        let ticket: Ticket = {
            let mut inner = self.inner.lock().expect("endpoint state");
            match blame(failure) {
                Blame::Sample => return Verdict::Counted,
                Blame::Endpoint => {
                    if inner.availability.down(failure.message.clone()) {
                        tracing::warn!(endpoint = %self.name, error = %failure.message, "endpoint down; dispatch paused until /health answers and a probe request succeeds");
                    }
                    drop(inner);
                    self.publish_availability();
                    self.evidence.notify_waiters();
                    return Verdict::Outage;
                }
                Blame::Unknown => {
                    let was_up = inner.availability.is_up();
                    let ticket = inner.availability.ambiguous(&failure.message);
                    if was_up && !inner.availability.is_up() {
                        tracing::warn!(endpoint = %self.name, reason = inner.availability.down_reason().unwrap_or(""), "endpoint down; dispatch paused until /health answers and a probe request succeeds");
                    }
                    ticket
                }
            }
        };
        self.publish_availability();
        self.evidence.notify_waiters();
        loop {
            let waiting = self.evidence.notified();
            let verdict = self.inner.lock().expect("endpoint state").availability.verdict(ticket);
            if verdict != Verdict::Pending {
                if verdict == Verdict::Counted && failure.is_transient() {
                    self.inner.lock().expect("endpoint state").failures += 1;
                }
                return verdict;
            }
            if tokio::time::timeout(VERDICT_PATIENCE, waiting).await.is_err() {
                // Nothing else is running here to tell: ask the server itself.
                self.inner.lock().expect("endpoint state").probe_wanted = true;
            }
        }
    }

    fn publish_availability(&self) {
        let (up, reason) = {
            let inner = self.inner.lock().expect("endpoint state");
            (inner.availability.is_up(), inner.availability.down_reason().map(str::to_string))
        };
        self.view.send_if_modified(|view| {
            let changed = view.up != up;
            view.up = up;
            view.down_reason = reason;
            changed
        });
    }

    /// Once per tick: read the server, probe it when a verdict or a recovery needs it, revise
    /// the capacity and the runs' shares, and publish what the drivers read.
    async fn watch(self: Arc<Self>, process: Process, earlier: Option<f64>, stop: CancellationToken) {
        let (probe_tx, probe_rx) = watch::channel(Probe::default());
        let monitor_stop = stop.child_token();
        let every_tick = Arc::new(AtomicBool::new(true));
        tokio::spawn(monitor(
            self.client.clone(),
            process.tick,
            every_tick.clone(),
            probe_tx,
            monitor_stop.clone(),
        ));
        let mut tick = tokio::time::interval(process.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut controller: Option<Controller> = None;
        let mut previous_load: Option<ServerLoad> = None;
        let mut rates = ServerRates::default();
        let mut spec_window = SpecWindow::default();
        let mut probing: Option<tokio::task::JoinHandle<Result<(), String>>> = None;
        let mut recorded_health: Option<bool> = None;
        let mut stored_pace = earlier.map(|tps| (tps, std::time::Instant::now()));
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let probe = probe_rx.borrow().clone();
            self.follow_health(&probe, &mut probing);
            // A scrape read again (between two slow scrapes) keeps the rates it gave for the
            // live view; the controller is given no rate for it, as one reading is judged once.
            let read_again = matches!((&probe.load, &previous_load), (Some(l), Some(p)) if l.at == p.at);
            let fresh = if read_again {
                ServerRates { draft_acceptance: rates.draft_acceptance, ..ServerRates::default() }
            } else {
                rates = ServerRates::between(probe.load.as_ref(), previous_load.as_ref());
                rates.draft_acceptance = probe.load.as_ref().and_then(|load| spec_window.observe(load));
                rates
            };
            let new_reading = if read_again { None } else { probe.load.as_ref() };
            let shares = match self
                .revise_capacity(
                    &process,
                    &mut controller,
                    &probe,
                    previous_load.as_ref(),
                    fresh,
                    new_reading,
                )
                .await
            {
                Ok(shares) => {
                    every_tick.store(controller.is_some(), Ordering::Relaxed);
                    Some(shares)
                }
                Err(e) => {
                    tracing::warn!(endpoint = %self.name, error = %e, "revising the endpoint's capacity failed; keeping the current shares");
                    None
                }
            };
            if probe.load.is_some() {
                previous_load = probe.load.clone();
            }
            let (up, down_reason) = {
                let inner = self.inner.lock().expect("endpoint state");
                (inner.availability.is_up(), inner.availability.down_reason().map(str::to_string))
            };
            if recorded_health != Some(up)
                && record_health(&process.pool, self.id, up, down_reason.as_deref()).await
            {
                recorded_health = Some(up);
            }
            self.keep_pace(&process.pool, &mut stored_pace).await;
            self.view.send_modify(|view| {
                view.up = up;
                view.down_reason = down_reason;
                view.load = probe.load.clone();
                view.rates = rates;
                if let (Some(load), Some(generation)) = (&probe.load, rates.generation) {
                    if load.running >= 1.0 {
                        view.per_request_tps = Some(generation / load.running);
                    }
                }
                if let Some(shares) = shares {
                    view.shares = shares;
                }
            });
        }
        monitor_stop.cancel();
    }

    /// Stores this process's pace for later runs when it moved away from the stored one (or
    /// that one is getting old). A failed write is tried again next tick.
    async fn keep_pace(&self, pool: &PgPool, stored: &mut Option<(f64, std::time::Instant)>) {
        let Some(tps) = self.inner.lock().expect("endpoint state").pace.per_request_tps() else {
            return;
        };
        let current = stored
            .is_some_and(|(was, at)| (tps / was - 1.0).abs() <= PACE_CHANGE && at.elapsed() < PACE_REFRESH);
        if current {
            return;
        }
        let written = sqlx::query!(
            "UPDATE endpoint_capacity SET stream_tps = $2, stream_tps_at = now() WHERE endpoint_id = $1",
            self.id,
            tps as f32
        )
        .execute(pool)
        .await;
        match written {
            Ok(_) => *stored = Some((tps, std::time::Instant::now())),
            Err(e) => tracing::debug!(endpoint = %self.name, error = %e, "storing the streams' pace failed"),
        }
    }

    /// Marks the endpoint down when `/health` fails; probes the server when a suspicion or a
    /// verdict waits for it, or when a down endpoint's `/health` answers again. One probe at a
    /// time; its result is read on a later tick.
    fn follow_health(
        self: &Arc<Self>,
        probe: &Probe,
        probing: &mut Option<tokio::task::JoinHandle<Result<(), String>>>,
    ) {
        if let Some(error) = &probe.health_error {
            let newly = self.inner.lock().expect("endpoint state").availability.down(error.clone());
            if newly {
                tracing::warn!(endpoint = %self.name, %error, "endpoint down; dispatch paused until /health answers and a probe request succeeds");
                self.publish_availability();
                self.evidence.notify_waiters();
            }
        }
        if probing.as_ref().is_some_and(|handle| !handle.is_finished()) {
            return;
        }
        if let Some(handle) = probing.take() {
            let result = futures::FutureExt::now_or_never(handle)
                .and_then(Result::ok)
                .unwrap_or_else(|| Err("the probe request did not finish".into()));
            let mut inner = self.inner.lock().expect("endpoint state");
            let was_up = inner.availability.is_up();
            match result {
                Ok(()) => inner.availability.probe_succeeded(),
                Err(error) => inner.availability.probe_failed(&error),
            }
            match (was_up, inner.availability.is_up()) {
                (false, true) => {
                    tracing::info!(endpoint = %self.name, "endpoint serves again; dispatch resumed")
                }
                (true, false) => {
                    tracing::warn!(endpoint = %self.name, reason = inner.availability.down_reason().unwrap_or(""), "endpoint down; dispatch paused until /health answers and a probe request succeeds")
                }
                _ => {}
            }
            drop(inner);
            self.publish_availability();
            self.evidence.notify_waiters();
        }
        let (wanted, model) = {
            let mut inner = self.inner.lock().expect("endpoint state");
            let health_ok = probe.scraped && probe.health_error.is_none();
            let for_verdict = std::mem::take(&mut inner.probe_wanted) && inner.availability.is_up();
            let wanted = for_verdict || inner.availability.wants_probe(health_ok);
            (wanted, inner.members.values().next().map(|m| m.model.clone()))
        };
        if let (true, Some(model)) = (wanted, model) {
            let client = self.client.clone();
            *probing = Some(tokio::spawn(async move { client.probe(&model).await }));
        }
    }

    /// The endpoint's capacity and each run's share of it. With no adaptive run on the
    /// endpoint there is no controller to store the server's load with its limit, so each
    /// `new_reading` of `/metrics` is stored on its own, for the Endpoints page.
    async fn revise_capacity(
        &self,
        process: &Process,
        controller: &mut Option<Controller>,
        probe: &Probe,
        previous_load: Option<&ServerLoad>,
        rates: ServerRates,
        new_reading: Option<&ServerLoad>,
    ) -> Result<HashMap<i64, RunShare>> {
        let claims = claims(&process.pool, self.id).await?;
        let Some((min, max)) = capacity::adaptive_bounds(&claims) else {
            *controller = None;
            if let (Some(load), false) = (new_reading, claims.is_empty()) {
                store_load(&process.pool, self.id, load, rates).await?;
            }
            return Ok(fixed_shares(&claims));
        };
        let workers = process.live_workers.load(Ordering::Relaxed).max(1);
        let (outstanding, failures, ttfts, up) = {
            let mut inner = self.inner.lock().expect("endpoint state");
            let outstanding: u32 = inner
                .members
                .values()
                .filter(|m| matches!(m.concurrency, Concurrency::Adaptive { .. }))
                .map(|m| m.in_flight)
                .sum();
            (
                outstanding * workers,
                std::mem::take(&mut inner.failures),
                std::mem::take(&mut inner.ttfts),
                inner.availability.is_up(),
            )
        };
        let lease = sqlx::query!(
            "UPDATE endpoint_capacity SET controller_owner = $2, controller_until = now() + interval '5 seconds'
             WHERE endpoint_id = $1
               AND (controller_owner = $2 OR controller_until IS NULL OR controller_until < now())
             RETURNING concurrency_limit, limit_reason",
            self.id,
            process.worker_id
        )
        .fetch_optional(&process.pool)
        .await?;
        let (limit, reason) = match lease {
            // While the server is down its readings say nothing about its capacity.
            Some(stored) if up => {
                let controller = controller
                    .get_or_insert_with(|| Controller::new(stored.concurrency_limit.max(1) as u32, min, max));
                controller.set_bounds(min, max);
                controller.set_limit(stored.concurrency_limit.max(1) as u32);
                let observation = Observation {
                    outstanding,
                    server: probe.load.as_ref().map(|load| ServerSignals {
                        running: load.running,
                        waiting: load.waiting,
                        kv_usage: load.kv_usage,
                        new_preemptions: previous_load
                            .map_or(0.0, |p| (load.preemptions_total - p.preemptions_total).max(0.0)),
                        generation_tps: rates.generation,
                    }),
                    failures,
                    ttft_p50: median(ttfts),
                };
                let decision = controller.observe(observation);
                let reason = if decision.changed { decision.reason } else { stored.limit_reason };
                if decision.changed {
                    tracing::debug!(endpoint = %self.name, limit = decision.limit, %reason, "endpoint capacity changed");
                }
                store_capacity(
                    &process.pool,
                    self.id,
                    decision.limit,
                    &reason,
                    decision.changed,
                    probe.load.as_ref(),
                    rates,
                )
                .await?;
                (decision.limit, reason)
            }
            Some(stored) => (stored.concurrency_limit.max(1) as u32, stored.limit_reason),
            None => {
                *controller = None;
                let stored = sqlx::query!(
                    "SELECT concurrency_limit, limit_reason FROM endpoint_capacity WHERE endpoint_id = $1",
                    self.id
                )
                .fetch_one(&process.pool)
                .await?;
                (stored.concurrency_limit.max(1) as u32, stored.limit_reason)
            }
        };
        let split = capacity::split(limit, &claims);
        let adaptive_runs =
            claims.iter().filter(|c| matches!(c.concurrency, Concurrency::Adaptive { .. })).count();
        let shares: HashMap<i64, RunShare> = split
            .into_iter()
            .zip(&claims)
            .map(|(share, claim)| {
                let reason = match claim.concurrency {
                    Concurrency::Fixed { .. } => "fixed by the run's settings".to_string(),
                    Concurrency::Adaptive { .. } if adaptive_runs > 1 => {
                        format!("{} of the endpoint's {limit} (weight {}, shared by {adaptive_runs} runs); {reason}", share.limit, claim.weight)
                    }
                    Concurrency::Adaptive { .. } => reason.clone(),
                };
                (share.run_id, RunShare { limit: share.limit, reason })
            })
            .collect();
        if controller.is_some() {
            store_shares(&process.pool, self.id, &shares).await?;
        }
        Ok(shares)
    }
}

fn fixed_shares(claims: &[Claim]) -> HashMap<i64, RunShare> {
    capacity::split(0, claims)
        .into_iter()
        .map(|s| (s.run_id, RunShare { limit: s.limit, reason: "fixed by the run's settings".to_string() }))
        .collect()
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

/// The running runs on an endpoint, from every worker process, with what each could use.
async fn claims(pool: &PgPool, endpoint_id: i64) -> Result<Vec<Claim>> {
    let rows = sqlx::query!(
        r#"SELECT r.id, r.settings,
                  EXISTS (SELECT 1 FROM samples s WHERE s.run_id = r.id AND s.state = 'pending') AS "has_pending!",
                  (SELECT count(*) FROM samples s WHERE s.run_id = r.id AND s.state = 'running') AS "running!"
           FROM run_endpoints re JOIN runs r ON r.id = re.run_id
           WHERE re.endpoint_id = $1 AND r.status = 'running'
           ORDER BY r.id"#,
        endpoint_id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let settings: RunSettings = domain::stored::from_stored(row.settings).ok()?;
            Some(Claim {
                run_id: row.id,
                concurrency: settings.concurrency,
                weight: settings.weight,
                demand: (!row.has_pending).then_some(row.running as u32),
            })
        })
        .collect())
}

async fn store_capacity(
    pool: &PgPool,
    endpoint_id: i64,
    limit: u32,
    reason: &str,
    changed: bool,
    load: Option<&ServerLoad>,
    rates: ServerRates,
) -> Result<()> {
    sqlx::query!(
        "UPDATE endpoint_capacity SET
             concurrency_limit = $2, limit_reason = $3,
             limit_changed_at = CASE WHEN $4 THEN now() ELSE limit_changed_at END,
             server_running = $5, server_waiting = $6, server_kv_usage = $7, server_generation_tps = $8,
             spec_acceptance = $9, spec_window_secs = $10, observed_at = now()
         WHERE endpoint_id = $1",
        endpoint_id,
        limit as i32,
        reason,
        changed,
        load.map(|l| l.running as i32),
        load.map(|l| l.waiting as i32),
        load.map(|l| l.kv_usage as f32),
        rates.generation.map(|r| r as f32),
        rates.draft_acceptance.map(|w| w.length as f32),
        rates.draft_acceptance.map(|w| w.seconds as f32),
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The server's load alone, where no controller stores it with a limit.
async fn store_load(pool: &PgPool, endpoint_id: i64, load: &ServerLoad, rates: ServerRates) -> Result<()> {
    sqlx::query!(
        "UPDATE endpoint_capacity SET
             server_running = $2, server_waiting = $3, server_kv_usage = $4, server_generation_tps = $5,
             spec_acceptance = $6, spec_window_secs = $7, observed_at = now()
         WHERE endpoint_id = $1",
        endpoint_id,
        load.running as i32,
        load.waiting as i32,
        load.kv_usage as f32,
        rates.generation.map(|r| r as f32),
        rates.draft_acceptance.map(|w| w.length as f32),
        rates.draft_acceptance.map(|w| w.seconds as f32),
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Writes each run's share where its dashboard reads it, when it changed.
async fn store_shares(pool: &PgPool, endpoint_id: i64, shares: &HashMap<i64, RunShare>) -> Result<()> {
    for (run_id, share) in shares {
        sqlx::query!(
            "UPDATE run_endpoints SET concurrency_limit = $3, limit_reason = $4, limit_changed_at = now()
             WHERE run_id = $1 AND endpoint_id = $2 AND (concurrency_limit <> $3 OR limit_reason <> $4)",
            run_id,
            endpoint_id,
            share.limit as i32,
            share.reason
        )
        .execute(pool)
        .await?;
    }
    Ok(())
}

/// Records whether the endpoint serves, for the Endpoints page and the runs' dashboards.
/// Returns whether the write landed.
async fn record_health(pool: &PgPool, endpoint_id: i64, up: bool, reason: Option<&str>) -> bool {
    let result = async {
        sqlx::query!(
            "UPDATE endpoint_capacity SET healthy = $2, health_reason = $3, health_changed_at = now()
             WHERE endpoint_id = $1 AND (healthy <> $2 OR health_reason IS DISTINCT FROM $3)",
            endpoint_id,
            up,
            reason
        )
        .execute(pool)
        .await?;
        sqlx::query!(
            "UPDATE run_endpoints re SET healthy = $2, health_changed_at = now()
             FROM runs r
             WHERE re.endpoint_id = $1 AND r.id = re.run_id AND r.status IN ('running', 'paused') AND re.healthy <> $2",
            endpoint_id,
            up
        )
        .execute(pool)
        .await?;
        Ok::<_, sqlx::Error>(())
    }
    .await;
    match result {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "recording endpoint health failed");
            false
        }
    }
}

/// Makes sure the endpoint has a capacity row (the first run on it starts it).
pub(crate) async fn ensure_capacity(pool: &PgPool, endpoint_id: i64) -> Result<()> {
    sqlx::query!(
        "INSERT INTO endpoint_capacity (endpoint_id, concurrency_limit, limit_reason)
         VALUES ($1, $2, 'starting value; adapts to the server''s load') ON CONFLICT (endpoint_id) DO NOTHING",
        endpoint_id,
        ADAPTIVE_START as i32
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The pace the endpoint's streams last had, when a process stored one within the last day
/// (an older one may describe another model behind the same address).
pub(crate) async fn earlier_pace(pool: &PgPool, endpoint_id: i64) -> Result<Option<f64>> {
    let tps = sqlx::query_scalar!(
        "SELECT stream_tps FROM endpoint_capacity
         WHERE endpoint_id = $1 AND stream_tps_at > now() - interval '1 day'",
        endpoint_id
    )
    .fetch_optional(pool)
    .await?
    .flatten();
    Ok(tps.map(f64::from))
}

/// The monitor's latest view of the server.
#[derive(Clone, Debug, Default)]
struct Probe {
    load: Option<ServerLoad>,
    /// Why `/health` failed, when it did.
    health_error: Option<String>,
    /// At least one reading has come back.
    scraped: bool,
}

/// Asks `/health` once per tick, off the endpoint's own loop: it is how an outage is seen.
/// Scrapes `/metrics` with it while `every_tick` is set (an adaptive controller reads the server
/// each tick), otherwise every [`SLOW_SCRAPE_TICKS`] ticks.
async fn monitor(
    client: VllmClient,
    every: Duration,
    every_tick: Arc<AtomicBool>,
    probe: watch::Sender<Probe>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut load: Option<ServerLoad> = None;
    let mut since_scrape = SLOW_SCRAPE_TICKS;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let scrape = every_tick.load(Ordering::Relaxed) || since_scrape >= SLOW_SCRAPE_TICKS;
        let health = if scrape {
            since_scrape = 1;
            let (scraped, health) = tokio::join!(client.load(), client.health());
            load = scraped.ok().flatten();
            health
        } else {
            since_scrape += 1;
            client.health().await
        };
        let _ = probe.send(Probe { load: load.clone(), health_error: health.err(), scraped: true });
    }
}
