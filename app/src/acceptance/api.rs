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
