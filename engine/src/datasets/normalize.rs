//! Turning one record into a normalized conversation with OpenAI roles, or saying why not.

use super::reader::kind_of;
use domain::conversation::{tool_names, ToolCall};
use domain::dataset::{Mapping, Schema};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// A record ready to be stored.
#[derive(Debug, Clone)]
pub struct Normalized {
    pub row_key: String,
    pub messages: Vec<Msg>,
    /// `messages` as stored (compact JSON). Its SHA-256 is `content_hash`, taken over the tools
    /// too when the row offers any.
    pub messages_json: String,
    /// The functions the row offers, as stored (compact JSON of the list).
    pub tools_json: Option<String>,
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Msg {
    fn text(role: &'static str, content: String) -> Self {
        Self { role, content, tool_calls: Vec::new(), tool_call_id: None }
    }
}

type Reason = String;

pub fn normalize(record: &Map<String, Value>, mapping: &Mapping) -> Result<Normalized, Reason> {
    let messages = match mapping.schema {
        Schema::Sharegpt | Schema::Openai => conversation(record, &mapping.column)?,
        Schema::Alpaca => alpaca(record, &mapping.column)?,
        Schema::Prompt => vec![Msg::text("user", text_field(record, &mapping.column)?)],
    };
    let tools = match &mapping.tools_column {
        Some(column) => tools_field(record, column)?,
        None => None,
    };
    if messages.iter().all(|m| m.content.trim().is_empty() && m.tool_calls.is_empty()) {
        return Err("empty conversation: every message is blank".into());
    }
    if !messages.iter().any(|m| m.role == "user") {
        return Err("the conversation has no user message".into());
    }
    if messages.iter().any(|m| m.content.contains('\0')) {
        return Err("a message contains a NUL character, which cannot be stored".into());
    }
    let messages_json =
        serde_json::to_string(&messages).map_err(|e| format!("the messages cannot be stored: {e}"))?;
    let tools_json = match &tools {
        Some(tools) => {
            Some(serde_json::to_string(tools).map_err(|e| format!("the tools cannot be stored: {e}"))?)
        }
        None => None,
    };
    let mut hasher = Sha256::new();
    hasher.update(messages_json.as_bytes());
    if let Some(tools) = &tools_json {
        // Rows without tools hash as they always did.
        hasher.update(b"\ntools:");
        hasher.update(tools.as_bytes());
    }
    let content_hash: [u8; 32] = hasher.finalize().into();
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
        tools_json,
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
    let mut out: Vec<Msg> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(item) = item else {
            return Err(format!("`{column}[{i}]` is {}, expected a message object", kind_of(item)));
        };
        let at = format!("{column}[{i}]");
        let (speaker_key, content_key) =
            if item.contains_key("from") { ("from", "value") } else { ("role", "content") };
        let speaker = match item.get(speaker_key) {
            Some(Value::String(s)) => s,
            None | Some(Value::Null) => {
                return Err(format!("`{at}` has no `from` or `role`"));
            }
            Some(other) => return Err(format!("`{at}.{speaker_key}` is {}, expected text", kind_of(other))),
        };
        let speaker = role_of(speaker)
            .ok_or_else(|| format!("`{at}.{speaker_key}` is `{speaker}`, which is not a known speaker"))?;
        let content = match item.get(content_key) {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            // OpenAI content parts: [{"type":"text","text":...}].
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            // A ShareGPT `function_call` may hold its call as an object.
            Some(call @ Value::Object(_)) if speaker == Speaker::FunctionCall => call.to_string(),
            Some(other) => return Err(format!("`{at}.{content_key}` is {}, expected text", kind_of(other))),
        };
        match speaker {
            Speaker::Role(role) => {
                let tool_calls = match item.get("tool_calls") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(_) if role != "assistant" => {
                        return Err(format!(
                        "`{at}` is a {role} message with `tool_calls`; only assistant messages call tools"
                    ))
                    }
                    Some(calls) => openai_calls(calls, &at)?,
                };
                out.push(Msg { tool_calls, ..Msg::text(role, content) });
            }
            Speaker::Tool => {
                let id = match item.get("tool_call_id") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(id)) => Some(id.clone()),
                    Some(other) => {
                        return Err(format!("`{at}.tool_call_id` is {}, expected text", kind_of(other)))
                    }
                };
                let tool_call_id = answered_call(&out, id, &at)?;
                out.push(Msg { tool_call_id, ..Msg::text("tool", content) });
            }
            Speaker::FunctionCall => {
                let calls = sharegpt_calls(&content, out.len(), &at)?;
                // A call right after the assistant's own text belongs to that turn.
                match out.last_mut() {
                    Some(last) if last.role == "assistant" && last.tool_calls.is_empty() => {
                        last.tool_calls = calls
                    }
                    _ => out.push(Msg { tool_calls: calls, ..Msg::text("assistant", String::new()) }),
                }
            }
        }
    }
    Ok(out)
}

/// Who speaks a message: a plain role, a tool result, or a ShareGPT `function_call` turn
/// (the assistant calling a function, its value the call as JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Speaker {
    Role(&'static str),
    Tool,
    FunctionCall,
}

/// OpenAI `tool_calls`: a list of `{id, type, function: {name, arguments}}`, arguments a JSON
/// string (or an object, which some datasets store).
fn openai_calls(calls: &Value, at: &str) -> Result<Vec<ToolCall>, Reason> {
    let Value::Array(calls) = calls else {
        return Err(format!("`{at}.tool_calls` is {}, expected a list of calls", kind_of(calls)));
    };
    calls
        .iter()
        .enumerate()
        .map(|(k, call)| {
            let at = format!("{at}.tool_calls[{k}]");
            let function = call.get("function").unwrap_or(call);
            let id = match call.get("id") {
                Some(Value::String(id)) if !id.is_empty() => id.clone(),
                _ => format!("call_{k}"),
            };
            called(function, id, &at)
        })
        .collect()
}

/// A ShareGPT `function_call` value: `{"name", "arguments"}` or a list of them, as JSON text.
fn sharegpt_calls(value: &str, position: usize, at: &str) -> Result<Vec<ToolCall>, Reason> {
    let parsed: Value = serde_json::from_str(value)
        .map_err(|e| format!("`{at}` is a function call whose JSON is broken: {e}"))?;
    let calls = match parsed {
        Value::Array(calls) => calls,
        call => vec![call],
    };
    calls
        .iter()
        .enumerate()
        .map(|(k, call)| called(call, format!("call_{position}_{k}"), &format!("{at}[{k}]")))
        .collect()
}

/// One call from `{"name", "arguments"}`, its arguments checked to be a JSON object.
fn called(function: &Value, id: String, at: &str) -> Result<ToolCall, Reason> {
    let name = match function.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
        _ => return Err(format!("`{at}` names no function")),
    };
    let arguments = match function.get("arguments").or_else(|| function.get("parameters")) {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(text)) => text.clone(),
        Some(object @ Value::Object(_)) => object.to_string(),
        Some(other) => return Err(format!("`{at}.arguments` is {}, expected a JSON object", kind_of(other))),
    };
    let call = ToolCall::new(id, name, arguments);
    call.parsed_arguments().map_err(|e| format!("`{at}`: {e}"))?;
    Ok(call)
}

/// The id of the call a tool result answers: the one it names, which an earlier assistant turn
/// must have made, or (ShareGPT's `observation` names none) the next call of the latest
/// assistant turn that no result has answered yet. `None` when that turn wrote its calls as
/// text (Hermes' `<tool_call>` blocks): the result is kept as the source has it.
fn answered_call(before: &[Msg], id: Option<String>, at: &str) -> Result<Option<String>, Reason> {
    if let Some(id) = id {
        return if before.iter().flat_map(|m| &m.tool_calls).any(|c| c.id == id) {
            Ok(Some(id))
        } else {
            Err(format!("`{at}` answers tool call `{id}`, which no assistant turn before it made"))
        };
    }
    let Some(caller) = before.iter().rposition(|m| m.role == "assistant") else {
        return Err(format!("`{at}` is a tool result with no assistant turn before it"));
    };
    let calls = &before[caller].tool_calls;
    if calls.is_empty() {
        return Ok(None);
    }
    let answered = before[caller + 1..].iter().filter(|m| m.role == "tool").count();
    match calls.get(answered) {
        Some(call) => Ok(Some(call.id.clone())),
        None => Err(format!(
            "`{at}` is tool result {} after a turn that made {} call(s)",
            answered + 1,
            calls.len()
        )),
    }
}

/// The `tools` column: a list of function definitions, or that list as JSON text.
fn tools_field(record: &Map<String, Value>, column: &str) -> Result<Option<Value>, Reason> {
    let tools = match record.get(column) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => return Ok(None),
        Some(Value::String(text)) => serde_json::from_str(text)
            .map_err(|e| format!("the tools column `{column}` holds broken JSON: {e}"))?,
        Some(list @ Value::Array(_)) => list.clone(),
        Some(other) => {
            return Err(format!(
                "the tools column `{column}` is {}, expected a list of functions",
                kind_of(other)
            ))
        }
    };
    // Glaive-style lists hold bare functions; OpenAI's shape wraps each in {"type", "function"}.
    let tools = match tools {
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|t| {
                    if t.get("function").is_some() {
                        t
                    } else {
                        serde_json::json!({"type": "function", "function": t})
                    }
                })
                .collect(),
        ),
        other => other,
    };
    tool_names(&tools).map_err(|e| format!("the tools column `{column}`: {e}"))?;
    match &tools {
        Value::Array(items) if items.is_empty() => Ok(None),
        _ => Ok(Some(tools)),
    }
}

fn role_of(speaker: &str) -> Option<Speaker> {
    Some(match speaker.to_ascii_lowercase().as_str() {
        "human" | "user" => Speaker::Role("user"),
        "gpt" | "chatgpt" | "bing" | "bard" | "assistant" | "model" => Speaker::Role("assistant"),
        "system" | "developer" => Speaker::Role("system"),
        "tool" | "observation" | "function" | "ipython" => Speaker::Tool,
        "function_call" => Speaker::FunctionCall,
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
    let mut messages = vec![Msg::text("user", prompt)];
    if let Some(output) = output.filter(|o| !o.trim().is_empty()) {
        messages.push(Msg::text("assistant", output));
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

    fn with_tools(schema: Schema) -> Mapping {
        Mapping { tools_column: Some("tools".into()), ..Mapping::new(schema) }
    }

    const WEATHER: &str = r#"[{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]"#;

    #[test]
    fn openai_tool_calls_and_tool_results_are_kept() {
        let n = normalize(
            &obj(json!({"tools": serde_json::from_str::<Value>(WEATHER).unwrap(), "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                {"role": "tool", "tool_call_id": "call_9", "content": "18 C"},
                {"role": "assistant", "content": "It is 18 C."}]})),
            &with_tools(Schema::Openai),
        )
        .unwrap();
        let roles: Vec<_> = n.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
        assert_eq!(
            n.messages[1].tool_calls,
            [ToolCall::new("call_9", "get_weather", "{\"city\": \"Paris\"}")]
        );
        assert_eq!(n.messages[2].tool_call_id.as_deref(), Some("call_9"));
        assert!(n.tools_json.unwrap().contains("get_weather"));
        assert!(n.messages_json.contains("\"tool_call_id\":\"call_9\""));
    }

    #[test]
    fn sharegpt_function_calls_and_observations_become_calls_and_results() {
        // glaive-function-calling-v2 in ShareGPT form: tools as a JSON string of bare functions.
        let tools = r#"[{"name": "get_weather", "parameters": {"type": "object"}}]"#;
        let n = normalize(
            &obj(json!({"tools": tools, "conversations": [
                {"from": "human", "value": "Weather in Paris?"},
                {"from": "function_call", "value": "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"},
                {"from": "observation", "value": "{\"temp\": 18}"},
                {"from": "gpt", "value": "It is 18 C."}]})),
            &with_tools(Schema::Sharegpt),
        )
        .unwrap();
        let call = &n.messages[1].tool_calls[0];
        assert_eq!((n.messages[1].role, call.function.name.as_str()), ("assistant", "get_weather"));
        assert_eq!(call.parsed_arguments().unwrap()["city"], "Paris");
        assert_eq!(n.messages[2].tool_call_id.as_deref(), Some(call.id.as_str()));
        // Bare functions are wrapped in OpenAI's shape.
        let stored: Value = serde_json::from_str(n.tools_json.as_deref().unwrap()).unwrap();
        assert_eq!(stored[0]["type"], "function");
        assert_eq!(stored[0]["function"]["name"], "get_weather");
        // The same conversation without its tools is another row.
        let bare = normalize(
            &obj(json!({"conversations": [{"from": "human", "value": "Weather in Paris?"}]})),
            &with_tools(Schema::Sharegpt),
        )
        .unwrap();
        assert!(bare.tools_json.is_none());
    }

    #[test]
    fn hermes_tool_turns_after_calls_written_as_text_are_kept_as_text() {
        let n = normalize(
            &obj(json!({"conversations": [
                {"from": "system", "value": "<tools>[...]</tools>"},
                {"from": "human", "value": "Price of TSLA?"},
                {"from": "gpt", "value": "<tool_call>\n{'arguments': {'symbol': 'TSLA'}, 'name': 'get_stock_price'}\n</tool_call>"},
                {"from": "tool", "value": "<tool_response>\n{'price': 250}\n</tool_response>"},
                {"from": "gpt", "value": "It trades at 250."}]})),
            &Mapping::new(Schema::Sharegpt),
        )
        .unwrap();
        assert_eq!(n.messages[3].role, "tool");
        assert_eq!(n.messages[3].tool_call_id, None);
    }

    #[test]
    fn broken_tool_json_is_refused_with_its_reason() {
        let openai = with_tools(Schema::Openai);
        let call = |arguments: Value| {
            obj(json!({"messages": [{"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": arguments}}]}]}))
        };
        let e = normalize(&call(json!("{\"city\": ")), &openai).unwrap_err();
        assert!(e.contains("messages[1].tool_calls[0]") && e.contains("not valid JSON"), "{e}");
        let e = normalize(&call(json!("[1, 2]")), &openai).unwrap_err();
        assert!(e.contains("not an object"), "{e}");
        let e = normalize(&call(json!(7)), &openai).unwrap_err();
        assert!(e.contains("expected a JSON object"), "{e}");

        let e = normalize(
            &obj(json!({"tools": "[{\"name\": ", "messages": [{"role": "user", "content": "q"}]})),
            &openai,
        )
        .unwrap_err();
        assert!(e.contains("tools column `tools` holds broken JSON"), "{e}");
        let e = normalize(
            &obj(json!({"tools": [{"type": "function"}], "messages": [{"role": "user", "content": "q"}]})),
            &openai,
        )
        .unwrap_err();
        assert!(e.contains("tool 0 has no function name"), "{e}");
        let e = normalize(
            &obj(json!({"tools": {"name": "f"}, "messages": [{"role": "user", "content": "q"}]})),
            &openai,
        )
        .unwrap_err();
        assert!(e.contains("is an object, expected a list of functions"), "{e}");

        let e = normalize(
            &obj(json!({"messages": [{"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "other", "content": "r"}]})),
            &openai,
        )
        .unwrap_err();
        assert!(e.contains("answers tool call `other`, which no assistant turn before it made"), "{e}");
        let e = normalize(
            &obj(json!({"messages": [{"role": "user", "tool_calls": [], "content": "q"}]})),
            &openai,
        )
        .unwrap_err();
        assert!(e.contains("only assistant messages call tools"), "{e}");

        let sharegpt = with_tools(Schema::Sharegpt);
        let e = normalize(
            &obj(json!({"conversations": [{"from": "human", "value": "q"},
                {"from": "function_call", "value": "{\"name\": \"f\", \"arguments\": "}]})),
            &sharegpt,
        )
        .unwrap_err();
        assert!(e.contains("function call whose JSON is broken"), "{e}");
        let e = normalize(
            &obj(json!({"conversations": [{"from": "human", "value": "q"},
                {"from": "function_call", "value": "{\"arguments\": {}}"}]})),
            &sharegpt,
        )
        .unwrap_err();
        assert!(e.contains("names no function"), "{e}");
        let e = normalize(
            &obj(json!({"conversations": [{"from": "human", "value": "q"},
                {"from": "function_call", "value": "{\"name\": \"f\"}"},
                {"from": "observation", "value": "1"}, {"from": "observation", "value": "2"}]})),
            &sharegpt,
        )
        .unwrap_err();
        assert!(e.contains("tool result 2 after a turn that made 1 call(s)"), "{e}");
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
