//! Server functions of the Exports page (namespace `exports/`, engineers and admins). Thin:
//! check the role, call `engine::export`.

use crate::AppError;
use domain::export::{ExportPreview, ExportSpec, ExportStatus};
use domain::review::FlagReason;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use server_fn::codec::Json;
use time::OffsetDateTime;

/// One past export as the page lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportItem {
    pub id: i64,
    pub preset_name: Option<String>,
    /// What was exported and where, in one line.
    pub summary: String,
    pub status: ExportStatus,
    pub created_by: Option<String>,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
    pub rows_total: Option<i64>,
    pub rows_done: i64,
    pub location: Option<String>,
    /// Written to an S3 bucket (no download through the app).
    pub to_s3: bool,
    pub bytes: Option<i64>,
    /// From the manifest, once completed.
    pub counts: Option<ExportCounts>,
    pub files: Vec<ExportFile>,
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportCounts {
    pub written: u64,
    pub train: u64,
    pub validation: u64,
    pub duplicates_removed: u64,
    pub dropped: u64,
    pub truncated: u64,
    pub completion_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportFile {
    pub name: String,
    pub rows: Option<u64>,
    pub bytes: u64,
}

/// The URL that streams one file of a completed folder export.
pub fn download_url(export_id: i64, file: &str) -> String {
    format!("/api/exports/{export_id}/files/{file}")
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PresetItem {
    pub id: i64,
    pub name: String,
    pub spec: ExportSpec,
    pub updated_at: OffsetDateTime,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOption {
    pub id: i64,
    pub name: String,
    pub ok_samples: i64,
}

/// What the export form offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportChoices {
    pub runs: Vec<RunOption>,
    pub flags: Vec<FlagReason>,
    /// Folders exports may be written under (DS_EXPORT_ROOTS); relative folders go under the first.
    pub roots: Vec<String>,
}

#[cfg(feature = "ssr")]
pub fn item(record: engine::export::store::ExportRecord) -> ExportItem {
    use engine::export::manifest::Manifest;
    let spec: Option<ExportSpec> = domain::stored::from_stored(record.spec).ok();
    let manifest: Option<Manifest> = record.manifest.and_then(|m| serde_json::from_value(m).ok());
    let (counts, files) = match manifest {
        Some(m) => {
            let c = &m.counts;
            let counts = ExportCounts {
                written: c.written,
                train: c.selection.train,
                validation: c.selection.validation,
                duplicates_removed: c.selection.duplicates_removed,
                dropped: c.dropped_overlong + c.dropped_no_loss,
                truncated: c.truncated,
                completion_tokens: c.selection.completion_tokens,
            };
            let mut files: Vec<ExportFile> = m
                .files
                .iter()
                .map(|f| ExportFile { name: f.name.clone(), rows: Some(f.rows), bytes: f.bytes })
                .collect();
            let data_bytes: u64 = m.files.iter().map(|f| f.bytes).sum();
            let manifest_bytes = record.bytes.map_or(0, |b| (b as u64).saturating_sub(data_bytes));
            files.push(ExportFile {
                name: engine::export::manifest::FILE_NAME.to_string(),
                rows: None,
                bytes: manifest_bytes,
            });
            (Some(counts), files)
        }
        None => (None, Vec::new()),
    };
    ExportItem {
        id: record.id,
        preset_name: record.preset_name,
        summary: spec.as_ref().map(super::form::describe).unwrap_or_default(),
        to_s3: matches!(spec.map(|s| s.destination), Some(domain::export::Destination::S3 { .. })),
        status: record.status,
        created_by: record.created_by,
        created_at: record.created_at,
        finished_at: record.finished_at,
        rows_total: record.rows_total,
        rows_done: record.rows_done,
        location: record.location,
        bytes: record.bytes,
        counts,
        files,
        error: record.error,
    }
}

#[server(endpoint = "exports/list", input = Json)]
pub async fn list_exports() -> Result<Vec<ExportItem>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let records = engine::export::store::list(&ssr::services()?.pool, 50).await?;
    Ok(records.into_iter().map(item).collect())
}

#[server(endpoint = "exports/choices", input = Json)]
pub async fn fetch_export_choices() -> Result<ExportChoices, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let services = ssr::services()?;
    let runs = engine::export::store::run_choices(&services.pool).await?;
    Ok(ExportChoices {
        runs: runs
            .into_iter()
            .map(|r| RunOption { id: r.id, name: r.name, ok_samples: r.ok_samples })
            .collect(),
        flags: engine::review::reasons::list(&services.pool).await?,
        roots: services.export_storage.roots.iter().map(|r| r.display().to_string()).collect(),
    })
}

#[server(endpoint = "exports/presets", input = Json)]
pub async fn list_presets() -> Result<Vec<PresetItem>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let presets = engine::export::store::presets(&ssr::services()?.pool).await?;
    Ok(presets
        .into_iter()
        .map(|p| PresetItem { id: p.id, name: p.name, spec: p.spec, updated_at: p.updated_at })
        .collect())
}

/// Saves `spec` under `name`, replacing a preset of that name; returns its id.
#[server(endpoint = "exports/save_preset", input = Json)]
pub async fn save_preset(name: String, spec: ExportSpec) -> Result<i64, AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    let id =
        engine::export::store::save_preset(&ssr::services()?.pool, &name, &spec, Some(viewer.id)).await?;
    tracing::info!(by = %viewer.username, preset = id, name = %name.trim(), "export preset saved");
    Ok(id)
}

#[server(endpoint = "exports/delete_preset", input = Json)]
pub async fn delete_preset(id: i64) -> Result<(), AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    engine::export::store::delete_preset(&ssr::services()?.pool, id).await?;
    tracing::info!(by = %viewer.username, preset = id, "export preset deleted");
    Ok(())
}

/// What `spec` would export: counts and token totals, before anything is written.
#[server(endpoint = "exports/preview", input = Json)]
pub async fn preview_export(spec: ExportSpec) -> Result<ExportPreview, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let problems = spec.problems();
    if !problems.is_empty() {
        return Err(AppError::Invalid(problems.join("; ")));
    }
    let plan = engine::export::selection::plan(
        &ssr::services()?.pool,
        &spec.selection,
        spec.format.validation_share,
    )
    .await?;
    Ok(plan.preview)
}

/// Starts exporting `spec` in the background; returns the export's id.
#[server(endpoint = "exports/start", input = Json)]
pub async fn start_export(spec: ExportSpec) -> Result<i64, AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    let services = ssr::services()?;
    let id = engine::export::job::start(
        &services.pool,
        services.export_storage.clone(),
        &spec,
        Some(viewer.id),
        None,
    )
    .await?;
    tracing::info!(by = %viewer.username, export = id, "export started");
    Ok(id)
}

/// The one-click path: starts exporting a saved preset as it is now.
#[server(endpoint = "exports/start_preset", input = Json)]
pub async fn start_preset(preset_id: i64) -> Result<i64, AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    let services = ssr::services()?;
    let preset = engine::export::store::preset(&services.pool, preset_id).await?;
    let id = engine::export::job::start(
        &services.pool,
        services.export_storage.clone(),
        &preset.spec,
        Some(viewer.id),
        Some(preset.id),
    )
    .await?;
    tracing::info!(by = %viewer.username, export = id, preset = %preset.name, "export started from a preset");
    Ok(id)
}

/// Asks a running export to stop; it removes what it wrote.
#[server(endpoint = "exports/cancel", input = Json)]
pub async fn cancel_export(id: i64) -> Result<(), AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    if !engine::export::job::cancel(&ssr::services()?.pool, id).await? {
        return Err(AppError::Conflict(format!("export {id} is no longer running; refresh the page")));
    }
    tracing::info!(by = %viewer.username, export = id, "export cancel requested");
    Ok(())
}
