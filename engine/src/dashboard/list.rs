//! The runs list: newest first, with counts by state and a throughput sparkline.

use crate::samples::tally;
use domain::{
    dashboard::RunListItem,
    generation::{RunSettings, RunStatus},
};
use sqlx::PgPool;
use std::collections::HashMap;

/// Sparkline points: one-minute buckets over the last half hour of a run's activity.
const SPARK_POINTS: i64 = 30;

pub async fn list(pool: &PgPool, limit: i64) -> crate::Result<Vec<RunListItem>> {
    let runs = sqlx::query!(
        r#"SELECT r.id, r.name, r.status AS "status: RunStatus", r.settings, r.created_at, r.finished_at,
                  d.name AS dataset, u.username AS "created_by?"
           FROM runs r JOIN datasets d ON d.id = r.dataset_id LEFT JOIN users u ON u.id = r.created_by
           ORDER BY r.id DESC LIMIT $1"#,
        limit
    )
    .fetch_all(pool)
    .await?;
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    let mut counts = tally::states_by_run(pool, &ids).await?;
    let mut sparks: HashMap<i64, Vec<(i64, f64)>> = HashMap::new();
    for row in sqlx::query!(
        r#"WITH last AS (SELECT run_id, max(at) AS until FROM run_metrics WHERE run_id = ANY($1) GROUP BY run_id)
           SELECT m.run_id, extract(epoch FROM date_bin('1 minute', m.at, 'epoch'))::bigint AS "minute!",
                  sum(m.client_tokens)::float8 / 60 AS "tps!"
           FROM run_metrics m JOIN last ON last.run_id = m.run_id
           WHERE m.at > last.until - make_interval(mins => $2::int)
           GROUP BY 1, 2 ORDER BY 1, 2"#,
        &ids,
        SPARK_POINTS as i32
    )
    .fetch_all(pool)
    .await?
    {
        sparks.entry(row.run_id).or_default().push((row.minute, row.tps));
    }
    Ok(runs
        .into_iter()
        .map(|r| {
            let model =
                domain::stored::from_stored::<RunSettings>(r.settings).map(|s| s.model).unwrap_or_default();
            RunListItem {
                id: r.id,
                name: r.name,
                status: r.status,
                dataset: r.dataset,
                model,
                created_by: r.created_by,
                created_at: r.created_at,
                finished_at: r.finished_at,
                counts: counts.remove(&r.id).unwrap_or_default(),
                sparkline: fill_minutes(sparks.remove(&r.id).unwrap_or_default()),
            }
        })
        .collect())
}

/// Minutes without any record are zeros, so the line shows stalls as dips.
fn fill_minutes(points: Vec<(i64, f64)>) -> Vec<f64> {
    let (Some(first), Some(last)) = (points.first(), points.last()) else { return vec![] };
    let (first, last) = (first.0, last.0);
    let mut out = vec![0.0; ((last - first) / 60 + 1) as usize];
    for (minute, tps) in points {
        out[((minute - first) / 60) as usize] = tps;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_minutes_are_zeros() {
        assert_eq!(fill_minutes(vec![(0, 5.0), (180, 7.0)]), vec![5.0, 0.0, 0.0, 7.0]);
        assert!(fill_minutes(vec![]).is_empty());
    }
}
