//! The tally of samples along the review list's facets (`sample_tally`, migration 0018): how
//! many samples of each run are in each state, finish reason, review state, reviewer, category
//! and set of flags. Triggers on `samples` append a delta row per key a statement changed, so
//! the counts are exact in every transaction's snapshot and no writer waits on another; this
//! module folds the deltas into one row per key so that reading stays a sum over a few rows.
//!
//!   settle, claim, decision ──trigger──▶ +1 (new key), −1 (old key)   appended
//!   fold                                  Σ per key, zero keys gone    one statement
//!
//! Folding runs from the workers' housekeeping and before a count when the deltas pile up; two
//! folds at once would only waste work, so one waits for none (an advisory lock).

use crate::error::Result;
use sqlx::PgPool;

/// More rows than this and the next fold rewrites them: a run's few hundred keys, plus the
/// deltas of a busy minute.
pub const FOLD_ABOVE: i64 = 20_000;

/// The advisory lock a fold holds ("tally" in ASCII).
const FOLD_LOCK: i64 = 0x0074_616c_6c79;

/// What a fold did: the rows it read, and the keys (rows) it left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Folded {
    pub rows: i64,
    pub keys: i64,
}

/// Folds the tally's deltas into one row per key when there are more than `above` rows (nothing
/// done, `Folded::default()`, when there are fewer or another fold is under way).
pub async fn fold(pool: &PgPool, above: i64) -> Result<Folded> {
    let mut tx = pool.begin().await?;
    let locked = sqlx::query_scalar!(r#"SELECT pg_try_advisory_xact_lock($1) AS "locked!""#, FOLD_LOCK)
        .fetch_one(&mut *tx)
        .await?;
    if !locked {
        return Ok(Folded::default());
    }
    // Counts no more than `above + 1` rows: enough to decide.
    let many = sqlx::query_scalar!(
        r#"SELECT count(*) > $1 AS "many!" FROM (SELECT 1 FROM sample_tally LIMIT $1::bigint + 1) AS r"#,
        above
    )
    .fetch_one(&mut *tx)
    .await?;
    if !many {
        return Ok(Folded::default());
    }
    // The rows this statement sees go, their sums come back; deltas appended meanwhile by
    // transactions not yet committed are not seen, so they stay and still add up.
    let folded = sqlx::query_as!(
        Folded,
        r#"WITH gone AS (DELETE FROM sample_tally RETURNING *),
              kept AS (
                  INSERT INTO sample_tally (run_id, state, finish_reason, review_state, reviewed_by, category, flags, n)
                  SELECT run_id, state, finish_reason, review_state, reviewed_by, category, flags, sum(n)
                  FROM gone GROUP BY 1, 2, 3, 4, 5, 6, 7 HAVING sum(n) <> 0
                  RETURNING 1)
           SELECT (SELECT count(*) FROM gone) AS "rows!", (SELECT count(*) FROM kept) AS "keys!""#
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    tracing::debug!(rows = folded.rows, keys = folded.keys, "folded the sample tally");
    Ok(folded)
}
