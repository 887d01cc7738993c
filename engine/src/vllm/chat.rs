//! Reading one streamed chat completion: text, finish reason, usage, time to first token, with
//! an idle timeout between events and an optional overall deadline.

use super::span_counts::{SpanCounter, SpanCounts, SpanMarkers};
use super::{error_body, tool_calls::CallAssembler, wire::Chunk};
use domain::acceptance::SpecDecode;
use domain::conversation::ToolCall;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub reasoning_tokens: Option<u32>,
}

/// A completion the server finished (with any finish reason, `length` included).
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub reasoning: String,
    pub content: String,
    /// The calls the answer makes (with `tools` in the request).
    pub tool_calls: Vec<ToolCall>,
    /// An open set: `stop`, `length`, `tool_calls`, `repetition`, and whatever comes next.
    pub finish_reason: String,
    pub usage: Option<Usage>,
    pub ttft: Option<Duration>,
    pub duration: Duration,
    /// The token ids the server saw and produced, when it reports them.
    pub tokens: Option<TokenIds>,
    /// The completion's tokens by span, counted from its ids (none without every id, or when a
    /// chunk's text went to two spans).
    pub span_counts: Option<SpanCounts>,
    /// What the server said about its speculative-decoding draft on this request.
    pub spec_decode: SpecReport,
}

/// What a response says about speculative decoding.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum SpecReport {
    /// Nothing: the server runs no draft, or does not report per request
    /// (`--per-request-spec-decode-metrics`).
    #[default]
    NotReported,
    /// Reported, with no verify step (a draft that proposed nothing): no acceptance, not zero.
    NoSteps,
    Measured(SpecDecode),
}

impl SpecReport {
    pub fn figures(&self) -> Option<&SpecDecode> {
        match self {
            SpecReport::Measured(figures) => Some(figures),
            _ => None,
        }
    }
}

/// A request's token ids as the server reported them (`return_token_ids`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenIds {
    pub prompt: Vec<u32>,
    pub completion: Vec<u32>,
}

/// What had arrived before a try failed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partial {
    pub reasoning: String,
    pub content: String,
    pub ttft: Option<Duration>,
    pub usage: Option<Usage>,
}

impl Partial {
    pub fn is_empty(&self) -> bool {
        self.reasoning.is_empty() && self.content.is_empty()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The server could not be reached at all (refused, unresolvable, connect timeout).
    Connect,
    /// An error status before any output.
    Http { status: u16 },
    /// An `{"error": ...}` chunk after the 200.
    ErrorChunk,
    /// The connection ended before `[DONE]`.
    Disconnected,
    /// No event for the idle timeout.
    IdleTimeout,
    /// The overall deadline passed.
    Deadline,
    /// The server answered something that is not a chat completion stream.
    Protocol,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::Http { .. } => "http",
            FailureKind::ErrorChunk => "error_chunk",
            FailureKind::Disconnected => "disconnected",
            FailureKind::IdleTimeout => "idle_timeout",
            FailureKind::Deadline => "deadline",
            FailureKind::Protocol => "protocol",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
    pub partial: Partial,
    pub duration: Duration,
}

impl Failure {
    /// Worth another try: overload, server errors, broken streams and timeouts. A 4xx such as
    /// "context too long" fails the same way every time.
    pub fn is_transient(&self) -> bool {
        match self.kind {
            FailureKind::Http { status } => matches!(status, 408 | 409 | 425 | 429) || status >= 500,
            FailureKind::Protocol => false,
            _ => true,
        }
    }

    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, FailureKind::IdleTimeout | FailureKind::Deadline)
    }

    pub fn http_status(&self) -> Option<u16> {
        match self.kind {
            FailureKind::Http { status } => Some(status),
            _ => None,
        }
    }
}

pub(crate) struct Limits {
    pub idle: Duration,
    pub deadline: Option<Instant>,
    pub started: Instant,
}

impl Limits {
    /// How long to wait for the next event, and which failure it is if nothing comes.
    fn next_wait(&self) -> (Duration, FailureKind) {
        match self.deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left < self.idle {
                    (left, FailureKind::Deadline)
                } else {
                    (self.idle, FailureKind::IdleTimeout)
                }
            }
            None => (self.idle, FailureKind::IdleTimeout),
        }
    }

    pub fn failure(&self, kind: FailureKind, message: impl Into<String>, partial: Partial) -> Failure {
        Failure { kind, message: message.into(), partial, duration: self.started.elapsed() }
    }

    pub fn timeout_failure(&self, kind: FailureKind, partial: Partial) -> Failure {
        let message = match kind {
            FailureKind::Deadline => "the request's deadline passed".to_string(),
            _ => format!("no token for {} s (idle timeout)", self.idle.as_secs()),
        };
        self.failure(kind, message, partial)
    }

    pub async fn wait<F: std::future::Future>(&self, future: F) -> Result<F::Output, FailureKind> {
        let (wait, kind) = self.next_wait();
        tokio::time::timeout(wait, future).await.map_err(|_| kind)
    }
}

/// What a stream tells while it arrives, for whoever follows the server's pace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Progress {
    /// The first token came this long after the request was sent.
    FirstToken(Duration),
    /// A chunk brought `tokens` tokens (by their ids), `after` the previous chunk with ids of
    /// the same request: the rate the request generates at, without its wait for the first.
    Tokens { tokens: u32, after: Duration },
}

/// Reads an SSE chat-completion stream to its end. Dropping the future drops the connection,
/// which makes vLLM abort the request.
pub(crate) async fn read_stream(
    response: reqwest::Response,
    limits: Limits,
    markers: SpanMarkers,
    mut on_progress: impl FnMut(Progress),
) -> Result<Completion, Failure> {
    let mut events = response.bytes_stream().eventsource();
    // When the last chunk carrying token ids arrived: the pace is told from the chunks after it.
    let mut last_ids_at: Option<Instant> = None;
    let mut partial = Partial::default();
    let mut finish_reason: Option<String> = None;
    let mut done = false;
    // Only a server that sends the prompt's ids gives a complete record; one that sends ids for
    // some chunks only would leave gaps, and the record is then dropped.
    let mut prompt_ids: Option<Vec<u32>> = None;
    let mut completion_ids: Vec<u32> = Vec::new();
    let mut ids_complete = true;
    let mut spec_decode = SpecReport::NotReported;
    let mut calls = CallAssembler::default();
    let mut spans = SpanCounter::new(markers);
    loop {
        let event = match limits.wait(events.next()).await {
            Err(kind) => return Err(limits.timeout_failure(kind, partial)),
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(limits.failure(
                    FailureKind::Disconnected,
                    format!("the stream broke: {e}"),
                    partial,
                ))
            }
            Ok(Some(Ok(event))) => event,
        };
        let data = event.data.trim();
        if data == "[DONE]" {
            done = true;
            break;
        }
        if data.is_empty() {
            continue;
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => {
                let message = format!("unreadable stream event ({e}): {}", preview(data));
                return Err(limits.failure(FailureKind::Protocol, message, partial));
            }
        };
        if let Some(error) = chunk.error {
            let message = error_body::message_of(&error).unwrap_or_else(|| error.to_string());
            return Err(limits.failure(FailureKind::ErrorChunk, message, partial));
        }
        if let Some(ids) = chunk.prompt_token_ids {
            prompt_ids = Some(ids);
        }
        if let Some(figures) = chunk.metrics.and_then(|m| m.speculative_decoding) {
            spec_decode = figures.figures().map_or(SpecReport::NoSteps, SpecReport::Measured);
        }
        for choice in &chunk.choices {
            let reasoning = choice.delta.reasoning_text().unwrap_or("");
            let content = choice.delta.content_text().unwrap_or("");
            let has_text =
                !(reasoning.is_empty() && content.is_empty() && choice.delta.tool_calls.is_empty());
            for call in &choice.delta.tool_calls {
                calls.add(call);
            }
            let chunk_ids = choice.token_ids.as_deref().unwrap_or_default();
            let new_ids = chunk_ids.len();
            spans.chunk(&choice.delta, chunk_ids);
            match &choice.token_ids {
                Some(ids) => completion_ids.extend_from_slice(ids),
                // A chunk that carries text but no ids: the record would have a gap.
                None if has_text => ids_complete = false,
                None => {}
            }
            // The first token is the first chunk with text or token ids: a token whose text is
            // not whole yet (a piece of a UTF-8 character) comes with its id and no text, and
            // its text only with the next chunk, a whole `stream_interval` later (the real vLLM
            // server sent 11 of 60 first tokens so).
            if partial.ttft.is_none() && (has_text || new_ids > 0) {
                let ttft = limits.started.elapsed();
                partial.ttft = Some(ttft);
                on_progress(Progress::FirstToken(ttft));
            }
            if new_ids > 0 {
                let now = Instant::now();
                if let Some(previous) = last_ids_at.replace(now) {
                    on_progress(Progress::Tokens { tokens: new_ids as u32, after: now - previous });
                }
            }
            partial.reasoning.push_str(reasoning);
            partial.content.push_str(content);
            if let Some(reason) = &choice.finish_reason {
                finish_reason = Some(reason.as_str().to_string());
            }
        }
        if let Some(usage) = chunk.usage {
            partial.usage = Some(Usage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                reasoning_tokens: usage.completion_tokens_details.and_then(|d| d.reasoning_tokens),
            });
        }
    }
    // The ids must add up to what the server says it generated, or they are not kept.
    if partial.usage.is_some_and(|u| u.completion_tokens as usize != completion_ids.len()) {
        ids_complete = false;
    }
    match (finish_reason, done) {
        (Some(finish_reason), true) => Ok(Completion {
            reasoning: partial.reasoning,
            content: partial.content,
            tool_calls: calls.finish(),
            finish_reason,
            usage: partial.usage,
            ttft: partial.ttft,
            duration: limits.started.elapsed(),
            span_counts: (ids_complete && !completion_ids.is_empty()).then(|| spans.finish()).flatten(),
            tokens: prompt_ids
                .filter(|_| ids_complete)
                .map(|prompt| TokenIds { prompt, completion: completion_ids }),
            spec_decode,
        }),
        (None, true) => {
            Err(limits.failure(FailureKind::Protocol, "the stream ended without a finish_reason", partial))
        }
        (_, false) => Err(limits.failure(
            FailureKind::Disconnected,
            "the connection closed before the stream ended",
            partial,
        )),
    }
}

fn preview(data: &str) -> &str {
    let mut end = data.len().min(200);
    while !data.is_char_boundary(end) {
        end -= 1;
    }
    &data[..end]
}
