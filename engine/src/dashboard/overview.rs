//! The home page's figures: the runs in progress with their rate, and where review stands on
//! the latest runs. (Endpoints, exports and a reviewer's own queue come from their modules.)

use super::rates;
use crate::samples::tally;
use domain::{dashboard::RunInProgress, generation::RunStatus};
use sqlx::PgPool;

/// Running and paused runs, newest first.
pub async fn runs_in_progress(pool: &PgPool) -> crate::Result<Vec<RunInProgress>> {
    let runs = sqlx::query!(
        r#"SELECT r.id, r.name, r.status AS "status: RunStatus", d.name AS dataset
           FROM runs r JOIN datasets d ON d.id = r.dataset_id
           WHERE r.status IN ('running', 'paused')
           ORDER BY r.id DESC"#
    )
    .fetch_all(pool)
    .await?;
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    let mut counts = tally::states_by_run(pool, &ids).await?;
    let mut rates = rates::last_minute(pool, &ids).await?;
    Ok(runs
        .into_iter()
        .map(|r| {
            let counts = counts.remove(&r.id).unwrap_or_default();
            let rates = rates.remove(&r.id).unwrap_or_default();
            let eta_secs = match r.status {
                RunStatus::Running => rates::eta_secs(counts.pending + counts.running, rates),
                _ => None,
            };
            RunInProgress {
                id: r.id,
                name: r.name,
                status: r.status,
                dataset: r.dataset,
                counts,
                tokens_per_s: rates.tokens_per_s,
                eta_secs,
            }
        })
        .collect())
}

/// Review progress on the finished samples of the latest runs, from the tally.
pub use crate::samples::tally::review_progress;

/// How many datasets are ready to generate from (for the overview's first steps).
pub async fn datasets_ready(pool: &PgPool) -> crate::Result<i64> {
    Ok(sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM datasets WHERE status = 'ready'"#)
        .fetch_one(pool)
        .await?)
}
