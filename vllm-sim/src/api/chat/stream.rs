//! A streamed completion as Server-Sent Events, in vLLM's chunk sequence: a role chunk,
//! reasoning and content deltas of `stream_interval` tokens, a finishing chunk, the usage
//! chunk (when asked for) and `[DONE]`.
//!
//! The response body pulls frames: each wakes on the engine's progress, renders every
//! event that became ready into one buffer and hands it to hyper as a single frame, so the
//! cost per token is writing its JSON, not a channel send or an allocation.

use super::job::{ChatJob, StreamSettings};
use super::{ENGINE_DEAD, INJECTED_FAILURE};
use crate::api::error::ApiError;
use crate::api::AppState;
use crate::engine::Generation;
use crate::faults::{Incident, IncidentKind};
use crate::server::Connection;
use crate::stats::SimCounters;
use crate::wire::{ChatChunk, ChunkChoice, Delta, FunctionDelta, Null, ToolCallDelta, Usage};
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, BytesMut};
use serde::Serialize;
use std::convert::Infallible;
use std::sync::Arc;

/// A frame is handed over once it holds this much, even if more events are ready.
const FRAME_BYTES: usize = 16 * 1024;

pub(super) fn respond(
    app: Arc<AppState>,
    connection: Connection,
    job: ChatJob,
    settings: StreamSettings,
) -> Response {
    let stream = ChatStream {
        app,
        connection,
        job,
        settings,
        generation: None,
        opened: false,
        sent: 0,
        done: false,
        frame: BytesMut::new(),
        reasoning: String::new(),
        answer: String::new(),
        call_opened: false,
    };
    let frames = futures::stream::unfold(stream, |mut stream| async move {
        let frame = stream.next_frame().await?;
        Some((Ok::<_, Infallible>(frame), stream))
    });
    ([(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")], Body::from_stream(frames)).into_response()
}

struct ChatStream {
    app: Arc<AppState>,
    connection: Connection,
    job: ChatJob,
    settings: StreamSettings,
    /// Submitted on the first pull, after any slow start. Dropping it aborts generation.
    generation: Option<Generation>,
    /// Whether the role chunk went out.
    opened: bool,
    /// Completion tokens sent so far.
    sent: u32,
    done: bool,
    frame: BytesMut,
    reasoning: String,
    answer: String,
    /// Whether the first piece of the answer's call (its id and name) went out.
    call_opened: bool,
}

impl ChatStream {
    async fn next_frame(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if self.opened && self.app.windows.failing() {
            SimCounters::bump(&self.app.counters.engine_failures);
            return Some(self.fail(ENGINE_DEAD));
        }
        while let Some(incident) = self.job.faults.incident.filter(|incident| incident.at_token == self.sent)
        {
            self.job.faults.incident = None;
            if let Some(frame) = self.suffer(incident).await {
                return Some(frame);
            }
        }
        let generation = match self.generation.take() {
            Some(generation) => generation,
            None => self.start().await,
        };
        let generated = generation.reached(self.next_stop()).await;
        self.generation = Some(generation);
        self.render_up_to(generated);
        Some(self.frame.split().freeze())
    }

    async fn start(&self) -> Generation {
        if let Some(delay) = self.job.faults.slow_start {
            SimCounters::bump(&self.app.counters.slow_starts);
            self.app.clock.sleep(delay).await;
        }
        self.app.engine.submit(self.job.sequence)
    }

    /// Applies an injected incident; returns the frame to send if it ends the stream.
    async fn suffer(&mut self, incident: Incident) -> Option<Bytes> {
        let counters = &self.app.counters;
        match incident.kind {
            IncidentKind::Stall(pause) => {
                SimCounters::bump(&counters.stalls);
                self.app.clock.sleep(pause).await;
                None
            }
            IncidentKind::ErrorChunk => {
                SimCounters::bump(&counters.stream_errors);
                Some(self.fail(INJECTED_FAILURE))
            }
            IncidentKind::DropConnection => {
                SimCounters::bump(&counters.dropped_connections);
                self.connection.sever();
                // The connection task now drops this stream along with the connection.
                std::future::pending().await
            }
        }
    }

    /// Ends the stream with an error chunk and `[DONE]`, aborting the generation.
    fn fail(&mut self, message: &str) -> Bytes {
        self.generation = None;
        let error = ApiError::internal(message);
        write_event(&mut self.frame, &error.body(self.app.config.legacy_error_shape).in_stream());
        write_done(&mut self.frame);
        self.done = true;
        self.frame.split().freeze()
    }

    /// The token count the next event waits for: a full interval, or less at the end of the
    /// completion or at a pending incident.
    fn next_stop(&self) -> u32 {
        (self.sent + self.settings.interval).min(self.hard_stop())
    }

    fn hard_stop(&self) -> u32 {
        let end = self.job.sequence.max_new_tokens;
        self.job.faults.incident.map_or(end, |incident| incident.at_token.min(end))
    }

    /// Renders every event that `generated` tokens make ready, up to a frame's worth.
    fn render_up_to(&mut self, generated: u32) {
        if !self.opened {
            self.opened = true;
            let role = Delta { role: Some("assistant"), content: Some(""), ..Delta::default() };
            // The prompt's ids ride on the first chunk, as in vLLM.
            let prompt_ids = self.job.prompt_token_ids.take();
            self.write_chunk(role, None, 0, None, prompt_ids.as_deref());
        }
        let end_of_completion = self.job.sequence.max_new_tokens;
        loop {
            let end = self.next_stop();
            if end == self.sent || end > generated {
                return;
            }
            self.write_delta(self.sent..end, end == end_of_completion);
            self.sent = end;
            if end == end_of_completion {
                self.write_trailer();
                return;
            }
            if self.frame.len() >= FRAME_BYTES {
                return;
            }
        }
    }

    fn write_delta(&mut self, range: std::ops::Range<u32>, finishes: bool) {
        let (mut reasoning, mut answer) =
            (std::mem::take(&mut self.reasoning), std::mem::take(&mut self.answer));
        reasoning.clear();
        answer.clear();
        self.job.write_text(range.clone(), &mut reasoning, &mut answer);
        let field = self.app.config.reasoning_field;
        let reasoning_text = (!reasoning.is_empty()).then_some(reasoning.as_str());
        let finish_reason = finishes.then(|| self.job.finish_reason());
        let mut arguments = String::new();
        let call = self.job.call.clone();
        let tool_calls = match &call {
            Some(call) if !answer.is_empty() => {
                // The answer's text is the call's one argument, written as JSON piece by piece.
                if !self.call_opened {
                    arguments.push_str("{\"text\": \"");
                }
                let quoted = serde_json::to_string(&answer).expect("text serialises");
                arguments.push_str(&quoted[1..quoted.len() - 1]);
                if finish_reason == Some("tool_calls") {
                    arguments.push_str("\"}");
                }
                let first = !std::mem::replace(&mut self.call_opened, true);
                Some([ToolCallDelta {
                    index: 0,
                    id: first.then_some(call.id.as_str()),
                    kind: first.then_some("function"),
                    function: FunctionDelta {
                        name: first.then_some(call.name.as_str()),
                        arguments: &arguments,
                    },
                }])
            }
            _ => None,
        };
        let delta = Delta {
            role: None,
            content: (!answer.is_empty() && tool_calls.is_none()).then_some(answer.as_str()),
            reasoning: reasoning_text.filter(|_| field.uses_reasoning()),
            reasoning_content: reasoning_text.filter(|_| field.uses_reasoning_content()),
            tool_calls,
        };
        let ids = self.settings.token_ids.then(|| {
            let mut ids = Vec::new();
            self.job.token_ids(range.clone(), &mut ids);
            ids
        });
        self.write_chunk(delta, finish_reason, range.end, ids.as_deref(), None);
        (self.reasoning, self.answer) = (reasoning, answer);
    }

    /// One chunk with one choice; `completed` is the completion token count through it.
    fn write_chunk(
        &mut self,
        delta: Delta<'_>,
        finish_reason: Option<&'static str>,
        completed: u32,
        token_ids: Option<&[u32]>,
        prompt_token_ids: Option<&[u32]>,
    ) {
        let choices = [ChunkChoice {
            index: 0,
            delta,
            logprobs: Null,
            finish_reason,
            stop_reason: finish_reason.map(|_| Null),
            token_ids,
        }];
        let usage = self.settings.continuous_usage.then(|| Usage::running(self.job.prompt_tokens, completed));
        let chunk =
            ChatChunk { header: &self.job.header, choices: &choices, usage, prompt_token_ids, metrics: None };
        write_event(&mut self.frame, &chunk);
    }

    fn write_trailer(&mut self) {
        let metrics = self.job.spec_decode(&self.app, self.sent);
        if self.settings.include_usage {
            let usage = self.job.final_usage(self.sent);
            write_event(
                &mut self.frame,
                &ChatChunk {
                    header: &self.job.header,
                    choices: &[],
                    usage: Some(usage),
                    prompt_token_ids: None,
                    metrics: metrics.as_ref(),
                },
            );
        }
        write_done(&mut self.frame);
        self.done = true;
    }
}

fn write_event(frame: &mut BytesMut, payload: &impl Serialize) {
    frame.put_slice(b"data: ");
    serde_json::to_writer(frame.writer(), payload).expect("chunks serialise");
    frame.put_slice(b"\n\n");
}

fn write_done(frame: &mut BytesMut) {
    frame.put_slice(b"data: [DONE]\n\n");
}
