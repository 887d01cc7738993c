//! Turning a dataset row into the requests a sample sends, by turn mode.

use crate::vllm::ChatMessage;
use domain::generation::TurnMode;
use serde::{Deserialize, Serialize};

/// A message of the regenerated conversation, as stored on the sample and exported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub role: String,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reasoning_content: Option<String>,
}

/// What a sample sends: a fixed prefix, then for each step the user turns to append before
/// asking for the next assistant turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The history before the first regenerated turn (system prompt, earlier turns).
    pub prefix: Vec<ChatMessage>,
    /// For each regenerated assistant turn, the messages that precede it after the last one.
    pub steps: Vec<Vec<ChatMessage>>,
}

/// Builds the plan, or says why this conversation cannot be sent.
pub fn plan(source: &serde_json::Value, mode: TurnMode, system_prompt: Option<&str>) -> Result<Plan, String> {
    let messages: Vec<ChatMessage> = serde_json::from_value(source.clone())
        .map_err(|e| format!("the dataset row's messages are not [{{role, content}}]: {e}"))?;
    // A system prompt in the run settings replaces the row's own, so generation and training
    // render the same prompt.
    let system: Vec<ChatMessage> = match system_prompt.map(str::trim).filter(|s| !s.is_empty()) {
        Some(prompt) => vec![ChatMessage { role: "system".into(), content: prompt.into() }],
        None => messages.iter().filter(|m| m.role == "system").take(1).cloned().collect(),
    };
    let turns: Vec<ChatMessage> = messages.into_iter().filter(|m| m.role != "system").collect();
    if !turns.iter().any(|m| m.role == "user") {
        return Err("the conversation has no user turn to answer".to_string());
    }
    let plan = match mode {
        TurnMode::FirstUser => {
            let first = turns.into_iter().find(|m| m.role == "user").expect("checked above");
            Plan { prefix: system, steps: vec![vec![first]] }
        }
        TurnMode::LastAssistant => {
            let cut = turns.iter().rposition(|m| m.role == "assistant").unwrap_or(turns.len());
            let mut history: Vec<ChatMessage> = turns[..cut].to_vec();
            if history.last().is_none_or(|m| m.role != "user") {
                // A trailing assistant with no user before it: answer the last user turn instead.
                let last_user = history.iter().rposition(|m| m.role == "user").unwrap_or(0);
                history.truncate(last_user + 1);
            }
            let step = history.pop().expect("ends with a user turn");
            let mut prefix = system;
            prefix.extend(history);
            Plan { prefix, steps: vec![vec![step]] }
        }
        TurnMode::EveryAssistant => {
            let mut steps = Vec::new();
            let mut pending: Vec<ChatMessage> = Vec::new();
            for message in turns {
                if message.role == "assistant" {
                    if pending.iter().any(|m| m.role == "user") {
                        steps.push(std::mem::take(&mut pending));
                    }
                } else {
                    pending.push(message);
                }
            }
            if pending.iter().any(|m| m.role == "user") {
                steps.push(pending);
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
        assert_eq!(contents(&p.steps[0]), ["q2"]);
    }

    #[test]
    fn first_user_sends_only_the_opening_question() {
        let p = plan(&conversation(), TurnMode::FirstUser, Some("you are terse")).unwrap();
        assert_eq!(contents(&p.prefix), ["you are terse"]);
        assert_eq!(contents(&p.steps[0]), ["q1"]);
    }

    #[test]
    fn every_assistant_regenerates_each_turn_in_order() {
        let p = plan(&conversation(), TurnMode::EveryAssistant, None).unwrap();
        assert_eq!(contents(&p.prefix), ["be brief"]);
        assert_eq!(p.steps.iter().map(|s| contents(s)).collect::<Vec<_>>(), [vec!["q1"], vec!["q2"]]);
    }

    #[test]
    fn a_conversation_ending_in_a_question_is_answered() {
        let source = json!([{"role": "user", "content": "only"}]);
        for mode in [TurnMode::LastAssistant, TurnMode::FirstUser, TurnMode::EveryAssistant] {
            let p = plan(&source, mode, None).unwrap();
            assert_eq!(contents(&p.steps[0]), ["only"], "{mode:?}");
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
}
