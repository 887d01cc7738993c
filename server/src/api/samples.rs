//! Samples: a run's samples with the review filters and their counts, one sample, and a review
//! decision: reviewers and up, as on the Review pages. A decision for every finished sample of a
//! filter: engineers and up, as the list's bulk actions.

use super::{
    auth::{Engineer, Reviewer},
    error::{ApiError, ApiJson, ApiPath, ApiResult},
    page::MAX_LIMIT,
};
use crate::state::AppState;
use axum::{extract::State, Json};
use domain::review::{Decision, SampleFilter};
use engine::review::counts::{self, Counting};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SamplesPage {
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<domain::review::SampleRow>,
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// The sample's `review_version` as you read it; a stale one is refused with 409.
    pub version: i32,
    /// `approve`, `reject` or `flag` (a flag needs at least one reason in `flags`).
    #[schema(value_type = String)]
    pub decision: Decision,
    #[serde(default)]
    pub flags: Vec<String>,
    pub note: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DecisionDone {
    /// The sample's new `review_version`.
    pub version: i32,
}

/// A run's samples with the review filters (`outcome`, `finish_reason`, `flag`, `review`,
/// `reviewer`, `category`, token ranges such as `completion_min`, the draft's acceptance length
/// as `acceptance_min` / `acceptance_max`, `q`, `sort`: `oldest`, `newest`, `longest`,
/// `shortest`, `slowest`, `lowest_acceptance`, `highest_acceptance`), paged with `after` and
/// `limit`.
#[utoipa::path(get, path = "/api/v1/runs/{id}/samples", tag = "samples",
    params(("id" = i64, Path), ("after" = Option<String>, Query), ("limit" = Option<i64>, Query),
        ("outcome" = Option<String>, Query), ("review" = Option<String>, Query),
        ("finish_reason" = Option<String>, Query), ("flag" = Option<String>, Query),
        ("acceptance_min" = Option<f64>, Query), ("acceptance_max" = Option<f64>, Query),
        ("sort" = Option<String>, Query), ("q" = Option<String>, Query)),
    responses((status = 200, body = SamplesPage), (status = 422, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    _: Reviewer,
    ApiPath(run): ApiPath<i64>,
    axum::extract::Query(mut query): axum::extract::Query<BTreeMap<String, String>>,
) -> ApiResult<SamplesPage> {
    let after = query.remove("after");
    let limit = match query.remove("limit") {
        None => None,
        Some(raw) => match raw.trim().parse::<i64>() {
            Ok(n) if (1..=MAX_LIMIT as i64).contains(&n) => Some(n),
            _ => return Err(ApiError::invalid(format!("limit must be 1 to {MAX_LIMIT}, not `{raw}`"))),
        },
    };
    let filter = run_filter(run, query)?;
    let page = engine::review::list::page(&state.services.pool, &filter, after.as_deref(), limit).await?;
    Ok(Json(SamplesPage { items: page.rows, next: page.next }))
}

/// One sample: prompt, reasoning, answer, attempts and review history.
#[utoipa::path(get, path = "/api/v1/samples/{id}", tag = "samples", params(("id" = i64, Path)),
    responses((status = 200, body = Object, description = "the sample as its review page shows it"),
        (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    Reviewer(viewer): Reviewer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<domain::review::SampleDetail> {
    Ok(Json(engine::review::detail::load(&state.services.pool, &viewer, id).await?))
}

/// Approve, reject or flag a sample.
#[utoipa::path(post, path = "/api/v1/samples/{id}/decision", tag = "samples", params(("id" = i64, Path)),
    request_body = DecisionBody,
    responses((status = 200, body = DecisionDone), (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn decide(
    State(state): State<AppState>,
    Reviewer(viewer): Reviewer,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<DecisionBody>,
) -> ApiResult<DecisionDone> {
    let input = engine::review::DecisionInput {
        sample_id: id,
        version: body.version,
        decision: body.decision,
        flags: body.flags,
        note: body.note,
    };
    let version = engine::review::decide(&state.services.pool, &viewer, input).await?;
    Ok(Json(DecisionDone { version }))
}

/// The review filters of `query` on the samples of `run`.
fn run_filter(run: i64, mut query: BTreeMap<String, String>) -> Result<SampleFilter, ApiError> {
    query.insert("run".into(), run.to_string());
    SampleFilter::from_query(&query).map_err(ApiError::invalid)
}

/// Counts per filter value, as the list's counts panel shows them: the total, and for each
/// dimension (run, outcome, finish reason, flag, review, reviewer, category) its values, each
/// counted with every other filter applied. A filter that needs a pass over the samples (a
/// text search) is counted as the panel does: exactly when that is quick, else estimated,
/// which `counted` says; `exact=true` counts every sample however long it takes.
#[utoipa::path(get, path = "/api/v1/runs/{id}/samples/counts", tag = "samples",
    params(("id" = i64, Path), ("outcome" = Option<String>, Query), ("review" = Option<String>, Query),
        ("finish_reason" = Option<String>, Query), ("flag" = Option<String>, Query), ("q" = Option<String>, Query),
        ("exact" = Option<bool>, Query, description = "count every sample, however long it takes")),
    responses((status = 200, body = Object, description = "how counted, total and counts per value of each dimension"),
        (status = 422, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn counts(
    State(state): State<AppState>,
    _: Reviewer,
    ApiPath(run): ApiPath<i64>,
    axum::extract::Query(mut query): axum::extract::Query<BTreeMap<String, String>>,
) -> ApiResult<domain::review::Facets> {
    let counting = match query.remove("exact").as_deref() {
        None | Some("false") => Counting::PANEL,
        Some("true") => Counting::Exact,
        Some(other) => {
            return Err(ApiError::invalid(format!("exact must be true or false, not \"{other}\"")))
        }
    };
    let filter = run_filter(run, query)?;
    Ok(Json(counts::count(&state.services.pool, &filter, counting).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkBody {
    /// `approve`, `reject` or `flag` (a flag needs at least one reason in `flags`).
    #[schema(value_type = String)]
    pub decision: Decision,
    #[serde(default)]
    pub flags: Vec<String>,
    pub note: Option<String>,
    /// The number of finished samples you mean to change, as a call without it answered: the
    /// decision applies only if the filter still matches exactly that many (else 409, nothing
    /// changed). Without it, nothing changes and the answer says how many match.
    pub expected: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BulkDone {
    /// Finished samples the filter matches (the ones a decision can apply to).
    pub matched: i64,
    /// Samples the decision changed: 0 when `expected` was left out. A sample that already had
    /// this decision (state, flags and note) is not changed, so a retried call changes 0.
    pub changed: i64,
}

/// One decision for every finished sample of a run that the filters (query parameters, as for
/// the list) match: first without `expected` to learn the count, then with it to apply.
#[utoipa::path(post, path = "/api/v1/runs/{id}/samples/decision", tag = "samples",
    params(("id" = i64, Path), ("outcome" = Option<String>, Query), ("review" = Option<String>, Query),
        ("finish_reason" = Option<String>, Query), ("flag" = Option<String>, Query), ("q" = Option<String>, Query)),
    request_body = BulkBody,
    responses((status = 200, body = BulkDone), (status = 409, body = super::error::ErrorBody),
        (status = 422, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn decide_all(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiPath(run): ApiPath<i64>,
    axum::extract::Query(query): axum::extract::Query<BTreeMap<String, String>>,
    ApiJson(body): ApiJson<BulkBody>,
) -> ApiResult<BulkDone> {
    let filter = run_filter(run, query)?;
    let pool = &state.services.pool;
    let Some(expected) = body.expected else {
        let matched = engine::review::bulk::count(pool, &filter).await?;
        return Ok(Json(BulkDone { matched, changed: 0 }));
    };
    let input = engine::review::bulk::BulkInput {
        filter,
        decision: body.decision,
        flags: body.flags,
        note: body.note,
        expected,
    };
    let changed = engine::review::bulk::apply(pool, &viewer, input).await?;
    Ok(Json(BulkDone { matched: expected, changed }))
}
