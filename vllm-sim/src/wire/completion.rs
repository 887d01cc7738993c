use super::{Null, ResponseHeader, Usage};
use serde::Serialize;

/// A non-streamed chat completion, with the null fields vLLM always sends.
#[derive(Debug, Serialize)]
pub struct ChatCompletion<'a> {
    #[serde(flatten)]
    pub header: &'a ResponseHeader,
    pub choices: [Choice<'a>; 1],
    pub service_tier: Null,
    pub system_fingerprint: Null,
    pub usage: Usage,
    pub prompt_logprobs: Null,
    pub kv_transfer_params: Null,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_token_ids: Option<&'a [u32]>,
    /// Speculative decoding, when reported per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<crate::draft::ResponseMetrics>,
}

#[derive(Debug, Serialize)]
pub struct Choice<'a> {
    pub index: u32,
    pub message: Message<'a>,
    pub logprobs: Null,
    pub finish_reason: &'static str,
    pub stop_reason: Null,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
}

#[derive(Debug, Serialize)]
pub struct Message<'a> {
    pub role: &'static str,
    /// Null when every token went to reasoning.
    pub content: Option<&'a str>,
    pub refusal: Null,
    pub annotations: Null,
    pub audio: Null,
    pub function_call: Null,
    pub tool_calls: [Null; 0],
    /// Outer `None`: the server does not use this field name; inner `None`: JSON null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<Option<&'a str>>,
}
