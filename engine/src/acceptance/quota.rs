//! A new run's prompts drawn toward where a draft is weak: each category of the dataset gets a
//! quota by how far the evaluation's acceptance on it falls below the most a step can emit
//! (`domain::acceptance::weighted_quotas`). The new-run form shows the quotas before the run
//! starts, and the run draws exactly these.

use super::report;
use crate::{Error, Result};
use domain::acceptance::{weighted_quotas, CategoryQuota, CategoryRows, Dimension};
use sqlx::PgPool;
use std::collections::HashMap;

pub async fn weighted(
    pool: &PgPool,
    dataset_id: i64,
    evaluation_run_id: i64,
    count: u64,
) -> Result<Vec<CategoryQuota>> {
    let evaluation = report::run(pool, evaluation_run_id).await?;
    let (Some(overall), Some(k)) = (&evaluation.overall, evaluation.spec_tokens) else {
        return Err(Error::invalid(format!(
            "run `{}` has no acceptance figures to weigh categories by: evaluate a draft on a server that reports \
             them (docs/acceptance.md) first",
            evaluation.run_name
        )));
    };
    let by_category: HashMap<String, f64> = evaluation
        .breakdowns
        .iter()
        .filter(|(dimension, _)| *dimension == Dimension::Category)
        .flat_map(|(_, groups)| groups)
        .filter_map(|g| Some((g.group.clone(), g.pooled.as_ref()?.length)))
        .collect();
    let rows: Vec<CategoryRows> = sqlx::query!(
        r#"SELECT category, count(*) AS "rows!" FROM dataset_rows WHERE dataset_id = $1
           GROUP BY category ORDER BY category NULLS LAST"#,
        dataset_id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| CategoryRows {
        acceptance: by_category.get(r.category.as_deref().unwrap_or("(none)")).copied(),
        category: r.category,
        available: r.rows.max(0) as u64,
    })
    .collect();
    if rows.is_empty() {
        return Err(Error::invalid("the dataset has no rows to draw from"));
    }
    Ok(weighted_quotas(count, f64::from(k) + 1.0, overall.length, &rows))
}
