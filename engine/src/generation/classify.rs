//! What a try's result means for its sample: a terminal outcome, another try, or neither.

use crate::vllm::{Completion, Failure};
use domain::generation::SampleState;

/// The verdict on a completed stream.
pub fn completion_outcome(completion: &Completion) -> Result<SampleState, &'static str> {
    match completion.finish_reason.as_str() {
        // vLLM's `error` is a retryable request-level failure; `abort` means the server dropped it.
        "error" => Err("the server finished the request with finish_reason `error`"),
        "abort" => Err("the server aborted the request"),
        // A truncated answer is an outcome, not an error: retrying would cut it again.
        "length" => Ok(SampleState::Truncated),
        // A turn that calls a tool is a whole answer (`finish_reason: tool_calls`, or `stop`
        // from servers that end forced calls so), however little text comes with it.
        _ if !completion.tool_calls.is_empty() => Ok(SampleState::Ok),
        "tool_calls" => Err("the server finished with `tool_calls` but sent no call"),
        _ if completion.content.trim().is_empty() => Ok(SampleState::Empty),
        _ => Ok(SampleState::Ok),
    }
}

/// What to do after a failed try that counts against its sample (an outage's tries do not:
/// see `availability`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// Count the try and retry later.
    Retry,
    /// Count the try and stop with this terminal state.
    Finish(SampleState),
}

/// `tries_after` is the number of counted tries including this one.
pub fn after_failure(failure: &Failure, tries_after: u32, max_attempts: u32) -> AfterFailure {
    if failure.is_transient() && tries_after < max_attempts {
        return AfterFailure::Retry;
    }
    if failure.is_timeout() {
        AfterFailure::Finish(SampleState::TimedOut)
    } else {
        AfterFailure::Finish(SampleState::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vllm::{FailureKind, Partial};
    use std::time::Duration;

    fn completion(finish_reason: &str, content: &str) -> Completion {
        Completion {
            reasoning: "thinking".into(),
            content: content.into(),
            tool_calls: Vec::new(),
            finish_reason: finish_reason.into(),
            usage: None,
            ttft: None,
            duration: Duration::ZERO,
            tokens: None,
            span_counts: None,
            spec_decode: crate::vllm::SpecReport::NotReported,
        }
    }

    fn failure(kind: FailureKind) -> Failure {
        Failure { kind, message: String::new(), partial: Partial::default(), duration: Duration::ZERO }
    }

    #[test]
    fn finish_reasons_map_to_outcomes() {
        assert_eq!(completion_outcome(&completion("stop", "answer")), Ok(SampleState::Ok));
        assert_eq!(completion_outcome(&completion("length", "")), Ok(SampleState::Truncated));
        assert_eq!(completion_outcome(&completion("stop", "  \n")), Ok(SampleState::Empty));
        // Unknown reasons are kept as they came; the answer decides.
        assert_eq!(completion_outcome(&completion("repetition", "x")), Ok(SampleState::Ok));
        assert!(completion_outcome(&completion("error", "x")).is_err());
    }

    #[test]
    fn a_tool_call_is_a_finished_answer() {
        let call = domain::conversation::ToolCall::new("c", "get_weather", "{}");
        let calling = Completion { tool_calls: vec![call], ..completion("tool_calls", "") };
        assert_eq!(completion_outcome(&calling), Ok(SampleState::Ok));
        // Cut while writing the call: truncated, as any answer.
        assert_eq!(
            completion_outcome(&Completion { finish_reason: "length".into(), ..calling }),
            Ok(SampleState::Truncated)
        );
        assert!(completion_outcome(&completion("tool_calls", "")).is_err());
    }

    #[test]
    fn transient_failures_retry_until_the_last_attempt() {
        let idle = failure(FailureKind::IdleTimeout);
        assert_eq!(after_failure(&idle, 1, 5), AfterFailure::Retry);
        assert_eq!(after_failure(&idle, 5, 5), AfterFailure::Finish(SampleState::TimedOut));
        let overloaded = failure(FailureKind::Http { status: 503 });
        assert_eq!(after_failure(&overloaded, 2, 5), AfterFailure::Retry);
        assert_eq!(after_failure(&overloaded, 5, 5), AfterFailure::Finish(SampleState::Failed));
    }

    #[test]
    fn a_bad_request_fails_at_once() {
        let too_long = failure(FailureKind::Http { status: 400 });
        assert_eq!(after_failure(&too_long, 1, 5), AfterFailure::Finish(SampleState::Failed));
    }
}
