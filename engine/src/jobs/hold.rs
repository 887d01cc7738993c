//! Running a claimed job while its lease is renewed, and the loop a worker runs jobs in.

use super::lease::{Claim, JobOptions, JobTable};
use crate::Result;
use sqlx::PgPool;
use std::future::Future;
use tokio_util::sync::CancellationToken;

/// How holding a job ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Held<T> {
    /// The work ran to its end with the lease held: its result is this process's to record.
    Done(T),
    /// The lease was lost (the job was cancelled, ended or taken over) and the work stopped at
    /// its next batch: what it did belongs to whoever holds the job now.
    LeaseLost,
    /// This process is stopping; the work stopped at its next batch and the job is the
    /// caller's to hand back.
    Stopping,
}

/// Runs `work` (which stops at its next batch once `halt` is cancelled) while renewing the
/// lease of `claim` in `table`. Renewal failures are retried; a renewal that finds the job no
/// longer held halts the work, and so does `stop`.
pub async fn hold<T>(
    pool: &PgPool,
    table: JobTable,
    claim: Claim,
    options: &JobOptions,
    stop: Option<&CancellationToken>,
    halt: &CancellationToken,
    work: impl Future<Output = T>,
) -> Held<T> {
    tokio::pin!(work);
    let mut renewal = tokio::time::interval(options.renewal());
    renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    renewal.tick().await;
    let lost = CancellationToken::new();
    // Polled beside the work, never awaited in an arm of its own: see the module's doc.
    let renewing = async {
        loop {
            renewal.tick().await;
            if halt.is_cancelled() {
                return std::future::pending::<()>().await;
            }
            match table.renew(pool, &claim, options.lease).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(
                        job = claim.id,
                        kind = table.what,
                        "the job's lease is gone; this process stops it"
                    );
                    lost.cancel();
                    halt.cancel();
                }
                Err(e) => {
                    tracing::warn!(job = claim.id, kind = table.what, error = %e, "renewing a job's lease failed; retrying")
                }
            }
        }
    };
    tokio::pin!(renewing);
    let stopping = async {
        match stop {
            Some(stop) => stop.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stopping);
    let mut stopped = false;
    let done = loop {
        tokio::select! {
            done = &mut work => break done,
            () = &mut renewing => {}
            () = &mut stopping, if !halt.is_cancelled() => {
                stopped = true;
                halt.cancel();
            }
        }
    };
    match (lost.is_cancelled(), stopped) {
        (true, _) => Held::LeaseLost,
        (false, true) => Held::Stopping,
        (false, false) => Held::Done(done),
    }
}

/// A worker's loop: `round` after `round` (each runs at most one job and says whether it ran
/// one) until `stop`, waiting `options.poll` after a round that found nothing or failed.
pub async fn poll<F, Fut>(stop: &CancellationToken, options: &JobOptions, what: &str, mut round: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    while !stop.is_cancelled() {
        let idle = match round().await {
            Ok(ran) => !ran,
            Err(e) => {
                tracing::warn!(kind = what, error = %e, "looking for jobs failed; trying again");
                true
            }
        };
        if idle {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::sleep(options.poll) => {}
            }
        }
    }
}
