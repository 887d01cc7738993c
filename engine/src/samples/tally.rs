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
//!
//! The pages' counts (a run's samples by state, review progress per run, a reviewer's total)
//! are read here too: a sum over a run's few hundred rows instead of a pass over its samples,
//! which at 25,000 samples of a run was most of the overview's and the run page's time. They
//! read without folding first: a sum over the deltas is the same count, and a run's rows are
//! found by its index however many there are.

use crate::error::Result;
use domain::{
    dashboard::{ReviewProgress, StateCounts},
    generation::SampleState,
};
use sqlx::PgPool;
use std::collections::HashMap;

/// More rows than this and the next fold rewrites them (housekeeping every few seconds, and
/// before the counts panel reads). A run has a few hundred keys at most; its deltas pile up
/// faster: a 25,000-sample run left 18,505 rows for 7 keys, and the counts panel, which reads
/// the tally once per dimension, took 71–103 ms over them against 1–5 ms folded (psql).
pub const FOLD_ABOVE: i64 = 1_000;

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

/// How many samples of each of these runs are in each state (a run with none is absent).
pub async fn states_by_run(pool: &PgPool, runs: &[i64]) -> Result<HashMap<i64, StateCounts>> {
    let rows = sqlx::query!(
        r#"SELECT run_id, state AS "state!: SampleState", sum(n)::bigint AS "n!" FROM sample_tally
           WHERE run_id = ANY($1) GROUP BY run_id, state HAVING sum(n) <> 0"#,
        runs
    )
    .fetch_all(pool)
    .await?;
    let mut counts: HashMap<i64, StateCounts> = HashMap::new();
    for row in rows {
        counts.entry(row.run_id).or_default().add(row.state, row.n);
    }
    Ok(counts)
}

/// Review progress on the finished samples of the latest `runs` runs that have any, newest
/// first.
pub async fn review_progress(pool: &PgPool, runs: i64) -> Result<Vec<ReviewProgress>> {
    Ok(sqlx::query_as!(
        ReviewProgress,
        r#"WITH finished AS (
               SELECT run_id, review_state, sum(n) AS n FROM sample_tally
               WHERE state NOT IN ('pending', 'running') GROUP BY 1, 2 HAVING sum(n) <> 0),
           recent AS (SELECT DISTINCT run_id FROM finished ORDER BY run_id DESC LIMIT $1)
           SELECT r.id AS run_id, r.name AS run_name,
                  COALESCE(sum(f.n) FILTER (WHERE f.review_state = 'unreviewed'), 0)::bigint AS "to_review!",
                  COALESCE(sum(f.n) FILTER (WHERE f.review_state = 'approved'), 0)::bigint AS "approved!",
                  COALESCE(sum(f.n) FILTER (WHERE f.review_state = 'rejected'), 0)::bigint AS "rejected!",
                  COALESCE(sum(f.n) FILTER (WHERE f.review_state = 'flagged'), 0)::bigint AS "flagged!"
           FROM recent JOIN runs r ON r.id = recent.run_id JOIN finished f ON f.run_id = recent.run_id
           GROUP BY r.id, r.name
           ORDER BY r.id DESC"#,
        runs
    )
    .fetch_all(pool)
    .await?)
}

/// How many samples (of `run`, when given) carry a decision by this reviewer.
pub async fn decided_by(pool: &PgPool, reviewer: i64, run: Option<i64>) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(n), 0)::bigint AS "n!" FROM sample_tally
           WHERE reviewed_by = $1 AND review_state <> 'unreviewed' AND ($2::bigint IS NULL OR run_id = $2)"#,
        reviewer,
        run
    )
    .fetch_one(pool)
    .await?)
}

/// How many finished samples (of `run`, when given) wait for a decision.
pub async fn to_review(pool: &PgPool, run: Option<i64>) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(n), 0)::bigint AS "n!" FROM sample_tally
           WHERE review_state = 'unreviewed' AND state NOT IN ('pending', 'running')
             AND ($1::bigint IS NULL OR run_id = $1)"#,
        run
    )
    .fetch_one(pool)
    .await?)
}
