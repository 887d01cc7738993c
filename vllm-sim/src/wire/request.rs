use serde::Deserialize;
use serde_json::{Map, Value};

/// `POST /v1/chat/completions`. Keys the simulator does not model (`seed`, `top_k`,
/// `stop`, ...) are accepted and ignored, as vLLM ignores unknown keys.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    /// Optional as in vLLM, which then uses the served model.
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    /// Deprecated by OpenAI in favour of `max_completion_tokens`; both are accepted.
    pub max_tokens: Option<i64>,
    pub max_completion_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// Emit a chunk every this many tokens (newer vLLM).
    pub stream_interval: Option<u32>,
    /// Becomes the response id `chatcmpl-<request_id>`.
    pub request_id: Option<String>,
    /// Report the prompt's and the completion's token ids (vLLM 0.10.2 on).
    pub return_token_ids: Option<bool>,
    /// Functions the model may call: `[{"type": "function", "function": {"name", ...}}]`.
    pub tools: Option<Vec<Value>>,
    /// `"auto"` (the default with tools), `"required"` or `"none"`.
    pub tool_choice: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
    pub continuous_usage_stats: Option<bool>,
}

impl StreamOptions {
    /// Whether Python would find the dict truthy: vLLM only rejects a non-empty one on a
    /// non-streaming request.
    pub fn is_set(&self) -> bool {
        self.include_usage.is_some() || self.continuous_usage_stats.is_some()
    }
}

#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: Option<MessageContent>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text {
        text: String,
    },
    /// Images, audio and the like: accepted, contribute no tokens.
    #[serde(other)]
    Other,
}

impl ChatMessage {
    /// The message's text, in order, without allocating.
    pub fn text_segments(&self) -> impl Iterator<Item = &str> {
        let (whole, parts) = match &self.content {
            Some(MessageContent::Text(text)) => (Some(text.as_str()), &[][..]),
            Some(MessageContent::Parts(parts)) => (None, parts.as_slice()),
            None => (None, &[][..]),
        };
        whole.into_iter().chain(parts.iter().filter_map(|part| match part {
            ContentPart::Text { text } => Some(text.as_str()),
            ContentPart::Other => None,
        }))
    }
}

impl ChatRequest {
    /// The function this request's answer calls, if any: the first tool offered, when the
    /// choice is `required`, or `auto` and the last message is a question (after a tool's
    /// result, the model answers in text, as an agent loop does).
    pub fn called_tool(&self) -> Option<String> {
        let name = self.tools.as_ref()?.iter().find_map(|t| {
            t.get("function").unwrap_or(t).get("name").and_then(Value::as_str).map(str::to_string)
        })?;
        match self.tool_choice.as_ref().and_then(Value::as_str).unwrap_or("auto") {
            "required" => Some(name),
            "auto" if self.messages.last().is_some_and(|m| m.role == "user") => Some(name),
            _ => None,
        }
    }

    /// Tools offered with `tool_choice` auto, or none given (vLLM's default with tools).
    pub fn lets_the_model_choose_a_tool(&self) -> bool {
        self.tools.as_ref().is_some_and(|t| !t.is_empty())
            && self.tool_choice.as_ref().is_none_or(|c| c.as_str() == Some("auto"))
    }

    /// Thinking is on unless the chat template is told otherwise: `enable_thinking` (Qwen3)
    /// or `thinking` (DeepSeek-V3.1, Kimi-K2, Granite).
    pub fn thinking_enabled(&self) -> bool {
        thinking_enabled(self.chat_template_kwargs.as_ref())
    }
}

fn thinking_enabled(kwargs: Option<&Map<String, Value>>) -> bool {
    let flag = |key| kwargs.and_then(|kwargs| kwargs.get(key)).and_then(Value::as_bool);
    flag("enable_thinking").or_else(|| flag("thinking")).unwrap_or(true)
}

/// `POST /tokenize`: either a raw `prompt` or chat `messages` rendered through the template.
#[derive(Debug, Deserialize)]
pub struct TokenizeRequest {
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub messages: Option<Vec<ChatMessage>>,
    pub add_generation_prompt: Option<bool>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub return_token_strs: Option<bool>,
}

impl TokenizeRequest {
    pub fn thinking_enabled(&self) -> bool {
        thinking_enabled(self.chat_template_kwargs.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_may_be_text_parts_or_null_and_unknown_keys_are_ignored() {
        let request: ChatRequest = serde_json::from_value(json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "x"}},
                    {"type": "text", "text": "here"}
                ]},
                {"role": "assistant", "content": null, "tool_calls": []}
            ],
            "top_k": 20,
            "repetition_penalty": 1.1
        }))
        .unwrap();
        let texts: Vec<Vec<&str>> = request.messages.iter().map(|m| m.text_segments().collect()).collect();
        assert_eq!(texts, [vec!["be brief"], vec!["look", "here"], vec![]]);
    }

    #[test]
    fn thinking_switches() {
        let with = |kwargs: Value| thinking_enabled(kwargs.as_object());
        assert!(with(json!({})));
        assert!(!with(json!({"enable_thinking": false})));
        assert!(!with(json!({"thinking": false})));
        assert!(with(json!({"enable_thinking": true, "thinking": false})));
        assert!(thinking_enabled(None));
    }
}
