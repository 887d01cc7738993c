//! Acceptance: a run's draft acceptance pooled and broken down, the evaluation runs, two
//! evaluations compared prompt by prompt, and the quotas of a draw weighted toward a draft's
//! weak categories. Engineers and admins, as on the Acceptance pages.

use super::{
    auth::Engineer,
    error::{ApiError, ApiPath, ApiQuery, ApiResult},
};
use crate::state::AppState;
use axum::{extract::State, Json};
use domain::acceptance::{CategoryQuota, Comparison, EvaluationSummary, RunAcceptance};
use serde::Deserialize;
use utoipa::IntoParams;

/// A run's acceptance: pooled by verify steps (1 + accepted ÷ steps) with a 95% interval,
/// broken down by category, prompt and completion length, thinking mode and user turns, and
/// its weakest samples.
#[utoipa::path(get, path = "/api/v1/runs/{id}/acceptance", tag = "acceptance", params(("id" = i64, Path)),
    responses((status = 200, body = Object, description = "RunAcceptance: overall, breakdowns, weakest"),
        (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn run(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<RunAcceptance> {
    Ok(Json(engine::acceptance::report::run(&state.services.pool, id).await?))
}

/// The evaluation runs (runs of a named draft), newest first.
#[utoipa::path(get, path = "/api/v1/evaluations", tag = "acceptance",
    responses((status = 200, body = Vec<Object>, description = "EvaluationSummary per run")),
    security(("bearer" = [])))]
pub async fn evaluations(State(state): State<AppState>, _: Engineer) -> ApiResult<Vec<EvaluationSummary>> {
    Ok(Json(engine::acceptance::evaluations::list(&state.services.pool).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct CompareQuery {
    /// The baseline run.
    pub a: i64,
    /// The run compared with it.
    pub b: i64,
}

/// Two runs of the same prompts compared prompt by prompt: each pooled, B − A with a 95%
/// interval over pairs, per category, and the prompts where B falls furthest below A.
#[utoipa::path(get, path = "/api/v1/acceptance/compare", tag = "acceptance", params(CompareQuery),
    responses((status = 200, body = Object, description = "Comparison"),
        (status = 422, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn compare(
    State(state): State<AppState>,
    _: Engineer,
    ApiQuery(query): ApiQuery<CompareQuery>,
) -> ApiResult<Comparison> {
    Ok(Json(engine::acceptance::compare::compare(&state.services.pool, query.a, query.b).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct QuotaQuery {
    /// The evaluation whose acceptance per category weighs the draw.
    pub evaluation: i64,
    /// Rows to draw.
    pub count: u64,
}

/// The rows per category a new run's weighted draw (`selection: weighted`) takes from this
/// dataset: the weaker the evaluated draft on a category, the more.
#[utoipa::path(get, path = "/api/v1/datasets/{id}/quotas", tag = "acceptance", params(("id" = i64, Path), QuotaQuery),
    responses((status = 200, body = Vec<Object>, description = "CategoryQuota per category"),
        (status = 422, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn quotas(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(dataset): ApiPath<i64>,
    ApiQuery(query): ApiQuery<QuotaQuery>,
) -> ApiResult<Vec<CategoryQuota>> {
    if query.count == 0 {
        return Err(ApiError::invalid("count must be at least 1"));
    }
    let pool = &state.services.pool;
    Ok(Json(engine::acceptance::quota::weighted(pool, dataset, query.evaluation, query.count).await?))
}
