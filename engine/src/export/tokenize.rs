//! Pre-tokenized rows: the conversation rendered with the target's chat template, encoded with
//! its `tokenizer.json`, and a loss mask that is 1 exactly over the assistant turns' tokens.
//!
//! An assistant turn's span starts where the generation prompt for it ends (the render of the
//! turns before it with `add_generation_prompt`, which must be a prefix of the full render) and
//! ends after its visible answer and the template's end-of-turn text. So a template's own
//! generation prompt (`<|im_start|>assistant\n`, or an empty `<think></think>` it inserts when
//! thinking is off) is never supervised, while the reasoning and answer the model produced are.

use super::conversation::Conversation;
use super::template::ChatTemplate;
use crate::generation::conversation::Turn;
use crate::{Error, Result};
use domain::export::Overlong;
use std::ops::Range;
use std::path::Path;
use tokenizers::Tokenizer;

const SENTINEL: &str = "\u{1}DRAFT-STUDIO-END-OF-TURN-PROBE\u{1}";

pub struct Tokenized {
    pub id: String,
    pub input_ids: Vec<u32>,
    pub loss_mask: Vec<u8>,
    /// Cut at the maximum length.
    pub truncated: bool,
}

/// What became of a conversation.
pub enum Outcome {
    Row(Tokenized),
    /// Longer than the maximum length with `Overlong::Drop`.
    DroppedOverlong,
    /// No assistant token left to learn from (e.g. all cut by truncation).
    DroppedNoLoss,
}

pub struct RowTokenizer {
    tokenizer: Tokenizer,
    template: ChatTemplate,
    /// What the template writes after an assistant answer (`<|im_end|>\n`, `<|eot_id|>`).
    end_of_turn: String,
    max_length: usize,
    overlong: Overlong,
}

impl RowTokenizer {
    pub fn from_dir(dir: &Path, max_length: u32, overlong: Overlong) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(Error::invalid(format!("{} has no tokenizer.json", dir.display())));
        }
        let tokenizer = Tokenizer::from_file(&path)
            .map_err(|e| Error::invalid(format!("{} cannot be loaded: {e}", path.display())))?;
        Self::new(tokenizer, ChatTemplate::from_dir(dir)?, max_length, overlong)
    }

    pub fn new(
        tokenizer: Tokenizer,
        template: ChatTemplate,
        max_length: u32,
        overlong: Overlong,
    ) -> Result<Self> {
        let end_of_turn = probe_end_of_turn(&template)?;
        Ok(Self { tokenizer, template, end_of_turn, max_length: max_length as usize, overlong })
    }

    /// The rendered text and the byte ranges of its assistant spans.
    pub fn render(&self, conversation: &Conversation) -> Result<(String, Vec<Range<usize>>)> {
        let turns = &conversation.turns;
        let full = self.template.render(turns, false, conversation.thinking)?;
        let mut spans = Vec::new();
        for (i, turn) in turns.iter().enumerate().filter(|(_, t)| t.role == "assistant") {
            let prompt = self.template.render(&turns[..i], true, conversation.thinking)?;
            let start = if full.starts_with(&prompt) {
                prompt.len()
            } else {
                // Templates may render a history answer differently from a fresh generation
                // prompt (Qwen3 with thinking off adds an empty think block only to the latter):
                // the turn then starts where the two renders part, after the history.
                let history = self.template.render(&turns[..i], false, conversation.thinking)?;
                let common = common_prefix(&full, &prompt);
                if !full.starts_with(&history) || common <= history.len() {
                    return Err(Error::invalid(format!(
                        "conversation {}: the chat template renders the history before assistant turn {} \
                         differently from the full conversation, so its span cannot be found",
                        conversation.id,
                        i + 1
                    )));
                }
                common
            };
            let end = self.span_end(&full, start, turn).ok_or_else(|| {
                Error::invalid(format!(
                    "conversation {}: assistant turn {} is not in the rendered text",
                    conversation.id,
                    i + 1
                ))
            })?;
            spans.push(start..end);
        }
        Ok((full, spans))
    }

    /// Where an assistant turn starting at `start` ends: after its visible answer (templates may
    /// move or trim reasoning, so only the last part of the answer is looked for) and after the
    /// end-of-turn text if it follows.
    fn span_end(&self, full: &str, start: usize, turn: &Turn) -> Option<usize> {
        let visible = turn.content.rsplit("</think>").next().unwrap_or("").trim();
        let after_answer =
            if visible.is_empty() { start } else { start + full[start..].find(visible)? + visible.len() };
        if self.end_of_turn.is_empty() {
            return Some(after_answer);
        }
        match full[after_answer..].find(&self.end_of_turn) {
            Some(at) if full[after_answer..after_answer + at].trim().is_empty() => {
                Some(after_answer + at + self.end_of_turn.len())
            }
            _ => Some(after_answer),
        }
    }

    pub fn encode_rendered(&self, id: String, text: &str, spans: &[Range<usize>]) -> Result<Outcome> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| Error::Internal(anyhow::anyhow!("tokenizing {id}: {e}")))?;
        Ok(self.finish(id, encoding.get_ids().to_vec(), encoding.get_offsets(), spans))
    }

    fn finish(
        &self,
        id: String,
        mut input_ids: Vec<u32>,
        offsets: &[(usize, usize)],
        spans: &[Range<usize>],
    ) -> Outcome {
        let mut loss_mask: Vec<u8> =
            offsets.iter().map(|&(from, _)| u8::from(spans.iter().any(|s| s.contains(&from)))).collect();
        let truncated = input_ids.len() > self.max_length;
        if truncated {
            match self.overlong {
                Overlong::Drop => return Outcome::DroppedOverlong,
                Overlong::Truncate => {
                    input_ids.truncate(self.max_length);
                    loss_mask.truncate(self.max_length);
                }
            }
        }
        if !loss_mask.contains(&1) {
            return Outcome::DroppedNoLoss;
        }
        Outcome::Row(Tokenized { id, input_ids, loss_mask, truncated })
    }

    /// Tokenizes a batch, encoding the texts in parallel.
    pub fn tokenize_batch(&self, conversations: &[Conversation]) -> Result<Vec<Outcome>> {
        let mut texts = Vec::with_capacity(conversations.len());
        let mut spans = Vec::with_capacity(conversations.len());
        for conversation in conversations {
            let (text, s) = self.render(conversation)?;
            texts.push(text);
            spans.push(s);
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts, false)
            .map_err(|e| Error::Internal(anyhow::anyhow!("tokenizing a batch: {e}")))?;
        Ok(encodings
            .into_iter()
            .zip(spans)
            .zip(conversations)
            .map(|((encoding, spans), c)| {
                self.finish(c.id.clone(), encoding.get_ids().to_vec(), encoding.get_offsets(), &spans)
            })
            .collect())
    }

    pub fn tokenize(&self, conversation: &Conversation) -> Result<Outcome> {
        let (text, spans) = self.render(conversation)?;
        self.encode_rendered(conversation.id.clone(), &text, &spans)
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }
}

/// The length in bytes of the longest common prefix, on a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices().zip(b.chars()).find(|((_, x), y)| x != y).map_or(a.len().min(b.len()), |((at, _), _)| at)
}

/// Renders a one-turn conversation with a marker answer and reads what follows the answer.
fn probe_end_of_turn(template: &ChatTemplate) -> Result<String> {
    let turns = [
        Turn { role: "user".into(), content: "hello".into(), reasoning_content: None },
        Turn { role: "assistant".into(), content: SENTINEL.into(), reasoning_content: None },
    ];
    let text = template.render(&turns, false, None)?;
    let at = text.rfind(SENTINEL).ok_or_else(|| {
        Error::invalid("the chat template drops the assistant's answer from the rendered text")
    })?;
    let rest = &text[at + SENTINEL.len()..];
    // The end-of-turn text, up to and including its line break if it has one.
    Ok(match rest.find('\n') {
        Some(nl) => rest[..=nl].to_string(),
        None => rest.to_string(),
    })
}
