//! What the new-run form offers: the datasets, runs and finished exports a run can draw from.

use crate::Result;
use domain::acceptance::DraftRef;
use domain::export::ExportSplit;
use sqlx::PgPool;

/// The runs and finished exports whose prompts a new run can send again (the newest first).
pub async fn source_choices(
    pool: &PgPool,
) -> Result<(Vec<domain::run_form::RunChoice>, Vec<domain::run_form::ExportChoice>)> {
    let runs = sqlx::query!(
        "SELECT id, name, dataset_id, sample_count, draft_name, draft_revision FROM runs ORDER BY id DESC LIMIT 200"
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| domain::run_form::RunChoice {
        id: r.id,
        name: r.name,
        dataset_id: r.dataset_id,
        samples: i64::from(r.sample_count),
        draft: r.draft_name.map(|name| DraftRef { name, revision: r.draft_revision.unwrap_or_default() }),
    })
    .collect();
    let exports: Vec<i64> =
        sqlx::query_scalar!("SELECT id FROM exports WHERE status = 'completed' ORDER BY id DESC LIMIT 50")
            .fetch_all(pool)
            .await?;
    let splits = sqlx::query!(
        r#"SELECT x.export_id, x.split AS "split: ExportSplit", r.dataset_id, count(*) AS "rows!"
           FROM export_samples x JOIN samples s ON s.id = x.sample_id JOIN dataset_rows r ON r.id = s.row_id
           WHERE x.export_id = ANY($1)
           GROUP BY 1, 2, 3 ORDER BY 1 DESC, 2, 3"#,
        &exports
    )
    .fetch_all(pool)
    .await?;
    let exports = exports
        .into_iter()
        .map(|id| domain::run_form::ExportChoice {
            id,
            splits: splits
                .iter()
                .filter(|s| s.export_id == id)
                .map(|s| (s.split, s.dataset_id, s.rows))
                .collect(),
        })
        .filter(|e| !e.splits.is_empty())
        .collect();
    Ok((runs, exports))
}

/// The datasets a new run can draw from (imports that finished), with their categories.
pub async fn dataset_choices(pool: &PgPool) -> Result<Vec<domain::run_form::DatasetChoice>> {
    let datasets = sqlx::query!(
        "SELECT id, name, rows_imported FROM datasets WHERE status = 'ready' ORDER BY created_at DESC, id DESC"
    )
    .fetch_all(pool)
    .await?;
    let mut choices = Vec::with_capacity(datasets.len());
    for d in datasets {
        let categories = sqlx::query!(
            r#"SELECT category AS "category!", count(*) AS "n!" FROM dataset_rows
               WHERE dataset_id = $1 AND category IS NOT NULL GROUP BY category ORDER BY 2 DESC, 1 LIMIT 200"#,
            d.id
        )
        .fetch_all(pool)
        .await?;
        choices.push(domain::run_form::DatasetChoice {
            id: d.id,
            name: d.name,
            rows: d.rows_imported,
            categories: categories.into_iter().map(|c| (c.category, c.n)).collect(),
        });
    }
    Ok(choices)
}
