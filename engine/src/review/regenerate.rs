//! Sends one finished sample back to the generation queue with its run's settings; a worker
//! generates it again like any pending sample. Earlier tries stay in its history, and its
//! review starts over (the text it was judged on is gone).

use crate::{Error, Result};
use domain::{generation::RunStatus, review::ReviewState, Viewer};
use sqlx::PgPool;

/// What happened to the run, so the page can say when the new result will come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requeued {
    /// The run is running (or was completed and runs again now).
    Running,
    /// The run is paused: the sample is generated when it resumes.
    WaitsForResume,
}

pub async fn regenerate(pool: &PgPool, by: &Viewer, sample_id: i64, version: i32) -> Result<Requeued> {
    let mut tx = pool.begin().await?;
    let sample = sqlx::query!(
        r#"SELECT s.run_id, s.state::text AS "state!", s.review_state AS "review_state: ReviewState", s.review_version,
                  s.flags, s.review_note, s.reviewed_by, s.reviewed_at, r.status AS "status: RunStatus"
           FROM samples s JOIN runs r ON r.id = s.run_id WHERE s.id = $1 FOR UPDATE OF s, r"#,
        sample_id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("sample"))?;
    if sample.review_version != version {
        return Err(Error::conflict(
            "This sample changed since you opened it; nothing was queued. Reload it and decide again.",
        ));
    }
    if matches!(sample.state.as_str(), "pending" | "running") {
        return Err(Error::conflict(format!(
            "this sample is already {}; its new result is on the way",
            sample.state
        )));
    }
    if sample.status == RunStatus::Cancelled {
        return Err(Error::conflict("its run was cancelled: start a new run to generate it again"));
    }
    let new_version = sqlx::query_scalar!(
        "UPDATE samples SET state = 'pending', attempts = 0, not_before = NULL, finished_at = NULL,
                review_state = 'unreviewed', flags = '{}', auto_flags = '{}', review_note = NULL,
                reviewed_by = NULL, reviewed_at = NULL, review_version = review_version + 1,
                review_lease_owner = NULL, review_lease_expires = NULL
         WHERE id = $1 RETURNING review_version",
        sample_id
    )
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query!(
        "INSERT INTO review_events (sample_id, kind, actor, from_state, to_state, from_flags, to_flags, from_note, to_note,
                                    from_reviewed_by, from_reviewed_at, version)
         VALUES ($1, 'regenerate', $2, $3, 'unreviewed', $4, '{}', $5, NULL, $6, $7, $8)",
        sample_id,
        by.id,
        sample.review_state as ReviewState,
        &sample.flags,
        sample.review_note,
        sample.reviewed_by,
        sample.reviewed_at,
        new_version
    )
    .execute(&mut *tx)
    .await?;
    let outcome = if sample.status == RunStatus::Paused {
        Requeued::WaitsForResume
    } else {
        // A completed run runs again until this sample is done, as after a retry pass.
        sqlx::query!(
            "UPDATE runs SET status = 'running', finished_at = NULL WHERE id = $1 AND status = 'completed'",
            sample.run_id
        )
        .execute(&mut *tx)
        .await?;
        Requeued::Running
    };
    tx.commit().await?;
    tracing::info!(by = %by.username, sample.id = sample_id, "sample queued for regeneration");
    Ok(outcome)
}
