//! A sample's stored conversation, shaped for export with the chosen reasoning style.

use super::selection::FullRow;
use crate::generation::conversation::Turn;
use crate::{Error, Result};
use domain::export::ReasoningStyle;

/// One exported conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    pub id: String,
    /// Whether the sample was generated with thinking on (`enable_thinking`), if it was set.
    pub thinking: Option<bool>,
    pub turns: Vec<Turn>,
    /// The functions the conversation offers, as vLLM handed them to the chat template
    /// (`domain::conversation::served_tools`), when it offers any.
    pub tools: Option<serde_json::Value>,
}

/// The exported id: stable across exports (run and dataset row), never a position.
pub fn export_id(run_id: i64, row_key: &str) -> String {
    format!("{run_id}-{row_key}")
}

pub fn from_row(row: FullRow, style: ReasoningStyle) -> Result<Conversation> {
    let turns: Vec<Turn> = serde_json::from_value(row.messages).map_err(|e| {
        Error::Internal(anyhow::anyhow!("sample {} has malformed stored messages: {e}", row.id))
    })?;
    Ok(Conversation {
        id: export_id(row.run_id, &row.row_key),
        thinking: row.thinking,
        turns: turns.into_iter().map(|t| styled(t, style)).collect(),
        tools: row.tools.as_ref().map(domain::conversation::served_tools),
    })
}

fn styled(mut turn: Turn, style: ReasoningStyle) -> Turn {
    // A turn that only calls tools has no text: vLLM's parsers hand back the whitespace the model
    // wrote between `</think>` and `<tool_call>` as its content ("\n\n"), and a template that
    // writes a separator before the calls when there is content (Qwen3's) then renders one the
    // model never wrote: every such row a trainer rebuilt from the export differed from the
    // server's ids by that token (the world's real-vLLM check, 10 of 70 rows).
    if !turn.tool_calls.is_empty() && turn.content.trim().is_empty() {
        turn.content.clear();
    }
    let reasoning = turn.reasoning_content.filter(|r| !r.is_empty() && turn.role == "assistant");
    match (style, reasoning) {
        (ReasoningStyle::Field, reasoning) => Turn { reasoning_content: reasoning, ..turn },
        (ReasoningStyle::InlineThink, Some(r)) => Turn {
            content: format!("<think>\n{}\n</think>\n\n{}", r.trim_matches('\n'), turn.content),
            reasoning_content: None,
            ..turn
        },
        (_, _) => Turn { reasoning_content: None, ..turn },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row() -> FullRow {
        FullRow {
            id: 1,
            run_id: 4,
            row_key: "abc".into(),
            thinking: Some(true),
            messages: json!([
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "a", "reasoning_content": "r"}
            ]),
            spec_steps: None,
            spec_accepted: None,
            tools: None,
        }
    }

    #[test]
    fn a_turn_that_only_calls_tools_has_no_text() {
        let mut r = row();
        r.messages = json!([
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "\n\n", "reasoning_content": "r", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": " "},
            {"role": "assistant", "content": "\n\nDone."}
        ]);
        let c = from_row(r, ReasoningStyle::Field).unwrap();
        assert_eq!(c.turns[1].content, "");
        // Text, and tool results, stay as written.
        assert_eq!((c.turns[2].content.as_str(), c.turns[3].content.as_str()), (" ", "\n\nDone."));
    }

    #[test]
    fn reasoning_goes_where_the_user_chose() {
        let field = from_row(row(), ReasoningStyle::Field).unwrap();
        assert_eq!(field.id, "4-abc");
        assert_eq!(field.turns[1].reasoning_content.as_deref(), Some("r"));
        let inline = from_row(row(), ReasoningStyle::InlineThink).unwrap();
        assert_eq!(inline.turns[1].content, "<think>\nr\n</think>\n\na");
        assert_eq!(inline.turns[1].reasoning_content, None);
        let omit = from_row(row(), ReasoningStyle::Omit).unwrap();
        assert_eq!(omit.turns[1].content, "a");
        assert_eq!(omit.turns[1].reasoning_content, None);
    }
}
