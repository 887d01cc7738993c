//! Keeps one endpoint busy for one run: claims samples up to this process's part of the run's
//! share of the endpoint, runs their tries, sends nothing while the endpoint is down, and once
//! a second records what the run saw.

use super::{
    attempt::{Attempt, Report, TryResult},
    endpoint::{Membership, View},
    queue, RunContext,
};
use std::{sync::atomic::Ordering, sync::Arc};
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

/// One second's worth of what the run's tries on the endpoint reported.
#[derive(Default)]
struct Window {
    completed: u32,
    failures: u32,
    tokens: u64,
}

pub(super) async fn drive(run: Arc<RunContext>, membership: Membership, mut phase: watch::Receiver<Phase>) {
    let endpoint = membership.endpoint().clone();
    let label = crate::metrics::EndpointLabel { endpoint: endpoint.name.clone() };
    let mut view_rx = endpoint.subscribe();
    let mut share = read_share(&run, endpoint.id).await.unwrap_or(1);
    let (report_tx, mut reports) = mpsc::unbounded_channel::<Report>();
    let abort = CancellationToken::new();
    let tasks = TaskTracker::new();
    let mut tick = tokio::time::interval(run.options.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut in_flight: u32 = 0;
    let mut queue_dry = false;
    let mut window = Window::default();
    let mut recorded_up = true;

    loop {
        let current = *phase.borrow();
        if current == Phase::Abort {
            abort.cancel();
        }
        let up = view_rx.borrow().up;
        if current == Phase::Active && up && !queue_dry {
            let part = share_of(share, run.live_workers.load(Ordering::Relaxed));
            let deficit = part.saturating_sub(in_flight);
            // Refill in small batches rather than one query per finished try.
            if deficit > 0 && (deficit >= (part / 16).max(1) || in_flight == 0) {
                let want = deficit.min(run.options.claim_batch);
                match queue::claim(&run.pool, run.run_id, run.worker_id, run.options.lease, want.into()).await
                {
                    Ok(claimed) => {
                        queue_dry = (claimed.len() as u32) < want;
                        for sample in claimed {
                            in_flight += 1;
                            let hold = run.held.hold(sample.id);
                            let (run, endpoint, abort, report_tx) =
                                (run.clone(), endpoint.clone(), abort.clone(), report_tx.clone());
                            tasks.spawn(async move {
                                let attempt = Attempt { run: &run, endpoint: &endpoint, cancel: &abort };
                                let report = attempt.run(sample).await;
                                drop(hold);
                                let _ = report_tx.send(report);
                            });
                        }
                        membership.set_in_flight(in_flight);
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
                membership.set_in_flight(in_flight);
                window.tokens += u64::from(report.completion_tokens);
                match report.result {
                    TryResult::Finished(_) => window.completed += 1,
                    TryResult::Retrying { timeout_or_server_error } => window.failures += u32::from(timeout_or_server_error),
                    TryResult::Released | TryResult::Interrupted | TryResult::LeaseLost => {}
                }
            }
            _ = view_rx.changed() => {}
            _ = tick.tick() => {
                queue_dry = false;
                let view = view_rx.borrow().clone();
                if let Some(own) = view.shares.get(&run.run_id) {
                    share = own.limit.max(1);
                }
                run.metrics.endpoint_up.get_or_create(&label).set(i64::from(view.up));
                if view.up != recorded_up {
                    recorded_up = view.up;
                    match &view.down_reason {
                        Some(reason) if !view.up => tracing::warn!(run.id = run.run_id, endpoint = %endpoint.name, %reason, "endpoint down; this run's dispatch to it is paused"),
                        _ => tracing::info!(run.id = run.run_id, endpoint = %endpoint.name, "endpoint serves again; this run's dispatch resumed"),
                    }
                }
                record(&run, endpoint.id, in_flight, share, &window, &view).await;
                window = Window::default();
            }
            _ = phase.changed() => {}
        }
    }
    tasks.close();
    tasks.wait().await;
    run.metrics.requests_in_flight.get_or_create(&label).set(0);
}

/// This process's part of a share when `workers` processes drive the run.
fn share_of(limit: u32, workers: u32) -> u32 {
    limit.div_ceil(workers.max(1))
}

async fn read_share(run: &RunContext, endpoint_id: i64) -> Option<u32> {
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

/// Adds this second to the run's time series. Several worker processes add to the same row.
async fn record(
    run: &RunContext,
    endpoint_id: i64,
    in_flight: u32,
    limit: u32,
    window: &Window,
    view: &View,
) {
    let load = view.load.as_ref();
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
        view.rates.prompt.map(|r| r as f32),
        view.rates.generation.map(|r| r as f32),
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
    fn a_share_is_split_between_live_workers_rounding_up() {
        assert_eq!(share_of(64, 1), 64);
        assert_eq!(share_of(64, 3), 22);
        assert_eq!(share_of(1, 4), 1);
        assert_eq!(share_of(10, 0), 10);
    }
}
