//! Keeps one endpoint busy for one run: claims samples up to this process's part of the run's
//! share of the endpoint, runs their tries, sends nothing while the endpoint is down, and once
//! a second records what the run saw.
//!
//! A few samples are claimed ahead of the free slots (`Ready`), so a slot freed by a stream that
//! ended is filled at once, not after a query; and a try frees its slot when it sends no more,
//! before its result is written (on connections of its own: `worker::results_pool`). These gaps
//! left the batch of a real vLLM server short. While results wait to be written, new tries keep
//! starting until twice the part's tries are alive, in flight or writing: a database that cannot
//! keep up then holds up generation, rather than the worker's memory growing with every answer.

use super::{
    attempt::{Attempt, Report, TryResult},
    endpoint::{Membership, View},
    held::Hold,
    queue::{self, Claimed},
    RunContext,
};
use std::{
    collections::VecDeque,
    sync::{atomic::Ordering, Arc, Mutex},
};
use tokio::sync::{mpsc, watch};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::Instrument;

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

/// A place in the run's part of the endpoint, held by one try while it sends requests. Freed
/// once: by `free` when the try sends no more, or when dropped.
pub(super) struct Slot(Mutex<Option<mpsc::UnboundedSender<()>>>);

impl Slot {
    fn new(freed: &mpsc::UnboundedSender<()>) -> Self {
        Self(Mutex::new(Some(freed.clone())))
    }

    pub(super) fn free(&self) {
        if let Some(freed) = self.0.lock().expect("slot").take() {
            let _ = freed.send(());
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.free();
    }
}

/// Samples claimed (and held, so their leases are renewed) but not yet sent.
#[derive(Default)]
struct Ready(VecDeque<(Claimed, Hold)>);

impl Ready {
    fn len(&self) -> u32 {
        self.0.len() as u32
    }

    /// Puts every waiting sample back in the queue, unrecorded: none was sent. When that
    /// fails their holds are dropped anyway, their leases run out and the reaper returns them.
    async fn give_back(&mut self, run: &RunContext) {
        if self.0.is_empty() {
            return;
        }
        let ids: Vec<i64> = self.0.iter().map(|(sample, _)| sample.id).collect();
        if let Err(e) = queue::unclaim(&run.pool, run.worker_id, &ids).await {
            tracing::warn!(run.id = run.run_id, error = %e, "returning claimed samples failed; their leases will run out");
        }
        self.0.clear();
    }
}

/// How many samples are claimed ahead of the free slots of a part: enough that a query is
/// needed only every few finished tries, few enough to leave the rest to other workers.
fn reserve(part: u32) -> u32 {
    (part / 16).clamp(1, 16)
}

pub(super) async fn drive(run: Arc<RunContext>, membership: Membership, mut phase: watch::Receiver<Phase>) {
    let endpoint = membership.endpoint().clone();
    let label = crate::metrics::EndpointLabel { endpoint: endpoint.name.clone() };
    let mut view_rx = endpoint.subscribe();
    let mut share = read_share(&run, endpoint.id).await.unwrap_or(1);
    let (report_tx, mut reports) = mpsc::unbounded_channel::<Report>();
    let (freed_tx, mut freed) = mpsc::unbounded_channel::<()>();
    let abort = CancellationToken::new();
    let tasks = TaskTracker::new();
    let mut tick = tokio::time::interval(run.options.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Tries holding a slot: sending requests, not yet writing their results.
    let mut in_flight: u32 = 0;
    let mut ready = Ready::default();
    let mut queue_dry = false;
    let mut window = Window::default();
    let mut recorded_up = true;

    loop {
        let current = *phase.borrow();
        if current == Phase::Abort {
            abort.cancel();
        }
        let up = view_rx.borrow().up;
        if current == Phase::Active && up {
            let part = share_of(share, run.live_workers.load(Ordering::Relaxed));
            // Claim once the reserve is used up, for every free slot and a new reserve (in
            // several queries when the part is larger than one claim).
            while !queue_dry && in_flight + ready.len() <= part {
                let want = (part + reserve(part) - in_flight - ready.len()).min(run.options.claim_batch);
                match queue::claim(&run.pool, run.run_id, run.worker_id, run.options.lease, want.into()).await
                {
                    Ok(claimed) => {
                        queue_dry = (claimed.len() as u32) < want;
                        ready.0.extend(claimed.into_iter().map(|sample| {
                            let hold = run.held.hold(sample.id);
                            (sample, hold)
                        }));
                    }
                    Err(e) => {
                        tracing::warn!(run.id = run.run_id, error = %e, "claiming samples failed; retrying next second");
                        queue_dry = true;
                    }
                }
            }
            // A try still running once its slot is freed is writing its result.
            while in_flight < part && (tasks.len() as u32) < 2 * part {
                let Some((sample, hold)) = ready.0.pop_front() else { break };
                in_flight += 1;
                let slot = Slot::new(&freed_tx);
                let (run, endpoint, abort, report_tx) =
                    (run.clone(), endpoint.clone(), abort.clone(), report_tx.clone());
                // Every line a try logs says which sample it is (and, from the driver's span,
                // which run, endpoint and worker).
                let span = tracing::info_span!("try", sample.id = sample.id);
                tasks.spawn(
                    async move {
                        let attempt = Attempt { run: &run, endpoint: &endpoint, cancel: &abort, slot: &slot };
                        let report = attempt.run(sample).await;
                        drop(slot);
                        drop(hold);
                        let _ = report_tx.send(report);
                    }
                    .instrument(span),
                );
            }
            membership.set_in_flight(in_flight);
        } else {
            // Paused, stopping or the endpoint is down: what was claimed ahead goes back, to
            // another endpoint of the run or a later resume.
            ready.give_back(&run).await;
        }
        if current != Phase::Active && in_flight == 0 {
            break;
        }
        run.metrics.requests_in_flight.get_or_create(&label).set(in_flight as i64);
        tokio::select! {
            Some(()) = freed.recv() => {
                in_flight -= 1;
                membership.set_in_flight(in_flight);
            }
            Some(report) = reports.recv() => {
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
