//! The text of generated tokens: words and punctuation chosen per position from a
//! per-prompt seed. Each piece is exactly one token under the simulator's tokenizer, and
//! any range of tokens can be rendered on its own, straight into a caller's buffer.

use crate::hash::mix64;
use std::ops::Range;

/// Words with their leading space; all ASCII letters, at most 12 bytes, so one token each.
const WORDS: [&str; 64] = [
    " the",
    " model",
    " answer",
    " first",
    " consider",
    " value",
    " so",
    " we",
    " check",
    " that",
    " step",
    " next",
    " result",
    " is",
    " a",
    " number",
    " of",
    " each",
    " case",
    " then",
    " it",
    " follows",
    " because",
    " given",
    " problem",
    " wait",
    " let",
    " me",
    " verify",
    " again",
    " this",
    " means",
    " total",
    " sum",
    " two",
    " three",
    " factor",
    " term",
    " and",
    " or",
    " not",
    " only",
    " if",
    " when",
    " which",
    " gives",
    " equals",
    " more",
    " less",
    " than",
    " all",
    " other",
    " way",
    " to",
    " find",
    " known",
    " simple",
    " method",
    " approach",
    " here",
    " final",
    " clearly",
    " hence",
    " true",
];

/// One in this many positions is punctuation (never two in a row).
const PUNCTUATION_EVERY: u64 = 9;

/// Which part of a completion a token belongs to; each part is seeded on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Reasoning,
    Answer,
}

/// The generated text of one prompt's completion.
#[derive(Clone, Copy, Debug)]
pub struct CompletionText {
    seed: u64,
}

impl CompletionText {
    pub fn new(prompt_fingerprint: u64, server_seed: u64) -> Self {
        Self { seed: mix64(prompt_fingerprint ^ mix64(server_seed)) }
    }

    /// The seed fixed by the prompt and the server, for other per-prompt draws.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Appends tokens `range` of `part` (indices counted from the part's start).
    pub fn write(&self, part: Part, range: Range<u32>, out: &mut String) {
        for index in range {
            out.push_str(self.piece(part, index));
        }
    }

    fn piece(&self, part: Part, index: u32) -> &'static str {
        let bits = self.bits(part, index);
        if index > 0 && is_punctuation(bits) && !is_punctuation(self.bits(part, index - 1)) {
            return if bits & 0x100 == 0 { "," } else { "." };
        }
        let word = WORDS[(bits >> 16) as usize % WORDS.len()];
        // A part opens without the space a word carries after other text.
        if index == 0 {
            &word[1..]
        } else {
            word
        }
    }

    fn bits(&self, part: Part, index: u32) -> u64 {
        let salt = match part {
            Part::Reasoning => 0x5245_4153,
            Part::Answer => 0x414e_5357,
        };
        mix64(self.seed ^ salt ^ (u64::from(index) << 20))
    }
}

fn is_punctuation(bits: u64) -> bool {
    bits.is_multiple_of(PUNCTUATION_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer;

    #[test]
    fn every_piece_is_one_token_so_counts_survive_retokenizing() {
        let text = CompletionText::new(12, 34);
        for part in [Part::Reasoning, Part::Answer] {
            let mut out = String::new();
            text.write(part, 0..5_000, &mut out);
            assert_eq!(tokenizer::pieces(&out).count(), 5_000);
            assert!(!out.starts_with(' '));
            assert!(!out.contains(",,") && !out.contains(".,") && !out.contains(",.") && !out.contains(".."));
        }
    }

    #[test]
    fn ranges_render_independently_and_deterministically() {
        let text = CompletionText::new(1, 2);
        let mut whole = String::new();
        text.write(Part::Answer, 0..100, &mut whole);
        let mut pieces = String::new();
        text.write(Part::Answer, 0..37, &mut pieces);
        text.write(Part::Answer, 37..100, &mut pieces);
        assert_eq!(whole, pieces);

        let mut other = String::new();
        CompletionText::new(2, 2).write(Part::Answer, 0..100, &mut other);
        assert_ne!(whole, other);
    }
}
