//! The simulator's tokenizer: deterministic, allocation-free, no vocabulary file.
//!
//! A token is a run of up to 12 ASCII letters or digits, optionally led by one space
//! (`" word"` is one token), or else any single character (punctuation, a newline, a space
//! not followed by a word, a non-ASCII character). English prose comes out at roughly four
//! characters per token, close to real BPE vocabularies. `/tokenize`, prompt counting,
//! context-length checks and the generated text all go through these rules, so generated
//! text re-tokenizes to exactly the number of tokens reported in `usage`.

use crate::hash::fnv1a;

/// Longest letter/digit run that stays one token; longer words split.
const MAX_WORD_BYTES: usize = 12;

/// Ids of ordinary pieces lie below this (Qwen2's ordinary vocabulary size); special
/// tokens take the ids above it.
pub const ORDINARY_VOCAB: u32 = 151_643;

/// Splits text into token pieces.
pub fn pieces(text: &str) -> Pieces<'_> {
    Pieces { rest: text }
}

/// The id of an ordinary (non-special) piece.
pub fn token_id(piece: &str) -> u32 {
    (fnv1a(piece.as_bytes()) % u64::from(ORDINARY_VOCAB)) as u32
}

pub struct Pieces<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let bytes = self.rest.as_bytes();
        let first = *bytes.first()?;
        let word_start = usize::from(first == b' ' && bytes.get(1).is_some_and(u8::is_ascii_alphanumeric));
        let word_len =
            bytes[word_start..].iter().take(MAX_WORD_BYTES).take_while(|b| b.is_ascii_alphanumeric()).count();
        let len = if word_len > 0 {
            word_start + word_len
        } else {
            self.rest.chars().next().map_or(1, char::len_utf8)
        };
        let (piece, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_take_their_leading_space_and_punctuation_stands_alone() {
        let got: Vec<_> = pieces("Hello, world!  Ünïcode\nend").collect();
        assert_eq!(got, ["Hello", ",", " world", "!", " ", " ", "Ü", "n", "ï", "code", "\n", "end"]);
    }

    #[test]
    fn long_words_split_every_twelve_bytes() {
        let got: Vec<_> = pieces(" internationalization").collect();
        assert_eq!(got, [" internationa", "lization"]);
    }

    #[test]
    fn ids_are_stable_and_ordinary() {
        assert_eq!(token_id(" world"), token_id(" world"));
        assert_ne!(token_id(" world"), token_id("world"));
        assert!(pieces("any text at all, 123").all(|p| token_id(p) < ORDINARY_VOCAB));
    }
}
