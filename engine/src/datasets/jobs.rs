//! Import jobs in any process (the web server, `draft-studio worker`): imports whose process
//! stopped are taken over and read again from the start, or failed with the reason once they
//! have been started `max_claims` times. The process that accepts an import runs it itself
//! (`import::start`); this is what happens when that process dies. The statements are in
//! `lease`.

use super::{import, lease, DatasetSettings};
use crate::Result;
use domain::dataset::DatasetStatus;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How imports are held and taken over: every job kind's options.
pub type ImportJobs = crate::jobs::JobOptions;

/// One round: fails the imports that keep stopping their processes, then takes over the next
/// import whose process stopped and runs it here. Returns the import it ran and how it ended.
pub async fn run_next(
    pool: &PgPool,
    http: &reqwest::Client,
    settings: &DatasetSettings,
    owner: Uuid,
    stop: &CancellationToken,
) -> Result<Option<(i64, DatasetStatus)>> {
    for id in lease::end_abandoned(pool, settings.jobs.max_claims).await? {
        tracing::warn!(dataset = id, "an import whose process kept stopping was failed");
    }
    let Some(taken) = lease::take_over(pool, owner, settings.jobs.lease, settings.jobs.max_claims).await?
    else {
        return Ok(None);
    };
    let id = taken.claim.id;
    tracing::warn!(
        dataset = id,
        start = taken.claim.claims,
        "taking over an import whose process stopped; reading its source again from the start"
    );
    let status = import::resume(pool, http, settings, taken, Some(stop)).await?;
    Ok(Some((id, status)))
}

/// Takes over imports until `stop`; one in progress is then handed back for another process.
pub async fn work(pool: PgPool, http: reqwest::Client, settings: DatasetSettings, stop: CancellationToken) {
    let owner = Uuid::new_v4();
    crate::jobs::poll(&stop, &settings.jobs, "import", || async {
        Ok(run_next(&pool, &http, &settings, owner, &stop).await?.is_some())
    })
    .await
}
