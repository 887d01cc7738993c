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
//! A chunk whose text goes to two or three spans at once (several tokens a chunk, as
//! `stream_interval` and a draft's accepted tokens send them) is split at the markers that end
//! them, by the same rules: the ids through the reasoning's end token (`</think>`) are reasoning,
//! the ids through a call's opening token (`<tool_call>`, Hermes) are the answer, and the rest
//! calls. The caller asks the server's `/tokenize` for the two ids once per model. The server's
//! reasoning figure never stands in (it was 0 on samples full of reasoning); where a split cannot
//! be read from the ids (a marker not known or not in the chunk, spans out of their order), the
//! completion has no counts rather than guessed ones.

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

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Span {
    Reasoning,
    Answer,
    ToolCalls,
}

/// The ids of the tokens that end a span, as the model's tokenizer has them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanMarkers {
    /// `</think>`: the last token of the reasoning.
    pub reasoning_end: Option<u32>,
    /// `<tool_call>`: the first token of a call, counted with the text before it.
    pub call_start: Option<u32>,
}

/// Counts a stream's ids chunk by chunk.
#[derive(Debug, Default)]
pub(crate) struct SpanCounter {
    counts: SpanCounts,
    /// Ids seen before any text.
    leading: u32,
    last: Option<Span>,
    markers: SpanMarkers,
    /// A chunk's split could not be read from its ids.
    unknown: bool,
}

impl SpanCounter {
    pub fn new(markers: SpanMarkers) -> Self {
        Self { markers, ..Self::default() }
    }

    /// One chunk's delta and the ids it carried.
    pub fn chunk(&mut self, delta: &Delta<'_>, ids: &[u32]) {
        let count = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        let written: Vec<Span> = [
            (delta.reasoning_text().is_some_and(|t| !t.is_empty()), Span::Reasoning),
            (delta.content_text().is_some_and(|t| !t.is_empty()), Span::Answer),
            (!delta.tool_calls.is_empty(), Span::ToolCalls),
        ]
        .into_iter()
        .filter_map(|(wrote, span)| wrote.then_some(span))
        .collect();
        match written.as_slice() {
            [] => match self.last {
                Some(span) => self.add(span, count),
                None => self.leading += count,
            },
            // A reasoning parser never returns to the reasoning once it ended.
            [Span::Reasoning] if self.last.is_some_and(|last| last != Span::Reasoning) => self.unknown = true,
            [span] => {
                let leading = std::mem::take(&mut self.leading);
                self.add(*span, count + leading);
                self.last = Some(*span);
            }
            // Spans follow one another in this order only; going back is no parser's output.
            spans if self.last.is_some_and(|last| last > spans[0]) => self.unknown = true,
            spans => match self.split(spans, ids) {
                Some(parts) => {
                    let mut leading = std::mem::take(&mut self.leading);
                    for (span, n) in parts {
                        self.add(span, n + std::mem::take(&mut leading));
                    }
                    self.last = spans.last().copied();
                }
                None => self.unknown = true,
            },
        }
    }

    /// A chunk's ids by span, split at the markers: through `</think>` reasoning, through
    /// `<tool_call>` the answer (with no answer text, the ids between the two are still the
    /// answer's, as a one-token chunk of "\n\n" would be), the rest calls.
    fn split(&self, spans: &[Span], ids: &[u32]) -> Option<Vec<(Span, u32)>> {
        let mut parts = Vec::new();
        let mut from = 0usize;
        if spans.contains(&Span::Reasoning) {
            let end = self.markers.reasoning_end?;
            let at = ids.iter().position(|&id| id == end)?;
            parts.push((Span::Reasoning, (at + 1) as u32));
            from = at + 1;
        }
        if spans.contains(&Span::ToolCalls) {
            let start = self.markers.call_start?;
            let at = from + ids[from..].iter().position(|&id| id == start)?;
            parts.push((Span::Answer, (at + 1 - from) as u32));
            parts.push((Span::ToolCalls, (ids.len() - at - 1) as u32));
        } else {
            parts.push((Span::Answer, (ids.len() - from) as u32));
        }
        Some(parts)
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

    /// The ids of `</think>` and `<tool_call>` in these tests; every other token is 1.
    const END: u32 = 9;
    const CALL_START: u32 = 8;
    const MARKERS: SpanMarkers = SpanMarkers { reasoning_end: Some(END), call_start: Some(CALL_START) };

    fn count(chunks: &[(&str, usize)]) -> Option<SpanCounts> {
        count_ids(&chunks.iter().map(|&(delta, n)| (delta, vec![1; n])).collect::<Vec<_>>(), MARKERS)
    }

    fn count_ids(chunks: &[(&str, Vec<u32>)], markers: SpanMarkers) -> Option<SpanCounts> {
        let mut counter = SpanCounter::new(markers);
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
    const ANSWER_AND_CALL: &str = r#"{"content":"ok","tool_calls":[{"index":0,"function":{"name":"f"}}]}"#;
    const REASONING_AND_CALL: &str =
        r#"{"reasoning":"so","tool_calls":[{"index":0,"function":{"name":"f"}}]}"#;

    #[test]
    fn markers_belong_to_the_span_they_open_or_close() {
        // <think> (no text), two reasoning tokens, </think> (no text), "\n\n" and an answer, <|im_end|>.
        let chunks =
            [(NOTHING, 1), (THINK, 1), (THINK, 1), (NOTHING, 1), (ANSWER, 1), (ANSWER, 1), (NOTHING, 1)];
        assert_eq!(count(&chunks).unwrap(), SpanCounts { reasoning: 4, answer: 3, tool_calls: 0 });
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
    fn a_chunk_across_spans_splits_at_their_markers() {
        // Three reasoning ids, then a chunk of "so", </think>, "\n\n", "42"; then the answer.
        let chunks =
            [(THINK, vec![1, 1, 1]), (BOTH, vec![1, END, 1, 1]), (ANSWER, vec![1]), (NOTHING, vec![1])];
        assert_eq!(
            count_ids(&chunks, MARKERS).unwrap(),
            SpanCounts { reasoning: 5, answer: 4, tool_calls: 0 }
        );
        // <think> before any text, then the reasoning, its end, "\n\n", <tool_call> and a call's
        // start in one chunk: the ids between the two markers are the answer's.
        let chunks = [(NOTHING, vec![1]), (REASONING_AND_CALL, vec![1, 1, END, 1, CALL_START, 1, 1])];
        assert_eq!(
            count_ids(&chunks, MARKERS).unwrap(),
            SpanCounts { reasoning: 4, answer: 2, tool_calls: 2 }
        );
        // An answer, then a call, in one chunk.
        let chunks = [(ANSWER, vec![1, 1]), (ANSWER_AND_CALL, vec![1, CALL_START, 1, 1])];
        assert_eq!(
            count_ids(&chunks, MARKERS).unwrap(),
            SpanCounts { reasoning: 0, answer: 4, tool_calls: 2 }
        );
    }

    #[test]
    fn a_split_the_ids_cannot_give_is_unknown() {
        // No end token known, or none in the chunk.
        let chunks = [(THINK, vec![1, 1, 1]), (BOTH, vec![1, END, 1, 1])];
        assert_eq!(count_ids(&chunks, SpanMarkers::default()), None);
        assert_eq!(count_ids(&[(BOTH, vec![1, 1, 1])], MARKERS), None);
        // A call's start not in the chunk, or not known.
        assert_eq!(count(&[(ANSWER, 2), (ANSWER_AND_CALL, 3)]), None);
        let no_call_start = SpanMarkers { call_start: None, ..MARKERS };
        assert_eq!(count_ids(&[(ANSWER_AND_CALL, vec![1, CALL_START, 1])], no_call_start), None);
        // Reasoning again after the answer began: not a parser's output.
        let chunks = [(BOTH, vec![END, 1]), (THINK, vec![1]), (BOTH, vec![END, 1])];
        assert_eq!(count_ids(&chunks, MARKERS), None);
    }

    #[test]
    fn ids_without_any_text_are_the_answer() {
        assert_eq!(count(&[(NOTHING, 1)]).unwrap(), SpanCounts { reasoning: 0, answer: 1, tool_calls: 0 });
        assert_eq!(count(&[]).unwrap(), SpanCounts::default());
    }
}
