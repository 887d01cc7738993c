//! Exports: start from a spec or a saved preset's name, status with progress, files and their
//! download. Engineers and admins, as on the Exports page.

use super::{
    auth::Engineer,
    error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult},
    page::PageQuery,
    runs::Created,
};
use crate::state::AppState;
use axum::{extract::State, http::StatusCode, response::Response, Json};
use domain::export::ExportSpec;
use domain::export::{ExportFile, ExportItem};
use engine::export::store::item;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The Exports page lists this many; the API pages through up to this many of the newest.
const LISTED: i64 = 10_000;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartExport {
    /// A full export spec (`selection`, `format`, `destination`), as the Exports page builds it.
    #[schema(value_type = Option<Object>)]
    pub spec: Option<ExportSpec>,
    /// Or the name of a saved preset, exported as it is now.
    pub preset: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExportsPage {
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<ExportItem>,
    pub next: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FileList {
    /// Files of a completed folder export, the manifest last; each downloads from
    /// `/api/v1/exports/{id}/files/{name}`.
    #[schema(value_type = Vec<Object>)]
    pub files: Vec<ExportFile>,
}

/// Start an export in the background.
#[utoipa::path(post, path = "/api/v1/exports", tag = "exports", request_body = StartExport,
    responses((status = 201, body = Created), (status = 404, body = super::error::ErrorBody),
        (status = 422, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn start(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiJson(body): ApiJson<StartExport>,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let services = &state.services;
    let (spec, preset_id) = match (body.spec, body.preset) {
        (Some(spec), None) => (spec, None),
        (None, Some(name)) => {
            let presets = engine::export::store::presets(&services.pool).await?;
            let names: Vec<&str> = presets.iter().map(|p| p.name.as_str()).collect();
            let Some(preset) = presets.iter().find(|p| p.name == name.trim()) else {
                return Err(ApiError::not_found(if names.is_empty() {
                    format!("there is no preset named {name:?}; save one on the Exports page first")
                } else {
                    format!("there is no preset named {name:?}; the presets are {}", names.join(", "))
                }));
            };
            (preset.spec.clone(), Some(preset.id))
        }
        _ => {
            return Err(ApiError::invalid("send either `spec` or `preset` (a saved preset's name), not both"))
        }
    };
    let id = engine::export::job::start(
        &services.pool,
        services.export_storage.clone(),
        &spec,
        Some(viewer.id),
        preset_id,
    )
    .await?;
    tracing::info!(by = %viewer.username, export = id, "export started through the API");
    Ok((StatusCode::CREATED, Json(Created { id })))
}

/// List exports, newest first.
#[utoipa::path(get, path = "/api/v1/exports", tag = "exports", params(PageQuery),
    responses((status = 200, body = ExportsPage)), security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    _: Engineer,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<ExportsPage> {
    let records = engine::export::store::list(&state.services.pool, LISTED).await?;
    let (records, next) = query.by_id(records, |r| r.id)?;
    let mut items: Vec<ExportItem> = records.into_iter().map(item).collect();
    engine::export::store::with_trained(&state.services.pool, &mut items).await?;
    Ok(Json(ExportsPage { items, next }))
}

/// An export's status with its progress (`rows_done` of `rows_total`), counts and files.
#[utoipa::path(get, path = "/api/v1/exports/{id}", tag = "exports", params(("id" = i64, Path)),
    responses((status = 200, body = Object, description = "the export as the Exports page lists it"),
        (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<ExportItem> {
    let pool = &state.services.pool;
    let mut export = [item(engine::export::store::get(pool, id).await?)];
    engine::export::store::with_trained(pool, &mut export).await?;
    let [export] = export;
    Ok(Json(export))
}

/// The files of an export (empty until it completes).
#[utoipa::path(get, path = "/api/v1/exports/{id}/files", tag = "exports", params(("id" = i64, Path)),
    responses((status = 200, body = FileList), (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn files(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<FileList> {
    Ok(Json(FileList { files: item(engine::export::store::get(&state.services.pool, id).await?).files }))
}

/// Download one file of a completed folder export, streamed.
#[utoipa::path(get, path = "/api/v1/exports/{id}/files/{name}", tag = "exports",
    params(("id" = i64, Path), ("name" = String, Path)),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn download(
    State(state): State<AppState>,
    _: Engineer,
    ApiPath((id, name)): ApiPath<(i64, String)>,
) -> Result<Response, ApiError> {
    let response = crate::downloads::download(State(state), axum::extract::Path((id, name))).await;
    if response.status().is_success() {
        return Ok(response);
    }
    // The download route answers refusals in plain text for browsers; say the same in the
    // API's shape.
    let status = response.status();
    let text = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|_| "the file cannot be served".into());
    Err(ApiError::new(status, text))
}

/// Ask a running export to stop; it removes what it wrote.
#[utoipa::path(post, path = "/api/v1/exports/{id}/cancel", tag = "exports", params(("id" = i64, Path)),
    responses((status = 200, body = super::runs::StatusBody), (status = 409, body = super::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn cancel(
    State(state): State<AppState>,
    Engineer(viewer): Engineer,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<super::runs::StatusBody> {
    if !engine::export::job::cancel(&state.services.pool, id).await? {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("export {id} is not running (or does not exist); see GET /api/v1/exports/{id}"),
        ));
    }
    tracing::info!(by = %viewer.username, export = id, "export cancel requested through the API");
    Ok(Json(super::runs::StatusBody { status: "cancelling".into() }))
}
