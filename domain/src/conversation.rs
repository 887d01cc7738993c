//! Tool calling in OpenAI's chat shape: the functions a conversation offers, the calls an
//! assistant turn makes and what they are checked for.
//!
//! A call's `arguments` is kept as the text the model wrote (the API sends a JSON string), so a
//! call whose arguments are not JSON is kept, shown and flagged rather than lost.

use serde::{Deserialize, Serialize};

/// One call an assistant turn makes: `{"id", "type": "function", "function": {"name", "arguments"}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id tool results answer (`tool_call_id`); servers make one per call.
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type", default)]
    pub kind: ToolKind,
    pub function: FunctionCall,
}

/// OpenAI's only kind of tool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    #[default]
    Function,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// The arguments as JSON text, exactly as written.
    #[serde(default)]
    pub arguments: String,
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            kind: ToolKind::Function,
            function: FunctionCall { name: name.into(), arguments: arguments.into() },
        }
    }

    /// The arguments as a JSON object, or why they are not one.
    pub fn parsed_arguments(&self) -> Result<serde_json::Map<String, serde_json::Value>, String> {
        match serde_json::from_str::<serde_json::Value>(&self.function.arguments) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            Ok(_) => Err(format!("the arguments of `{}` are JSON but not an object", self.function.name)),
            Err(e) => Err(format!("the arguments of `{}` are not valid JSON: {e}", self.function.name)),
        }
    }
}

/// The names of the functions a tool list (`[{"type": "function", "function": {"name", ...}}]`)
/// offers, or why the list is not one.
pub fn tool_names(tools: &serde_json::Value) -> Result<Vec<String>, String> {
    let serde_json::Value::Array(items) = tools else {
        return Err("the tools are not a list".to_string());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let function = tool.get("function").unwrap_or(tool);
            match function.get("name") {
                Some(serde_json::Value::String(name)) if !name.trim().is_empty() => Ok(name.clone()),
                _ => Err(format!("tool {i} has no function name")),
            }
        })
        .collect()
}

/// The tools as vLLM hands them to a chat template (`ChatCompletionToolsParam.model_dump()` in
/// vLLM 0.32): each `{"type", "function": {"name", "description", "parameters", "strict"?,
/// "defer_loading"?}, "defer_loading"?}` in that order, `description` and `parameters` null when
/// absent, `strict` and `defer_loading` only when set (a tool's `defer_loading` copied into a
/// function without one), other keys dropped; below the top levels
/// (`parameters`), everything as the request sent it, key order included (pydantic keeps a dict's
/// order). A render of the exported row's tools is then the render the target saw: the row's own
/// top-level order put every prompt out of step with the real server's
/// (`scripts/real-vllm-tools.sh`). Anything that is not a list of tools is returned as it is.
pub fn served_tools(tools: &serde_json::Value) -> serde_json::Value {
    use serde_json::{Map, Value};
    let Value::Array(list) = tools else { return tools.clone() };
    let field = |v: Option<&Value>| v.cloned().unwrap_or(Value::Null);
    let set = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
    Value::Array(
        list.iter()
            .map(|tool| {
                let Some(function) = tool.get("function") else { return tool.clone() };
                let mut described = Map::new();
                for key in ["name", "description", "parameters"] {
                    described.insert(key.into(), field(function.get(key)));
                }
                if let Some(v) = set(function.get("strict")) {
                    described.insert("strict".into(), v);
                }
                // A tool's `defer_loading` is copied into its function when that has none.
                if let Some(v) = set(function.get("defer_loading")).or_else(|| set(tool.get("defer_loading")))
                {
                    described.insert("defer_loading".into(), v);
                }
                let mut served = Map::new();
                served.insert("type".into(), Value::from("function"));
                served.insert("function".into(), Value::Object(described));
                if let Some(v) = set(tool.get("defer_loading")) {
                    served.insert("defer_loading".into(), v);
                }
                Value::Object(served)
            })
            .collect(),
    )
}

/// What is wrong with the calls of a generated turn, each a flag the review page shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallProblem {
    /// Arguments that are not a JSON object.
    BadArguments,
    /// A function the conversation does not offer.
    UnknownTool,
}

impl CallProblem {
    /// The automatic flag's name.
    pub fn flag(self) -> &'static str {
        match self {
            Self::BadArguments => "bad_tool_arguments",
            Self::UnknownTool => "unknown_tool",
        }
    }
}

/// The problems of `calls` against the functions offered (`offered`, when the conversation
/// lists them).
pub fn call_problems(calls: &[ToolCall], offered: Option<&[String]>) -> Vec<CallProblem> {
    let mut problems = Vec::new();
    if calls.iter().any(|c| c.parsed_arguments().is_err()) {
        problems.push(CallProblem::BadArguments);
    }
    if let Some(offered) = offered {
        if calls.iter().any(|c| !offered.contains(&c.function.name)) {
            problems.push(CallProblem::UnknownTool);
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_reads_and_writes_openai_shape() {
        let wire = json!({"id": "call_1", "type": "function",
                          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}});
        let call: ToolCall = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(call, ToolCall::new("call_1", "get_weather", "{\"city\": \"Paris\"}"));
        assert_eq!(serde_json::to_value(&call).unwrap(), wire);
        assert_eq!(call.parsed_arguments().unwrap()["city"], "Paris");
    }

    #[test]
    fn problems_name_bad_arguments_and_unknown_tools() {
        let offered = vec!["get_weather".to_string()];
        let good = ToolCall::new("a", "get_weather", "{}");
        assert!(call_problems(std::slice::from_ref(&good), Some(&offered)).is_empty());
        let broken = ToolCall::new("b", "get_weather", "{\"city\": ");
        assert_eq!(call_problems(&[good.clone(), broken], Some(&offered)), [CallProblem::BadArguments]);
        let list = ToolCall::new("c", "get_weather", "[1]");
        assert!(list.parsed_arguments().unwrap_err().contains("not an object"));
        let unknown = ToolCall::new("d", "send_email", "{}");
        assert_eq!(call_problems(std::slice::from_ref(&unknown), Some(&offered)), [CallProblem::UnknownTool]);
        // Without a tool list, no name is unknown.
        assert!(call_problems(&[unknown], None).is_empty());
    }

    #[test]
    fn tool_names_read_both_shapes_and_refuse_nameless_tools() {
        let tools = json!([{"type": "function", "function": {"name": "a", "parameters": {}}}, {"name": "b"}]);
        assert_eq!(tool_names(&tools).unwrap(), ["a", "b"]);
        assert!(tool_names(&json!([{"type": "function"}]))
            .unwrap_err()
            .contains("tool 0 has no function name"));
        assert!(tool_names(&json!({"name": "a"})).unwrap_err().contains("not a list"));
    }

    #[test]
    fn tools_are_served_as_vllm_hands_them_to_the_template() {
        // As a source writes them: keys in any order, an extra key, no description, a tool-level
        // `defer_loading`, `parameters` with keys out of alphabetical order.
        let written: serde_json::Value = serde_json::from_str(
            r#"[{"function": {"parameters": {"type": "object", "properties": {"b": {"type": "string"}, "a": {}}},
                "x-extra": 1, "name": "f"}, "type": "function", "defer_loading": true},
                {"type": "function", "function": {"name": "g", "strict": false, "description": "G."}}]"#,
        )
        .unwrap();
        let served = served_tools(&written);
        assert_eq!(
            serde_json::to_string(&served).unwrap(),
            concat!(
                r#"[{"type":"function","function":{"name":"f","description":null,"#,
                r#""parameters":{"type":"object","properties":{"b":{"type":"string"},"a":{}}},"defer_loading":true},"#,
                r#""defer_loading":true},"#,
                r#"{"type":"function","function":{"name":"g","description":"G.","parameters":null,"strict":false}}]"#
            )
        );
        assert_eq!(served_tools(&served), served, "serving twice changes nothing");
    }
}
