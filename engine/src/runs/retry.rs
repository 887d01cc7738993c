//! A retry pass: a run's failed (or chosen) samples back in the queue with changed settings.

use super::checks::check_endpoint;
use crate::samples::{self, query, requeue::Why};
use crate::{Error, Result};
use domain::generation::{Concurrency, RunSettings, RunStatus, SampleState};
use domain::sample_query::SampleQuery;
use domain::stored::{from_stored, to_stored};
use sqlx::{PgPool, Postgres, QueryBuilder};

/// A second pass over a run's failures, with changed settings.
#[derive(Clone, Debug, Default)]
pub struct RetryPass {
    /// Which outcomes to re-queue; failed and timed_out when empty.
    pub states: Vec<SampleState>,
    /// Only samples whose error contains this text.
    pub error_contains: Option<String>,
    pub idle_timeout_secs: Option<u32>,
    pub deadline_secs: Option<Option<u32>>,
    pub concurrency: Option<Concurrency>,
    pub max_attempts: Option<u32>,
    pub max_tokens: Option<u32>,
}

/// Puts the selected samples back in the queue with a fresh attempt budget, keeps every earlier
/// try in their history, drops their review decisions (logged, with the text they applied to), applies the changed settings and sets the run running. Returns how
/// many samples were re-queued. A higher `max_tokens` is checked against the endpoints'
/// `max_model_len`, as at run creation.
pub async fn retry(pool: &PgPool, http: &reqwest::Client, run_id: i64, pass: RetryPass) -> Result<u64> {
    let states =
        if pass.states.is_empty() { vec![SampleState::Failed, SampleState::TimedOut] } else { pass.states };
    if let Some(state) = states.iter().find(|s| !s.is_terminal()) {
        return Err(Error::invalid(format!("only finished samples can be retried, not {state} ones")));
    }
    if let Some(max_tokens) = pass.max_tokens {
        // Asked before the run is locked: the endpoints may take a while to answer.
        let stored = sqlx::query_scalar!("SELECT settings FROM runs WHERE id = $1", run_id)
            .fetch_optional(pool)
            .await?
            .ok_or(Error::NotFound("run"))?;
        let mut settings: RunSettings = from_stored(stored).map_err(Error::Invalid)?;
        // A lower value fits wherever the run's own did.
        if max_tokens > settings.max_tokens {
            settings.max_tokens = max_tokens;
            let mut problems = Vec::new();
            for id in &settings.endpoint_ids {
                problems.extend(check_endpoint(pool, http, *id, &settings).await?);
            }
            if !problems.is_empty() {
                return Err(Error::Invalid(problems.join("; ")));
            }
        }
    }
    let mut tx = pool.begin().await?;
    let run = sqlx::query!(
        r#"SELECT status AS "status: RunStatus", settings FROM runs WHERE id = $1 FOR UPDATE"#,
        run_id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("run"))?;
    if run.status == RunStatus::Cancelled {
        return Err(Error::conflict("the run was cancelled; start a new run instead"));
    }
    let mut settings: RunSettings = from_stored(run.settings).map_err(Error::Invalid)?;
    if let Some(v) = pass.idle_timeout_secs {
        settings.idle_timeout_secs = v;
    }
    if let Some(v) = pass.deadline_secs {
        settings.deadline_secs = v;
    }
    if let Some(v) = pass.concurrency {
        settings.concurrency = v;
    }
    if let Some(v) = pass.max_attempts {
        settings.max_attempts = v;
    }
    if let Some(v) = pass.max_tokens {
        settings.max_tokens = v;
    }
    let problems = settings.problems();
    if !problems.is_empty() {
        return Err(Error::Invalid(problems.join("; ")));
    }
    let selected = SampleQuery { states, error_contains: pass.error_contains, ..SampleQuery::run(run_id) };
    if let Some(problem) = selected.problems() {
        return Err(Error::Invalid(problem));
    }
    // Served by samples_run_outcome_idx (run_id, state, id); locked until the pass commits.
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new("SELECT s.id");
    query::push_from(&mut qb, &selected);
    qb.push(" ORDER BY s.id FOR UPDATE");
    let ids: Vec<i64> = qb.build_query_scalar().fetch_all(&mut *tx).await?;
    // Their text is about to change: their decisions are dropped and kept in the audit log.
    let requeued = samples::requeue::requeue(&mut tx, &ids, Why::RetryPass, None).await?;
    if requeued == 0 {
        return Err(Error::invalid("no sample matches this retry pass"));
    }
    super::restart(&mut tx, run_id, to_stored(&settings)).await?;
    if let Concurrency::Fixed { limit } = settings.concurrency {
        sqlx::query!(
            "UPDATE run_endpoints SET concurrency_limit = $2, limit_reason = 'fixed by the retry pass', limit_changed_at = now()
             WHERE run_id = $1",
            run_id,
            limit as i32
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    tracing::info!(run.id = run_id, requeued, "retry pass queued");
    Ok(requeued)
}
