//! What goes over the wire: the request body and the pieces of responses we read.

use domain::conversation::ToolCall;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// A message as sent: `system`, `user`, `assistant` (with the calls it made) or `tool` (a
/// call's result).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default, deserialize_with = "text_or_null")]
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    pub fn text(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into(), tool_calls: Vec::new(), tool_call_id: None }
    }
}

/// OpenAI writes `"content": null` beside tool calls.
fn text_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// A `/v1/chat/completions` request. Extras that some servers do not know (`stream_interval`)
/// are ignored by them, as vLLM accepts unknown keys.
#[derive(Clone, Debug, Serialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// The functions the model may call (`[{"type": "function", "function": {...}}]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<serde_json::Value>,
    /// `auto`, `required` or `none`; sent only with `tools`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    /// Sent only as `false` (one call per turn), with `tools`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    pub max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Template switches such as `{"enable_thinking": false}`, sent as a top-level field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_interval: Option<u32>,
    pub stream: bool,
    /// Usage arrives only when asked for; vLLM's default flipped between versions.
    pub stream_options: StreamOptions,
    /// Ask for the token ids the server saw and produced (vLLM 0.10.2 on): `prompt_token_ids`
    /// on the first chunk, `token_ids` on each. Servers without it ignore it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub return_token_ids: bool,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct StreamOptions {
    pub include_usage: bool,
}

/// One `data:` event of a streamed completion. Text fields borrow from the event when they
/// contain no escapes, so the common chunk parses without allocating.
#[derive(Debug, Deserialize)]
pub(crate) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub choices: Vec<ChunkChoice<'a>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// vLLM reports failures after the 200 as a chunk with a top-level `error`.
    #[serde(default)]
    pub error: Option<serde_json::Value>,
    /// The prompt as the server tokenized it (first chunk, with `return_token_ids`).
    #[serde(default)]
    pub prompt_token_ids: Option<Vec<u32>>,
    /// The request's own figures, on the usage chunk (vLLM 0.32 on; null when not measured).
    #[serde(default)]
    pub metrics: Option<ChunkMetrics>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChunkMetrics {
    /// Present when the server runs a draft with `--per-request-spec-decode-metrics`.
    #[serde(default)]
    pub speculative_decoding: Option<WireSpecDecode>,
}

/// `metrics.speculative_decoding`; the means and rates it also carries are derived from these.
#[derive(Debug, Deserialize)]
pub(crate) struct WireSpecDecode {
    #[serde(default)]
    pub num_spec_steps: u32,
    #[serde(default)]
    pub num_accepted_draft_tokens: u32,
    #[serde(default)]
    pub num_draft_tokens: u32,
    #[serde(default)]
    pub num_spec_tokens: u32,
    #[serde(default)]
    pub acceptance_histogram: Vec<u32>,
}

impl WireSpecDecode {
    /// The figures, or `None` for a request without a verify step (no acceptance, not zero).
    pub fn figures(self) -> Option<domain::acceptance::SpecDecode> {
        domain::acceptance::SpecDecode::new(
            self.num_spec_steps,
            self.num_accepted_draft_tokens,
            self.num_draft_tokens,
            self.num_spec_tokens,
            self.acceptance_histogram,
        )
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChunkChoice<'a> {
    #[serde(default, borrow)]
    pub delta: Delta<'a>,
    #[serde(default, borrow)]
    pub finish_reason: Option<Text<'a>>,
    /// The ids of the tokens this chunk carries (with `return_token_ids`).
    #[serde(default)]
    pub token_ids: Option<Vec<u32>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta<'a> {
    #[serde(default, borrow)]
    pub content: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub reasoning: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub reasoning_content: Option<Text<'a>>,
    /// Fragments of the calls being written, by `index`; `null` (servers that write every
    /// field of a delta) is none.
    #[serde(default, deserialize_with = "null_as_default")]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A field some servers send as `null` where others leave it out.
fn null_as_default<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A piece of a streamed call: the first of a call names its `id` and function, the rest
/// bring pieces of its `arguments`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ToolCallDelta {
    #[serde(default, deserialize_with = "null_as_default")]
    pub index: usize,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}

/// A string that borrows from the input unless it holds escapes. (serde never borrows an
/// `Option<Cow<str>>` directly; wrapping the `Cow` makes it.)
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(crate) struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'a> Delta<'a> {
    /// vLLM 0.11–0.1x sent both names with the same text; newer ones only `reasoning`.
    pub fn reasoning_text(&self) -> Option<&str> {
        self.reasoning.as_ref().or(self.reasoning_content.as_ref()).map(Text::as_str)
    }

    pub fn content_text(&self) -> Option<&str> {
        self.content.as_ref().map(Text::as_str)
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: u32,
    #[serde(default)]
    pub completion_tokens: u32,
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct CompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u32>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ModelList {
    #[serde(default)]
    pub data: Vec<ModelEntry>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ModelEntry {
    pub id: String,
    #[serde(default)]
    pub max_model_len: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_chunks_borrow_their_text() {
        let raw = r#"{"id":"x","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}"#;
        let chunk: Chunk = serde_json::from_str(raw).unwrap();
        assert!(matches!(chunk.choices[0].delta.content, Some(Text(Cow::Borrowed("hello")))));
    }

    #[test]
    fn a_delta_that_writes_every_field_as_null_is_read() {
        // As servers that serialize every field of the delta send a text chunk.
        let chunk: Chunk = serde_json::from_str(
            r#"{"choices":[{"index":0,"delta":{"role":null,"content":"hi","reasoning":null,"reasoning_content":null,"tool_calls":null},"finish_reason":null}]}"#,
        )
        .unwrap();
        let delta = &chunk.choices[0].delta;
        assert_eq!(delta.content_text(), Some("hi"));
        assert!(delta.tool_calls.is_empty());
        let call: Chunk = serde_json::from_str(
            r#"{"choices":[{"delta":{"content":null,"tool_calls":[{"index":null,"id":"c","type":"function","function":{"name":"f","arguments":null}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(call.choices[0].delta.tool_calls[0].index, 0);
    }

    #[test]
    fn both_reasoning_names_are_read_and_reasoning_wins() {
        let both: Chunk =
            serde_json::from_str(r#"{"choices":[{"delta":{"reasoning":"a","reasoning_content":"a"}}]}"#)
                .unwrap();
        assert_eq!(both.choices[0].delta.reasoning_text(), Some("a"));
        let old: Chunk =
            serde_json::from_str(r#"{"choices":[{"delta":{"reasoning_content":"b"}}]}"#).unwrap();
        assert_eq!(old.choices[0].delta.reasoning_text(), Some("b"));
    }

    #[test]
    fn token_ids_are_read_from_the_first_chunk_and_each_delta() {
        // As vLLM 0.32 streams with `return_token_ids` (checked against the real server).
        let first: Chunk = serde_json::from_str(
            r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1,339,86,203],"prompt_text":null}"#,
        )
        .unwrap();
        assert_eq!(first.prompt_token_ids.as_deref(), Some(&[1, 339, 86, 203][..]));
        assert_eq!(first.choices[0].token_ids, None);
        let delta: Chunk = serde_json::from_str(
            r#"{"choices":[{"index":0,"delta":{"reasoning":"}nder"},"finish_reason":null,"token_ids":[97,430]}]}"#,
        )
        .unwrap();
        assert_eq!(delta.choices[0].token_ids.as_deref(), Some(&[97, 430][..]));
    }

    #[test]
    fn speculative_decoding_is_read_from_the_usage_chunk() {
        // As vLLM 0.32 sends it with `--per-request-spec-decode-metrics summary` (real server,
        // the tiny model as its own draft, 64 tokens, 3 speculative tokens).
        let last: Chunk = serde_json::from_str(
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":64,"total_tokens":73},"metrics":{"time_to_first_token_ms":12.5,"speculative_decoding":{"mean_acceptance_length":4.0,"draft_acceptance_rate":1.0,"acceptance_histogram":[0,0,0,16],"num_spec_steps":16,"num_accepted_draft_tokens":48,"num_draft_tokens":48,"num_spec_tokens":3}}}"#,
        )
        .unwrap();
        let figures = last.metrics.unwrap().speculative_decoding.unwrap().figures().unwrap();
        assert_eq!((figures.steps, figures.accepted, figures.drafted, figures.spec_tokens), (16, 48, 48, 3));
        assert_eq!(figures.histogram, [0, 0, 0, 16]);
        assert_eq!(figures.length(), 4.0);
        // An ngram draft that proposed nothing: no steps, so no figure (vLLM says 1.0).
        let none: Chunk = serde_json::from_str(
            r#"{"choices":[],"metrics":{"speculative_decoding":{"mean_acceptance_length":1.0,"draft_acceptance_rate":0.0,"acceptance_histogram":[0,0,0,0],"num_spec_steps":0,"num_accepted_draft_tokens":0,"num_draft_tokens":0,"num_spec_tokens":3}}}"#,
        )
        .unwrap();
        assert_eq!(none.metrics.unwrap().speculative_decoding.unwrap().figures(), None);
        let without: Chunk = serde_json::from_str(r#"{"choices":[],"metrics":null}"#).unwrap();
        assert!(without.metrics.is_none());
    }

    #[test]
    fn usage_chunks_have_no_choices_and_escapes_still_parse() {
        let usage: Chunk = serde_json::from_str(
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,"completion_tokens_details":{"reasoning_tokens":3}}}"#,
        )
        .unwrap();
        let u = usage.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (5, 7));
        assert_eq!(u.completion_tokens_details.unwrap().reasoning_tokens, Some(3));
        let escaped: Chunk = serde_json::from_str(r#"{"choices":[{"delta":{"content":"a\nb"}}]}"#).unwrap();
        assert_eq!(escaped.choices[0].delta.content_text(), Some("a\nb"));
        let null: Chunk =
            serde_json::from_str(r#"{"choices":[{"delta":{"content":null},"finish_reason":"stop"}]}"#)
                .unwrap();
        assert_eq!(null.choices[0].delta.content_text(), None);
    }
}
