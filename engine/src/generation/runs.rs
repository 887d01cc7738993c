//! Creating runs (their prompts, settings and draft checked first) and retry passes; the
//! status transitions themselves (pause, resume, cancel, complete) are `crate::runs`.

pub use crate::runs::{control, Control};
use crate::samples::{self, create::Rows, query, requeue::Why};
use crate::vllm::{ChatCall, ChatMessage, ChatRequest, SpecReport, StreamOptions};
use crate::{acceptance, endpoints, Error, Result};
use domain::acceptance::DraftRef;
use domain::export::ExportSplit;
use domain::generation::{Concurrency, RunSettings, RunStatus, SampleState, Selection};
use domain::sample_query::SampleQuery;
use domain::stored::{from_stored, to_stored};
use sqlx::{PgPool, Postgres, QueryBuilder};
use std::time::Duration;

pub struct NewRun {
    pub name: String,
    pub dataset_id: i64,
    pub selection: Selection,
    pub settings: RunSettings,
    /// The draft this run evaluates (its endpoints serve the target with it); `None` for a
    /// generation run.
    pub draft: Option<DraftRef>,
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
    if let Some(draft) = &new.draft {
        if draft.name.trim().is_empty() {
            problems.push("name the draft this run evaluates".into());
        }
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
    let draft_name = new.draft.as_ref().map(|d| d.name.trim());
    let draft_revision = new.draft.as_ref().map(|d| d.revision.trim()).filter(|r| !r.is_empty());
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

/// Whether the run or export a selection draws from can give this dataset's prompts.
async fn check_source(pool: &PgPool, dataset_id: i64, selection: &Selection) -> Result<Vec<String>> {
    Ok(match selection {
        Selection::Run { run_id } => {
            let source = sqlx::query!(
                r#"SELECT r.name, r.dataset_id, d.name AS dataset FROM runs r JOIN datasets d ON d.id = r.dataset_id
                   WHERE r.id = $1"#,
                run_id
            )
            .fetch_optional(pool)
            .await?;
            match source {
                None => vec![format!("run {run_id} does not exist")],
                Some(s) if s.dataset_id != dataset_id => vec![format!(
                    "run `{}` sent prompts of the dataset `{}`: choose that dataset to send them again",
                    s.name, s.dataset
                )],
                Some(_) => vec![],
            }
        }
        Selection::Export { export_id, split } => {
            check_export_source(pool, dataset_id, *export_id, *split).await?
        }
        Selection::Weighted { evaluation_run_id, .. } => {
            let measured = sqlx::query!(
                r#"SELECT r.name, EXISTS (SELECT 1 FROM samples s WHERE s.run_id = r.id AND s.spec_steps IS NOT NULL)
                          AS "measured!"
                   FROM runs r WHERE r.id = $1"#,
                evaluation_run_id
            )
            .fetch_optional(pool)
            .await?;
            match measured {
                None => vec![format!("run {evaluation_run_id} does not exist")],
                Some(r) if !r.measured => vec![format!(
                    "run `{}` has no acceptance figures to weigh categories by: evaluate a draft on a server that \
                     reports them (docs/acceptance.md) first",
                    r.name
                )],
                Some(_) => vec![],
            }
        }
        Selection::All | Selection::Categories { .. } | Selection::Sample { .. } => vec![],
    })
}

async fn check_export_source(
    pool: &PgPool,
    dataset_id: i64,
    export_id: i64,
    split: ExportSplit,
) -> Result<Vec<String>> {
    let Some(status) =
        sqlx::query_scalar!("SELECT status::text AS \"status!\" FROM exports WHERE id = $1", export_id)
            .fetch_optional(pool)
            .await?
    else {
        return Ok(vec![format!("export {export_id} does not exist")]);
    };
    if status != "completed" {
        return Ok(vec![format!(
            "export {export_id} is {status}; only a completed export's prompts can be sent"
        )]);
    }
    let datasets = sqlx::query!(
        r#"SELECT d.id, d.name, count(*) AS "rows!"
           FROM export_samples e JOIN samples s ON s.id = e.sample_id
           JOIN dataset_rows r ON r.id = s.row_id JOIN datasets d ON d.id = r.dataset_id
           WHERE e.export_id = $1 AND e.split = $2
           GROUP BY d.id, d.name ORDER BY d.name"#,
        export_id,
        split as ExportSplit
    )
    .fetch_all(pool)
    .await?;
    Ok(match datasets.as_slice() {
        [] => vec![format!(
            "export {export_id} wrote no {} rows (a validation split needs a validation share above 0; \
             exports written before this release did not record their rows: export again)",
            split.as_str()
        )],
        [only] if only.id == dataset_id => vec![],
        [only] => vec![format!(
            "the {} prompts of export {export_id} come from the dataset `{}`: choose that dataset",
            split.as_str(),
            only.name
        )],
        many => vec![format!(
            "the {} prompts of export {export_id} come from {} datasets ({}); a run draws from one: \
             export each dataset's runs on their own",
            split.as_str(),
            many.len(),
            many.iter().map(|d| format!("`{}`: {} rows", d.name, d.rows)).collect::<Vec<_>>().join(", ")
        )],
    })
}

/// Whether an endpoint can serve an evaluation: it runs a draft (its `/metrics` has
/// `spec_decode` counters) and reports each request's acceptance (one tiny request tells).
async fn check_draft(
    pool: &PgPool,
    http: &reqwest::Client,
    id: i64,
    settings: &RunSettings,
) -> Result<Vec<String>> {
    let target = endpoints::target(pool, id).await?;
    let client = target.client(http.clone())?;
    if let Ok(Some(load)) = client.load().await {
        if load.spec.is_none() {
            return Ok(vec![format!(
                "endpoint `{}` runs no draft (its /metrics has no spec_decode counters): serve the target with \
                 --speculative-config naming the draft to evaluate",
                target.name
            )]);
        }
    }
    let probe = ChatRequest {
        model: settings.model.clone(),
        messages: vec![ChatMessage::text("user", "Count from one to ten.")],
        tools: None,
        tool_choice: None,
        parallel_tool_calls: None,
        max_tokens: 16,
        temperature: Some(0.0),
        top_p: None,
        seed: None,
        chat_template_kwargs: None,
        stream_interval: None,
        stream: true,
        stream_options: StreamOptions { include_usage: true },
        return_token_ids: false,
    };
    let call = ChatCall { idle_timeout: Duration::from_secs(60), deadline: Some(Duration::from_secs(120)) };
    Ok(match client.chat(&probe, call).await {
        Ok(completion) if completion.spec_decode == SpecReport::NotReported => vec![format!(
            "endpoint `{}` does not report each request's acceptance: start vLLM (0.32 or later) with \
             --per-request-spec-decode-metrics summary",
            target.name
        )],
        Ok(_) => vec![],
        Err(e) => vec![format!(
            "endpoint `{}` failed a test request ({}); check it on the Endpoints page",
            target.name, e.message
        )],
    })
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
    let selected = SampleQuery { states, error_contains: pass.error_contains, ..SampleQuery::run(run_id) };
    if let Some(problem) = selected.problems() {
        return Err(Error::Invalid(problem));
    }
    // Served by samples_run_outcome_idx (run_id, state, id); locked until the pass commits.
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new("SELECT s.id");
    query::push_from(&mut qb, &selected);
    qb.push(" ORDER BY s.id FOR UPDATE");
    let ids: Vec<i64> = qb.build_query_scalar().fetch_all(&mut *tx).await?;
    // Their text is about to change: their decisions are dropped and kept in the audit log.
    let requeued = samples::requeue::requeue(&mut tx, &ids, Why::RetryPass, None).await?;
    if requeued == 0 {
        return Err(Error::invalid("no sample matches this retry pass"));
    }
    crate::runs::restart(&mut tx, run_id, to_stored(&settings)).await?;
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

/// The runs and finished exports whose prompts a new run can send again (the newest first).
pub async fn source_choices(
    pool: &PgPool,
) -> Result<(Vec<domain::run_form::RunChoice>, Vec<domain::run_form::ExportChoice>)> {
    let runs = sqlx::query!(
        "SELECT id, name, dataset_id, sample_count, draft_name, draft_revision FROM runs ORDER BY id DESC LIMIT 200"
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| domain::run_form::RunChoice {
        id: r.id,
        name: r.name,
        dataset_id: r.dataset_id,
        samples: i64::from(r.sample_count),
        draft: r.draft_name.map(|name| DraftRef { name, revision: r.draft_revision.unwrap_or_default() }),
    })
    .collect();
    let exports: Vec<i64> =
        sqlx::query_scalar!("SELECT id FROM exports WHERE status = 'completed' ORDER BY id DESC LIMIT 50")
            .fetch_all(pool)
            .await?;
    let splits = sqlx::query!(
        r#"SELECT x.export_id, x.split AS "split: ExportSplit", r.dataset_id, count(*) AS "rows!"
           FROM export_samples x JOIN samples s ON s.id = x.sample_id JOIN dataset_rows r ON r.id = s.row_id
           WHERE x.export_id = ANY($1)
           GROUP BY 1, 2, 3 ORDER BY 1 DESC, 2, 3"#,
        &exports
    )
    .fetch_all(pool)
    .await?;
    let exports = exports
        .into_iter()
        .map(|id| domain::run_form::ExportChoice {
            id,
            splits: splits
                .iter()
                .filter(|s| s.export_id == id)
                .map(|s| (s.split, s.dataset_id, s.rows))
                .collect(),
        })
        .filter(|e| !e.splits.is_empty())
        .collect();
    Ok((runs, exports))
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
