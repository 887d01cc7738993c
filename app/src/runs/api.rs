//! Server functions of the Runs pages. Thin: check the role, call the engine.

use crate::AppError;
use domain::{
    dashboard::{BiasReport, ChartPoint, RunListItem, RunSnapshot},
    generation::{RunStatus, SampleState},
    run_form::{DatasetChoice, ExportChoice, RunChoice, RunForm},
    EndpointSummary,
};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use server_fn::codec::Json;

/// What the new-run form offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormChoices {
    pub datasets: Vec<DatasetChoice>,
    pub endpoints: Vec<EndpointSummary>,
    /// Earlier runs and finished exports whose prompts can be sent again.
    pub runs: Vec<RunChoice>,
    pub exports: Vec<ExportChoice>,
}

#[server(endpoint = "runs/list")]
pub async fn list_runs() -> Result<Vec<RunListItem>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::dashboard::list::list(&ssr::services()?.pool, 200).await?)
}

#[server(endpoint = "runs/choices")]
pub async fn get_form_choices() -> Result<FormChoices, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let pool = ssr::services()?.pool;
    let (runs, exports) = engine::runs::source_choices(&pool).await?;
    Ok(FormChoices {
        datasets: engine::runs::dataset_choices(&pool).await?,
        endpoints: engine::endpoints::list(&pool).await?,
        runs,
        exports,
    })
}

#[server(endpoint = "runs/create", input = Json)]
pub async fn create_run(form: RunForm) -> Result<i64, AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    let services = ssr::services()?;
    let mut form = form;
    engine::runs::fill_source_dataset(&services.pool, &mut form).await?;
    let parsed = form.parse().map_err(|problems| AppError::Invalid(problems.join("; ")))?;
    let id = engine::runs::create(
        &services.pool,
        &services.http,
        engine::runs::NewRun {
            name: parsed.name,
            dataset_id: parsed.dataset_id,
            selection: parsed.selection,
            settings: parsed.settings,
            draft: parsed.draft,
            trained_on: parsed.trained_on,
        },
        viewer.id,
    )
    .await?;
    tracing::info!(by = %viewer.username, run.id = id, "run started");
    Ok(id)
}

#[server(endpoint = "runs/snapshot")]
pub async fn get_run_snapshot(id: i64) -> Result<RunSnapshot, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let services = ssr::services()?;
    Ok(engine::dashboard::snapshot::full(&services.pool, id, services.live.policy()).await?)
}

#[server(endpoint = "runs/history")]
pub async fn run_history(id: i64) -> Result<Vec<ChartPoint>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::dashboard::series::history(&ssr::services()?.pool, id).await?)
}

#[server(endpoint = "runs/bias")]
pub async fn run_bias(id: i64) -> Result<BiasReport, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::dashboard::bias::report(&ssr::services()?.pool, id).await?)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunAction {
    Pause,
    Resume,
    Cancel,
}

#[server(endpoint = "runs/control")]
pub async fn control_run(id: i64, action: RunAction) -> Result<RunStatus, AppError> {
    use crate::ssr;
    use engine::runs::Control;
    let viewer = ssr::require(domain::Role::Engineer)?;
    let control = match action {
        RunAction::Pause => Control::Pause,
        RunAction::Resume => Control::Resume,
        RunAction::Cancel => Control::Cancel,
    };
    let status = engine::runs::control(&ssr::services()?.pool, id, control).await?;
    tracing::info!(by = %viewer.username, run.id = id, ?action, "run control");
    Ok(status)
}

/// A retry pass as the form sends it: empty fields keep the run's settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RetryForm {
    pub states: Vec<SampleState>,
    pub error_contains: String,
    pub idle_timeout_secs: String,
    pub fixed_concurrency: String,
    pub max_attempts: String,
    pub max_tokens: String,
}

#[server(endpoint = "runs/retry", input = Json)]
pub async fn retry_run(id: i64, form: RetryForm) -> Result<u64, AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    let number = |raw: &str, what: &str| -> Result<Option<u32>, AppError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Ok(None);
        }
        raw.parse()
            .map(Some)
            .map_err(|_| AppError::Invalid(format!("{what} must be a whole number, not `{raw}`")))
    };
    let pass = engine::runs::RetryPass {
        states: form.states,
        error_contains: Some(form.error_contains),
        idle_timeout_secs: number(&form.idle_timeout_secs, "the idle timeout")?,
        deadline_secs: None,
        concurrency: number(&form.fixed_concurrency, "the concurrency")?
            .map(|limit| domain::generation::Concurrency::Fixed { limit }),
        max_attempts: number(&form.max_attempts, "attempts")?,
        max_tokens: number(&form.max_tokens, "max_tokens")?,
    };
    let services = ssr::services()?;
    let requeued = engine::runs::retry(&services.pool, &services.http, id, pass).await?;
    tracing::info!(by = %viewer.username, run.id = id, requeued, "retry pass");
    Ok(requeued)
}
