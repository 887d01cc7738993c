//! Acceptance: a run's draft acceptance pooled and broken down, the evaluation runs, two
//! evaluations compared prompt by prompt, the quotas of a draw weighted toward a draft's weak
//! categories, and the loop's lineage (draft revisions, the exports they were trained on). Engineers and admins, as on the Acceptance pages.

use super::{
    auth::Engineer,
    error::{ApiError, ApiPath, ApiQuery, ApiResult},
};
use crate::state::AppState;
use axum::{extract::State, Json};
use domain::acceptance::{CategoryQuota, Comparison, DraftRef, EvaluationSummary, RunAcceptance};
use domain::lineage::{DraftRevision, LoopTable, NewDraftRevision, TrainedDraft};
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

/// A draft revision to register, with the export it was trained on.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDraftBody {
    /// The draft's name, as evaluations name it (no `@`).
    pub name: String,
    /// A checkpoint, commit or tag; empty or absent for none.
    #[serde(default)]
    pub revision: String,
    /// The completed export whose training rows it was trained on; absent for a starting draft.
    #[serde(default)]
    pub trained_on: Option<i64>,
}

/// Register a draft revision and the export it was trained on. Registering one again is
/// allowed (it returns the revision), but never with a different export.
#[utoipa::path(post, path = "/api/v1/drafts", tag = "acceptance", request_body = NewDraftBody,
    responses((status = 201, body = Object, description = "DraftRef"),
        (status = 422, body = super::error::ErrorBody), (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn register_draft(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    super::error::ApiJson(body): super::error::ApiJson<NewDraftBody>,
) -> Result<(axum::http::StatusCode, Json<DraftRef>), ApiError> {
    let new = NewDraftRevision { name: body.name, revision: body.revision, trained_on: body.trained_on };
    let mut conn = state.services.pool.acquire().await.map_err(engine::Error::from)?;
    let draft = engine::acceptance::lineage::register(&mut conn, &new, Some(viewer.id)).await?;
    tracing::info!(by = %viewer.username, draft = %draft.describe(), trained_on = ?new.trained_on, "draft revision registered");
    Ok((axum::http::StatusCode::CREATED, Json(draft)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DraftsQuery {
    /// Only this draft's revisions.
    pub name: Option<String>,
}

/// Registered draft revisions, the newest first, each with the export it was trained on.
#[utoipa::path(get, path = "/api/v1/drafts", tag = "acceptance", params(DraftsQuery),
    responses((status = 200, body = Vec<Object>, description = "DraftRevision per revision")),
    security(("bearer" = [])))]
pub async fn drafts(
    State(state): State<AppState>,
    _: Engineer,
    ApiQuery(query): ApiQuery<DraftsQuery>,
) -> ApiResult<Vec<DraftRevision>> {
    Ok(Json(engine::acceptance::lineage::revisions(&state.services.pool, query.name.as_deref()).await?))
}

/// The drafts trained on an export, each with its evaluations (newest first).
#[utoipa::path(get, path = "/api/v1/exports/{id}/drafts", tag = "acceptance", params(("id" = i64, Path)),
    responses((status = 200, body = Vec<Object>, description = "TrainedDraft per revision")),
    security(("bearer" = [])))]
pub async fn export_drafts(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Vec<TrainedDraft>> {
    Ok(Json(engine::acceptance::lineage::trained_on_export(&state.services.pool, id).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct LoopQuery {
    /// The draft's name.
    pub draft: String,
    /// The held-out dataset the evaluations sent; by default the newest evaluation's.
    pub dataset: Option<i64>,
}

/// A draft's loop: each revision in the order registered, the export it was trained on (its
/// selection in words), its newest completed evaluation on the held-out dataset pooled overall
/// and per category, and its paired change from the revision before, with a 95% interval.
#[utoipa::path(get, path = "/api/v1/acceptance/loop", tag = "acceptance", params(LoopQuery),
    responses((status = 200, body = Object, description = "LoopTable"),
        (status = 422, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn lineage_loop(
    State(state): State<AppState>,
    _: Engineer,
    ApiQuery(query): ApiQuery<LoopQuery>,
) -> ApiResult<LoopTable> {
    Ok(Json(
        engine::acceptance::lineage::loop_table(&state.services.pool, &query.draft, query.dataset).await?,
    ))
}
