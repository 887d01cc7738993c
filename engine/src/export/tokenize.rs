//! Pre-tokenized rows re-made from a conversation: rendered with the target's chat template (as
//! transformers renders it, see `template`), encoded with its `tokenizer.json`, and a loss mask
//! over the characters `spans` supervises. A token is supervised when it overlaps a supervised
//! span, the rule of transformers' `return_assistant_tokens_mask`.

use super::captured::Limit;
use super::conversation::Conversation;
use super::spans::{self, AddedTokens, Supervised};
use super::template::ChatTemplate;
use crate::{Error, Result};
use domain::export::{Overlong, TurnRows};
use std::ops::Range;
use std::path::Path;
use time::{Date, OffsetDateTime};
use tokenizers::Tokenizer;

pub struct Tokenized {
    pub id: String,
    pub input_ids: Vec<u32>,
    pub loss_mask: Vec<u8>,
    /// Cut at the maximum length.
    pub truncated: bool,
    /// Assistant turns the template re-renders in the history, left unsupervised.
    pub unsupervised_turns: u32,
}

/// What became of a conversation.
pub enum Outcome {
    Row(Tokenized),
    /// Longer than the maximum length with `Overlong::Drop`.
    DroppedOverlong,
    /// No assistant token left to learn from (e.g. all cut by truncation).
    DroppedNoLoss,
}

/// A rendered and encoded conversation, whatever its length.
pub struct Encoded {
    pub text: String,
    pub input_ids: Vec<u32>,
    pub loss_mask: Vec<u8>,
    pub unsupervised_turns: u32,
}

/// The prompt the target model was given for one assistant turn, as the template renders it.
pub struct TurnPrompt {
    /// Index of the assistant turn in the conversation.
    pub turn: usize,
    pub input_ids: Vec<u32>,
}

pub struct RowTokenizer {
    tokenizer: Tokenizer,
    template: ChatTemplate,
    added: AddedTokens,
    limit: Limit,
    turn_rows: TurnRows,
}

impl RowTokenizer {
    /// Loads `tokenizer.json` and the chat template from `dir`; `strftime_now` renders today (UTC).
    pub fn from_dir(dir: &Path, max_length: u32, overlong: Overlong) -> Result<Self> {
        Self::from_dir_dated(dir, OffsetDateTime::now_utc().date(), max_length, overlong)
    }

    /// As `from_dir`, with the date templates stamp through `strftime_now` (an export passes its
    /// own creation date and records it in the manifest).
    pub fn from_dir_dated(dir: &Path, date: Date, max_length: u32, overlong: Overlong) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(Error::invalid(format!("{} has no tokenizer.json", dir.display())));
        }
        let mut tokenizer = Tokenizer::from_file(&path)
            .map_err(|e| Error::invalid(format!("{} cannot be loaded: {e}", path.display())))?;
        // apply_chat_template encodes with neither, whatever tokenizer.json configures.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| Error::Internal(anyhow::anyhow!("clearing truncation: {e}")))?;
        Self::new(tokenizer, ChatTemplate::from_dir(dir, date)?, max_length, overlong)
    }

    pub fn new(
        tokenizer: Tokenizer,
        template: ChatTemplate,
        max_length: u32,
        overlong: Overlong,
    ) -> Result<Self> {
        let added = AddedTokens::new(tokenizer.get_added_tokens_decoder().into_values().map(|t| t.content));
        let limit = Limit { max_length: max_length as usize, overlong };
        Ok(Self { tokenizer, template, added, limit, turn_rows: TurnRows::PerConversation })
    }

    /// Rows per conversation, or one per assistant turn (`tokenize_batch`).
    pub fn with_turn_rows(self, turn_rows: TurnRows) -> Self {
        Self { turn_rows, ..self }
    }

    /// The date `strftime_now` renders, for the manifest.
    pub fn template_date(&self) -> Date {
        self.template.date()
    }

    /// The rendered conversation and the byte ranges its loss mask covers.
    pub fn render(&self, conversation: &Conversation) -> Result<Supervised> {
        spans::supervise(&self.template, &self.added, conversation)
    }

    /// The prompt ids of each assistant turn: the turns before it rendered with the generation
    /// prompt, as a server applying this template would have tokenized the request.
    pub fn turn_prompts(&self, conversation: &Conversation) -> Result<Vec<TurnPrompt>> {
        let turns = &conversation.turns;
        let mut prompts = Vec::new();
        for turn in (1..turns.len()).filter(|&i| turns[i].role == "assistant") {
            let text = self
                .template
                .render(&turns[..turn], conversation.tools.as_ref(), true, conversation.thinking)?
                .text;
            prompts.push(TurnPrompt {
                turn,
                input_ids: self.encode(&conversation.id, &text)?.get_ids().to_vec(),
            });
        }
        Ok(prompts)
    }

    pub fn tokenize(&self, conversation: &Conversation) -> Result<Outcome> {
        let supervised = self.render(conversation)?;
        let encoding = self.encode(&conversation.id, &supervised.text)?;
        Ok(self.finish(conversation.id.clone(), &encoding, &supervised))
    }

    /// The whole row before the length limit and the no-loss check: the rendered text, its ids
    /// and loss mask (what the parity test compares with transformers).
    pub fn encode_conversation(&self, conversation: &Conversation) -> Result<Encoded> {
        let supervised = self.render(conversation)?;
        let encoding = self.encode(&conversation.id, &supervised.text)?;
        Ok(Encoded {
            input_ids: encoding.get_ids().to_vec(),
            loss_mask: mask(encoding.get_offsets(), &supervised.spans),
            text: supervised.text,
            unsupervised_turns: supervised.unsupervised_turns,
        })
    }

    /// Tokenizes a batch, encoding the texts in parallel: each conversation's rows, one per
    /// conversation or one per assistant turn as `with_turn_rows` chose.
    pub fn tokenize_batch(&self, conversations: &[Conversation]) -> Result<Vec<Vec<Outcome>>> {
        let mut rows: Vec<(usize, String, Supervised)> = Vec::with_capacity(conversations.len());
        for (at, c) in conversations.iter().enumerate() {
            match self.turn_rows {
                TurnRows::PerConversation => rows.push((at, c.id.clone(), self.render(c)?)),
                TurnRows::PerTurn => {
                    rows.extend(self.render_turns(c)?.into_iter().map(|(id, s)| (at, id, s)))
                }
            }
        }
        let texts: Vec<&str> = rows.iter().map(|(_, _, s)| s.text.as_str()).collect();
        let encodings = self
            .tokenizer
            .encode_batch(texts, false)
            .map_err(|e| Error::Internal(anyhow::anyhow!("tokenizing a batch: {e}")))?;
        let mut out: Vec<Vec<Outcome>> = conversations.iter().map(|_| Vec::new()).collect();
        for ((at, id, supervised), encoding) in rows.into_iter().zip(&encodings) {
            out[at].push(self.finish(id, encoding, &supervised));
        }
        Ok(out)
    }

    /// One row per assistant turn after the first message, as speculators writes rows: the
    /// conversation up to and including that turn, as the template renders it at that point, with
    /// only that turn supervised. Ids are `<id>_turn<k>` (k from 0) when there are several, the
    /// plain id when there is one, as rows from captured ids per request are named.
    pub fn render_turns(&self, conversation: &Conversation) -> Result<Vec<(String, Supervised)>> {
        let turns = &conversation.turns;
        let assistants: Vec<usize> = (1..turns.len()).filter(|&i| turns[i].role == "assistant").collect();
        let mut rows = Vec::with_capacity(assistants.len());
        for (k, &i) in assistants.iter().enumerate() {
            let upto = Conversation {
                id: conversation.id.clone(),
                thinking: conversation.thinking,
                turns: turns[..=i].to_vec(),
                tools: conversation.tools.clone(),
            };
            let mut supervised = self.render(&upto)?;
            // The last span is turn i's: it ends the render, so it is never left out.
            supervised.spans = supervised.spans.pop().into_iter().collect();
            supervised.unsupervised_turns = 0;
            let id = if assistants.len() == 1 {
                conversation.id.clone()
            } else {
                format!("{}_turn{k}", conversation.id)
            };
            rows.push((id, supervised));
        }
        Ok(rows)
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn encode(&self, id: &str, text: &str) -> Result<tokenizers::Encoding> {
        self.tokenizer
            .encode(text, false)
            .map_err(|e| Error::Internal(anyhow::anyhow!("tokenizing {id}: {e}")))
    }

    fn finish(&self, id: String, encoding: &tokenizers::Encoding, supervised: &Supervised) -> Outcome {
        self.limit.apply(Tokenized {
            id,
            input_ids: encoding.get_ids().to_vec(),
            loss_mask: mask(encoding.get_offsets(), &supervised.spans),
            truncated: false,
            unsupervised_turns: supervised.unsupervised_turns,
        })
    }
}

/// transformers' rule (`apply_chat_template`, `return_assistant_tokens_mask`): a token is 1 when
/// its offsets overlap a span; spans and offsets are both in order, so one pass serves.
fn mask(offsets: &[(usize, usize)], spans: &[Range<usize>]) -> Vec<u8> {
    let mut mask = vec![0u8; offsets.len()];
    let mut span = 0;
    for (m, &(start, end)) in mask.iter_mut().zip(offsets) {
        while span < spans.len() && start >= spans[span].end {
            span += 1;
        }
        if span == spans.len() {
            break;
        }
        if end > spans[span].start {
            *m = 1;
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_overlapping_a_span_are_supervised() {
        let offsets = [(0, 2), (2, 5), (5, 6), (6, 9), (9, 9), (9, 12)];
        assert_eq!(mask(&offsets, std::slice::from_ref(&(3..6))), [0, 1, 1, 0, 0, 0]);
        // An empty span inside a token still marks it, as in transformers.
        assert_eq!(mask(&offsets, &[7..7, 9..12]), [0, 0, 0, 1, 0, 1]);
    }
}
