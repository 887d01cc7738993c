//! An import's life in `datasets` as a job (`jobs`), one guarded statement per transition: the
//! process that accepted the import holds
//! it under a lease it renews while it reads; every write of the import is made only while it
//! still holds it. When that process dies, its lease runs out and another process takes the
//! import over from the start (`take_over`), or ends it (`end_abandoned`: failed after
//! `max_claims` starts, so an import that kills its process does not kill every process).
//!
//! ```text
//!   start ──▶ importing (leased) ──▶ ready | failed | cancelled      (import::Job, store)
//!                │  ▲
//!                │  │ take_over: lease ran out; rows, rejections and counters reset
//!                ▼  │
//!           lease ran out ──end_abandoned──▶ failed (started max_claims times)
//! ```

pub use crate::jobs::Claim;
use crate::jobs::JobTable;
use crate::Result;
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// Imports as jobs (`jobs`): a held one is `importing`; its lease is renewed as every job's is.
pub const IMPORTS: JobTable = JobTable { table: "datasets", held: "importing", what: "import" };

/// An import taken over from a process that stopped, with what it needs to start again.
#[derive(Clone, Debug)]
pub struct TakenOver {
    pub claim: Claim,
    pub source: serde_json::Value,
    pub mapping: serde_json::Value,
}

/// Takes over the oldest import whose process stopped renewing its lease and that has starts
/// left: this process now holds it, and it starts again from nothing (its rows and
/// rejections are removed here, its counters reset). Served by `datasets_importing_idx`.
pub async fn take_over(
    pool: &PgPool,
    owner: Uuid,
    lease: Duration,
    max_claims: i32,
) -> Result<Option<TakenOver>> {
    let mut tx = pool.begin().await?;
    let Some(row) = sqlx::query!(
        "WITH picked AS (
             SELECT id FROM datasets
             WHERE status = 'importing' AND lease_expires_at < now() AND claims < $3
             ORDER BY lease_expires_at LIMIT 1
             FOR UPDATE SKIP LOCKED)
         UPDATE datasets d SET lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2),
                claims = d.claims + 1, rows_imported = 0, rows_duplicate = 0, rows_rejected = 0,
                bytes_read = 0, progress_at = now()
         FROM picked WHERE d.id = picked.id
         RETURNING d.id, d.claims, d.source, d.mapping",
        owner,
        lease.as_secs_f64(),
        max_claims
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(None);
    };
    sqlx::query!("DELETE FROM dataset_rows WHERE dataset_id = $1", row.id).execute(&mut *tx).await?;
    sqlx::query!("DELETE FROM dataset_rejections WHERE dataset_id = $1", row.id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(Some(TakenOver {
        claim: Claim { id: row.id, owner, claims: row.claims },
        source: row.source,
        mapping: row.mapping,
    }))
}

/// Lets another process take the import over at once (this one is stopping); the start does
/// not count against it.
pub async fn release(pool: &PgPool, claim: &Claim) -> Result<bool> {
    let released = sqlx::query!(
        "UPDATE datasets SET lease_expires_at = now() - interval '1 second', claims = claims - 1
         WHERE id = $1 AND status = 'importing' AND lease_owner = $2",
        claim.id,
        claim.owner
    )
    .execute(pool)
    .await?;
    Ok(released.rows_affected() == 1)
}

/// Fails the imports whose process stopped and that have been started `max_claims` times,
/// with the reason, and removes their rows. Returns their ids. Served by
/// `datasets_importing_idx`.
pub async fn end_abandoned(pool: &PgPool, max_claims: i32) -> Result<Vec<i64>> {
    let mut tx = pool.begin().await?;
    let ids = sqlx::query_scalar!(
        "UPDATE datasets SET status = 'failed', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
             error = format('the process importing this dataset stopped before it finished, %s times (it was killed, crashed or lost the database); its rows were removed. Import the file again, and see the server log if it keeps stopping', claims)
         WHERE status = 'importing' AND lease_expires_at < now() AND claims >= $1
         RETURNING id",
        max_claims
    )
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query!("DELETE FROM dataset_rows WHERE dataset_id = ANY($1)", &ids).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(ids)
}
