//! Both shapes of vLLM error bodies: nested `{"error":{"message",...}}` (0.10.1 on) and flat
//! `{"object":"error","message",...}` (before), plus anything else as raw text.

use serde_json::Value;

/// The human-readable message of an error body or error chunk.
pub fn error_message(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(value) => message_of(&value).unwrap_or_else(|| truncate(body)),
        Err(_) => truncate(body),
    }
}

/// The message inside a parsed error value (`{"error": ...}`, a flat body, or a bare string).
pub fn message_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Object(map) => {
            if let Some(inner) = map.get("error") {
                if let Some(message) = message_of(inner) {
                    return Some(message);
                }
            }
            map.get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| map.get("detail").and_then(Value::as_str).map(str::to_string))
        }
        _ => None,
    }
}

fn truncate(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(empty response body)".to_string();
    }
    let mut end = text.len().min(500);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::error_message;

    #[test]
    fn reads_nested_flat_and_unknown_bodies() {
        assert_eq!(
            error_message(
                r#"{"error":{"message":"max_tokens too big","type":"BadRequestError","param":"max_tokens","code":400}}"#
            ),
            "max_tokens too big"
        );
        assert_eq!(
            error_message(
                r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","code":404}"#
            ),
            "The model `x` does not exist."
        );
        assert_eq!(error_message(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(error_message("Internal Server Error"), "Internal Server Error");
        assert_eq!(error_message(""), "(empty response body)");
    }
}
