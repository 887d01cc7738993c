//! Datasets: list, one with its import status, an upload, and an import from a server path,
//! an upload or the hub. Engineers and admins, as on the Datasets pages.

use super::{
    auth::Engineer,
    error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult},
    page::PageQuery,
    runs::Created,
};
use crate::state::AppState;
use axum::{
    body::Body,
    extract::State,
    http::{header, HeaderMap, StatusCode},
    Json,
};
use domain::dataset::{DatasetDetail, DatasetSummary, Mapping, SourceSpec, Uploaded};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct DatasetsPage {
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<DatasetSummary>,
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportBody {
    pub name: String,
    /// `{"kind": "path", "path": "…"}` (under a DS_DATASET_ROOTS folder),
    /// `{"kind": "upload", "upload_id": "…", "filename": "…"}` (from `POST /api/v1/datasets/uploads`)
    /// or `{"kind": "hub", "repo": "…", "config": "…", "split": "…"}`.
    #[schema(value_type = Object)]
    pub source: SourceSpec,
    /// `{"schema": "sharegpt|openai|alpaca|prompt", "column": "…"}`; detected when omitted.
    #[schema(value_type = Option<Object>)]
    pub mapping: Option<Mapping>,
}

/// List datasets, newest first.
#[utoipa::path(get, path = "/api/v1/datasets", tag = "datasets", params(PageQuery),
    responses((status = 200, body = DatasetsPage)), security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    _: Engineer,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<DatasetsPage> {
    let all = engine::datasets::store::list(&state.services.pool).await?;
    let (items, next) = query.by_id(all, |d| d.id)?;
    Ok(Json(DatasetsPage { items, next }))
}

/// A dataset with its import status and statistics.
#[utoipa::path(get, path = "/api/v1/datasets/{id}", tag = "datasets", params(("id" = i64, Path)),
    responses((status = 200, body = Object, description = "the dataset as its page shows it"),
        (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<DatasetDetail> {
    Ok(Json(engine::datasets::store::detail(&state.services.pool, id).await?))
}

/// Start importing a dataset; poll `GET /api/v1/datasets/{id}` until its status is `ready`.
#[utoipa::path(post, path = "/api/v1/datasets", tag = "datasets", request_body = ImportBody,
    responses((status = 201, body = Created), (status = 422, body = super::error::ErrorBody),
        (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn import(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiJson(body): ApiJson<ImportBody>,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let services = &state.services;
    let started = engine::datasets::import::start(
        &services.pool,
        &services.http,
        &services.datasets,
        engine::datasets::import::NewImport {
            name: body.name,
            source: body.source,
            mapping: body.mapping,
            created_by: Some(viewer.id),
        },
    )
    .await?;
    tracing::info!(by = %viewer.username, dataset = started.id, "dataset import started through the API");
    Ok((StatusCode::CREATED, Json(Created { id: started.id })))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RowsPage {
    /// Imported rows (normalized messages, row key, category), in import order.
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<domain::dataset::DatasetRow>,
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RowsQuery {
    /// The `next` cursor of the previous page.
    pub after: Option<i64>,
    /// Rows per page, 1 to 200 (default 50).
    pub limit: Option<i64>,
    /// Only rows whose text contains this.
    pub q: Option<String>,
}

/// A dataset's imported rows, paged by key.
#[utoipa::path(get, path = "/api/v1/datasets/{id}/rows", tag = "datasets",
    params(("id" = i64, Path), RowsQuery),
    responses((status = 200, body = RowsPage), (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn rows(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<RowsQuery>,
) -> ApiResult<RowsPage> {
    let limit = match query.limit {
        None => 50,
        Some(n) if (1..=200).contains(&n) => n,
        Some(n) => return Err(ApiError::invalid(format!("limit must be 1 to 200, not {n}"))),
    };
    let page =
        engine::datasets::store::rows(&state.services.pool, id, query.after, query.q.as_deref(), limit)
            .await?;
    Ok(Json(RowsPage { items: page.rows, next: page.next_after.map(|n| n.to_string()) }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UploadQuery {
    /// The file's name; its extension (`.jsonl`, `.json`, `.parquet`, `.csv`) tells the format.
    pub filename: String,
}

/// A dataset file, sent as the raw request body and streamed to the server's disk within
/// `DS_UPLOAD_LIMIT`; import it with `POST /api/v1/datasets` and `{"kind": "upload", …}`.
#[utoipa::path(post, path = "/api/v1/datasets/uploads", tag = "datasets", params(UploadQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 201, body = Object, description = "`{upload_id, filename, bytes}`"),
        (status = 413, body = super::error::ErrorBody), (status = 422, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn upload(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiQuery(query): ApiQuery<UploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Uploaded>), ApiError> {
    let settings = &state.services.datasets;
    let too_large = |limit: u64| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the file is larger than the upload limit of {} (DS_UPLOAD_LIMIT); put it under a dataset \
                 folder on the server and import it by path",
                domain::units::bytes(limit)
            ),
        )
    };
    let announced =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > settings.upload_limit) {
        return Err(too_large(settings.upload_limit));
    }
    if query.filename.trim().is_empty() {
        return Err(ApiError::invalid(
            "give the file's name as `?filename=…`; its extension tells the format",
        ));
    }
    let saved = engine::datasets::uploads::save(settings, &query.filename, body.into_data_stream())
        .await
        .map_err(|e| match e {
            // The engine reports an over-limit stream as invalid input naming DS_UPLOAD_LIMIT.
            e if e.to_string().contains("(DS_UPLOAD_LIMIT)") => too_large(settings.upload_limit),
            e => ApiError::from(e),
        })?;
    if saved.bytes == 0 {
        engine::datasets::uploads::remove(settings, &saved.upload_id);
        return Err(ApiError::invalid("the upload is empty: send the file's bytes as the request body"));
    }
    tracing::info!(by = %viewer.username, upload = %saved.upload_id, bytes = saved.bytes, "upload stored through the API");
    Ok((StatusCode::CREATED, Json(saved)))
}
