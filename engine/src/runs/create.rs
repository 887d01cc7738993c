//! A new run: its settings, prompts and draft checked first (`super::checks`), then the run,
//! its endpoints' starting limits and one pending sample per selected row, in one transaction.

use super::checks::{check_draft, check_endpoint, check_source, check_tools};
use crate::samples::{self, create::Rows};
use crate::{acceptance, Error, Result};
use domain::acceptance::DraftRef;
use domain::export::ExportSplit;
use domain::generation::{Concurrency, RunSettings, Selection};
use domain::lineage::NewDraftRevision;
use domain::stored::to_stored;
use sqlx::PgPool;

pub struct NewRun {
    pub name: String,
    pub dataset_id: i64,
    pub selection: Selection,
    pub settings: RunSettings,
    /// The draft this run evaluates (its endpoints serve the target with it); `None` for a
    /// generation run.
    pub draft: Option<DraftRef>,
    /// The export the evaluated draft revision was trained on, recorded in its lineage
    /// (`acceptance::lineage`); only with a draft.
    pub trained_on: Option<i64>,
}

/// Validates the settings against the endpoints themselves, then creates the run with one
/// pending sample per selected row. Refusals say what to change.
pub async fn create(pool: &PgPool, http: &reqwest::Client, new: NewRun, by: i64) -> Result<i64> {
    let mut problems = new.settings.problems();
    if new.name.trim().is_empty() {
        problems.insert(0, "give the run a name".to_string());
    }
    match &new.selection {
        Selection::Categories { categories } if categories.is_empty() => {
            problems.push("choose at least one category, or select all rows".into())
        }
        Selection::Sample { count: 0, .. } | Selection::Weighted { count: 0, .. } => {
            problems.push("sample at least one row".into())
        }
        _ => {}
    }
    match (&new.draft, new.trained_on) {
        (Some(draft), _) if draft.name.trim().is_empty() => {
            problems.push("name the draft this run evaluates".into())
        }
        (None, Some(export)) => {
            problems.push(format!("name the draft trained on export {export} that this run evaluates"))
        }
        _ => {}
    }
    let dataset =
        sqlx::query!("SELECT name, status::text AS \"status!\" FROM datasets WHERE id = $1", new.dataset_id)
            .fetch_optional(pool)
            .await?;
    match dataset {
        None => problems.push("the dataset does not exist".into()),
        Some(d) if d.status != "ready" => {
            problems.push(format!("the dataset `{}` is {}; wait until its import is ready", d.name, d.status))
        }
        Some(_) => {}
    }
    problems.extend(check_source(pool, new.dataset_id, &new.selection).await?);
    for id in &new.settings.endpoint_ids {
        let endpoint_problems = check_endpoint(pool, http, *id, &new.settings).await?;
        if endpoint_problems.is_empty() && new.draft.is_some() {
            problems.extend(check_draft(pool, http, *id, &new.settings).await?);
        }
        if endpoint_problems.is_empty() {
            problems.extend(check_tools(pool, http, *id, new.dataset_id, &new.settings).await?);
        }
        problems.extend(endpoint_problems);
    }
    if !problems.is_empty() {
        return Err(Error::Invalid(problems.join("; ")));
    }
    let quotas = match &new.selection {
        Selection::Weighted { evaluation_run_id, count, .. } => {
            acceptance::quota::weighted(pool, new.dataset_id, *evaluation_run_id, *count).await?
        }
        _ => Vec::new(),
    };

    let settings_json = to_stored(&new.settings);
    let selection_json = serde_json::to_value(&new.selection).expect("selection serialize");
    let mut tx = pool.begin().await?;
    if let Some(draft) = &new.draft {
        let revision = NewDraftRevision {
            name: draft.name.clone(),
            revision: draft.revision.clone(),
            trained_on: new.trained_on,
        };
        acceptance::lineage::register(&mut tx, &revision, Some(by)).await?;
    }
    let draft_name = new.draft.as_ref().map(|d| d.name.trim());
    let draft_revision = new.draft.as_ref().map(|d| d.revision.trim());
    let run_id = sqlx::query_scalar!(
        "INSERT INTO runs (name, dataset_id, settings, selection, created_by, draft_name, draft_revision)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        new.name.trim(),
        new.dataset_id,
        settings_json,
        selection_json,
        by,
        draft_name,
        draft_revision
    )
    .fetch_one(&mut *tx)
    .await?;
    let (initial, reason) = match new.settings.concurrency {
        Concurrency::Fixed { limit } => (limit, "fixed by the run's settings".to_string()),
        Concurrency::Adaptive { min, max } => (
            crate::generation::ADAPTIVE_START.clamp(min, max),
            "starting value; adapts to the server's load".to_string(),
        ),
    };
    for endpoint_id in &new.settings.endpoint_ids {
        sqlx::query!(
            "INSERT INTO run_endpoints (run_id, endpoint_id, concurrency_limit, limit_reason) VALUES ($1, $2, $3, $4)",
            run_id,
            endpoint_id,
            initial as i32,
            reason
        )
        .execute(&mut *tx)
        .await?;
    }
    let quotas: Vec<(Option<String>, u64)> = quotas.into_iter().map(|q| (q.category, q.quota)).collect();
    let rows = match &new.selection {
        Selection::All => Rows::Dataset { categories: None, sample: None },
        Selection::Categories { categories } => Rows::Dataset { categories: Some(categories), sample: None },
        Selection::Sample { count, seed } => {
            Rows::Dataset { categories: None, sample: Some((*count, *seed)) }
        }
        Selection::Run { run_id } => Rows::Run(*run_id),
        Selection::Export { export_id, split } => Rows::Export(*export_id, *split),
        Selection::Weighted { seed, .. } => Rows::Quotas { quotas: &quotas, seed: *seed },
    };
    // The thinking mix is drawn per row from the run's seed, so the same settings give the
    // same mix.
    let mix_seed = new.settings.seed.unwrap_or(run_id);
    let inserted =
        samples::create::for_run(&mut tx, run_id, new.dataset_id, rows, &new.settings.thinking, mix_seed)
            .await?;
    if inserted == 0 {
        return Err(Error::invalid("the selection matches no rows of the dataset; widen it"));
    }
    sqlx::query!("UPDATE runs SET sample_count = $2 WHERE id = $1", run_id, inserted as i32)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!(run.id = run_id, samples = inserted, draft = ?new.draft, "run created");
    Ok(run_id)
}

/// A form that sends an earlier run's or an export's prompts needs no dataset: it is the
/// source's (an export's split only when all its rows are of one dataset). Fills it in when the
/// form left it out; a given one is checked at creation.
pub async fn fill_source_dataset(pool: &PgPool, form: &mut domain::run_form::RunForm) -> Result<()> {
    if form.dataset_id.is_some() {
        return Ok(());
    }
    form.dataset_id = match (form.selection.as_str(), form.source_run_id, form.source_export_id) {
        ("run", Some(run), _) => {
            sqlx::query_scalar!("SELECT dataset_id FROM runs WHERE id = $1", run).fetch_optional(pool).await?
        }
        ("export", _, Some(export)) => {
            let split =
                if form.source_split == "train" { ExportSplit::Train } else { ExportSplit::Validation };
            let datasets = sqlx::query_scalar!(
                r#"SELECT DISTINCT r.dataset_id FROM export_samples e JOIN samples s ON s.id = e.sample_id
                   JOIN dataset_rows r ON r.id = s.row_id WHERE e.export_id = $1 AND e.split = $2 LIMIT 2"#,
                export,
                split as ExportSplit
            )
            .fetch_all(pool)
            .await?;
            match datasets.as_slice() {
                [only] => Some(*only),
                _ => None,
            }
        }
        _ => None,
    };
    Ok(())
}
