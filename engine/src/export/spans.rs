//! Which characters of a rendered conversation the loss mask covers (docs/export.md, "What is
//! supervised"). Every span comes from renders of the conversation, never from searching the
//! text for an answer, which would stop at an earlier copy of it (an answer "42" whose reasoning
//! says "6 times 7 is 42").
//!
//! - A template with `{% generation %}` blocks decides: the spans are its blocks, as
//!   transformers' `return_assistant_tokens_mask` takes them. There must be one per assistant
//!   turn.
//! - Otherwise assistant turn i is supervised from the end of its generation prompt to the end
//!   of its render: `prompt` = render(turns[..i]) with `add_generation_prompt`, `through` =
//!   render(turns[..=i]). The span ends where `through` ends, end-of-turn text included. It
//!   starts where `prompt` ends when `through` begins with it; otherwise the template's
//!   generation prompt is not how it renders a finished turn (DeepSeek-R1 opens `<think>\n`,
//!   Qwen3 with thinking off adds an empty think block to the prompt only), and it starts where
//!   the two part after `history` = render(turns[..i]) — moved back to the start of the added
//!   token or text run of the prompt it falls in, so an answer beginning like the prompt's tail
//!   (`<html>` where the prompt has `<think>`) keeps its first characters.
//! - A turn whose `through` is not how the whole conversation begins is left unsupervised: the
//!   template renders it differently once later turns follow (Qwen3 drops the reasoning, and the
//!   empty think block, of turns before the last user message), so what stands in the row is not
//!   what the model wrote after that prompt. So is a turn with no prompt before it (the first
//!   message). A history that renders differently with and without the generation prompt is
//!   refused: no start can be placed.

use super::conversation::Conversation;
use super::template::ChatTemplate;
use crate::{Error, Result};
use std::ops::Range;

/// A rendered conversation and the byte ranges its loss mask covers, in order.
pub struct Supervised {
    pub text: String,
    pub spans: Vec<Range<usize>>,
    /// Assistant turns left unsupervised because the template re-renders them in the history.
    pub unsupervised_turns: u32,
}

/// The added tokens of the tokenizer, longest first, to cut a generation prompt into pieces.
pub struct AddedTokens(Vec<String>);

impl AddedTokens {
    pub fn new(contents: impl IntoIterator<Item = String>) -> Self {
        let mut tokens: Vec<String> = contents.into_iter().filter(|t| !t.is_empty()).collect();
        tokens.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        tokens.dedup();
        Self(tokens)
    }

    /// Byte offsets where `text` changes between added tokens and the text around them
    /// (leftmost-longest matches), with 0 and `text.len()`.
    fn boundaries(&self, text: &str) -> Vec<usize> {
        let mut bounds = vec![0];
        let mut i = 0;
        while i < text.len() {
            match self.0.iter().find(|t| text[i..].starts_with(t.as_str())) {
                Some(token) => {
                    bounds.extend([i, i + token.len()]);
                    i += token.len();
                }
                None => i += text[i..].chars().next().map_or(1, char::len_utf8),
            }
        }
        bounds.push(text.len());
        bounds
    }
}

pub fn supervise(
    template: &ChatTemplate,
    added: &AddedTokens,
    conversation: &Conversation,
) -> Result<Supervised> {
    let turns = &conversation.turns;
    let thinking = conversation.thinking;
    let tools = conversation.tools.as_ref();
    let full = template.render(turns, tools, false, thinking)?;
    let assistants: Vec<usize> = (0..turns.len()).filter(|&i| turns[i].role == "assistant").collect();
    if let Some(blocks) = full.generation {
        if blocks.len() != assistants.len() {
            return Err(Error::invalid(format!(
                "conversation {}: the chat template's {{% generation %}} blocks ({}) do not match its \
                 assistant turns ({}), so they cannot be its loss mask",
                conversation.id,
                blocks.len(),
                assistants.len()
            )));
        }
        return Ok(Supervised { text: full.text, spans: blocks, unsupervised_turns: 0 });
    }

    let text = full.text;
    let mut spans = Vec::with_capacity(assistants.len());
    let mut unsupervised_turns = 0;
    for &i in &assistants {
        if i == 0 {
            unsupervised_turns += 1;
            continue;
        }
        // The last turn's render is the whole conversation's.
        let through = if i + 1 == turns.len() {
            None
        } else {
            Some(template.render(&turns[..=i], tools, false, thinking)?.text)
        };
        let through = through.as_deref().unwrap_or(&text);
        if !text.starts_with(through) {
            unsupervised_turns += 1;
            continue;
        }
        let prompt = template.render(&turns[..i], tools, true, thinking)?.text;
        let start = if through.starts_with(&prompt) {
            prompt.len()
        } else {
            let history = template.render(&turns[..i], tools, false, thinking)?.text;
            if !(prompt.starts_with(&history) && through.starts_with(&history)) {
                return Err(Error::invalid(format!(
                    "conversation {}: the chat template renders the turns before assistant turn {} \
                     differently depending on what follows them, so that turn cannot be located in the \
                     rendered text",
                    conversation.id,
                    i + 1
                )));
            }
            history.len() + answer_start(&prompt[history.len()..], &through[history.len()..], added)
        };
        spans.push(start..through.len());
    }
    Ok(Supervised { text, spans, unsupervised_turns })
}

/// Where the turn's own text starts after its history: past the whole generation prompt when
/// the turn renders with it, else where the two part, moved back to a piece boundary of the prompt.
fn answer_start(prompt: &str, turn: &str, added: &AddedTokens) -> usize {
    let parted = prompt
        .char_indices()
        .zip(turn.chars())
        .find(|((_, a), b)| a != b)
        .map_or(prompt.len().min(turn.len()), |((at, _), _)| at);
    if parted == prompt.len() {
        return parted;
    }
    added.boundaries(prompt).into_iter().filter(|&b| b <= parted).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generation::conversation::Turn;
    use time::macros::date;

    fn conversation(turns: &[(&str, &str)]) -> Conversation {
        Conversation {
            id: "c".into(),
            tools: None,
            thinking: None,
            turns: turns
                .iter()
                .map(|(role, content)| Turn {
                    role: role.to_string(),
                    content: content.to_string(),
                    ..Turn::default()
                })
                .collect(),
        }
    }

    fn template(source: &str) -> ChatTemplate {
        ChatTemplate::new(source.into(), vec![], date!(2026 - 02 - 03)).unwrap()
    }

    const CHAT: [(&str, &str); 4] =
        [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")];

    #[test]
    fn spans_run_from_the_prompt_to_the_end_of_the_turn() {
        let t = template(
            "{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
        );
        let s = supervise(&t, &AddedTokens::new([]), &conversation(&CHAT)).unwrap();
        let supervised: Vec<&str> = s.spans.iter().map(|r| &s.text[r.clone()]).collect();
        assert_eq!(supervised, ["a1</>", "a2</>"]);
        assert_eq!(s.unsupervised_turns, 0);
    }

    #[test]
    fn generation_blocks_must_cover_every_assistant_turn() {
        let only_last = "{% for m in messages %}{% if m.role == 'assistant' and loop.last %}{% generation %}\
                         {{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}";
        let error =
            supervise(&template(only_last), &AddedTokens::new([]), &conversation(&CHAT)).err().unwrap();
        assert!(error.to_string().contains("(1) do not match its assistant turns (2)"), "{error}");
    }

    #[test]
    fn a_history_that_renders_differently_is_refused() {
        // The generation prompt changes what comes before the turn: no start can be placed.
        let t = template(
            "{% if add_generation_prompt %}[{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}\
             {% if add_generation_prompt %}>{% endif %}",
        );
        let error = supervise(&t, &AddedTokens::new([]), &conversation(&CHAT[..2])).err().unwrap();
        assert!(error.to_string().contains("cannot be located"), "{error}");
    }

    #[test]
    fn templates_transformers_cannot_load_are_refused() {
        let load = |source: &str| {
            ChatTemplate::new(source.into(), vec![], date!(2026 - 02 - 03)).err().unwrap().to_string()
        };
        // minijinja knows `do`; transformers' sandbox does not.
        assert!(load("{% do messages.append(1) %}").contains("does not know"));
        assert!(load("{% if messages %}never closed").contains("does not parse"));
    }

    fn added() -> AddedTokens {
        AddedTokens::new(["<|im_start|>", "<think>", "</think>", "<｜Assistant｜>"].map(String::from))
    }

    #[test]
    fn the_answer_starts_after_the_generation_prompt() {
        let a = added();
        assert_eq!(answer_start("<|im_start|>assistant\n", "<|im_start|>assistant\nHi", &a), 22);
        // The prompt opens a think block the finished turn does not have; an answer that begins
        // like it keeps its first characters.
        let prompt = "<｜Assistant｜><think>\n";
        assert_eq!(answer_start(prompt, "<｜Assistant｜><html>", &a), "<｜Assistant｜>".len());
        assert_eq!(answer_start(prompt, "<｜Assistant｜><think>\nr</think>a", &a), prompt.len());
        // Parting inside a text run of the prompt: back to the run's start.
        let off = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
        let with_reasoning = "<|im_start|>assistant\n<think>\nr\n</think>\n\na";
        assert_eq!(answer_start(off, with_reasoning, &a), "<|im_start|>assistant\n<think>".len());
    }
}
