//! Runs: create (validated exactly as the new-run form), list, live status, controls, retry
//! passes and the progress stream. Engineers and admins, as on the Runs pages.

use super::{
    auth::Engineer,
    error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult},
    page::PageQuery,
};
use crate::state::AppState;
use axum::{extract::State, response::Response, Json};
use domain::{generation::SampleState, run_form::RunForm, Viewer};
use engine::runs::{self, Control};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The id of what was just made.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Created {
    pub id: i64,
}

/// A run's status after a control.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StatusBody {
    /// `running`, `paused`, `completed` or `cancelled`.
    pub status: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunsPage {
    /// Runs, newest first (as the Runs page lists them).
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<domain::dashboard::RunListItem>,
    pub next: Option<String>,
}

/// The new-run form's fields (see docs/api.md): `name`, `dataset_id`, `endpoint_ids`, `model`,
/// `max_tokens`, `temperature`, `selection`, `concurrency`, … Omitted fields take the form's
/// defaults; numbers may be sent as JSON numbers or strings.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(value_type = Object)]
pub struct NewRunBody(pub serde_json::Value);

/// A retry pass; omitted fields keep the run's settings.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryBody {
    /// Outcomes to re-queue (`failed`, `timed_out`, `truncated`, `empty`); failed and timed_out
    /// when empty.
    #[serde(default)]
    #[schema(value_type = Vec<String>)]
    pub states: Vec<SampleState>,
    /// Only samples whose error contains this text.
    pub error_contains: Option<String>,
    pub idle_timeout_secs: Option<u32>,
    /// A fixed concurrency for the pass instead of the run's setting.
    pub fixed_concurrency: Option<u32>,
    pub max_attempts: Option<u32>,
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Requeued {
    /// Samples put back in the queue.
    pub requeued: u64,
}

/// Turns the body into the form the page sends: defaults first, then the caller's fields, with
/// numbers and booleans spelled as the strings the form's inputs hold.
pub fn form_from_json(body: serde_json::Value) -> Result<RunForm, ApiError> {
    use serde_json::Value;
    let Value::Object(given) = body else {
        return Err(ApiError::invalid("send the run as a JSON object of the new-run form's fields"));
    };
    let Ok(Value::Object(mut form)) = serde_json::to_value(RunForm::with_defaults()) else {
        return Err(ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "the run form cannot be built",
        ));
    };
    let mut unknown = Vec::new();
    for (key, value) in given {
        let Some(slot) = form.get_mut(&key) else {
            unknown.push(key);
            continue;
        };
        *slot = match (&*slot, value) {
            (Value::String(_), Value::Number(n)) => Value::String(n.to_string()),
            (Value::String(_), Value::Bool(b)) => Value::String(b.to_string()),
            (Value::String(_), Value::Null) => Value::String(String::new()),
            // The CLI's `--set parallel_tool_calls=false` sends text.
            (Value::Bool(_), Value::String(text)) => match text.trim() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return Err(ApiError::invalid(format!("`{key}` is true or false, not `{text}`"))),
            },
            (_, value) => value,
        };
    }
    if !unknown.is_empty() {
        let known: Vec<&String> = form.keys().collect();
        return Err(ApiError::invalid(format!(
            "unknown field(s) {}; a run takes {}",
            unknown.join(", "),
            known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    serde_json::from_value(Value::Object(form))
        .map_err(|e| ApiError::invalid(format!("the run's fields do not fit the form: {e}")))
}

/// Start a run.
#[utoipa::path(post, path = "/api/v1/runs", tag = "runs", request_body = NewRunBody,
    responses((status = 201, body = Created), (status = 422, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiJson(body): ApiJson<NewRunBody>,
) -> Result<(axum::http::StatusCode, Json<Created>), ApiError> {
    let mut form = form_from_json(body.0)?;
    let services = &state.services;
    runs::fill_source_dataset(&services.pool, &mut form).await?;
    let parsed = form.parse().map_err(|problems| ApiError::invalid(problems.join("; ")))?;
    let id = runs::create(
        &services.pool,
        &services.http,
        runs::NewRun {
            name: parsed.name,
            dataset_id: parsed.dataset_id,
            selection: parsed.selection,
            settings: parsed.settings,
            draft: parsed.draft,
            trained_on: parsed.trained_on,
        },
        viewer.id,
    )
    .await?;
    tracing::info!(by = %viewer.username, run.id = id, "run started through the API");
    Ok((axum::http::StatusCode::CREATED, Json(Created { id })))
}

/// List runs, newest first.
#[utoipa::path(get, path = "/api/v1/runs", tag = "runs", params(PageQuery),
    responses((status = 200, body = RunsPage)), security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    _: Engineer,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<RunsPage> {
    let all = engine::dashboard::list::list(&state.services.pool, i64::MAX).await?;
    let (items, next) = query.by_id(all, |r| r.id)?;
    Ok(Json(RunsPage { items, next }))
}

/// A run with its live counters (done/total by outcome, tok/s, ETA, endpoints, alerts).
#[utoipa::path(get, path = "/api/v1/runs/{id}", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, body = Object, description = "the run's snapshot, as the run page shows it"),
        (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<domain::dashboard::RunSnapshot> {
    let services = &state.services;
    Ok(Json(engine::dashboard::snapshot::full(&services.pool, id, services.live.policy()).await?))
}

async fn control(state: &AppState, viewer: &Viewer, id: i64, action: Control) -> ApiResult<StatusBody> {
    let status = runs::control(&state.services.pool, id, action).await?;
    tracing::info!(by = %viewer.username, run.id = id, status = status.as_str(), "run control through the API");
    Ok(Json(StatusBody { status: status.as_str().to_string() }))
}

/// Pause a running run (in-flight requests finish; nothing new is sent).
#[utoipa::path(post, path = "/api/v1/runs/{id}/pause", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, body = StatusBody), (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn pause(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<StatusBody> {
    control(&state, &viewer, id, Control::Pause).await
}

/// Resume a paused run.
#[utoipa::path(post, path = "/api/v1/runs/{id}/resume", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, body = StatusBody), (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn resume(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<StatusBody> {
    control(&state, &viewer, id, Control::Resume).await
}

/// Cancel a run; finished samples are kept.
#[utoipa::path(post, path = "/api/v1/runs/{id}/cancel", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, body = StatusBody), (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn cancel(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<StatusBody> {
    control(&state, &viewer, id, Control::Cancel).await
}

/// Start a retry pass over a run's failures.
#[utoipa::path(post, path = "/api/v1/runs/{id}/retry", tag = "runs", params(("id" = i64, Path)),
    request_body = RetryBody,
    responses((status = 200, body = Requeued), (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn retry(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiPath(id): ApiPath<i64>,
    body: axum::body::Bytes,
) -> ApiResult<Requeued> {
    // The body is optional: none keeps every setting of the run.
    let body: RetryBody = if body.iter().all(u8::is_ascii_whitespace) {
        RetryBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid(format!("the retry pass cannot be read: {e}; see /api/v1/docs")))?
    };
    let pass = runs::RetryPass {
        states: body.states,
        error_contains: body.error_contains,
        idle_timeout_secs: body.idle_timeout_secs,
        deadline_secs: None,
        concurrency: body.fixed_concurrency.map(|limit| domain::generation::Concurrency::Fixed { limit }),
        max_attempts: body.max_attempts,
        max_tokens: body.max_tokens,
    };
    let services = &state.services;
    let requeued = runs::retry(&services.pool, &services.http, id, pass).await?;
    tracing::info!(by = %viewer.username, run.id = id, requeued, "retry pass through the API");
    Ok(Json(Requeued { requeued }))
}

/// The run's live snapshot as server-sent events (`event: snapshot`, once a second).
#[utoipa::path(get, path = "/api/v1/runs/{id}/events", tag = "runs", params(("id" = i64, Path)),
    responses((status = 200, content_type = "text/event-stream", body = String)),
    security(("bearer" = [])))]
pub async fn events(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(id): ApiPath<i64>,
) -> Result<Response, ApiError> {
    Ok(crate::events::run_events(State(state.services.clone()), axum::extract::Path(id)).await)
}
