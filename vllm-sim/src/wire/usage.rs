use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub total_tokens: u32,
    pub completion_tokens: u32,
    /// Sent on final usage only, as in vLLM; running usage (`continuous_usage_stats`) omits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    pub reasoning_tokens: u32,
}

impl Usage {
    /// Token counts so far, without the reasoning breakdown.
    pub fn running(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            completion_tokens,
            completion_tokens_details: None,
        }
    }

    pub fn last(prompt_tokens: u32, completion_tokens: u32, reasoning_tokens: u32) -> Self {
        Self {
            completion_tokens_details: Some(CompletionTokensDetails { reasoning_tokens }),
            ..Self::running(prompt_tokens, completion_tokens)
        }
    }
}
