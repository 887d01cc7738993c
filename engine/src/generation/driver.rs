//! Keeps one endpoint busy for one run: claims samples up to this process's share of the
//! endpoint's limit, runs their tries, pauses dispatch while the endpoint is down, and once a
//! second updates the limit and records what it saw.

use super::{
    attempt::{Attempt, Report, TryResult},
    controller::{Controller, Observation, ServerSignals},
    queue, RunContext,
};
use crate::{
    endpoints::EndpointTarget,
    vllm::{ServerLoad, VllmClient},
};
use domain::generation::Concurrency;
use std::{
    sync::{atomic::Ordering, Arc, Mutex},
    time::Duration,
};
use tokio::sync::{mpsc, watch};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// What the worker wants a run's drivers to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Claim and run samples.
    Active,
    /// Claim nothing more; let the tries in flight finish (pause, completion, new settings).
    Draining,
    /// Stop the tries in flight and return their samples to the queue (cancel, shutdown).
    Abort,
}

/// One second's worth of what the endpoint's tries reported.
#[derive(Default)]
struct Window {
    completed: u32,
    failures: u32,
    tokens: u64,
}

/// The monitor's latest view of the server.
#[derive(Clone, Debug, Default)]
struct Probe {
    load: Option<ServerLoad>,
    healthy: bool,
}

pub(super) async fn drive(run: Arc<RunContext>, endpoint: EndpointTarget, mut phase: watch::Receiver<Phase>) {
    let client = match endpoint.client(run.http.clone()) {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(run.id = run.run_id, endpoint = %endpoint.name, error = %e, "endpoint unusable");
            return;
        }
    };
    let label = crate::metrics::EndpointLabel { endpoint: endpoint.name.clone() };
    let mut limit = read_limit(&run, endpoint.id).await.unwrap_or(1);
    let mut controller = match run.settings.concurrency {
        Concurrency::Adaptive { min, max } => Some(Controller::new(limit, min, max)),
        Concurrency::Fixed { .. } => None,
    };
    let (report_tx, mut reports) = mpsc::unbounded_channel::<Report>();
    let ttfts: Arc<Mutex<Vec<f64>>> = Arc::default();
    let abort = CancellationToken::new();
    let tasks = TaskTracker::new();
    let (probe_tx, probe_rx) = watch::channel(Probe { load: None, healthy: true });
    let monitor_stop = CancellationToken::new();
    tokio::spawn(monitor(client.clone(), run.options.tick, probe_tx, monitor_stop.clone()));

    let mut tick = tokio::time::interval(run.options.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut in_flight: u32 = 0;
    let mut healthy = true;
    let mut queue_dry = false;
    let mut window = Window::default();
    let mut previous_load: Option<ServerLoad> = None;

    loop {
        let current = *phase.borrow();
        if current == Phase::Abort {
            abort.cancel();
        }
        if current == Phase::Active && healthy && !queue_dry {
            let share = share_of(limit, run.live_workers.load(Ordering::Relaxed));
            let deficit = share.saturating_sub(in_flight);
            // Refill in small batches rather than one query per finished try.
            if deficit > 0 && (deficit >= (share / 16).max(1) || in_flight == 0) {
                let want = deficit.min(run.options.claim_batch);
                match queue::claim(&run.pool, run.run_id, run.worker_id, run.options.lease, want.into()).await
                {
                    Ok(claimed) => {
                        queue_dry = (claimed.len() as u32) < want;
                        for sample in claimed {
                            in_flight += 1;
                            let hold = run.held.hold(sample.id);
                            let (run, client, abort, ttfts, report_tx) = (
                                run.clone(),
                                client.clone(),
                                abort.clone(),
                                ttfts.clone(),
                                report_tx.clone(),
                            );
                            let endpoint_id = endpoint.id;
                            tasks.spawn(async move {
                                let on_first_token = move |ttft: Duration| {
                                    ttfts.lock().expect("ttft list").push(ttft.as_secs_f64());
                                };
                                let attempt = Attempt {
                                    run: &run,
                                    endpoint_id,
                                    client: &client,
                                    cancel: &abort,
                                    on_first_token: &on_first_token,
                                };
                                let report = attempt.run(sample).await;
                                drop(hold);
                                let _ = report_tx.send(report);
                            });
                        }
                    }
                    Err(e) => {
                        tracing::warn!(run.id = run.run_id, error = %e, "claiming samples failed; retrying next second");
                        queue_dry = true;
                    }
                }
            }
        }
        if current != Phase::Active && in_flight == 0 {
            break;
        }
        run.metrics.requests_in_flight.get_or_create(&label).set(in_flight as i64);
        tokio::select! {
            Some(report) = reports.recv() => {
                in_flight -= 1;
                window.tokens += u64::from(report.completion_tokens);
                match report.result {
                    TryResult::Finished(_) => window.completed += 1,
                    TryResult::Retrying { timeout_or_server_error } => window.failures += u32::from(timeout_or_server_error),
                    TryResult::EndpointDown(message) if healthy => {
                        healthy = false;
                        tracing::warn!(run.id = run.run_id, endpoint = %endpoint.name, error = %message, "endpoint unreachable; dispatch paused until /health answers");
                        set_health(&run, endpoint.id, false).await;
                        run.metrics.endpoint_up.get_or_create(&label).set(0);
                    }
                    _ => {}
                }
            }
            _ = tick.tick() => {
                queue_dry = false;
                let probe = probe_rx.borrow().clone();
                if !healthy && probe.healthy {
                    healthy = true;
                    tracing::info!(run.id = run.run_id, endpoint = %endpoint.name, "endpoint answers again; dispatch resumed");
                    set_health(&run, endpoint.id, true).await;
                }
                run.metrics.endpoint_up.get_or_create(&label).set(i64::from(healthy));
                let rates = ServerRates::between(probe.load.as_ref(), previous_load.as_ref());
                let signals = probe.load.as_ref().map(|load| ServerSignals {
                    running: load.running,
                    waiting: load.waiting,
                    kv_usage: load.kv_usage,
                    new_preemptions: previous_load
                        .as_ref()
                        .map_or(0.0, |p| (load.preemptions_total - p.preemptions_total).max(0.0)),
                    generation_tps: rates.generation,
                });
                let observation = Observation {
                    outstanding: in_flight * run.live_workers.load(Ordering::Relaxed).max(1),
                    server: signals,
                    failures: window.failures,
                    ttft_p50: median(std::mem::take(&mut *ttfts.lock().expect("ttft list"))),
                };
                limit = update_limit(&run, endpoint.id, controller.as_mut(), observation, limit).await;
                record(&run, endpoint.id, in_flight, limit, &window, probe.load.as_ref(), rates).await;
                if probe.load.is_some() {
                    previous_load = probe.load;
                }
                window = Window::default();
            }
            _ = phase.changed() => {}
        }
    }
    monitor_stop.cancel();
    tasks.close();
    tasks.wait().await;
    run.metrics.requests_in_flight.get_or_create(&label).set(0);
}

/// This process's part of the endpoint's limit when `workers` processes share the run.
fn share_of(limit: u32, workers: u32) -> u32 {
    limit.div_ceil(workers.max(1))
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

/// Scrapes `/metrics` and probes `/health` once per tick, off the dispatch loop.
async fn monitor(client: VllmClient, every: Duration, probe: watch::Sender<Probe>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let (load, healthy) = tokio::join!(client.load(), client.healthy());
        let _ = probe.send(Probe { load: load.ok().flatten(), healthy });
    }
}

async fn read_limit(run: &RunContext, endpoint_id: i64) -> Option<u32> {
    sqlx::query_scalar!(
        "SELECT concurrency_limit FROM run_endpoints WHERE run_id = $1 AND endpoint_id = $2",
        run.run_id,
        endpoint_id
    )
    .fetch_optional(&run.pool)
    .await
    .ok()
    .flatten()
    .map(|l| l.max(1) as u32)
}

/// Fixed: the setting. Adaptive: the process holding the controller lease decides and stores
/// the limit with its reason; the others read it.
async fn update_limit(
    run: &RunContext,
    endpoint_id: i64,
    controller: Option<&mut Controller>,
    obs: Observation,
    current: u32,
) -> u32 {
    let Some(controller) = controller else {
        return match run.settings.concurrency {
            Concurrency::Fixed { limit } => limit,
            Concurrency::Adaptive { .. } => current,
        };
    };
    let lease = sqlx::query_scalar!(
        "UPDATE run_endpoints SET controller_owner = $3, controller_until = now() + interval '5 seconds'
         WHERE run_id = $1 AND endpoint_id = $2
           AND (controller_owner = $3 OR controller_until IS NULL OR controller_until < now())
         RETURNING concurrency_limit",
        run.run_id,
        endpoint_id,
        run.worker_id
    )
    .fetch_optional(&run.pool)
    .await;
    match lease {
        Ok(Some(stored)) => {
            controller.set_limit(stored.max(1) as u32);
            let decision = controller.observe(obs);
            if decision.changed {
                tracing::debug!(run.id = run.run_id, endpoint.id = endpoint_id, limit = decision.limit, reason = %decision.reason, "concurrency limit changed");
                let _ = sqlx::query!(
                    "UPDATE run_endpoints SET concurrency_limit = $3, limit_reason = $4, limit_changed_at = now()
                     WHERE run_id = $1 AND endpoint_id = $2",
                    run.run_id,
                    endpoint_id,
                    decision.limit as i32,
                    decision.reason
                )
                .execute(&run.pool)
                .await;
            }
            decision.limit
        }
        Ok(None) => read_limit(run, endpoint_id).await.unwrap_or(current),
        Err(e) => {
            tracing::warn!(error = %e, "reading the concurrency limit failed; keeping the current one");
            current
        }
    }
}

async fn set_health(run: &RunContext, endpoint_id: i64, healthy: bool) {
    let result = sqlx::query!(
        "UPDATE run_endpoints SET healthy = $3, health_changed_at = now() WHERE run_id = $1 AND endpoint_id = $2 AND healthy <> $3",
        run.run_id,
        endpoint_id,
        healthy
    )
    .execute(&run.pool)
    .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "recording endpoint health failed");
    }
}

/// The server's prompt and generation tokens/s since the previous scrape, computed once per
/// tick for both the controller and the time series.
#[derive(Clone, Copy, Debug, Default)]
struct ServerRates {
    prompt: Option<f64>,
    generation: Option<f64>,
}

impl ServerRates {
    fn between(load: Option<&ServerLoad>, previous: Option<&ServerLoad>) -> Self {
        match (load, previous) {
            (Some(l), Some(p)) => Self {
                prompt: l.rate_since(p, |l| l.prompt_tokens_total),
                generation: l.rate_since(p, |l| l.generation_tokens_total),
            },
            _ => Self::default(),
        }
    }
}

/// Adds this second to the run's time series. Several worker processes add to the same row.
async fn record(
    run: &RunContext,
    endpoint_id: i64,
    in_flight: u32,
    limit: u32,
    window: &Window,
    load: Option<&ServerLoad>,
    rates: ServerRates,
) {
    let result = sqlx::query!(
        "INSERT INTO run_metrics (run_id, endpoint_id, at, in_flight, concurrency_limit, completed, errors, client_tokens,
                                  server_prompt_tps, server_generation_tps, server_running, server_waiting,
                                  server_kv_usage, server_preemptions)
         VALUES ($1, $2, date_trunc('second', now()), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
         ON CONFLICT (run_id, endpoint_id, at) DO UPDATE SET
             in_flight = run_metrics.in_flight + excluded.in_flight,
             concurrency_limit = excluded.concurrency_limit,
             completed = run_metrics.completed + excluded.completed,
             errors = run_metrics.errors + excluded.errors,
             client_tokens = run_metrics.client_tokens + excluded.client_tokens,
             server_prompt_tps = COALESCE(excluded.server_prompt_tps, run_metrics.server_prompt_tps),
             server_generation_tps = COALESCE(excluded.server_generation_tps, run_metrics.server_generation_tps),
             server_running = COALESCE(excluded.server_running, run_metrics.server_running),
             server_waiting = COALESCE(excluded.server_waiting, run_metrics.server_waiting),
             server_kv_usage = COALESCE(excluded.server_kv_usage, run_metrics.server_kv_usage),
             server_preemptions = COALESCE(excluded.server_preemptions, run_metrics.server_preemptions)",
        run.run_id,
        endpoint_id,
        in_flight as i32,
        limit as i32,
        window.completed as i32,
        window.failures as i32,
        window.tokens.min(i32::MAX as u64) as i32,
        rates.prompt.map(|r| r as f32),
        rates.generation.map(|r| r as f32),
        load.map(|l| l.running as i32),
        load.map(|l| l.waiting as i32),
        load.map(|l| l.kv_usage as f32),
        load.map(|l| l.preemptions_total as i32),
    )
    .execute(&run.pool)
    .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "recording run metrics failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_split_between_live_workers_rounding_up() {
        assert_eq!(share_of(64, 1), 64);
        assert_eq!(share_of(64, 3), 22);
        assert_eq!(share_of(1, 4), 1);
        assert_eq!(share_of(10, 0), 10);
    }

    #[test]
    fn median_of_an_unsorted_window() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![]), None);
    }
}
