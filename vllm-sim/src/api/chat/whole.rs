//! A non-streamed completion: one JSON body once generation has ended.

use super::job::ChatJob;
use super::{ENGINE_DEAD, INJECTED_FAILURE};
use crate::api::error::ApiError;
use crate::api::AppState;
use crate::faults::{Incident, IncidentKind};
use crate::server::Connection;
use crate::stats::SimCounters;
use crate::wire::{ChatCompletion, Choice, Message, Null};
use axum::response::{IntoResponse, Response};
use axum::Json;

/// Generates the whole completion, then answers. If the client goes away first, this
/// future is dropped, and with it the generation, which aborts it in the engine.
pub(super) async fn respond(
    app: &AppState,
    connection: &Connection,
    job: ChatJob,
) -> Result<Response, ApiError> {
    if let Some(delay) = job.faults.slow_start {
        SimCounters::bump(&app.counters.slow_starts);
        app.clock.sleep(delay).await;
    }
    let generation = app.engine.submit(job.sequence);
    let generated = job.sequence.max_new_tokens;
    match job.faults.incident {
        None => {
            generation.reached(generated).await;
        }
        Some(Incident { at_token, kind: IncidentKind::ErrorChunk }) => {
            generation.reached(at_token).await;
            SimCounters::bump(&app.counters.stream_errors);
            return Err(ApiError::internal(INJECTED_FAILURE));
        }
        Some(Incident { at_token, kind: IncidentKind::DropConnection }) => {
            generation.reached(at_token).await;
            SimCounters::bump(&app.counters.dropped_connections);
            connection.sever();
            // The connection task now drops this future along with the connection.
            return Ok(std::future::pending().await);
        }
        Some(Incident { kind: IncidentKind::Stall(pause), .. }) => {
            generation.reached(generated).await;
            SimCounters::bump(&app.counters.stalls);
            app.clock.sleep(pause).await;
        }
    }

    if app.windows.failing() {
        SimCounters::bump(&app.counters.engine_failures);
        return Err(ApiError::internal(ENGINE_DEAD));
    }
    let (mut reasoning, mut answer) = (String::new(), String::new());
    job.write_text(0..generated, &mut reasoning, &mut answer);
    let reasoning = (!reasoning.is_empty()).then_some(reasoning.as_str());
    let field = app.config.reasoning_field;
    let message = Message {
        role: "assistant",
        content: (!answer.is_empty()).then_some(answer.as_str()),
        refusal: Null,
        annotations: Null,
        audio: Null,
        function_call: Null,
        tool_calls: [],
        reasoning: field.uses_reasoning().then_some(reasoning),
        reasoning_content: field.uses_reasoning_content().then_some(reasoning),
    };
    let completion = ChatCompletion {
        header: &job.header,
        choices: [Choice {
            index: 0,
            message,
            logprobs: Null,
            finish_reason: job.sequence.finish_reason.as_str(),
            stop_reason: Null,
            token_ids: job.prompt_token_ids.is_some().then(|| {
                let mut ids = Vec::new();
                job.token_ids(0..generated, &mut ids);
                ids
            }),
        }],
        service_tier: Null,
        system_fingerprint: Null,
        usage: job.final_usage(generated),
        prompt_logprobs: Null,
        kv_transfer_params: Null,
        prompt_token_ids: job.prompt_token_ids.as_deref(),
        metrics: job.spec_decode(app, generated),
    };
    Ok(Json(completion).into_response())
}
