//! Turning a chat request into the work to simulate, with vLLM's validation and messages.

use crate::api::error::ApiError;
use crate::api::AppState;
use crate::engine::{FinishReason, SequenceRequest};
use crate::faults::FaultPlan;
use crate::lengths::completion_shape;
use crate::prompt::{self, TemplateOptions};
use crate::text::{CompletionText, Part};
use crate::wire::{ChatRequest, ResponseHeader, StreamOptions, Usage};
use std::ops::Range;
use std::sync::atomic::Ordering;

/// A validated request: what to generate, how to render it, and what goes wrong.
pub(super) struct ChatJob {
    pub header: ResponseHeader,
    pub prompt_tokens: u32,
    pub sequence: SequenceRequest,
    /// Reasoning tokens at the start of the natural completion (0 with thinking off);
    /// completion tokens from here on are answer.
    pub reasoning_tokens: u32,
    pub text: CompletionText,
    pub faults: FaultPlan,
    /// `None` for a non-streaming request.
    pub stream: Option<StreamSettings>,
    /// The prompt's token ids, when the request asked for token ids.
    pub prompt_token_ids: Option<Vec<u32>>,
    /// The chance that the served draft's tokens are accepted on this prompt; `None` without a
    /// draft.
    pub draft_chance: Option<f64>,
    /// The call the answer makes (with tools): its answer text streams as the call's arguments,
    /// `{"text": "<answer>"}`.
    pub call: Option<ToolCallPlan>,
    /// Usage says 0 reasoning tokens whatever was generated (`--zero-reasoning-tokens`).
    pub zero_reasoning_tokens: bool,
}

#[derive(Clone, Debug)]
pub(super) struct ToolCallPlan {
    pub id: String,
    pub name: String,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct StreamSettings {
    pub include_usage: bool,
    /// Usage on every chunk; vLLM honours it only together with `include_usage`.
    pub continuous_usage: bool,
    /// Completion tokens per content chunk.
    pub interval: u32,
    /// Each chunk carries its tokens' ids.
    pub token_ids: bool,
}

impl ChatJob {
    pub fn prepare(app: &AppState, body: &[u8]) -> Result<Self, ApiError> {
        let config = &app.config;
        let request: ChatRequest =
            serde_json::from_slice(body).map_err(|error| ApiError::bad_request(error.to_string(), None))?;
        let stream = request.stream.unwrap_or(false);
        if !stream && request.stream_options.as_ref().is_some_and(StreamOptions::is_set) {
            return Err(ApiError::bad_request(
                "Stream options can only be defined when `stream=True`.",
                Some("stream_options"),
            ));
        }
        validate_sampling(&request)?;
        if config.no_tool_parser && request.lets_the_model_choose_a_tool() {
            return Err(ApiError::bad_request(
                "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                None,
            ));
        }
        if let Some(model) = request.model.as_deref().filter(|&model| model != config.model) {
            return Err(ApiError::model_not_found(model));
        }

        let thinking = request.thinking_enabled();
        let options = TemplateOptions { add_generation_prompt: true, thinking };
        let prompt_tokens = prompt::template_tokens(&request.messages, options).count() as u32;
        let token_ids = request.return_token_ids.unwrap_or(false) && !config.ignore_return_token_ids;
        let prompt_token_ids =
            token_ids.then(|| prompt::template_tokens(&request.messages, options).map(|t| t.id).collect());
        let max_new_tokens = max_new_tokens(&request, prompt_tokens, config.max_model_len)?;

        let fingerprint = prompt::fingerprint(&request.messages);
        let natural = completion_shape(&config.lengths, config.seed, fingerprint);
        let natural = if thinking { natural } else { natural.without_reasoning() };
        let (generate, finish_reason) = if natural.total() <= max_new_tokens {
            (natural.total(), FinishReason::Stop)
        } else {
            (max_new_tokens, FinishReason::Length)
        };

        let request_index = app.chat_requests.fetch_add(1, Ordering::Relaxed);
        let settings = app.faults();
        let mut faults = settings.draw(config.seed, request_index, generate);
        if let Some(marker) = settings.http_500_if_prompt_contains.as_deref() {
            faults.http_500 |= request.messages.iter().any(|m| m.text_segments().any(|t| t.contains(marker)));
        }
        let draft = &config.draft;
        let draft_chance = draft.serves_draft().then(|| {
            draft.chance_for(|piece| {
                request.messages.iter().any(|m| m.text_segments().any(|t| t.contains(piece)))
            })
        });
        let id = match &request.request_id {
            Some(request_id) => format!("chatcmpl-{request_id}"),
            None => format!("chatcmpl-{:032x}", rand::random::<u128>()),
        };
        let call = request
            .called_tool()
            .map(|name| ToolCallPlan { id: format!("chatcmpl-tool-{:016x}", rand::random::<u64>()), name });
        let created = crate::clock::unix_seconds();
        let header = if stream {
            ResponseHeader::for_chunks(id, created, config.model.clone())
        } else {
            ResponseHeader::for_completion(id, created, config.model.clone())
        };
        Ok(Self {
            header,
            prompt_tokens,
            sequence: SequenceRequest { prompt_tokens, max_new_tokens: generate, finish_reason },
            reasoning_tokens: natural.reasoning_tokens,
            text: CompletionText::new(fingerprint, config.seed),
            faults,
            stream: stream.then(|| stream_settings(&request, config.ignore_stream_interval, token_ids)),
            prompt_token_ids,
            draft_chance,
            call,
            zero_reasoning_tokens: config.zero_reasoning_tokens,
        })
    }

    /// How the draft did on a completion of `generated` tokens, counted in `/metrics`; the
    /// response carries it when the server reports per-request figures.
    pub fn spec_decode(&self, app: &AppState, generated: u32) -> Option<crate::draft::ResponseMetrics> {
        let chance = self.draft_chance?;
        let k = app.config.draft.num_speculative_tokens;
        let figures = crate::draft::verify(generated, k, chance, self.text.seed());
        app.metrics.spec_decoded(&figures);
        app.config
            .draft
            .per_request_spec_decode_metrics
            .then_some(crate::draft::ResponseMetrics { speculative_decoding: figures })
    }

    /// Appends the text of completion tokens `range`, reasoning and answer separately.
    pub fn write_text(&self, range: Range<u32>, reasoning: &mut String, answer: &mut String) {
        let split = self.reasoning_tokens;
        let worded = split - u32::from(self.ends_reasoning());
        self.text.write(Part::Reasoning, range.start.min(worded)..range.end.min(worded), reasoning);
        self.text.write(Part::Answer, range.start.max(split) - split..range.end.max(split) - split, answer);
    }

    /// Whether the reasoning ends inside this completion: its last token is then `</think>`,
    /// which has no text in the streamed message (as vLLM's reasoning parsers strip it).
    fn ends_reasoning(&self) -> bool {
        self.reasoning_tokens > 0 && self.sequence.max_new_tokens > self.reasoning_tokens
    }

    /// The ids of completion tokens `range` (each generated piece is one token; the reasoning's
    /// end is `</think>`).
    pub fn token_ids(&self, range: Range<u32>, into: &mut Vec<u32>) {
        let (mut reasoning, mut answer) = (String::new(), String::new());
        self.write_text(range.clone(), &mut reasoning, &mut answer);
        into.extend(crate::prompt::text_tokens(&reasoning).map(|t| t.id));
        if self.ends_reasoning() && range.contains(&(self.reasoning_tokens - 1)) {
            into.push(crate::prompt::think_end().id);
        }
        into.extend(crate::prompt::text_tokens(&answer).map(|t| t.id));
    }

    /// The finish reason of the completed sequence: `tool_calls` when a call ended naturally.
    pub fn finish_reason(&self) -> &'static str {
        match (self.sequence.finish_reason, &self.call) {
            (FinishReason::Stop, Some(_)) if self.sequence.max_new_tokens > self.reasoning_tokens => {
                "tool_calls"
            }
            (reason, _) => reason.as_str(),
        }
    }

    /// The usage of a finished completion of `generated` tokens.
    pub fn final_usage(&self, generated: u32) -> Usage {
        let reasoning = if self.zero_reasoning_tokens { 0 } else { generated.min(self.reasoning_tokens) };
        Usage::last(self.prompt_tokens, generated, reasoning)
    }
}

/// vLLM's checks of sampling parameters that the simulator otherwise ignores.
fn validate_sampling(request: &ChatRequest) -> Result<(), ApiError> {
    if let Some(temperature) = request.temperature.filter(|&t| t < 0.0) {
        return Err(ApiError::bad_request(
            format!("temperature must be non-negative, got {temperature}."),
            Some("temperature"),
        ));
    }
    if let Some(top_p) = request.top_p.filter(|&p| !(p > 0.0 && p <= 1.0)) {
        return Err(ApiError::bad_request(format!("top_p must be in (0, 1], got {top_p}."), Some("top_p")));
    }
    Ok(())
}

/// The completion budget: the requested one if it fits the context, else the whole rest
/// of the context when none was requested.
fn max_new_tokens(request: &ChatRequest, prompt_tokens: u32, max_model_len: u32) -> Result<u32, ApiError> {
    let too_long = |requested: i64| {
        ApiError::bad_request(
            format!(
                "This model's maximum context length is {max_model_len} tokens. However, you requested \
                 {requested} output tokens and your prompt contains at least {prompt_tokens} input tokens, \
                 for a total of at least {} tokens. Please reduce the length of the input prompt or the \
                 number of requested output tokens. (parameter=input_tokens, value={prompt_tokens})",
                i64::from(prompt_tokens) + requested
            ),
            Some("input_tokens"),
        )
    };
    match request.max_completion_tokens.or(request.max_tokens) {
        Some(requested) if requested < 1 => Err(ApiError::bad_request(
            format!("max_tokens must be at least 1, got {requested}."),
            Some("max_tokens"),
        )),
        Some(requested) if requested > i64::from(max_model_len) => Err(ApiError::bad_request(
            format!(
                "max_tokens={requested} cannot be greater than max_model_len={max_model_len}. \
                 Please request fewer output tokens."
            ),
            Some("max_tokens"),
        )),
        Some(requested) if i64::from(prompt_tokens) + requested > i64::from(max_model_len) => {
            Err(too_long(requested))
        }
        Some(requested) => Ok(requested as u32),
        None if prompt_tokens >= max_model_len => Err(too_long(0)),
        None => Ok(max_model_len - prompt_tokens),
    }
}

fn stream_settings(request: &ChatRequest, ignore_stream_interval: bool, token_ids: bool) -> StreamSettings {
    let options = request.stream_options.as_ref();
    let include_usage = options.and_then(|o| o.include_usage).unwrap_or(false);
    let continuous_usage = include_usage && options.and_then(|o| o.continuous_usage_stats).unwrap_or(false);
    let interval = if ignore_stream_interval { 1 } else { request.stream_interval.unwrap_or(1).max(1) };
    StreamSettings { include_usage, continuous_usage, interval, token_ids }
}
