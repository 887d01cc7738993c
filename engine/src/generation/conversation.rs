//! Turning a dataset row into the requests a sample sends, by turn mode.

use crate::vllm::ChatMessage;
use domain::conversation::ToolCall;
use domain::generation::TurnMode;
use serde::{Deserialize, Serialize};

/// A message of the regenerated conversation, as stored on the sample and exported. Tool
/// results (`tool`) always come from the dataset row: nothing here runs a tool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub role: String,
    #[serde(default)]
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool_call_id: Option<String>,
}

impl Turn {
    pub fn sent(message: &ChatMessage) -> Self {
        Turn {
            role: message.role.clone(),
            content: message.content.clone(),
            reasoning_content: None,
            tool_calls: message.tool_calls.clone(),
            tool_call_id: message.tool_call_id.clone(),
        }
    }
}

/// What a sample sends: a fixed prefix, then for each step the messages to append before
/// asking for the next assistant turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The history before the first regenerated turn (system prompt, earlier turns).
    pub prefix: Vec<ChatMessage>,
    /// One per regenerated assistant turn.
    pub steps: Vec<Step>,
}

/// The messages that precede a regenerated assistant turn after the previous one: user turns,
/// or the source's tool results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub messages: Vec<ChatMessage>,
    /// The calls of the source's assistant turn that these tool results answer: the
    /// regenerated turn in its place must make the same calls for the results to fit.
    pub answers: Vec<ToolCall>,
}

impl Step {
    fn asking(messages: Vec<ChatMessage>) -> Self {
        Step { messages, answers: Vec::new() }
    }

    /// The tool results with their `tool_call_id` moved from the source's calls to the
    /// regenerated turn's (by position), and how the regenerated calls fit the source's.
    pub fn answering(&self, regenerated: &[ToolCall]) -> (Vec<ChatMessage>, CallsFit) {
        let messages = self
            .messages
            .iter()
            .map(|m| {
                let moved = m.tool_call_id.as_ref().and_then(|id| {
                    let k = self.answers.iter().position(|c| c.id == *id)?;
                    regenerated.get(k).map(|c| c.id.clone())
                });
                ChatMessage { tool_call_id: moved.or_else(|| m.tool_call_id.clone()), ..m.clone() }
            })
            .collect();
        (messages, CallsFit::of(regenerated, &self.answers))
    }

    /// Whether the step starts by answering the previous turn's calls.
    pub fn has_tool_results(&self) -> bool {
        self.messages.first().is_some_and(|m| m.role == "tool")
    }
}

/// How a regenerated turn's calls fit the source's calls, whose results come next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallsFit {
    /// The same functions in the same order, with the same arguments (as JSON values: key
    /// order and spacing aside): the source's results answer them.
    Same,
    /// Other functions, or another number of calls: the results answer calls never made.
    OtherCalls,
    /// The same functions with other arguments: each result answers a question the call no
    /// longer asks (`get_weather(Rome)` answered with Paris's weather).
    OtherArguments,
}

impl CallsFit {
    pub fn of(regenerated: &[ToolCall], source: &[ToolCall]) -> Self {
        let same_functions = regenerated.len() == source.len()
            && regenerated.iter().zip(source).all(|(a, b)| a.function.name == b.function.name);
        if !same_functions {
            return CallsFit::OtherCalls;
        }
        let arguments = |call: &ToolCall| {
            serde_json::from_str::<serde_json::Value>(&call.function.arguments)
                .unwrap_or_else(|_| serde_json::Value::String(call.function.arguments.trim().to_string()))
        };
        if regenerated.iter().zip(source).all(|(a, b)| arguments(a) == arguments(b)) {
            CallsFit::Same
        } else {
            CallsFit::OtherArguments
        }
    }
}

/// Messages that ask for an assistant turn: a question, or a tool's result.
fn asks(message: &ChatMessage) -> bool {
    message.role == "user" || message.role == "tool"
}

/// Builds the plan, or says why this conversation cannot be sent.
pub fn plan(source: &serde_json::Value, mode: TurnMode, system_prompt: Option<&str>) -> Result<Plan, String> {
    let messages: Vec<ChatMessage> = serde_json::from_value(source.clone())
        .map_err(|e| format!("the dataset row's messages are not [{{role, content}}]: {e}"))?;
    // A system prompt in the run settings replaces the row's own, so generation and training
    // render the same prompt.
    let system: Vec<ChatMessage> = match system_prompt.map(str::trim).filter(|s| !s.is_empty()) {
        Some(prompt) => vec![ChatMessage::text("system", prompt)],
        None => messages.iter().filter(|m| m.role == "system").take(1).cloned().collect(),
    };
    let turns: Vec<ChatMessage> = messages.into_iter().filter(|m| m.role != "system").collect();
    if !turns.iter().any(|m| m.role == "user") {
        return Err("the conversation has no user turn to answer".to_string());
    }
    let plan = match mode {
        TurnMode::FirstUser => {
            let first = turns.into_iter().find(|m| m.role == "user").expect("checked above");
            Plan { prefix: system, steps: vec![Step::asking(vec![first])] }
        }
        TurnMode::LastAssistant => {
            let cut = turns.iter().rposition(|m| m.role == "assistant").unwrap_or(turns.len());
            let mut history: Vec<ChatMessage> = turns[..cut].to_vec();
            if !history.last().is_some_and(asks) {
                // A trailing assistant with no question before it: answer the last one instead.
                let last_ask = history.iter().rposition(asks).unwrap_or(0);
                history.truncate(last_ask + 1);
            }
            // The source's calls and their results stay in the prefix together, ids and all.
            let step = history.pop().expect("ends with a question or a tool result");
            let mut prefix = system;
            prefix.extend(history);
            Plan { prefix, steps: vec![Step::asking(vec![step])] }
        }
        TurnMode::EveryAssistant => {
            let mut steps = Vec::new();
            let mut pending: Vec<ChatMessage> = Vec::new();
            // The calls of the source's latest assistant turn, which the next tool results answer.
            let mut source_calls: Vec<ToolCall> = Vec::new();
            for message in turns {
                if message.role == "assistant" {
                    if pending.iter().any(asks) {
                        let answers =
                            if pending[0].role == "tool" { source_calls.clone() } else { Vec::new() };
                        steps.push(Step { messages: std::mem::take(&mut pending), answers });
                    }
                    source_calls = message.tool_calls;
                } else {
                    pending.push(message);
                }
            }
            if pending.iter().any(asks) {
                let answers = if pending[0].role == "tool" { source_calls } else { Vec::new() };
                steps.push(Step { messages: pending, answers });
            }
            Plan { prefix: system, steps }
        }
    };
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conversation() -> serde_json::Value {
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": "a2"}
        ])
    }

    fn contents(messages: &[ChatMessage]) -> Vec<&str> {
        messages.iter().map(|m| m.content.as_str()).collect()
    }

    #[test]
    fn last_assistant_keeps_the_history_and_regenerates_the_last_answer() {
        let p = plan(&conversation(), TurnMode::LastAssistant, None).unwrap();
        assert_eq!(contents(&p.prefix), ["be brief", "q1", "a1"]);
        assert_eq!(p.steps.len(), 1);
        assert_eq!(contents(&p.steps[0].messages), ["q2"]);
    }

    #[test]
    fn first_user_sends_only_the_opening_question() {
        let p = plan(&conversation(), TurnMode::FirstUser, Some("you are terse")).unwrap();
        assert_eq!(contents(&p.prefix), ["you are terse"]);
        assert_eq!(contents(&p.steps[0].messages), ["q1"]);
    }

    #[test]
    fn every_assistant_regenerates_each_turn_in_order() {
        let p = plan(&conversation(), TurnMode::EveryAssistant, None).unwrap();
        assert_eq!(contents(&p.prefix), ["be brief"]);
        assert_eq!(
            p.steps.iter().map(|s| contents(&s.messages)).collect::<Vec<_>>(),
            [vec!["q1"], vec!["q2"]]
        );
    }

    #[test]
    fn a_conversation_ending_in_a_question_is_answered() {
        let source = json!([{"role": "user", "content": "only"}]);
        for mode in [TurnMode::LastAssistant, TurnMode::FirstUser, TurnMode::EveryAssistant] {
            let p = plan(&source, mode, None).unwrap();
            assert_eq!(contents(&p.steps[0].messages), ["only"], "{mode:?}");
        }
    }

    #[test]
    fn rows_without_a_user_turn_are_refused_with_the_reason() {
        let source = json!([{"role": "assistant", "content": "hello"}]);
        assert!(plan(&source, TurnMode::LastAssistant, None).unwrap_err().contains("no user turn"));
        assert!(plan(&json!({"x": 1}), TurnMode::LastAssistant, None)
            .unwrap_err()
            .contains("not [{role, content}]"));
    }

    fn tool_conversation() -> serde_json::Value {
        json!([
            {"role": "user", "content": "weather in Paris and Rome?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "s1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "s2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]},
            {"role": "tool", "tool_call_id": "s1", "content": "18 C"},
            {"role": "tool", "tool_call_id": "s2", "content": "24 C"},
            {"role": "assistant", "content": "Paris 18 C, Rome 24 C."}
        ])
    }

    #[test]
    fn every_assistant_answers_the_sources_tool_results_with_the_regenerated_ids() {
        let p = plan(&tool_conversation(), TurnMode::EveryAssistant, None).unwrap();
        assert_eq!(p.steps.len(), 2);
        assert!(!p.steps[0].has_tool_results());
        let results = &p.steps[1];
        assert!(results.has_tool_results());
        assert_eq!(results.answers.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["s1", "s2"]);
        let regenerated =
            [ToolCall::new("g1", "get_weather", "{}"), ToolCall::new("g2", "get_weather", "{}")];
        let (sent, fit) = results.answering(&regenerated);
        assert_eq!(fit, CallsFit::OtherArguments, "the source asked for Paris and Rome");
        assert_eq!(
            sent.iter().map(|m| m.tool_call_id.as_deref()).collect::<Vec<_>>(),
            [Some("g1"), Some("g2")]
        );
        assert_eq!(contents(&sent), ["18 C", "24 C"]);
        // Another function, or fewer calls: the source's results no longer fit.
        let other = [ToolCall::new("g1", "get_time", "{}"), regenerated[1].clone()];
        assert_eq!(results.answering(&other).1, CallsFit::OtherCalls);
        assert_eq!(results.answering(&regenerated[..1]).1, CallsFit::OtherCalls);
        // The same calls, keys in another order and spaced differently: they fit.
        let same = [
            ToolCall::new("g1", "get_weather", "{ \"city\": \"Paris\" }"),
            ToolCall::new("g2", "get_weather", "{\"city\":\"Rome\"}"),
        ];
        assert_eq!(results.answering(&same).1, CallsFit::Same);
    }

    #[test]
    fn arguments_compare_as_json_values() {
        let call = |args: &str| [ToolCall::new("x", "f", args)];
        assert_eq!(CallsFit::of(&call(r#"{"a":1,"b":[2]}"#), &call(r#"{"b": [2], "a": 1}"#)), CallsFit::Same);
        assert_eq!(CallsFit::of(&call(r#"{"a":1}"#), &call(r#"{"a":2}"#)), CallsFit::OtherArguments);
        // Text that is not JSON compares as text.
        assert_eq!(CallsFit::of(&call("not json"), &call(" not json ")), CallsFit::Same);
        assert_eq!(CallsFit::of(&call("not json"), &call("{}")), CallsFit::OtherArguments);
    }

    #[test]
    fn last_assistant_answers_after_the_sources_tool_results() {
        let p = plan(&tool_conversation(), TurnMode::LastAssistant, None).unwrap();
        assert_eq!(p.prefix.len(), 3);
        assert_eq!(p.prefix[1].tool_calls.len(), 2);
        assert_eq!(contents(&p.steps[0].messages), ["24 C"]);
        assert_eq!(p.steps[0].messages[0].tool_call_id.as_deref(), Some("s2"));
    }
}
