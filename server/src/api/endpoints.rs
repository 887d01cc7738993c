//! Endpoints: list, add (the connection is tested on the way), check and remove. Engineers and
//! admins.

use super::{
    auth::Engineer,
    error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult},
    page::PageQuery,
};
use crate::state::AppState;
use axum::{extract::State, http::StatusCode, Json};
use domain::EndpointSummary;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointsPage {
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<EndpointSummary>,
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEndpointBody {
    pub name: String,
    /// The server's root URL, e.g. `http://gpu-7:8000`.
    pub base_url: String,
    /// Kept on the server and never shown again.
    pub api_key: Option<String>,
}

/// List endpoints with their models and capacity.
#[utoipa::path(get, path = "/api/v1/endpoints", tag = "endpoints", params(PageQuery),
    responses((status = 200, body = EndpointsPage)), security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    _: Engineer,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<EndpointsPage> {
    let all = engine::endpoints::list(&state.services.pool).await?;
    let (items, next) = query.by_id(all, |e| e.id)?;
    Ok(Json(EndpointsPage { items, next }))
}

/// Register a vLLM server; its connection and models are checked first.
#[utoipa::path(post, path = "/api/v1/endpoints", tag = "endpoints", request_body = NewEndpointBody,
    responses((status = 201, body = Object, description = "the endpoint"),
        (status = 422, body = super::error::ErrorBody), (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiJson(body): ApiJson<NewEndpointBody>,
) -> Result<(StatusCode, Json<EndpointSummary>), ApiError> {
    let services = &state.services;
    let endpoint = engine::endpoints::create(
        &services.pool,
        &services.http,
        engine::endpoints::NewEndpoint {
            name: &body.name,
            base_url: &body.base_url,
            api_key: body.api_key.as_deref(),
        },
        viewer.id,
    )
    .await?;
    tracing::info!(by = %viewer.username, endpoint = %endpoint.name, "endpoint added through the API");
    Ok((StatusCode::CREATED, Json(endpoint)))
}

/// Test the connection again and refresh the models.
#[utoipa::path(post, path = "/api/v1/endpoints/{id}/check", tag = "endpoints", params(("id" = i64, Path)),
    responses((status = 200, body = Object, description = "the endpoint after the check"),
        (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn check(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<EndpointSummary> {
    let services = &state.services;
    Ok(Json(engine::endpoints::check(&services.pool, &services.http, id).await?))
}

/// Remove an endpoint no run has used (one that was used stays, so its runs keep their history).
#[utoipa::path(delete, path = "/api/v1/endpoints/{id}", tag = "endpoints", params(("id" = i64, Path)),
    responses((status = 204, description = "removed"), (status = 404, body = super::error::ErrorBody),
        (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiPath(id): ApiPath<i64>,
) -> Result<StatusCode, ApiError> {
    engine::endpoints::delete(&state.services.pool, id).await?;
    tracing::info!(by = %viewer.username, endpoint = id, "endpoint removed through the API");
    Ok(StatusCode::NO_CONTENT)
}
