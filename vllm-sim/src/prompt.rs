//! The chat prompt as the model sees it: messages rendered through a ChatML template (as
//! Qwen's), its tokens, and the fingerprint that fixes a prompt's completion.

use crate::hash::Fnv1a;
use crate::tokenizer::{self, Pieces, ORDINARY_VOCAB};
use crate::wire::ChatMessage;

/// One prompt token: its id and the text it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    pub id: u32,
    pub text: &'a str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TemplateOptions {
    /// End with the assistant header so the model answers (vLLM's default for chat).
    pub add_generation_prompt: bool,
    /// With thinking off, Qwen3's template pre-fills an empty `<think>` block.
    pub thinking: bool,
}

/// The rendered template's tokens, in order. Each text segment is tokenized on its own.
pub fn template_tokens<'a>(
    messages: &'a [ChatMessage],
    options: TemplateOptions,
) -> impl Iterator<Item = Token<'a>> + 'a {
    messages
        .iter()
        .flat_map(|message| {
            [Segment::Special(Special::ImStart), Segment::Text(&message.role), Segment::Text("\n")]
                .into_iter()
                .chain(message.text_segments().map(Segment::Text))
                .chain([Segment::Special(Special::ImEnd), Segment::Text("\n")])
        })
        .chain(generation_prompt(options).iter().copied())
        .flat_map(Segment::tokens)
}

/// Tokens of a raw prompt (no template, no special tokens).
pub fn text_tokens(text: &str) -> impl Iterator<Item = Token<'_>> {
    tokenizer::pieces(text).map(|piece| Token { id: tokenizer::token_id(piece), text: piece })
}

/// Tokens of a raw prompt as `/tokenize` sees it: a special token's text (`</think>`) is that
/// token, as a Hugging Face tokenizer matches its added tokens in raw text.
pub fn raw_prompt_tokens(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let next = Special::ALL
            .iter()
            .filter_map(|s| rest.find(s.token().text).map(|at| (at, *s)))
            .min_by_key(|(at, _)| *at);
        let Some((at, special)) = next else {
            tokens.extend(text_tokens(rest));
            break;
        };
        tokens.extend(text_tokens(&rest[..at]));
        let token = special.token();
        tokens.push(token);
        rest = &rest[at + token.text.len()..];
    }
    tokens
}

/// The token that ends a reasoning span (`</think>`): its id closes the reasoning in a
/// completion's ids, with no text of its own in the streamed message.
pub fn think_end() -> Token<'static> {
    Special::ThinkEnd.token()
}

/// A stable identity of the conversation: same roles and texts, same fingerprint.
pub fn fingerprint(messages: &[ChatMessage]) -> u64 {
    let mut hasher = Fnv1a::new();
    for message in messages {
        hasher.write(message.role.as_bytes());
        // Separators keep ("ab","c") and ("a","bc") apart; 0xFF/0xFE never occur in UTF-8.
        hasher.write(&[0xFF]);
        for segment in message.text_segments() {
            hasher.write(segment.as_bytes());
            hasher.write(&[0xFE]);
        }
    }
    hasher.finish()
}

fn generation_prompt(options: TemplateOptions) -> &'static [Segment<'static>] {
    use Segment::{Special as S, Text as T};
    const ASSISTANT: [Segment<'static>; 3] = [S(Special::ImStart), T("assistant"), T("\n")];
    const NO_THINKING: [Segment<'static>; 7] = [
        S(Special::ImStart),
        T("assistant"),
        T("\n"),
        S(Special::ThinkStart),
        T("\n\n"),
        S(Special::ThinkEnd),
        T("\n\n"),
    ];
    match (options.add_generation_prompt, options.thinking) {
        (false, _) => &[],
        (true, true) => &ASSISTANT,
        (true, false) => &NO_THINKING,
    }
}

#[derive(Clone, Copy, Debug)]
enum Special {
    ImStart,
    ImEnd,
    ThinkStart,
    ThinkEnd,
}

impl Special {
    const ALL: [Special; 4] = [Special::ImStart, Special::ImEnd, Special::ThinkStart, Special::ThinkEnd];

    fn token(self) -> Token<'static> {
        let (offset, text) = match self {
            Self::ImStart => (1, "<|im_start|>"),
            Self::ImEnd => (2, "<|im_end|>"),
            Self::ThinkStart => (24, "<think>"),
            Self::ThinkEnd => (25, "</think>"),
        };
        Token { id: ORDINARY_VOCAB + offset, text }
    }
}

#[derive(Clone, Copy, Debug)]
enum Segment<'a> {
    Special(Special),
    Text(&'a str),
}

impl<'a> Segment<'a> {
    fn tokens(self) -> SegmentTokens<'a> {
        match self {
            Self::Special(special) => SegmentTokens::Special(Some(special.token())),
            Self::Text(text) => SegmentTokens::Text(tokenizer::pieces(text)),
        }
    }
}

enum SegmentTokens<'a> {
    Special(Option<Token<'static>>),
    Text(Pieces<'a>),
}

impl<'a> Iterator for SegmentTokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        match self {
            Self::Special(token) => token.take(),
            Self::Text(pieces) => {
                pieces.next().map(|piece| Token { id: tokenizer::token_id(piece), text: piece })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(value: serde_json::Value) -> Vec<ChatMessage> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn renders_chatml_with_the_generation_prompt() {
        let messages = messages(json!([{"role": "user", "content": "Hi there"}]));
        let options = TemplateOptions { add_generation_prompt: true, thinking: true };
        let text: String = template_tokens(&messages, options).map(|t| t.text).collect();
        assert_eq!(text, "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
        assert_eq!(template_tokens(&messages, options).count(), 10);

        let no_thinking = TemplateOptions { thinking: false, ..options };
        let text: String = template_tokens(&messages, no_thinking).map(|t| t.text).collect();
        assert!(text.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    }

    #[test]
    fn fingerprint_depends_on_roles_and_texts_only() {
        let a = messages(json!([{"role": "user", "content": "ab"}, {"role": "user", "content": "c"}]));
        let b = messages(json!([{"role": "user", "content": "a"}, {"role": "user", "content": "bc"}]));
        let a_parts = messages(json!([{"role": "user", "content": [{"type": "text", "text": "ab"}]},
                                      {"role": "user", "content": "c"}]));
        assert_ne!(fingerprint(&a), fingerprint(&b));
        assert_eq!(fingerprint(&a), fingerprint(&a_parts));
    }
}
