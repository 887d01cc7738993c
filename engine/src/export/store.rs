//! Reading exports and saving presets.

use crate::error::OnConstraint;
use crate::{Error, Result};
use domain::export::{ExportCounts, ExportFile, ExportItem, ExportSpec, ExportStatus};
use domain::stored::{from_stored, to_stored};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use time::OffsetDateTime;

/// One export as the Exports page lists it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExportRecord {
    pub id: i64,
    pub preset_id: Option<i64>,
    pub preset_name: Option<String>,
    pub spec: serde_json::Value,
    pub status: ExportStatus,
    pub created_by: Option<String>,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
    pub rows_total: Option<i64>,
    pub rows_done: i64,
    pub location: Option<String>,
    pub bytes: Option<i64>,
    pub manifest: Option<serde_json::Value>,
    pub error: Option<String>,
}

pub async fn list(pool: &PgPool, limit: i64) -> Result<Vec<ExportRecord>> {
    Ok(sqlx::query_as!(
        ExportRecord,
        r#"SELECT e.id, e.preset_id, p.name AS "preset_name?", e.spec, e.status AS "status: ExportStatus",
                  u.username AS "created_by?", e.created_at, e.finished_at, e.rows_total, e.rows_done,
                  e.location, e.bytes, e.manifest, e.error
           FROM exports e
           LEFT JOIN export_presets p ON p.id = e.preset_id
           LEFT JOIN users u ON u.id = e.created_by
           ORDER BY e.id DESC LIMIT $1"#,
        limit
    )
    .fetch_all(pool)
    .await?)
}

/// The newest `limit` exports as the pages and the API list them.
pub async fn items(pool: &PgPool, limit: i64) -> Result<Vec<ExportItem>> {
    Ok(list(pool, limit).await?.into_iter().map(item).collect())
}

/// Fills in the drafts trained on each export, with their evaluations, in one query.
pub async fn with_trained(pool: &PgPool, items: &mut [ExportItem]) -> Result<()> {
    let ids: Vec<i64> = items.iter().map(|e| e.id).collect();
    let mut trained = crate::acceptance::lineage::trained_on_exports(pool, &ids).await?;
    for e in items {
        e.trained = trained.remove(&e.id).unwrap_or_default();
    }
    Ok(())
}

/// One past export as the pages and the API list it: its spec in one line, progress, and from
/// the manifest its counts and files (the drafts trained on it: `with_trained`).
pub fn item(record: ExportRecord) -> ExportItem {
    use super::manifest::Manifest;
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
                name: super::manifest::FILE_NAME.to_string(),
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
        summary: spec.as_ref().map(ExportSpec::describe).unwrap_or_default(),
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
        trained: Vec::new(),
    }
}

pub async fn get(pool: &PgPool, id: i64) -> Result<ExportRecord> {
    sqlx::query_as!(
        ExportRecord,
        r#"SELECT e.id, e.preset_id, p.name AS "preset_name?", e.spec, e.status AS "status: ExportStatus",
                  u.username AS "created_by?", e.created_at, e.finished_at, e.rows_total, e.rows_done,
                  e.location, e.bytes, e.manifest, e.error
           FROM exports e
           LEFT JOIN export_presets p ON p.id = e.preset_id
           LEFT JOIN users u ON u.id = e.created_by
           WHERE e.id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await?
    .ok_or(Error::NotFound("export"))
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Preset {
    pub id: i64,
    pub name: String,
    pub spec: ExportSpec,
    pub updated_at: OffsetDateTime,
}

pub async fn presets(pool: &PgPool) -> Result<Vec<Preset>> {
    let rows = sqlx::query!("SELECT id, name, spec, updated_at FROM export_presets ORDER BY name")
        .fetch_all(pool)
        .await?;
    rows.into_iter()
        .map(|r| {
            let spec = from_stored(r.spec).map_err(|e| Error::Invalid(format!("preset {}: {e}", r.name)))?;
            Ok(Preset { id: r.id, name: r.name, spec, updated_at: r.updated_at })
        })
        .collect()
}

pub async fn preset(pool: &PgPool, id: i64) -> Result<Preset> {
    let r = sqlx::query!("SELECT id, name, spec, updated_at FROM export_presets WHERE id = $1", id)
        .fetch_optional(pool)
        .await?
        .ok_or(Error::NotFound("preset"))?;
    let spec = from_stored(r.spec).map_err(|e| Error::Invalid(format!("preset {}: {e}", r.name)))?;
    Ok(Preset { id: r.id, name: r.name, spec, updated_at: r.updated_at })
}

/// Saves a preset under `name`, replacing the one of that name.
pub async fn save_preset(pool: &PgPool, name: &str, spec: &ExportSpec, user_id: Option<i64>) -> Result<i64> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::invalid("give the preset a name"));
    }
    let problems = spec.problems();
    if !problems.is_empty() {
        return Err(Error::invalid(problems.join("; ")));
    }
    let spec = to_stored(spec);
    sqlx::query_scalar!(
        "INSERT INTO export_presets (name, spec, created_by) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET spec = EXCLUDED.spec, updated_at = now()
         RETURNING id",
        name,
        spec,
        user_id
    )
    .fetch_one(pool)
    .await
    .on_constraint("export_presets_name_key", || format!("a preset named {name} exists"))
}

pub async fn delete_preset(pool: &PgPool, id: i64) -> Result<()> {
    let done = sqlx::query!("DELETE FROM export_presets WHERE id = $1", id).execute(pool).await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound("preset"));
    }
    Ok(())
}

/// A run that can be exported, with how many `ok` samples it holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunChoice {
    pub id: i64,
    pub name: String,
    pub ok_samples: i64,
}

pub async fn run_choices(pool: &PgPool) -> Result<Vec<RunChoice>> {
    Ok(sqlx::query_as!(
        RunChoice,
        r#"SELECT r.id, r.name,
                  (SELECT count(*) FROM samples s WHERE s.run_id = r.id AND s.state = 'ok') AS "ok_samples!"
           FROM runs r ORDER BY r.id DESC LIMIT 200"#
    )
    .fetch_all(pool)
    .await?)
}
