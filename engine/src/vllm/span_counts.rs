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
//! A chunk whose text goes to two spans at once (several tokens per chunk, as a draft's accepted
//! tokens arrive) cannot be split without the tokenizer. Where the reasoning ends inside such a
//! chunk, the server's reasoning figure is taken if the ids bound it (at least one of the chunk's
//! tokens on each side); otherwise, or for any other straddling chunk, the completion has no
//! counts rather than guessed ones.

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
    straddle: Straddle,
}

/// A chunk whose text went to two spans.
#[derive(Debug, Default)]
enum Straddle {
    #[default]
    None,
    /// The reasoning ended inside a chunk of `ids` ids: `before` reasoning ids came before it,
    /// and `then` followed.
    EndOfReasoning { before: u32, ids: u32, then: Span },
    /// Any other, or a second one: the split is unknown.
    Unknown,
}

impl SpanCounter {
    /// One chunk's delta and the number of ids it carried.
    pub fn chunk(&mut self, delta: &Delta<'_>, ids: usize) {
        let ids = u32::try_from(ids).unwrap_or(u32::MAX);
        let spans = [
            (delta.reasoning_text().is_some_and(|t| !t.is_empty()), Span::Reasoning),
            (delta.content_text().is_some_and(|t| !t.is_empty()), Span::Answer),
            (!delta.tool_calls.is_empty(), Span::ToolCalls),
        ];
        let mut written = spans.iter().filter(|(wrote, _)| *wrote).map(|&(_, span)| span);
        match (written.next(), written.next(), written.next()) {
            (Some(Span::Reasoning), Some(then), None) if matches!(self.straddle, Straddle::None) => {
                let before = self.counts.reasoning + std::mem::take(&mut self.leading);
                self.counts.reasoning = before;
                self.straddle = Straddle::EndOfReasoning { before, ids, then };
                self.last = Some(then);
            }
            (Some(_), Some(_), _) => self.straddle = Straddle::Unknown,
            (Some(Span::Reasoning), None, _) if matches!(self.straddle, Straddle::EndOfReasoning { .. }) => {
                self.straddle = Straddle::Unknown; // reasoning again after it ended
            }
            (Some(span), None, _) => {
                let leading = std::mem::take(&mut self.leading);
                self.add(span, ids + leading);
                self.last = Some(span);
            }
            (None, _, _) => match self.last {
                Some(span) => self.add(span, ids),
                None => self.leading += ids,
            },
        }
    }

    /// The counts, unless a chunk made the split unknown; `server_reasoning` is the server's
    /// figure, used only inside the bounds a straddling chunk sets. Ids with no text at all (a
    /// completion of only an end-of-turn token) are its answer.
    pub fn finish(mut self, server_reasoning: Option<u32>) -> Option<SpanCounts> {
        match self.straddle {
            Straddle::None => {}
            Straddle::EndOfReasoning { before, ids, then } => {
                let reasoning = server_reasoning.filter(|r| (before + 1..before + ids).contains(r))?;
                self.counts.reasoning = reasoning;
                self.add(then, before + ids - reasoning);
            }
            Straddle::Unknown => return None,
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

    fn count(chunks: &[(&str, usize)]) -> Option<SpanCounts> {
        count_with(chunks, None)
    }

    fn count_with(chunks: &[(&str, usize)], server_reasoning: Option<u32>) -> Option<SpanCounts> {
        let mut counter = SpanCounter::default();
        for (delta, ids) in chunks {
            let delta: Delta<'_> = serde_json::from_str(delta).unwrap();
            counter.chunk(&delta, *ids);
        }
        counter.finish(server_reasoning)
    }

    const THINK: &str = r#"{"reasoning":"Let me think"}"#;
    const ANSWER: &str = r#"{"content":"42"}"#;
    const NOTHING: &str = r#"{}"#;
    const CALL: &str = r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\""}}]}"#;

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
    fn a_chunk_across_the_end_of_reasoning_takes_the_servers_figure_within_its_bounds() {
        let both = r#"{"reasoning":"so","content":"42"}"#;
        let chunks = [(THINK, 3), (both, 4), (ANSWER, 1), (NOTHING, 1)];
        // 3 before the chunk; 1 to 3 of its 4 ids are reasoning.
        assert_eq!(
            count_with(&chunks, Some(5)).unwrap(),
            SpanCounts { reasoning: 5, answer: 4, tool_calls: 0 }
        );
        assert_eq!(
            count_with(&chunks, Some(4)).unwrap(),
            SpanCounts { reasoning: 4, answer: 5, tool_calls: 0 }
        );
        // vLLM's 0, or a figure the ids rule out, or none: unknown.
        for figure in [Some(0), Some(3), Some(7), None] {
            assert_eq!(count_with(&chunks, figure), None, "{figure:?}");
        }
    }

    #[test]
    fn other_straddling_chunks_leave_the_split_unknown() {
        let answer_and_call = r#"{"content":"ok","tool_calls":[{"index":0,"function":{"name":"f"}}]}"#;
        assert_eq!(count_with(&[(ANSWER, 2), (answer_and_call, 3)], Some(0)), None);
        let both = r#"{"reasoning":"so","content":"42"}"#;
        assert_eq!(count_with(&[(both, 2), (THINK, 1), (both, 2)], Some(2)), None);
    }

    #[test]
    fn ids_without_any_text_are_the_answer() {
        assert_eq!(count(&[(NOTHING, 1)]).unwrap(), SpanCounts { reasoning: 0, answer: 1, tool_calls: 0 });
        assert_eq!(count(&[]).unwrap(), SpanCounts::default());
    }
}
