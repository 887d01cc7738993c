//! Server functions of the Acceptance pages. Thin: check the role, call the engine.

use crate::AppError;
use domain::acceptance::{CategoryQuota, Comparison, EvaluationSummary, RunAcceptance};
use leptos::prelude::*;

#[server(endpoint = "acceptance/evaluations")]
pub async fn list_evaluations() -> Result<Vec<EvaluationSummary>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::acceptance::evaluations::list(&ssr::services()?.pool).await?)
}

#[server(endpoint = "acceptance/run")]
pub async fn get_run_acceptance(id: i64) -> Result<RunAcceptance, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::acceptance::report::run(&ssr::services()?.pool, id).await?)
}

#[server(endpoint = "acceptance/compare")]
pub async fn compare_runs(a: i64, b: i64) -> Result<Comparison, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::acceptance::compare::compare(&ssr::services()?.pool, a, b).await?)
}

/// The quota per category a weighted draw would take: shown on the new-run form before the
/// run starts, and exactly what the run then draws.
#[server(endpoint = "acceptance/quotas")]
pub async fn weighted_quotas(
    dataset_id: i64,
    evaluation_run_id: i64,
    count: u64,
) -> Result<Vec<CategoryQuota>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let pool = ssr::services()?.pool;
    Ok(engine::acceptance::quota::weighted(&pool, dataset_id, evaluation_run_id, count).await?)
}

/// Registered draft revisions, the newest first, with the exports they were trained on.
#[server(endpoint = "acceptance/drafts")]
pub async fn list_drafts() -> Result<Vec<domain::lineage::DraftRevision>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::acceptance::lineage::revisions(&ssr::services()?.pool, None).await?)
}

/// A draft's loop on a held-out dataset (by default its newest evaluation's).
#[server(endpoint = "acceptance/loop")]
pub async fn get_loop(draft: String, dataset: Option<i64>) -> Result<domain::lineage::LoopTable, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::acceptance::lineage::loop_table(&ssr::services()?.pool, &draft, dataset).await?)
}

/// The drafts trained on an export, with their evaluations.
#[server(endpoint = "acceptance/export-drafts")]
pub async fn export_drafts(export_id: i64) -> Result<Vec<domain::lineage::TrainedDraft>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::acceptance::lineage::trained_on_export(&ssr::services()?.pool, export_id).await?)
}
