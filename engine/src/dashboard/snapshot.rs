//! One run's live figures. `fast` parts are read every second; the length statistics and the
//! attempts histogram, which scan every finished sample, are refreshed less often by the caller.

use super::{alerts, rates, series, AlertPolicy};
use domain::{
    dashboard::{EndpointLive, ErrorGroup, LengthStats, RunSnapshot, StateCounts},
    generation::{RunSettings, RunStatus},
};
use sqlx::PgPool;

/// The parts of a snapshot that scan every finished sample.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlowParts {
    pub completion: LengthStats,
    pub attempts: Vec<(i32, i64)>,
}

/// The length statistics and the attempts histogram, in one pass over the run's finished
/// samples.
pub async fn slow_parts(pool: &PgPool, run_id: i64) -> crate::Result<SlowParts> {
    let row = sqlx::query!(
        r#"WITH finished AS MATERIALIZED (
               SELECT state, completion_tokens, attempts FROM samples
               WHERE run_id = $1 AND state IN ('ok', 'truncated', 'timed_out', 'failed', 'empty'))
           SELECT a.count AS "count!", a.mean, a.p50, a.p95,
                  ARRAY(SELECT attempts FROM finished GROUP BY attempts ORDER BY attempts) AS "attempts!",
                  ARRAY(SELECT count(*) FROM finished GROUP BY attempts ORDER BY attempts) AS "attempt_counts!"
           FROM (SELECT count(*) AS count, avg(completion_tokens)::float8 AS mean,
                        percentile_cont(0.5) WITHIN GROUP (ORDER BY completion_tokens) AS p50,
                        percentile_cont(0.95) WITHIN GROUP (ORDER BY completion_tokens) AS p95
                 FROM finished WHERE state IN ('ok', 'truncated') AND completion_tokens IS NOT NULL) AS a"#,
        run_id
    )
    .fetch_one(pool)
    .await?;
    Ok(SlowParts {
        completion: LengthStats { count: row.count, mean: row.mean, p50: row.p50, p95: row.p95 },
        attempts: row.attempts.into_iter().zip(row.attempt_counts).collect(),
    })
}

/// Reads a run's snapshot, with the slow parts given.
pub async fn read(
    pool: &PgPool,
    run_id: i64,
    slow: SlowParts,
    policy: &AlertPolicy,
) -> crate::Result<RunSnapshot> {
    let run = sqlx::query!(
        r#"SELECT r.name, r.status AS "status: RunStatus", r.settings, r.created_at, r.finished_at,
                  d.name AS dataset, u.username AS "created_by?", now() AS "now!"
           FROM runs r JOIN datasets d ON d.id = r.dataset_id LEFT JOIN users u ON u.id = r.created_by
           WHERE r.id = $1"#,
        run_id
    )
    .fetch_optional(pool)
    .await?
    .ok_or(crate::Error::NotFound("run"))?;
    let settings: RunSettings = domain::stored::from_stored(run.settings).map_err(crate::Error::Invalid)?;
    let counts = counts(pool, run_id).await?;

    let rates = rates::last_minute(pool, &[run_id]).await?.remove(&run_id).unwrap_or_default();
    let requests_per_s = rates.requests_per_s;
    let client_tokens_per_s = rates.tokens_per_s;
    let remaining = counts.pending + counts.running;
    let eta_secs = if run.status == RunStatus::Running { rates::eta_secs(remaining, rates) } else { None };

    let endpoints = sqlx::query!(
        r#"SELECT re.endpoint_id, e.name, re.healthy, re.concurrency_limit, re.limit_reason, re.limit_changed_at,
                  m.in_flight AS "in_flight?", m.server_prompt_tps::float8 AS prompt_tps,
                  m.server_generation_tps::float8 AS generation_tps, m.server_running AS running,
                  m.server_waiting AS waiting, m.server_kv_usage::float8 AS kv_usage, m.at AS "at?"
           FROM run_endpoints re JOIN endpoints e ON e.id = re.endpoint_id
           LEFT JOIN LATERAL (SELECT * FROM run_metrics m WHERE m.run_id = re.run_id AND m.endpoint_id = re.endpoint_id
                              ORDER BY m.at DESC LIMIT 1) m ON true
           WHERE re.run_id = $1 ORDER BY e.name"#,
        run_id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| {
        // Figures older than a few seconds describe a past moment: the endpoint has nothing
        // in flight for this run now.
        let fresh = r.at.is_some_and(|at| run.now - at < time::Duration::seconds(5));
        EndpointLive {
            endpoint_id: r.endpoint_id,
            name: r.name,
            healthy: r.healthy,
            concurrency_limit: r.concurrency_limit,
            limit_reason: r.limit_reason,
            limit_changed_at: r.limit_changed_at,
            in_flight: if fresh { r.in_flight.unwrap_or(0) } else { 0 },
            prompt_tps: r.prompt_tps,
            generation_tps: r.generation_tps,
            running: r.running,
            waiting: r.waiting,
            kv_usage: r.kv_usage,
            at: r.at,
        }
    })
    .collect();

    let errors = sqlx::query!(
        r#"SELECT a.error_kind AS "kind!", count(*) AS "count!",
                  (array_agg(a.error ORDER BY a.finished_at DESC))[1] AS "last_message?",
                  max(a.finished_at) AS "last_at!"
           FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
           WHERE a.error_kind IS NOT NULL AND a.finished_at > now() - interval '15 minutes' AND s.run_id = $1
           GROUP BY a.error_kind ORDER BY 2 DESC LIMIT 10"#,
        run_id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| ErrorGroup {
        kind: r.kind,
        count: r.count,
        last_message: r.last_message.unwrap_or_default(),
        last_at: r.last_at,
    })
    .collect();

    let alerts = alerts::evaluate(&alerts::inputs(pool, run_id).await?, policy);
    let latest = series::latest(pool, run_id).await?;
    Ok(RunSnapshot {
        at: run.now,
        id: run_id,
        name: run.name,
        status: run.status,
        dataset: run.dataset,
        created_by: run.created_by,
        created_at: run.created_at,
        finished_at: run.finished_at,
        settings,
        counts,
        requests_per_s,
        client_tokens_per_s,
        eta_secs,
        endpoints,
        completion: slow.completion,
        attempts: slow.attempts,
        errors,
        alerts,
        latest,
    })
}

/// A full snapshot, slow parts included (for a first page load).
pub async fn full(pool: &PgPool, run_id: i64, policy: &AlertPolicy) -> crate::Result<RunSnapshot> {
    let slow = slow_parts(pool, run_id).await?;
    read(pool, run_id, slow, policy).await
}

/// How many of the run's samples are in each state.
pub async fn counts(pool: &PgPool, run_id: i64) -> crate::Result<StateCounts> {
    Ok(crate::samples::tally::states_by_run(pool, &[run_id]).await?.remove(&run_id).unwrap_or_default())
}
