//! Server functions of the Datasets section (namespace `datasets/`, engineers and admins).

use crate::AppError;
use domain::dataset::{DatasetDetail, DatasetSummary, Mapping, Preview, RowPage, SourceSpec};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use server_fn::codec::Json;

/// What the new-dataset form tells the user about the server's limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportLimits {
    pub roots: Vec<String>,
    pub upload_limit: u64,
    pub hub_endpoint: String,
}

#[server(endpoint = "datasets/list", input = Json)]
pub async fn list_datasets() -> Result<Vec<DatasetSummary>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::datasets::store::list(&ssr::services()?.pool).await?)
}

#[server(endpoint = "datasets/detail", input = Json)]
pub async fn fetch_dataset_detail(id: i64) -> Result<DatasetDetail, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::datasets::store::detail(&ssr::services()?.pool, id).await?)
}

#[server(endpoint = "datasets/rows", input = Json)]
pub async fn dataset_rows(id: i64, after: Option<i64>, search: String) -> Result<RowPage, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let search = Some(search.as_str()).filter(|s| !s.trim().is_empty());
    Ok(engine::datasets::store::rows(&ssr::services()?.pool, id, after, search, 25).await?)
}

#[server(endpoint = "datasets/limits", input = Json)]
pub async fn fetch_import_limits() -> Result<ImportLimits, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let settings = ssr::services()?.datasets;
    Ok(ImportLimits {
        roots: settings.roots.iter().map(|r| r.display().to_string()).collect(),
        upload_limit: settings.upload_limit,
        hub_endpoint: settings.hub_endpoint.to_string(),
    })
}

#[server(endpoint = "datasets/preview", input = Json)]
pub async fn preview_dataset(source: SourceSpec, mapping: Option<Mapping>) -> Result<Preview, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let services = ssr::services()?;
    Ok(engine::datasets::preview::preview_source(&services.datasets, &services.http, &source, mapping)
        .await?)
}

#[server(endpoint = "datasets/import", input = Json)]
pub async fn import_dataset(
    name: String,
    source: SourceSpec,
    mapping: Option<Mapping>,
) -> Result<i64, AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    let services = ssr::services()?;
    let started = engine::datasets::import::start(
        &services.pool,
        &services.http,
        &services.datasets,
        engine::datasets::import::NewImport { name, source, mapping, created_by: Some(viewer.id) },
    )
    .await?;
    tracing::info!(by = %viewer.username, dataset = started.id, "dataset import started");
    Ok(started.id)
}

#[server(endpoint = "datasets/cancel", input = Json)]
pub async fn cancel_import(id: i64) -> Result<(), AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    engine::datasets::store::cancel(&ssr::services()?.pool, id, &viewer.username).await?;
    Ok(())
}
