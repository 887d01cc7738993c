//! A run's life, in one place: it is created with its prompts (`create`, after `checks` asked
//! the endpoints whether they can serve it), runs, is paused, resumed or cancelled by a user,
//! completed by the workers, restarted by a retry pass (`retry`), and reopened when a reviewer
//! regenerates one of its samples. Every change of its status is one guarded statement here.
//!
//! ```text
//!   create ──▶ running ──pause──▶ paused ──cancel──▶ cancelled
//!               ▲  │ ◀──resume──              ▲
//!               │  ├──────────cancel───────────┘
//!               │  │ complete: no sample pending or running
//!               │  ▼
//!               └─ completed
//!      restart (a retry pass, from any status but cancelled, with its settings)
//!      reopen (a sample regenerated: completed only; a paused run stays paused)
//! ```

//!
//! `choices` lists what a new run can draw its prompts from.

mod checks;
mod choices;
mod create;
mod retry;

pub use choices::{dataset_choices, source_choices};
pub use create::{create, fill_source_dataset, NewRun};
pub use retry::{retry, RetryPass};

use crate::{Error, Result};
use domain::generation::RunStatus;
use sqlx::{PgPool, Postgres, Transaction};

/// What a user asks of a running or paused run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Pause,
    Resume,
    Cancel,
}

/// Pauses (no new tries; those in flight finish), resumes, or cancels (tries in flight stop).
pub async fn control(pool: &PgPool, run_id: i64, action: Control) -> Result<RunStatus> {
    let current =
        sqlx::query_scalar!(r#"SELECT status AS "status: RunStatus" FROM runs WHERE id = $1"#, run_id)
            .fetch_optional(pool)
            .await?
            .ok_or(Error::NotFound("run"))?;
    let next = match (action, current) {
        (Control::Pause, RunStatus::Running) => RunStatus::Paused,
        (Control::Resume, RunStatus::Paused) => RunStatus::Running,
        (Control::Cancel, RunStatus::Running | RunStatus::Paused) => RunStatus::Cancelled,
        (action, status) => {
            return Err(Error::conflict(format!(
                "the run is {}; it cannot be {}",
                status.as_str(),
                match action {
                    Control::Pause => "paused",
                    Control::Resume => "resumed",
                    Control::Cancel => "cancelled",
                }
            )))
        }
    };
    let updated = sqlx::query!(
        "UPDATE runs SET status = $3, finished_at = CASE WHEN $3 = 'cancelled'::run_status THEN now() ELSE NULL END
         WHERE id = $1 AND status = $2",
        run_id,
        current as RunStatus,
        next as RunStatus
    )
    .execute(pool)
    .await?;
    if updated.rows_affected() == 0 {
        return Err(Error::conflict("the run changed at the same moment; reload and try again"));
    }
    Ok(next)
}

/// Marks the run completed once no sample is pending or running.
pub async fn complete_if_done(pool: &PgPool, run_id: i64) -> Result<bool> {
    let done = sqlx::query!(
        "UPDATE runs SET status = 'completed', finished_at = now()
         WHERE id = $1 AND status = 'running'
           AND NOT EXISTS (SELECT 1 FROM samples WHERE run_id = $1 AND state IN ('pending', 'running'))",
        run_id
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A retry pass sets the run running again, whatever it was but cancelled (the caller holds the
/// run's row and checked), with the pass's settings.
pub async fn restart(
    tx: &mut Transaction<'_, Postgres>,
    run_id: i64,
    settings: serde_json::Value,
) -> Result<()> {
    sqlx::query!(
        "UPDATE runs SET settings = $2, status = 'running', finished_at = NULL WHERE id = $1 AND status <> 'cancelled'",
        run_id,
        settings
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A sample regenerated in a completed run runs it again until the sample is done, as after a
/// retry pass; a paused run stays paused (the sample waits for the resume).
pub async fn reopen(tx: &mut Transaction<'_, Postgres>, run_id: i64) -> Result<bool> {
    let reopened = sqlx::query!(
        "UPDATE runs SET status = 'running', finished_at = NULL WHERE id = $1 AND status = 'completed'",
        run_id
    )
    .execute(&mut **tx)
    .await?;
    Ok(reopened.rows_affected() == 1)
}
