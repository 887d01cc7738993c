//! What a run is checked against before it starts: the run or export its prompts come from, and
//! each endpoint (does it answer, serve the model, fit max_tokens, run the draft an evaluation
//! needs, let the model call the rows' tools). Each check returns what to change, in words,
//! rather than failing on the first.

use crate::vllm::{ChatCall, ChatMessage, ChatRequest, SpanMarkers, SpecReport, StreamOptions};
use crate::{endpoints, Error, Result};
use domain::export::ExportSplit;
use domain::generation::{RunSettings, Selection, ToolChoice};
use sqlx::PgPool;
use std::time::Duration;

/// Whether the run or export a selection draws from can give this dataset's prompts.
pub(super) async fn check_source(
    pool: &PgPool,
    dataset_id: i64,
    selection: &Selection,
) -> Result<Vec<String>> {
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

/// How long a check's request may take.
const PROBE_CALL: ChatCall = ChatCall {
    idle_timeout: Duration::from_secs(60),
    deadline: Some(Duration::from_secs(120)),
    markers: SpanMarkers { reasoning_end: None, call_start: None },
};

/// A short request a check sends to learn what an endpoint does with the run's model.
fn probe(settings: &RunSettings, question: &str, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: settings.model.clone(),
        messages: vec![ChatMessage::text("user", question)],
        tools: None,
        tool_choice: None,
        parallel_tool_calls: None,
        max_tokens,
        temperature: Some(0.0),
        top_p: None,
        seed: None,
        chat_template_kwargs: None,
        stream_interval: None,
        stream: true,
        stream_options: StreamOptions { include_usage: true },
        return_token_ids: false,
    }
}

/// Whether an endpoint can serve an evaluation: it runs a draft (its `/metrics` has
/// `spec_decode` counters) and reports each request's acceptance (one tiny request tells).
pub(super) async fn check_draft(
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
    let probe = probe(settings, "Count from one to ten.", 16);
    Ok(match client.chat(&probe, PROBE_CALL).await {
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
pub(super) async fn check_endpoint(
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

/// Whether an endpoint can let the model decide to call a tool (`tool_choice: auto`) on the
/// rows of this dataset that offer tools: vLLM refuses every such request with a 400 unless
/// it runs a tool parser, which would fail each of those samples at once. One tiny request
/// with a row's tools tells, before the run starts.
pub(super) async fn check_tools(
    pool: &PgPool,
    http: &reqwest::Client,
    id: i64,
    dataset_id: i64,
    settings: &RunSettings,
) -> Result<Vec<String>> {
    if settings.tool_choice != ToolChoice::Auto {
        return Ok(vec![]);
    }
    // Served by dataset_rows_tools_idx.
    let Some(tools) = sqlx::query_scalar!(
        r#"SELECT tools AS "tools!" FROM dataset_rows WHERE dataset_id = $1 AND tools IS NOT NULL LIMIT 1"#,
        dataset_id
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(vec![]);
    };
    let target = endpoints::target(pool, id).await?;
    let client = target.client(http.clone())?;
    let probe = ChatRequest {
        tools: Some(tools),
        tool_choice: Some(ToolChoice::Auto.as_str()),
        ..probe(settings, "Say hello.", 1)
    };
    Ok(match client.chat(&probe, PROBE_CALL).await {
        Ok(_) => vec![],
        Err(e) if e.message.contains("enable-auto-tool-choice") => vec![format!(
            "endpoint `{}` runs no tool parser, so every row that offers tools would fail with tool_choice auto: \
             start vLLM with --enable-auto-tool-choice --tool-call-parser <the model's parser, e.g. hermes for \
             Qwen>, or choose tool_choice required or none",
            target.name
        )],
        Err(e) => vec![format!(
            "endpoint `{}` failed a test request with the rows' tools ({}); check that it serves tool calls",
            target.name, e.message
        )],
    })
}
