//! The evaluation runs, newest first, for the pages that pick one.

use crate::Result;
use domain::acceptance::{DraftRef, EvaluationSummary};
use domain::generation::RunStatus;
use sqlx::PgPool;

/// Evaluations listed at most.
const LIMIT: i64 = 500;

/// Served by runs_evaluations_idx.
pub async fn list(pool: &PgPool) -> Result<Vec<EvaluationSummary>> {
    let rows = sqlx::query!(
        r#"SELECT r.id, r.name, r.draft_name AS "draft_name!", r.draft_revision, r.dataset_id, d.name AS dataset,
                  r.status AS "status: RunStatus", r.sample_count, r.created_at
           FROM runs r JOIN datasets d ON d.id = r.dataset_id
           WHERE r.draft_name IS NOT NULL
           ORDER BY r.id DESC LIMIT $1"#,
        LIMIT
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| EvaluationSummary {
            run_id: r.id,
            name: r.name,
            draft: DraftRef { name: r.draft_name, revision: r.draft_revision.unwrap_or_default() },
            dataset_id: r.dataset_id,
            dataset: r.dataset,
            status: r.status,
            samples: i64::from(r.sample_count),
            created_at: r.created_at,
        })
        .collect())
}
