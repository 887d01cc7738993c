//! Queue mode: "next sample" gives a reviewer the sample they hold, or leases them the next
//! unreviewed finished one for a few minutes (renewed while the page is open), so two reviewers
//! never get the same sample; and their progress. The lease's statements are
//! `samples::review_lease`.

use crate::samples::{review_lease, tally};
use crate::Result;
use domain::review::QueueProgress;
use sqlx::PgPool;
use std::time::Duration;

/// How long a reviewer holds a sample without renewing.
pub const LEASE: Duration = Duration::from_secs(5 * 60);

/// The sample this reviewer holds already, or the next free one, leased to them. `None` when
/// nothing is left to review (in `run`, when given).
pub async fn next(pool: &PgPool, reviewer: i64, run: Option<i64>) -> Result<Option<i64>> {
    match review_lease::held(pool, reviewer, run, LEASE).await? {
        Some(held) => Ok(Some(held)),
        None => review_lease::claim(pool, reviewer, run, LEASE).await,
    }
}

/// Extends this reviewer's lease on the sample; false when they no longer hold it.
pub async fn renew(pool: &PgPool, reviewer: i64, sample_id: i64) -> Result<bool> {
    review_lease::renew(pool, reviewer, sample_id, LEASE).await
}

/// Gives the sample back to the queue (the reviewer skipped it or left).
pub async fn release(pool: &PgPool, reviewer: i64, sample_id: i64) -> Result<bool> {
    review_lease::release(pool, reviewer, sample_id).await
}

/// The reviewer's own progress and what is left.
pub async fn progress(pool: &PgPool, reviewer: i64, run: Option<i64>) -> Result<QueueProgress> {
    let mine_today = sqlx::query_scalar!(
        // The sample is looked up only for a run's count (a bulk decision on a whole run is
        // as many events as samples).
        r#"SELECT count(*) AS "n!" FROM review_events e
           WHERE e.actor = $1 AND e.kind IN ('decision', 'bulk') AND e.undone_by IS NULL
             AND e.at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
             AND ($2::bigint IS NULL OR EXISTS (SELECT 1 FROM samples s WHERE s.id = e.sample_id AND s.run_id = $2))"#,
        reviewer,
        run
    )
    .fetch_one(pool)
    .await?;
    let mine_total = tally::decided_by(pool, reviewer, run).await?;
    let remaining = tally::to_review(pool, run).await?;
    // Few samples are held at a time: the lease index finds them.
    let held = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM samples
           WHERE review_lease_owner IS NOT NULL AND review_lease_owner <> $1 AND review_lease_expires > now()
             AND review_state = 'unreviewed' AND state NOT IN ('pending', 'running')
             AND ($2::bigint IS NULL OR run_id = $2)"#,
        reviewer,
        run
    )
    .fetch_one(pool)
    .await?;
    Ok(QueueProgress { mine_today, mine_total, remaining, held_by_others: held })
}
