//! An export job's life in `exports` as a job (`jobs`), one guarded statement per transition: a process claims a queued job (or one whose process died:
//! its lease ran out), renews the lease while it writes, and records the end only while it still
//! holds it. A job whose process died is taken over by the next claimer, or ended (failed after
//! `max_claims` starts, or cancelled if a user asked) by whoever sees it first.
//!
//! ```text
//!   create ──▶ queued ──claim──▶ running ──finish──▶ completed | failed | cancelled
//!                ▲  │              │  │ lease ran out: claimed again (take-over),
//!                │  │ cancel       │  │ or end_abandoned: failed / cancelled
//!                │  ▼              │  ▼
//!                │ cancelled       │ release (the process stops): queued
//!                └─────────────────┘
//! ```

pub use crate::jobs::Claim;
use crate::jobs::JobTable;
use crate::Result;
use domain::export::ExportStatus;
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// Exports as jobs (`jobs`): a held one is `running`; its lease is renewed as every job's is.
pub const EXPORTS: JobTable = JobTable { table: "exports", held: "running", what: "export" };

/// Claims export `id` if it is queued, or running under a lease that ran out, and has starts
/// left. `None` when it is finished, held by a live process, or being cancelled.
pub async fn claim_id(
    pool: &PgPool,
    id: i64,
    owner: Uuid,
    lease: Duration,
    max_claims: i32,
) -> Result<Option<Claim>> {
    let row = sqlx::query!(
        "UPDATE exports SET status = 'running', lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3),
                claims = claims + 1, started_at = COALESCE(started_at, now()), rows_done = 0
         WHERE id = $1 AND NOT cancel_requested AND claims < $4
           AND (status = 'queued' OR (status = 'running' AND lease_expires_at < now()))
         RETURNING id, claims",
        id,
        owner,
        lease.as_secs_f64(),
        max_claims
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| Claim { id: r.id, owner, claims: r.claims }))
}

/// Claims the oldest claimable export (see `claim_id`). Served by `exports_open_idx`.
pub async fn claim_next(
    pool: &PgPool,
    owner: Uuid,
    lease: Duration,
    max_claims: i32,
) -> Result<Option<Claim>> {
    let row = sqlx::query!(
        "WITH picked AS (
             SELECT id FROM exports
             WHERE status IN ('queued', 'running') AND NOT cancel_requested AND claims < $3
               AND (status = 'queued' OR lease_expires_at < now())
             ORDER BY id LIMIT 1
             FOR UPDATE SKIP LOCKED)
         UPDATE exports e SET status = 'running', lease_owner = $1,
                lease_expires_at = now() + make_interval(secs => $2), claims = e.claims + 1,
                started_at = COALESCE(e.started_at, now()), rows_done = 0
         FROM picked WHERE e.id = picked.id
         RETURNING e.id, e.claims",
        owner,
        lease.as_secs_f64(),
        max_claims
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| Claim { id: r.id, owner, claims: r.claims }))
}

/// How a job this process ran ended.
#[derive(Clone, Debug)]
pub enum End {
    Completed { location: String, bytes: u64, manifest: serde_json::Value },
    Cancelled,
    Failed { error: String },
}

/// Records the end of a job this process still holds; false when it no longer does (its result
/// is dropped: another process owns the job now).
pub async fn finish(pool: &PgPool, claim: &Claim, end: End) -> Result<bool> {
    let (status, location, bytes, manifest, error) = match end {
        End::Completed { location, bytes, manifest } => {
            (ExportStatus::Completed, Some(location), Some(bytes as i64), Some(manifest), None)
        }
        End::Cancelled => (ExportStatus::Cancelled, None, None, None, None),
        End::Failed { error } => (ExportStatus::Failed, None, None, None, Some(error)),
    };
    let done = sqlx::query!(
        "UPDATE exports SET status = $3, finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
                location = $4, bytes = $5, manifest = $6, error = $7
         WHERE id = $1 AND status = 'running' AND lease_owner = $2",
        claim.id,
        claim.owner,
        status as ExportStatus,
        location,
        bytes,
        manifest,
        error
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Puts a job this process holds back in the queue (the process is stopping); the next claimer
/// starts it again.
pub async fn release(pool: &PgPool, claim: &Claim) -> Result<bool> {
    let done = sqlx::query!(
        "UPDATE exports SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, rows_done = 0,
                claims = claims - 1
         WHERE id = $1 AND status = 'running' AND lease_owner = $2",
        claim.id,
        claim.owner
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Cancels an export that has not finished. A queued one, or one whose process died (lease run
/// out), ends at once; a running one stops at its next batch and removes what it wrote (and if
/// its process dies first, ends when the lease runs out). False when it had already finished.
pub async fn cancel(pool: &PgPool, id: i64) -> Result<bool> {
    let done = sqlx::query!(
        "UPDATE exports SET cancel_requested = true,
                status = CASE WHEN status = 'queued' OR lease_expires_at < now() THEN 'cancelled'::export_status
                              ELSE status END,
                finished_at = CASE WHEN status = 'queued' OR lease_expires_at < now() THEN now() END,
                lease_owner = CASE WHEN status = 'queued' OR lease_expires_at < now() THEN NULL ELSE lease_owner END,
                lease_expires_at = CASE WHEN status = 'queued' OR lease_expires_at < now() THEN NULL
                                        ELSE lease_expires_at END
         WHERE id = $1 AND status IN ('queued', 'running')",
        id
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A job `end_abandoned` ended, whose leftovers (a staging folder, uploaded parts) the caller
/// removes.
#[derive(Clone, Debug)]
pub struct Abandoned {
    pub id: i64,
    pub spec: serde_json::Value,
    pub status: ExportStatus,
}

/// Ends jobs whose process died (lease ran out) and that will not be taken over: cancelled
/// ones, and ones started `max_claims` times already (a job that kills its process must not
/// kill every process that takes it). Served by `exports_open_idx`.
pub async fn end_abandoned(pool: &PgPool, max_claims: i32) -> Result<Vec<Abandoned>> {
    let rows = sqlx::query!(
        r#"WITH expired AS (
               SELECT id FROM exports
               WHERE status = 'running' AND lease_expires_at < now() AND (cancel_requested OR claims >= $1)
               FOR UPDATE SKIP LOCKED)
           UPDATE exports e SET
               status = CASE WHEN e.cancel_requested THEN 'cancelled'::export_status ELSE 'failed'::export_status END,
               finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
               error = CASE WHEN e.cancel_requested THEN NULL ELSE format(
                   'the process running this export stopped before it finished, %s times (it was killed, crashed or lost the database); nothing was left in the destination. Start the export again, and see the server log if it keeps stopping',
                   e.claims) END
           FROM expired WHERE e.id = expired.id
           RETURNING e.id, e.spec, e.status AS "status: ExportStatus""#,
        max_claims
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| Abandoned { id: r.id, spec: r.spec, status: r.status }).collect())
}

/// An export's status as it stands.
pub async fn status(pool: &PgPool, id: i64) -> Result<ExportStatus> {
    sqlx::query_scalar!(r#"SELECT status AS "status: ExportStatus" FROM exports WHERE id = $1"#, id)
        .fetch_optional(pool)
        .await?
        .ok_or(crate::Error::NotFound("export"))
}
