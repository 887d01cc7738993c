//! Creating runs and changing their course: pause, resume, cancel, and retry passes.

use crate::samples::{self, requeue::Why};
use crate::{endpoints, Error, Result};
use domain::generation::{Concurrency, RunSettings, RunStatus, SampleState, Selection, Thinking};
use domain::stored::{from_stored, to_stored};
use sqlx::PgPool;

pub struct NewRun {
    pub name: String,
    pub dataset_id: i64,
    pub selection: Selection,
    pub settings: RunSettings,
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
        Selection::Sample { count: 0, .. } => problems.push("sample at least one row".into()),
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
    for id in &new.settings.endpoint_ids {
        problems.extend(check_endpoint(pool, http, *id, &new.settings).await?);
    }
    if !problems.is_empty() {
        return Err(Error::Invalid(problems.join("; ")));
    }

    let settings_json = to_stored(&new.settings);
    let selection_json = serde_json::to_value(&new.selection).expect("selection serialize");
    let mut tx = pool.begin().await?;
    let run_id = sqlx::query_scalar!(
        "INSERT INTO runs (name, dataset_id, settings, selection, created_by) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        new.name.trim(),
        new.dataset_id,
        settings_json,
        selection_json,
        by
    )
    .fetch_one(&mut *tx)
    .await?;
    let (initial, reason) = match new.settings.concurrency {
        Concurrency::Fixed { limit } => (limit, "fixed by the run's settings".to_string()),
        Concurrency::Adaptive { min, max } => (
            super::endpoint::ADAPTIVE_START.clamp(min, max),
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
    let (thinking_mode, on_ratio) = match new.settings.thinking {
        Thinking::On => ("on", 1.0),
        Thinking::Off => ("off", 0.0),
        Thinking::Mix { on_ratio } => ("mix", on_ratio),
        Thinking::ServerDefault => ("server", 0.0),
    };
    let (categories, sample_count, sample_seed) = match &new.selection {
        Selection::All => (None, None, 0),
        Selection::Categories { categories } => (Some(categories.clone()), None, 0),
        Selection::Sample { count, seed } => (None, Some(*count as i64), *seed as i64),
    };
    // The thinking mix is drawn per row from the run's seed, so the same settings give the
    // same mix; sampling orders rows by a seeded hash, so the same seed draws the same rows.
    let mix_seed = new.settings.seed.unwrap_or(run_id);
    let inserted = sqlx::query!(
        "INSERT INTO samples (run_id, row_id, thinking)
         SELECT $1, r.id,
                CASE $3 WHEN 'on' THEN true WHEN 'off' THEN false
                        WHEN 'mix' THEN (hashint8(r.id # $4) & 1048575) < $5::float8 * 1048576
                        ELSE NULL END
         FROM dataset_rows r
         WHERE r.dataset_id = $2 AND ($6::text[] IS NULL OR r.category = ANY($6))
         ORDER BY CASE WHEN $7::bigint IS NULL THEN r.id ELSE hashint8(r.id # $8) END, r.id
         LIMIT $7",
        run_id,
        new.dataset_id,
        thinking_mode,
        mix_seed,
        on_ratio,
        categories.as_deref(),
        sample_count,
        sample_seed,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 0 {
        return Err(Error::invalid("the selection matches no rows of the dataset; widen it"));
    }
    sqlx::query!("UPDATE runs SET sample_count = $2 WHERE id = $1", run_id, inserted as i32)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!(run.id = run_id, samples = inserted, "run created");
    Ok(run_id)
}

/// Asks the endpoint whether it can serve these settings.
async fn check_endpoint(
    pool: &PgPool,
    http: &reqwest::Client,
    id: i64,
    settings: &RunSettings,
) -> Result<Vec<String>> {
    let target = match endpoints::target(pool, id).await {
        Ok(target) => target,
        Err(Error::NotFound(_)) => return Ok(vec![format!("endpoint {id} does not exist")]),
        Err(e) => return Err(e),
    };
    let models = match target.client(http.clone())?.models().await {
        Ok(models) => models,
        Err(e) => {
            return Ok(vec![format!(
                "endpoint `{}` does not answer ({e}); start it or test it on the Endpoints page",
                target.name
            )])
        }
    };
    let Some(model) = models.iter().find(|m| m.id == settings.model) else {
        let served: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
        return Ok(vec![format!(
            "endpoint `{}` does not serve `{}`; it serves {}",
            target.name,
            settings.model,
            served.join(", ")
        )]);
    };
    Ok(match model.max_model_len {
        Some(max) if settings.max_tokens >= max => vec![format!(
            "max_tokens {} leaves no room for the prompt: `{}` on `{}` has max_model_len {max}",
            settings.max_tokens, model.id, target.name
        )],
        _ => vec![],
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Pause,
    Resume,
    Cancel,
}

/// Pauses (no new tries; those in flight finish), resumes, or cancels (tries in flight stop).
pub async fn control(pool: &PgPool, run_id: i64, action: Control) -> Result<RunStatus> {
    let current =
        sqlx::query_scalar!(r#"SELECT status AS "status: RunStatus" FROM runs WHERE id = $1"#, run_id)
            .fetch_optional(pool)
            .await?
            .ok_or(Error::NotFound("run"))?;
    let next = match (action, current) {
        (Control::Pause, RunStatus::Running) => RunStatus::Paused,
        (Control::Resume, RunStatus::Paused) => RunStatus::Running,
        (Control::Cancel, RunStatus::Running | RunStatus::Paused) => RunStatus::Cancelled,
        (action, status) => {
            return Err(Error::conflict(format!(
                "the run is {}; it cannot be {}",
                status.as_str(),
                match action {
                    Control::Pause => "paused",
                    Control::Resume => "resumed",
                    Control::Cancel => "cancelled",
                }
            )))
        }
    };
    let updated = sqlx::query!(
        "UPDATE runs SET status = $3, finished_at = CASE WHEN $3 = 'cancelled'::run_status THEN now() ELSE NULL END
         WHERE id = $1 AND status = $2",
        run_id,
        current as RunStatus,
        next as RunStatus
    )
    .execute(pool)
    .await?;
    if updated.rows_affected() == 0 {
        return Err(Error::conflict("the run changed at the same moment; reload and try again"));
    }
    Ok(next)
}

/// A second pass over a run's failures, with changed settings.
#[derive(Clone, Debug, Default)]
pub struct RetryPass {
    /// Which outcomes to re-queue; failed and timed_out when empty.
    pub states: Vec<SampleState>,
    /// Only samples whose error contains this text.
    pub error_contains: Option<String>,
    pub idle_timeout_secs: Option<u32>,
    pub deadline_secs: Option<Option<u32>>,
    pub concurrency: Option<Concurrency>,
    pub max_attempts: Option<u32>,
    pub max_tokens: Option<u32>,
}

/// Puts the selected samples back in the queue with a fresh attempt budget, keeps every earlier
/// try in their history, drops their review decisions (logged, with the text they applied to), applies the changed settings and sets the run running. Returns how
/// many samples were re-queued. A higher `max_tokens` is checked against the endpoints'
/// `max_model_len`, as at run creation.
pub async fn retry(pool: &PgPool, http: &reqwest::Client, run_id: i64, pass: RetryPass) -> Result<u64> {
    let states =
        if pass.states.is_empty() { vec![SampleState::Failed, SampleState::TimedOut] } else { pass.states };
    if let Some(state) = states.iter().find(|s| !s.is_terminal()) {
        return Err(Error::invalid(format!("only finished samples can be retried, not {state} ones")));
    }
    if let Some(max_tokens) = pass.max_tokens {
        // Asked before the run is locked: the endpoints may take a while to answer.
        let stored = sqlx::query_scalar!("SELECT settings FROM runs WHERE id = $1", run_id)
            .fetch_optional(pool)
            .await?
            .ok_or(Error::NotFound("run"))?;
        let mut settings: RunSettings = from_stored(stored).map_err(Error::Invalid)?;
        // A lower value fits wherever the run's own did.
        if max_tokens > settings.max_tokens {
            settings.max_tokens = max_tokens;
            let mut problems = Vec::new();
            for id in &settings.endpoint_ids {
                problems.extend(check_endpoint(pool, http, *id, &settings).await?);
            }
            if !problems.is_empty() {
                return Err(Error::Invalid(problems.join("; ")));
            }
        }
    }
    let mut tx = pool.begin().await?;
    let run = sqlx::query!(
        r#"SELECT status AS "status: RunStatus", settings FROM runs WHERE id = $1 FOR UPDATE"#,
        run_id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("run"))?;
    if run.status == RunStatus::Cancelled {
        return Err(Error::conflict("the run was cancelled; start a new run instead"));
    }
    let mut settings: RunSettings = from_stored(run.settings).map_err(Error::Invalid)?;
    if let Some(v) = pass.idle_timeout_secs {
        settings.idle_timeout_secs = v;
    }
    if let Some(v) = pass.deadline_secs {
        settings.deadline_secs = v;
    }
    if let Some(v) = pass.concurrency {
        settings.concurrency = v;
    }
    if let Some(v) = pass.max_attempts {
        settings.max_attempts = v;
    }
    if let Some(v) = pass.max_tokens {
        settings.max_tokens = v;
    }
    let problems = settings.problems();
    if !problems.is_empty() {
        return Err(Error::Invalid(problems.join("; ")));
    }
    let filter = pass.error_contains.filter(|f| !f.trim().is_empty());
    // Served by samples_run_outcome_idx (run_id, state, id); locked until the pass commits.
    let ids = sqlx::query_scalar!(
        "SELECT id FROM samples
         WHERE run_id = $1 AND state = ANY($2) AND ($3::text IS NULL OR error ILIKE '%' || $3 || '%')
         ORDER BY id FOR UPDATE",
        run_id,
        &states as &[SampleState],
        filter
    )
    .fetch_all(&mut *tx)
    .await?;
    // Their text is about to change: their decisions are dropped and kept in the audit log.
    let requeued = samples::requeue::requeue(&mut tx, &ids, Why::RetryPass, None).await?;
    if requeued == 0 {
        return Err(Error::invalid("no sample matches this retry pass"));
    }
    sqlx::query!(
        "UPDATE runs SET settings = $2, status = 'running', finished_at = NULL WHERE id = $1",
        run_id,
        to_stored(&settings)
    )
    .execute(&mut *tx)
    .await?;
    if let Concurrency::Fixed { limit } = settings.concurrency {
        sqlx::query!(
            "UPDATE run_endpoints SET concurrency_limit = $2, limit_reason = 'fixed by the retry pass', limit_changed_at = now()
             WHERE run_id = $1",
            run_id,
            limit as i32
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    tracing::info!(run.id = run_id, requeued, "retry pass queued");
    Ok(requeued)
}

/// The datasets a new run can draw from (imports that finished), with their categories.
pub async fn dataset_choices(pool: &PgPool) -> Result<Vec<domain::run_form::DatasetChoice>> {
    let datasets = sqlx::query!(
        "SELECT id, name, rows_imported FROM datasets WHERE status = 'ready' ORDER BY created_at DESC, id DESC"
    )
    .fetch_all(pool)
    .await?;
    let mut choices = Vec::with_capacity(datasets.len());
    for d in datasets {
        let categories = sqlx::query!(
            r#"SELECT category AS "category!", count(*) AS "n!" FROM dataset_rows
               WHERE dataset_id = $1 AND category IS NOT NULL GROUP BY category ORDER BY 2 DESC, 1 LIMIT 200"#,
            d.id
        )
        .fetch_all(pool)
        .await?;
        choices.push(domain::run_form::DatasetChoice {
            id: d.id,
            name: d.name,
            rows: d.rows_imported,
            categories: categories.into_iter().map(|c| (c.category, c.n)).collect(),
        });
    }
    Ok(choices)
}
