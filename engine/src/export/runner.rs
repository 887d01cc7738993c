//! Running export jobs in any process (the web server, `draft-studio worker`): claim one, hold
//! it while it writes (`jobs::hold` renews its lease), record how it ended; end the jobs of
//! processes that died and remove what they left in the destination. The job's statements are
//! in `lease`; the writing itself is `job::execute`.

use super::job::{self, Finished};
use super::lease::{self, Claim, End};
use super::Storage;
use crate::jobs::Held;
use crate::{Error, Result};
use domain::export::{ExportSpec, ExportStatus};
use sqlx::PgPool;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How export jobs are held and taken over: every job kind's options.
pub use crate::jobs::JobOptions;

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
    crate::jobs::poll(&stop, &options, "export", || async {
        Ok(run_next(&pool, &storage, owner, &options, &stop).await?.is_some())
    })
    .await
}

/// Runs a claimed job while renewing its lease (`jobs::hold`), and records its end.
pub async fn carry_out(
    pool: &PgPool,
    storage: &Storage,
    claim: Claim,
    options: &JobOptions,
    stop: Option<&CancellationToken>,
) -> Result<ExportStatus> {
    let halt = CancellationToken::new();
    let span = tracing::info_span!("export", export.id = claim.id, start = claim.claims);
    let work = tracing::Instrument::instrument(job::execute(pool, storage, claim.id, &halt), span);
    let result = match crate::jobs::hold(pool, lease::EXPORTS, claim, options, stop, &halt, work).await {
        Held::Done(result) => result,
        // Another process took the job over (this one was away longer than the lease) or it
        // ended: what was staged belongs to the new owner.
        Held::LeaseLost => {
            tracing::warn!(export = claim.id, "lost the export's lease; another process has it now");
            return lease::status(pool, claim.id).await;
        }
        Held::Stopping => {
            lease::release(pool, &claim).await?;
            tracing::info!(export = claim.id, "export returned to the queue: this process is stopping");
            return Ok(ExportStatus::Queued);
        }
    };
    let (end, status) = match result {
        Ok(Finished::Completed { location, bytes, manifest }) => {
            let manifest = serde_json::to_value(&manifest).map_err(|e| Error::Internal(e.into()))?;
            (End::Completed { location, bytes, manifest }, ExportStatus::Completed)
        }
        Ok(Finished::Cancelled) => (End::Cancelled, ExportStatus::Cancelled),
        // Only when the hold ended, which `hold` reports as a lost lease or a stop.
        Ok(Finished::Halted) => return lease::status(pool, claim.id).await,
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
