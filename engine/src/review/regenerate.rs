//! Sends one finished sample back to the generation queue with its run's settings; a worker
//! generates it again like any pending sample. Earlier tries stay in its history, and its
//! review starts over (the text it was judged on is gone).

use crate::samples::{self, requeue::Why};
use crate::{Error, Result};
use domain::{generation::RunStatus, Viewer};
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
        r#"SELECT s.run_id, s.state::text AS "state!", s.review_version, r.status AS "status: RunStatus"
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
    let requeued = samples::requeue::requeue(&mut tx, &[sample_id], Why::Regenerate, Some(by.id)).await?;
    if requeued != 1 {
        return Err(Error::conflict(
            "this sample changed at the same moment; nothing was queued. Reload it.",
        ));
    }
    let outcome = if sample.status == RunStatus::Paused {
        Requeued::WaitsForResume
    } else {
        crate::runs::reopen(&mut tx, sample.run_id).await?;
        Requeued::Running
    };
    tx.commit().await?;
    tracing::info!(by = %by.username, sample.id = sample_id, "sample queued for regeneration");
    Ok(outcome)
}
