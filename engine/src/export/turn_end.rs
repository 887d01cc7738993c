//! What a chat template writes after an assistant turn's end-of-turn token, for rows made from
//! captured ids that should end as a trainer builds them from the conversation.
//!
//! A server stops at the end-of-turn token (`<|im_end|>`) and never samples what the template
//! writes after it (Qwen's `\n`), so a row from its ids ends there. SpecForge and speculators
//! build their rows by rendering the conversation, and supervise the turn through the end of its
//! render, newline included: every captured row then differed from the trainer's by that one token
//! (issue 46). With `TurnEnd::AsRendered` the export appends it, supervised.
//!
//! The tail is read off a render, not assumed: a probe conversation is rendered and encoded, and
//! what follows the probe answer must be one added token (the end of turn) and then the tail.
//! A template that ends a turn any other way gets no tail, and says so.

use super::conversation::Conversation;
use super::tokenize::{RowTokenizer, Tokenized};
use crate::generation::conversation::Turn;
use crate::{Error, Result};

/// The end-of-turn token of the template's assistant turns and the ids it writes after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnTail {
    pub end_id: u32,
    pub tail: Vec<u32>,
}

const PROBE_ANSWER: &str = "Fine, thanks.";

impl TurnTail {
    /// Reads the tail off `tokenizer`'s template: None when its assistant turn does not end with
    /// an added token.
    pub fn of(tokenizer: &RowTokenizer) -> Result<Option<Self>> {
        let turn = |role: &str, content: &str| Turn {
            role: role.into(),
            content: content.into(),
            ..Turn::default()
        };
        let probe = Conversation {
            id: "turn-end-probe".into(),
            thinking: None,
            turns: vec![turn("user", "How are you?"), turn("assistant", PROBE_ANSWER)],
            tools: None,
        };
        let text = tokenizer.render(&probe)?.text;
        let Some(at) = text.rfind(PROBE_ANSWER) else {
            return Err(Error::invalid(
                "the chat template does not write an assistant turn's text as it is, so the end of a turn cannot be read off it",
            ));
        };
        let after = &text[at + PROBE_ANSWER.len()..];
        let ids = tokenizer
            .tokenizer()
            .encode(after, false)
            .map_err(|e| Error::Internal(anyhow::anyhow!("tokenizing the end of a turn: {e}")))?
            .get_ids()
            .to_vec();
        let Some((&end_id, tail)) = ids.split_first() else { return Ok(None) };
        let added = tokenizer.tokenizer().get_added_tokens_decoder();
        if !added.get(&end_id).is_some_and(|t| after.starts_with(t.content.as_str())) {
            return Ok(None);
        }
        Ok(Some(Self { end_id, tail: tail.to_vec() }))
    }

    /// Appends the tail, supervised, to a row that ends with the end-of-turn token (an answer
    /// cut at `max_tokens` does not, and gets nothing).
    pub fn append(&self, row: &mut Tokenized) {
        if row.input_ids.last() == Some(&self.end_id) && row.loss_mask.last() == Some(&1) {
            row.input_ids.extend_from_slice(&self.tail);
            row.loss_mask.extend(std::iter::repeat_n(1, self.tail.len()));
        }
    }
}
