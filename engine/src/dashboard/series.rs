//! The throughput history of a run, from `run_metrics` (one row per endpoint and second),
//! averaged into buckets so a week-long run still draws a few hundred points.

use domain::dashboard::ChartPoint;
use sqlx::PgPool;

/// At most this many points are returned; buckets widen to fit.
pub const MAX_POINTS: i64 = 600;

/// Bucket width in seconds for a history `span_secs` long.
pub fn bucket_secs(span_secs: i64) -> i32 {
    (((span_secs.max(1) + MAX_POINTS - 1) / MAX_POINTS).max(1)).min(i32::MAX as i64) as i32
}

pub async fn history(pool: &PgPool, run_id: i64) -> crate::Result<Vec<ChartPoint>> {
    let span = sqlx::query!(
        r#"SELECT extract(epoch FROM max(at) - min(at))::bigint AS span FROM run_metrics WHERE run_id = $1"#,
        run_id
    )
    .fetch_one(pool)
    .await?
    .span;
    let Some(span) = span else { return Ok(vec![]) };
    points(pool, run_id, bucket_secs(span + 1), None).await
}

/// The newest second that is over (the current one is still being written).
pub async fn latest(pool: &PgPool, run_id: i64) -> crate::Result<Option<ChartPoint>> {
    Ok(points(pool, run_id, 1, Some(2)).await?.pop())
}

/// Per-second rates summed over endpoints, then averaged per bucket of `bucket` seconds. With
/// `recent`, only the seconds from `recent` seconds ago up to the last complete one.
async fn points(
    pool: &PgPool,
    run_id: i64,
    bucket: i32,
    recent: Option<i32>,
) -> crate::Result<Vec<ChartPoint>> {
    let rows = sqlx::query!(
        r#"WITH seconds AS (
               SELECT at,
                      sum(server_prompt_tps) AS prompt_tps, sum(server_generation_tps) AS generation_tps,
                      sum(client_tokens) AS client_tokens, sum(in_flight) AS in_flight,
                      sum(errors) AS errors, sum(completed) AS completed
               FROM run_metrics
               WHERE run_id = $1
                 AND ($3::int IS NULL OR (at >= date_trunc('second', now()) - make_interval(secs => $3)
                                          AND at < date_trunc('second', now())))
               GROUP BY at)
           SELECT extract(epoch FROM date_bin(make_interval(secs => $2::int), at, 'epoch'))::bigint AS "t!",
                  avg(prompt_tps)::float8 AS prompt_tps, avg(generation_tps)::float8 AS generation_tps,
                  (sum(client_tokens)::float8 / $2::int) AS "client_tps!",
                  avg(in_flight)::float8 AS "in_flight!",
                  (sum(errors)::float8 / $2::int) AS "errors!",
                  (sum(completed)::float8 / $2::int) AS "completed!"
           FROM seconds GROUP BY 1 ORDER BY 1"#,
        run_id,
        bucket,
        recent
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| ChartPoint {
            t: r.t,
            seconds: bucket,
            prompt_tps: r.prompt_tps,
            generation_tps: r.generation_tps,
            client_tps: r.client_tps,
            in_flight: r.in_flight,
            errors: r.errors,
            completed: r.completed,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_widen_so_the_history_fits_the_point_budget() {
        assert_eq!(bucket_secs(1), 1);
        assert_eq!(bucket_secs(600), 1);
        assert_eq!(bucket_secs(601), 2);
        assert_eq!(bucket_secs(7 * 24 * 3600), 1008);
    }
}
