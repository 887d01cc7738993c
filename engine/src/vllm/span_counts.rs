//! How many of a completion's tokens are reasoning, answer and tool calls, counted from the ids
//! each streamed chunk carries (`return_token_ids`) and the part of the message its text went to.
//!
//! The server's own figure, `completion_tokens_details.reasoning_tokens`, cannot be trusted: real
//! vLLM 0.32 (deepseek_r1 parser) left it at 0 on 1,167 of 2,038 samples that hold reasoning
//! text. The ids are the tokens the model wrote, and the reasoning parser decides per chunk
//! whether their text is reasoning, answer or a call, so counting them is exact, with two rules
//! for the chunks whose ids have no text:
//!
//! - ids before any text belong to the span that follows (the opening `<think>` a model writes
//!   itself);
//! - ids after text belong to the span before them (`</think>`, `</tool_call>`, the end-of-turn
//!   token, a piece of a UTF-8 character). A call's opening `<tool_call>` is thus counted with the
//!   text before it: one token, named in docs/review.md.
//!
//! A chunk whose text goes to two spans at once (several tokens per chunk, as `stream_interval`
//! and a draft's accepted tokens send them) is split at the token that ends the reasoning
//! (`</think>`, whose id the caller asks the server's `/tokenize` for): the ids through it are
//! reasoning, the rest the span that follows. The server's reasoning figure never stands in (it
//! was 0 on samples full of reasoning); where the split cannot be read from the ids (no such id
//! known or in the chunk, or text of two other spans in one chunk), the completion has no counts
//! rather than guessed ones.

use super::wire::Delta;

/// A completion's tokens by the part of the message they wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanCounts {
    pub reasoning: u32,
    pub answer: u32,
    pub tool_calls: u32,
}

impl std::ops::Add for SpanCounts {
    type Output = SpanCounts;

    fn add(self, other: SpanCounts) -> SpanCounts {
        SpanCounts {
            reasoning: self.reasoning + other.reasoning,
            answer: self.answer + other.answer,
            tool_calls: self.tool_calls + other.tool_calls,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Span {
    Reasoning,
    Answer,
    ToolCalls,
}

/// Counts a stream's ids chunk by chunk.
#[derive(Debug, Default)]
pub(crate) struct SpanCounter {
    counts: SpanCounts,
    /// Ids seen before any text.
    leading: u32,
    last: Option<Span>,
    /// The id of the token that ends the reasoning, when known.
    reasoning_end: Option<u32>,
    /// The reasoning has ended inside a chunk already.
    reasoning_ended: bool,
    /// A chunk's split could not be read from its ids.
    unknown: bool,
}

impl SpanCounter {
    pub fn new(reasoning_end: Option<u32>) -> Self {
        Self { reasoning_end, ..Self::default() }
    }

    /// One chunk's delta and the ids it carried.
    pub fn chunk(&mut self, delta: &Delta<'_>, ids: &[u32]) {
        let count = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        let spans = [
            (delta.reasoning_text().is_some_and(|t| !t.is_empty()), Span::Reasoning),
            (delta.content_text().is_some_and(|t| !t.is_empty()), Span::Answer),
            (!delta.tool_calls.is_empty(), Span::ToolCalls),
        ];
        let mut written = spans.iter().filter(|(wrote, _)| *wrote).map(|&(_, span)| span);
        match (written.next(), written.next(), written.next()) {
            (Some(Span::Reasoning), Some(then), None) if !self.reasoning_ended => {
                // The reasoning ends inside this chunk: at its end token, which is reasoning.
                let Some(end) = self.reasoning_end.and_then(|id| ids.iter().position(|&x| x == id)) else {
                    self.unknown = true;
                    return;
                };
                let through = end as u32 + 1;
                let leading = std::mem::take(&mut self.leading);
                self.add(Span::Reasoning, leading + through);
                self.add(then, count - through);
                self.last = Some(then);
                self.reasoning_ended = true;
            }
            (Some(_), Some(_), _) => self.unknown = true,
            (Some(span), None, _) => {
                let leading = std::mem::take(&mut self.leading);
                self.add(span, count + leading);
                self.last = Some(span);
            }
            (None, _, _) => match self.last {
                Some(span) => self.add(span, count),
                None => self.leading += count,
            },
        }
    }

    /// The counts, unless a chunk's split could not be read. Ids with no text at all (a
    /// completion of only an end-of-turn token) are its answer.
    pub fn finish(self) -> Option<SpanCounts> {
        if self.unknown {
            return None;
        }
        let mut counts = self.counts;
        counts.answer += self.leading;
        Some(counts)
    }

    fn add(&mut self, span: Span, ids: u32) {
        let count = match span {
            Span::Reasoning => &mut self.counts.reasoning,
            Span::Answer => &mut self.counts.answer,
            Span::ToolCalls => &mut self.counts.tool_calls,
        };
        *count += ids;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id of `</think>` in these tests; every other token is 1.
    const END: u32 = 9;

    fn count(chunks: &[(&str, usize)]) -> Option<SpanCounts> {
        count_ids(&chunks.iter().map(|&(delta, n)| (delta, vec![1; n])).collect::<Vec<_>>(), Some(END))
    }

    fn count_ids(chunks: &[(&str, Vec<u32>)], reasoning_end: Option<u32>) -> Option<SpanCounts> {
        let mut counter = SpanCounter::new(reasoning_end);
        for (delta, ids) in chunks {
            let delta: Delta<'_> = serde_json::from_str(delta).unwrap();
            counter.chunk(&delta, ids);
        }
        counter.finish()
    }

    const THINK: &str = r#"{"reasoning":"Let me think"}"#;
    const ANSWER: &str = r#"{"content":"42"}"#;
    const NOTHING: &str = r#"{}"#;
    const CALL: &str = r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\""}}]}"#;
    const BOTH: &str = r#"{"reasoning":"so","content":"42"}"#;

    #[test]
    fn markers_belong_to_the_span_they_open_or_close() {
        // <think> (no text), two reasoning tokens, </think> (no text), "\n\n" and an answer, <|im_end|>.
        let counts = count(&[
            (NOTHING, 1),
            (THINK, 1),
            (THINK, 1),
            (NOTHING, 1),
            (ANSWER, 1),
            (ANSWER, 1),
            (NOTHING, 1),
        ])
        .unwrap();
        assert_eq!(counts, SpanCounts { reasoning: 4, answer: 3, tool_calls: 0 });
    }

    #[test]
    fn a_reasoning_only_completion_has_no_answer_tokens() {
        // The case vLLM reported as 0 reasoning tokens: reasoning cut at max_tokens.
        let counts = count(&[(THINK, 1), (THINK, 1), (THINK, 1)]).unwrap();
        assert_eq!(counts, SpanCounts { reasoning: 3, answer: 0, tool_calls: 0 });
    }

    #[test]
    fn call_tokens_are_counted_apart() {
        let counts = count(&[(ANSWER, 2), (NOTHING, 1), (CALL, 5), (CALL, 3), (NOTHING, 2)]).unwrap();
        assert_eq!(counts, SpanCounts { reasoning: 0, answer: 3, tool_calls: 10 });
    }

    #[test]
    fn a_chunk_across_the_end_of_reasoning_splits_at_its_end_token() {
        // Three reasoning ids, then a chunk of "so", </think>, "\n\n", "42"; then the answer.
        let chunks =
            [(THINK, vec![1, 1, 1]), (BOTH, vec![1, END, 1, 1]), (ANSWER, vec![1]), (NOTHING, vec![1])];
        assert_eq!(
            count_ids(&chunks, Some(END)).unwrap(),
            SpanCounts { reasoning: 5, answer: 4, tool_calls: 0 }
        );
        // <think> before any text, then the whole reasoning and its end in one chunk with a call.
        let call_after = r#"{"reasoning":"so","tool_calls":[{"index":0,"function":{"name":"f"}}]}"#;
        let chunks = [(NOTHING, vec![1]), (call_after, vec![1, 1, END, 1, 1, 1])];
        assert_eq!(
            count_ids(&chunks, Some(END)).unwrap(),
            SpanCounts { reasoning: 4, answer: 0, tool_calls: 3 }
        );
        // No end token known, or none in the chunk: unknown, never guessed.
        let chunks = [(THINK, vec![1, 1, 1]), (BOTH, vec![1, END, 1, 1])];
        assert_eq!(count_ids(&chunks, None), None);
        assert_eq!(count_ids(&[(BOTH, vec![1, 1, 1])], Some(END)), None);
    }

    #[test]
    fn other_straddling_chunks_leave_the_split_unknown() {
        let answer_and_call = r#"{"content":"ok","tool_calls":[{"index":0,"function":{"name":"f"}}]}"#;
        assert_eq!(count(&[(ANSWER, 2), (answer_and_call, 3)]), None);
        // Reasoning again after it ended, across another end token: not a parser's output.
        let chunks = [(BOTH, vec![END, 1]), (THINK, vec![1]), (BOTH, vec![END, 1])];
        assert_eq!(count_ids(&chunks, Some(END)), None);
    }

    #[test]
    fn ids_without_any_text_are_the_answer() {
        assert_eq!(count(&[(NOTHING, 1)]).unwrap(), SpanCounts { reasoning: 0, answer: 1, tool_calls: 0 });
        assert_eq!(count(&[]).unwrap(), SpanCounts::default());
    }
}
