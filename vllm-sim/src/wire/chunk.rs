use super::{Null, ResponseHeader, Usage};
use serde::Serialize;

/// One `data:` event of a streamed chat completion.
#[derive(Debug, Serialize)]
pub struct ChatChunk<'a> {
    #[serde(flatten)]
    pub header: &'a ResponseHeader,
    /// One choice, or none on the trailing usage chunk.
    pub choices: &'a [ChunkChoice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The prompt's token ids, on the first chunk when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_token_ids: Option<&'a [u32]>,
    /// The request's figures, on the usage chunk (speculative decoding, when reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<&'a crate::draft::ResponseMetrics>,
}

#[derive(Debug, Serialize)]
pub struct ChunkChoice<'a> {
    pub index: u32,
    pub delta: Delta<'a>,
    pub logprobs: Null,
    pub finish_reason: Option<&'static str>,
    /// Present (null: no stop string matched) on the finishing chunk only, as in vLLM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<Null>,
    /// The ids of the tokens this chunk carries, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<&'a [u32]>,
}

/// Fields appear only when set: vLLM serialises deltas with `exclude_unset`.
#[derive(Debug, Default, Serialize)]
pub struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<&'a str>,
    /// A piece of the call the answer makes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<[ToolCallDelta<'a>; 1]>,
}

/// vLLM's streamed call: the first piece names the call's id and function, the others add to
/// its arguments.
#[derive(Debug, Serialize)]
pub struct ToolCallDelta<'a> {
    pub index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub function: FunctionDelta<'a>,
}

#[derive(Debug, Serialize)]
pub struct FunctionDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub arguments: &'a str,
}
