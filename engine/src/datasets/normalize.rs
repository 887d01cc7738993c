//! Turning one record into a normalized conversation with OpenAI roles, or saying why not.

use super::reader::kind_of;
use domain::dataset::{Mapping, Schema};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// A record ready to be stored.
#[derive(Debug, Clone)]
pub struct Normalized {
    pub row_key: String,
    pub messages: Vec<Msg>,
    /// `messages` as stored (compact JSON); its SHA-256 is `content_hash`.
    pub messages_json: String,
    pub content_hash: [u8; 32],
    pub category: Option<String>,
    /// Messages other than system ones.
    pub turn_count: i32,
    /// Characters before the last assistant message (all of them when there is none).
    pub prompt_chars: i32,
}

#[derive(Debug, Clone, Serialize)]
pub struct Msg {
    pub role: &'static str,
    pub content: String,
}

type Reason = String;

pub fn normalize(record: &Map<String, Value>, mapping: &Mapping) -> Result<Normalized, Reason> {
    let messages = match mapping.schema {
        Schema::Sharegpt | Schema::Openai => conversation(record, &mapping.column)?,
        Schema::Alpaca => alpaca(record, &mapping.column)?,
        Schema::Prompt => vec![Msg { role: "user", content: text_field(record, &mapping.column)? }],
    };
    if messages.iter().all(|m| m.content.trim().is_empty()) {
        return Err("empty conversation: every message is blank".into());
    }
    if !messages.iter().any(|m| m.role == "user") {
        return Err("the conversation has no user message".into());
    }
    if messages.iter().any(|m| m.content.contains('\0')) {
        return Err("a message contains a NUL character, which cannot be stored".into());
    }
    let messages_json = serde_json::to_string(&messages).expect("messages serialize");
    let content_hash: [u8; 32] = Sha256::digest(messages_json.as_bytes()).into();
    let row_key = match &mapping.id_column {
        None => hex::encode(&content_hash[..16]),
        Some(column) => scalar_field(record, column, "id")?
            .ok_or_else(|| format!("the id column `{column}` is missing or null"))?,
    };
    let category = match &mapping.category_column {
        None => None,
        Some(column) => scalar_field(record, column, "category")?,
    };
    let last_assistant = messages.iter().rposition(|m| m.role == "assistant").unwrap_or(messages.len());
    let prompt_chars: usize = messages[..last_assistant].iter().map(|m| m.content.chars().count()).sum();
    let turn_count = messages.iter().filter(|m| m.role != "system").count();
    Ok(Normalized {
        row_key,
        messages,
        messages_json,
        content_hash,
        category,
        turn_count: turn_count.min(i32::MAX as usize) as i32,
        prompt_chars: prompt_chars.min(i32::MAX as usize) as i32,
    })
}

/// A ShareGPT (`from`/`value`) or OpenAI (`role`/`content`) message list; either item shape is
/// accepted in either schema, as published datasets mix them.
fn conversation(record: &Map<String, Value>, column: &str) -> Result<Vec<Msg>, Reason> {
    let items = match record.get(column) {
        None | Some(Value::Null) => return Err(format!("the column `{column}` is missing")),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(format!("`{column}` is {}, expected a list of messages", kind_of(other))),
    };
    if items.is_empty() {
        return Err(format!("empty conversation: `{column}` has no messages"));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(item) = item else {
            return Err(format!("`{column}[{i}]` is {}, expected a message object", kind_of(item)));
        };
        let (speaker_key, content_key) =
            if item.contains_key("from") { ("from", "value") } else { ("role", "content") };
        let speaker = match item.get(speaker_key) {
            Some(Value::String(s)) => s,
            None | Some(Value::Null) => {
                return Err(format!("`{column}[{i}]` has no `from` or `role`"));
            }
            Some(other) => {
                return Err(format!("`{column}[{i}].{speaker_key}` is {}, expected text", kind_of(other)))
            }
        };
        let role = role_of(speaker).ok_or_else(|| {
            format!("`{column}[{i}].{speaker_key}` is `{speaker}`, which is not a known speaker")
        })?;
        let content = match item.get(content_key) {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            // OpenAI content parts: [{"type":"text","text":...}].
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            Some(other) => {
                return Err(format!("`{column}[{i}].{content_key}` is {}, expected text", kind_of(other)))
            }
        };
        out.push(Msg { role, content });
    }
    Ok(out)
}

fn role_of(speaker: &str) -> Option<&'static str> {
    Some(match speaker.to_ascii_lowercase().as_str() {
        "human" | "user" => "user",
        "gpt" | "chatgpt" | "bing" | "bard" | "assistant" | "model" => "assistant",
        "system" | "developer" => "system",
        _ => return None,
    })
}

fn alpaca(record: &Map<String, Value>, column: &str) -> Result<Vec<Msg>, Reason> {
    let instruction = text_field(record, column)?;
    let input = optional_text(record, "input")?;
    let output = match optional_text(record, "output")? {
        Some(o) => Some(o),
        None => optional_text(record, "response")?,
    };
    let prompt = match input {
        Some(input) if !input.trim().is_empty() => format!("{instruction}\n\n{input}"),
        _ => instruction,
    };
    let mut messages = vec![Msg { role: "user", content: prompt }];
    if let Some(output) = output.filter(|o| !o.trim().is_empty()) {
        messages.push(Msg { role: "assistant", content: output });
    }
    Ok(messages)
}

fn text_field(record: &Map<String, Value>, column: &str) -> Result<String, Reason> {
    match record.get(column) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(format!("empty conversation: `{column}` is blank")),
        None | Some(Value::Null) => Err(format!("the column `{column}` is missing")),
        Some(other) => Err(format!("`{column}` is {}, expected text", kind_of(other))),
    }
}

fn optional_text(record: &Map<String, Value>, column: &str) -> Result<Option<String>, Reason> {
    match record.get(column) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("`{column}` is {}, expected text", kind_of(other))),
    }
}

/// An id or category: text or a number, as text. Null or absent is `None`.
fn scalar_field(record: &Map<String, Value>, column: &str, what: &str) -> Result<Option<String>, Reason> {
    let value = match record.get(column) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(other) => {
            return Err(format!(
                "the {what} column `{column}` is {}, expected text or a number",
                kind_of(other)
            ))
        }
    };
    if value.contains('\0') {
        return Err(format!("the {what} column `{column}` contains a NUL character"));
    }
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn sharegpt_roles_become_openai_roles() {
        let m = Mapping { id_column: Some("id".into()), ..Mapping::new(Schema::Sharegpt) };
        let n = normalize(
            &obj(json!({"id": 7, "conversations": [
                {"from": "system", "value": "Be brief."},
                {"from": "human", "value": "Hi"},
                {"from": "gpt", "value": "Hello!"}]})),
            &m,
        )
        .unwrap();
        let roles: Vec<_> = n.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["system", "user", "assistant"]);
        assert_eq!(n.row_key, "7");
        assert_eq!(n.turn_count, 2);
        assert_eq!(n.prompt_chars, "Be brief.".len() as i32 + 2);
    }

    #[test]
    fn wrong_shapes_are_explained() {
        let m = Mapping::new(Schema::Sharegpt);
        let e = normalize(&obj(json!({"conversations": []})), &m).unwrap_err();
        assert!(e.starts_with("empty conversation"), "{e}");
        let e = normalize(&obj(json!({"conversations": "hi"})), &m).unwrap_err();
        assert!(e.contains("is a string, expected a list"), "{e}");
        let e = normalize(&obj(json!({"conversations": [{"from": "robot", "value": "x"}]})), &m).unwrap_err();
        assert!(e.contains("not a known speaker"), "{e}");
        let e = normalize(&obj(json!({"other": 1})), &m).unwrap_err();
        assert!(e.contains("`conversations` is missing"), "{e}");
    }

    #[test]
    fn alpaca_joins_instruction_and_input() {
        let n = normalize(
            &obj(json!({"instruction": "Translate", "input": "bonjour", "output": "hello"})),
            &Mapping::new(Schema::Alpaca),
        )
        .unwrap();
        assert_eq!(n.messages[0].content, "Translate\n\nbonjour");
        assert_eq!(n.messages[1].role, "assistant");
        assert_eq!(n.row_key.len(), 32);
    }
}
