//! Assembling streamed `tool_calls` deltas into whole calls.
//!
//! vLLM's tool parsers stream each call as a first fragment with its `index`, `id` and function
//! `name`, then fragments of its `arguments` text under the same `index`. Calls are kept in the
//! order of their index; arguments are kept as text, whatever they hold (a call whose arguments
//! are not JSON is flagged at review, not lost).

use super::wire::ToolCallDelta;
use domain::conversation::ToolCall;

#[derive(Debug, Default)]
pub(crate) struct CallAssembler {
    calls: Vec<ToolCall>,
}

impl CallAssembler {
    pub fn add(&mut self, delta: &ToolCallDelta) {
        while self.calls.len() <= delta.index {
            self.calls.push(ToolCall::new(String::new(), String::new(), String::new()));
        }
        let call = &mut self.calls[delta.index];
        if let Some(id) = delta.id.as_deref().filter(|id| !id.is_empty()) {
            call.id = id.to_string();
        }
        if let Some(function) = &delta.function {
            if let Some(name) = &function.name {
                // Servers send the name once; some repeat it whole on later fragments.
                if call.function.name.is_empty() || call.function.name != *name {
                    call.function.name.push_str(name);
                }
            }
            if let Some(arguments) = &function.arguments {
                call.function.arguments.push_str(arguments);
            }
        }
    }

    /// The calls, each with an id (the server's, or `call_N` when it sent none).
    pub fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_iter()
            .enumerate()
            .filter(|(_, c)| !c.function.name.is_empty() || !c.function.arguments.is_empty())
            .map(|(i, mut c)| {
                if c.id.is_empty() {
                    c.id = format!("call_{i}");
                }
                c
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vllm::wire::Delta;

    fn delta(json: &str) -> Delta<'_> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn fragments_join_into_whole_calls_in_index_order() {
        let mut calls = CallAssembler::default();
        for json in [
            r#"{"tool_calls":[{"index":0,"id":"chatcmpl-tool-a","type":"function","function":{"name":"get_weather","arguments":""}}]}"#,
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]}"#,
            r#"{"tool_calls":[{"index":1,"id":"chatcmpl-tool-b","type":"function","function":{"name":"get_time"}}]}"#,
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}"#,
            r#"{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}"#,
        ] {
            for d in &delta(json).tool_calls {
                calls.add(d);
            }
        }
        assert_eq!(
            calls.finish(),
            [
                ToolCall::new("chatcmpl-tool-a", "get_weather", "{\"city\": \"Paris\"}"),
                ToolCall::new("chatcmpl-tool-b", "get_time", "{}"),
            ]
        );
    }

    #[test]
    fn a_repeated_name_is_not_doubled_and_a_missing_id_is_made() {
        let mut calls = CallAssembler::default();
        for json in [
            r#"{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{"}}]}"#,
            r#"{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"}"}}]}"#,
        ] {
            for d in &delta(json).tool_calls {
                calls.add(d);
            }
        }
        assert_eq!(calls.finish(), [ToolCall::new("call_0", "f", "{}")]);
    }
}
