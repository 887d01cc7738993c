//! Running export jobs in any process (the web server, `draft-studio worker`): claim one, renew
//! its lease while it writes, record how it ended; end the jobs of processes that died and
//! remove what they left in the destination. The job's statements are in `lease`; the writing
//! itself is `job::execute`.

use super::job::{self, Finished};
use super::lease::{self, Claim, End};
use super::Storage;
use crate::{Error, Result};
use domain::export::{ExportSpec, ExportStatus};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

#[derive(Clone, Debug)]
pub struct JobOptions {
    /// How long a job stays leased to a process that stops renewing it. Renewed every third.
    pub lease: Duration,
    /// Starts a job gets (a take-over after a crash is one more) before it is failed.
    pub max_claims: i32,
    /// How often an idle worker looks for jobs.
    pub poll: Duration,
}

impl Default for JobOptions {
    fn default() -> Self {
        Self { lease: Duration::from_secs(30), max_claims: 3, poll: Duration::from_secs(2) }
    }
}

/// Claims export `id` for this process, if it can be claimed now.
pub async fn claim(pool: &PgPool, id: i64, options: &JobOptions) -> Result<Option<Claim>> {
    lease::claim_id(pool, id, Uuid::new_v4(), options.lease, options.max_claims).await
}

/// Runs export `id` here to its end if it can be claimed; otherwise returns its status as it
/// stands (finished, cancelled, or running in another process).
pub async fn run_export(
    pool: &PgPool,
    storage: &Storage,
    id: i64,
    options: &JobOptions,
) -> Result<ExportStatus> {
    match claim(pool, id, options).await? {
        Some(claim) => carry_out(pool, storage, claim, options, None).await,
        None => lease::status(pool, id).await,
    }
}

/// One round of a worker: ends the jobs of dead processes that will not be taken over (and
/// removes their leftovers), then claims the next job and runs it. Returns the job it ran.
pub async fn run_next(
    pool: &PgPool,
    storage: &Storage,
    owner: Uuid,
    options: &JobOptions,
    stop: &CancellationToken,
) -> Result<Option<(i64, ExportStatus)>> {
    for ended in lease::end_abandoned(pool, options.max_claims).await? {
        tracing::warn!(export = ended.id, status = %ended.status, "an export whose process stopped was ended");
        match domain::stored::from_stored::<ExportSpec>(ended.spec) {
            Ok(spec) => {
                if let Err(e) = storage.remove_leftovers(&spec.destination, ended.id).await {
                    tracing::error!(export = ended.id, error = %e, "could not remove what an ended export left");
                }
            }
            Err(e) => {
                tracing::error!(export = ended.id, error = %e, "an ended export's destination is unreadable")
            }
        }
    }
    let Some(claim) = lease::claim_next(pool, owner, options.lease, options.max_claims).await? else {
        return Ok(None);
    };
    if claim.claims > 1 {
        tracing::warn!(
            export = claim.id,
            start = claim.claims,
            "taking over an export whose process stopped"
        );
    }
    let status = carry_out(pool, storage, claim, options, Some(stop)).await?;
    Ok(Some((claim.id, status)))
}

/// Runs export jobs until `stop`; a job in progress then goes back to the queue for another
/// process.
pub async fn work(pool: PgPool, storage: Arc<Storage>, options: JobOptions, stop: CancellationToken) {
    let owner = Uuid::new_v4();
    while !stop.is_cancelled() {
        let idle = match run_next(&pool, &storage, owner, &options, &stop).await {
            Ok(Some(_)) => false,
            Ok(None) => true,
            Err(e) => {
                tracing::warn!(error = %e, "looking for export jobs failed; trying again");
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

/// Runs a claimed job while renewing its lease, and records its end.
pub async fn carry_out(
    pool: &PgPool,
    storage: &Storage,
    claim: Claim,
    options: &JobOptions,
    stop: Option<&CancellationToken>,
) -> Result<ExportStatus> {
    let work = job::execute(pool, storage, claim.id);
    tokio::pin!(work);
    let mut renewal = tokio::time::interval((options.lease / 3).max(Duration::from_millis(100)));
    renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    renewal.tick().await;
    let stopping = async {
        match stop {
            Some(stop) => stop.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stopping);
    let result = loop {
        tokio::select! {
            result = &mut work => break result,
            _ = renewal.tick() => match lease::renew(pool, &claim, options.lease).await {
                Ok(true) => {}
                Ok(false) => {
                    // Another process took the job over (this one was away longer than the
                    // lease) or it ended: stop writing; its staging belongs to the new owner.
                    tracing::warn!(export = claim.id, "lost the export's lease; another process has it now");
                    return lease::status(pool, claim.id).await;
                }
                Err(e) => tracing::warn!(export = claim.id, error = %e, "renewing an export's lease failed; retrying"),
            },
            _ = &mut stopping => {
                lease::release(pool, &claim).await?;
                tracing::info!(export = claim.id, "export returned to the queue: this process is stopping");
                return Ok(ExportStatus::Queued);
            }
        }
    };
    let (end, status) = match result {
        Ok(Finished::Completed { location, bytes, manifest }) => {
            let manifest = serde_json::to_value(&manifest).map_err(|e| Error::Internal(e.into()))?;
            (End::Completed { location, bytes, manifest }, ExportStatus::Completed)
        }
        Ok(Finished::Cancelled) => (End::Cancelled, ExportStatus::Cancelled),
        Err(e) => {
            let error = if e.is_internal() {
                tracing::error!(export = claim.id, error = %e, "export failed");
                "the export failed on the server; see the server log".to_string()
            } else {
                e.to_string()
            };
            (End::Failed { error }, ExportStatus::Failed)
        }
    };
    if lease::finish(pool, &claim, end).await? {
        Ok(status)
    } else {
        tracing::warn!(
            export = claim.id,
            "the export ended after another process took it over; this result was dropped"
        );
        lease::status(pool, claim.id).await
    }
}
