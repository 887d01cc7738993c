//! Flags the engine sets when a result arrives, from the outcome and the text alone.

use domain::generation::SampleState;
use std::collections::HashMap;

/// Codes of the `flag_reasons` rows the engine sets.
pub const TRUNCATED: &str = "truncated";
pub const TIMED_OUT: &str = "timed_out";
pub const FAILED: &str = "failed";
pub const EMPTY_ANSWER: &str = "empty_answer";
pub const REASONING_ONLY: &str = "reasoning_only";
pub const REPETITION: &str = "repetition";
pub const THINK_MARKERS: &str = "think_markers";
/// A regenerated turn whose calls the source's next tool results no longer answer.
pub const TOOL_RESULT_MISMATCH: &str = "tool_result_mismatch";
/// A regenerated call to the same function with other arguments, answered by the source's
/// result for the old ones.
pub const TOOL_ARGUMENTS_CHANGED: &str = "tool_arguments_changed";
/// A regenerated turn that calls tools where the source answered in text: the next user turn
/// follows calls no result answers.
pub const UNANSWERED_TOOL_CALL: &str = "unanswered_tool_call";

/// The automatic flags for a finished try. Pending or running samples get none. An answer that
/// calls a tool (`calls_tools`) is not empty for want of text.
pub fn auto_flags(
    state: SampleState,
    reasoning: Option<&str>,
    content: Option<&str>,
    calls_tools: bool,
) -> Vec<&'static str> {
    if !state.is_terminal() {
        return Vec::new();
    }
    let mut flags = Vec::new();
    match state {
        SampleState::Truncated => flags.push(TRUNCATED),
        SampleState::TimedOut => flags.push(TIMED_OUT),
        SampleState::Failed => flags.push(FAILED),
        _ => {}
    }
    let answer = content.map(str::trim).unwrap_or("");
    let thought = reasoning.map(str::trim).unwrap_or("");
    if answer.is_empty() && !calls_tools {
        flags.push(EMPTY_ANSWER);
        if !thought.is_empty() {
            flags.push(REASONING_ONLY);
        }
    }
    if answer.contains("<think>") || answer.contains("</think>") {
        flags.push(THINK_MARKERS);
    }
    if has_repetition_loop(thought) || has_repetition_loop(answer) {
        flags.push(REPETITION);
    }
    flags
}

/// How far back from the end a trailing loop is looked for, in characters.
const TAIL_CHARS: usize = 16_000;
/// Longest repeated unit looked for at the end, in characters.
const MAX_PERIOD: usize = 2_000;
/// A word sequence this long, seen this many times, is a loop even in the middle of a text.
const NGRAM_WORDS: usize = 12;
const NGRAM_REPEATS: u32 = 5;

/// True when the text falls into a loop: it ends with the same unit repeated back to back
/// (what a model stuck until `max_tokens` produces), or one long word sequence recurs many times.
pub fn has_repetition_loop(text: &str) -> bool {
    trailing_loop(text) || repeated_ngram(text)
}

fn trailing_loop(text: &str) -> bool {
    let tail: Vec<char> = {
        let mut chars: Vec<char> = text.chars().rev().take(TAIL_CHARS).collect();
        chars.reverse();
        chars
    };
    let n = tail.len();
    for period in 1..=MAX_PERIOD.min(n / 3) {
        // The repeating stretch must cover three periods and at least 200 characters, so
        // "ha ha ha" or a short list ending does not count.
        let needed = (period * 2).max(200usize.saturating_sub(period));
        if needed + period > n {
            continue;
        }
        let mut run = 0;
        while run < needed && tail[n - 1 - run] == tail[n - 1 - run - period] {
            run += 1;
        }
        if run >= needed {
            return true;
        }
    }
    false
}

fn repeated_ngram(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() < NGRAM_WORDS * NGRAM_REPEATS as usize {
        return false;
    }
    let mut seen: HashMap<&[&str], u32> = HashMap::new();
    for window in words.windows(NGRAM_WORDS) {
        let count = seen.entry(window).or_insert(0);
        *count += 1;
        if *count >= NGRAM_REPEATS {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_flag_themselves() {
        assert_eq!(auto_flags(SampleState::Truncated, Some("r"), Some("a"), false), vec![TRUNCATED]);
        assert_eq!(auto_flags(SampleState::TimedOut, None, Some("partial"), false), vec![TIMED_OUT]);
        assert_eq!(
            auto_flags(SampleState::Ok, Some("thinking"), Some("The answer is 4."), false),
            Vec::<&str>::new()
        );
        assert!(auto_flags(SampleState::Pending, None, None, false).is_empty());
        assert!(auto_flags(SampleState::Running, None, None, false).is_empty());
    }

    #[test]
    fn an_empty_answer_and_reasoning_only_are_told_apart() {
        assert_eq!(auto_flags(SampleState::Empty, None, Some("  "), false), vec![EMPTY_ANSWER]);
        // A turn that only calls a tool has answered.
        assert!(auto_flags(SampleState::Ok, Some("I should look it up"), Some(""), true).is_empty());
        assert_eq!(
            auto_flags(SampleState::Truncated, Some("Let me think about it"), None, false),
            vec![TRUNCATED, EMPTY_ANSWER, REASONING_ONLY]
        );
    }

    #[test]
    fn leftover_think_markers_in_the_answer_are_flagged() {
        assert_eq!(
            auto_flags(SampleState::Ok, None, Some("<think>hmm</think> The answer is 4."), false),
            vec![THINK_MARKERS]
        );
        assert_eq!(
            auto_flags(SampleState::Ok, None, Some("stray </think> The answer"), false),
            vec![THINK_MARKERS]
        );
        // In the reasoning, the markers are not the answer's problem.
        assert!(auto_flags(SampleState::Ok, Some("<think>x</think>"), Some("4"), false).is_empty());
    }

    #[test]
    fn a_trailing_loop_is_a_repetition() {
        let looped = format!("First I add the numbers. {}", "Wait, let me recheck the sum. ".repeat(20));
        assert!(has_repetition_loop(&looped));
        assert_eq!(
            auto_flags(SampleState::Truncated, Some(&looped), None, false),
            vec![TRUNCATED, EMPTY_ANSWER, REASONING_ONLY, REPETITION]
        );
        let one_char = format!("The result is {}", "9".repeat(500));
        assert!(has_repetition_loop(&one_char));
    }

    #[test]
    fn a_loop_in_the_middle_is_found_by_its_word_sequence() {
        let unit = "so the total is seven and then we check the total again because it might be wrong ";
        let text =
            format!("Start. {} Finally the answer: 7, confirmed by a different method.", unit.repeat(6));
        assert!(has_repetition_loop(&text));
    }

    #[test]
    fn ordinary_text_is_not_a_loop() {
        let prose = "Photosynthesis turns light into chemical energy. Plants take in carbon dioxide \
                     and water, and release oxygen. The light reactions happen in the thylakoids, \
                     while the Calvin cycle runs in the stroma. Each step is driven by enzymes.";
        assert!(!has_repetition_loop(prose));
        let table = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n| 5 | 6 |\n";
        assert!(!has_repetition_loop(table));
        assert!(!has_repetition_loop("ha ha ha ha"));
        let code = "fn main() {\n    let x = 1;\n    let y = 2;\n    println!(\"{}\", x + y);\n}\n";
        assert!(!has_repetition_loop(code));
        assert!(!has_repetition_loop(""));
    }
}
