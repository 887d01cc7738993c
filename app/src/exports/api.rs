//! Server functions of the Exports page (namespace `exports/`, engineers and admins). Thin:
//! check the role, call `engine::export`.

use crate::AppError;
pub use domain::export::{ExportChoices, ExportCounts, ExportFile, ExportItem, PresetItem, RunOption};
use domain::export::{ExportPreview, ExportSpec};
use leptos::prelude::*;
use server_fn::codec::Json;

/// The URL that streams one file of a completed folder export.
pub fn download_url(export_id: i64, file: &str) -> String {
    format!("/api/exports/{export_id}/files/{file}")
}

#[server(endpoint = "exports/list", input = Json)]
pub async fn list_exports() -> Result<Vec<ExportItem>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    // Only this page shows the drafts trained on each export (the overview does not pool them).
    let pool = ssr::services()?.pool;
    let mut items = engine::export::store::items(&pool, 50).await?;
    engine::export::store::with_trained(&pool, &mut items).await?;
    Ok(items)
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
