//! One try of one sample: send its conversation turn by turn, classify what came back, and
//! settle the sample in the queue.

use super::{
    availability::Verdict,
    backoff, chunking,
    classify::{self, AfterFailure},
    conversation::{self, CallsFit, Turn},
    driver::Slot,
    endpoint::Endpoint,
    queue::{self, Claimed, Next, Output, TryRecord},
    write_back::{self, GaveUp},
    RunContext,
};
use crate::samples::auto_flags;
use crate::vllm::{ChatCall, ChatMessage, ChatRequest, Completion, Failure, SpanCounts, StreamOptions};
use domain::conversation::{call_problems, tool_names};
use domain::{acceptance::SpecDecode, generation::SampleState};
use std::time::Duration;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

/// What the endpoint driver learns from a finished try.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub sample_id: i64,
    pub result: TryResult,
    pub completion_tokens: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TryResult {
    /// The sample reached this terminal state.
    Finished(SampleState),
    /// Counted, back in the queue after a backoff. `timeout_or_server_error` feeds the
    /// concurrency controller.
    Retrying { timeout_or_server_error: bool },
    /// Cut by an outage of the endpoint; the sample went back uncounted.
    Released,
    /// Stopped because the run was cancelled or the worker is stopping.
    Interrupted,
    /// Another worker owns the sample now (or the result could not be written while the
    /// database was away); this result was dropped.
    LeaseLost,
}

pub struct Attempt<'a> {
    pub run: &'a RunContext,
    pub endpoint: &'a Endpoint,
    pub cancel: &'a CancellationToken,
    /// The place in the endpoint's share this try holds while it sends requests; freed once it
    /// sends no more, before its result is written, so the next sample starts at once.
    pub slot: &'a Slot,
}

impl Attempt<'_> {
    pub async fn run(&self, sample: Claimed) -> Report {
        let sample_id = sample.id;
        let (result, completion_tokens) = match self.execute(&sample).await {
            Ok(done) => done,
            Err(GaveUp::Abandoned(reason)) => {
                // The sample stays leased until the lease runs out (this worker no longer renews
                // it), then returns to the queue: a new try, not a failure.
                tracing::error!(sample.id = sample_id, %reason, "a finished try could not be written; its sample returns to the queue");
                (TryResult::LeaseLost, 0)
            }
            Err(GaveUp::Refused(e)) => {
                tracing::error!(sample.id = sample_id, error = %e, "the database refused a try's record; the sample is marked failed");
                let reason = e.to_string();
                let failing =
                    || queue::fail_unrecorded(&self.run.results, sample_id, self.run.worker_id, &reason);
                match write_back::persist(&self.run.hold_budget, 1024, "marking a sample failed", failing)
                    .await
                {
                    Ok(true) => (TryResult::Finished(SampleState::Failed), 0),
                    Ok(false) => (TryResult::LeaseLost, 0),
                    Err(e) => {
                        tracing::error!(sample.id = sample_id, error = ?e, "marking the sample failed did not work either; its lease will run out");
                        (TryResult::LeaseLost, 0)
                    }
                }
            }
        };
        let metrics = &self.run.metrics;
        match &result {
            TryResult::Finished(state) => {
                metrics.finished(state.as_str());
                metrics.tried(state.as_str());
            }
            TryResult::Retrying { .. } => metrics.tried("error"),
            TryResult::Released | TryResult::Interrupted | TryResult::LeaseLost => metrics.tried("abandoned"),
        }
        metrics.generated_tokens.inc_by(completion_tokens as u64);
        Report { sample_id, result, completion_tokens }
    }

    async fn execute(&self, sample: &Claimed) -> Result<(TryResult, u32), GaveUp> {
        let settings = &self.run.settings;
        let started_at = OffsetDateTime::now_utc();
        let clock = std::time::Instant::now();
        let plan = match conversation::plan(&sample.source, settings.turns, settings.system_prompt.as_deref())
        {
            Ok(plan) => plan,
            Err(reason) => {
                let record = TryRecord {
                    result: "error",
                    error_kind: Some("bad_conversation"),
                    error: Some(reason),
                    started_at: Some(started_at),
                    endpoint_id: Some(self.endpoint.id),
                    ..Default::default()
                };
                let result = TryResult::Finished(SampleState::Failed);
                return self
                    .settle(sample, Next::Finish(SampleState::Failed), Output::default(), record, result, 0)
                    .await;
            }
        };
        let mut history: Vec<ChatMessage> = plan.prefix.clone();
        let mut turns: Vec<Turn> = plan.prefix.iter().map(Turn::sent).collect();
        let mut found_flags: Vec<&'static str> = Vec::new();
        // The calls the regenerated turns made (the source's own calls are not judged here).
        let mut generated_calls: Vec<domain::conversation::ToolCall> = Vec::new();
        let mut usage = UsageSum::default();
        let mut first_ttft: Option<Duration> = None;
        let mut last: Option<Completion> = None;
        // The server's token ids of each request, while every one of them has come with its ids.
        let mut tokens: Option<Vec<crate::vllm::TokenIds>> = Some(Vec::new());
        // How the server's draft did, over the requests that report it.
        let mut spec_decode: Option<SpecDecode> = None;
        let mut outcome = SampleState::Ok;

        for step in plan.steps {
            let messages = match last.as_ref().map(|c| c.tool_calls.as_slice()) {
                Some(regenerated) if !step.answers.is_empty() => {
                    if regenerated.is_empty() {
                        // The regenerated turn answered in text where the source called tools:
                        // the source's results answer nothing, so the conversation ends here.
                        found_flags.push(auto_flags::TOOL_RESULT_MISMATCH);
                        break;
                    }
                    let (messages, fit) = step.answering(regenerated);
                    match fit {
                        CallsFit::Same => {}
                        CallsFit::OtherCalls => found_flags.push(auto_flags::TOOL_RESULT_MISMATCH),
                        CallsFit::OtherArguments => found_flags.push(auto_flags::TOOL_ARGUMENTS_CHANGED),
                    }
                    messages
                }
                Some(regenerated) if !regenerated.is_empty() => {
                    // The regenerated turn called tools where the source answered in text: the
                    // next user turn follows calls that no result answers.
                    found_flags.push(auto_flags::UNANSWERED_TOOL_CALL);
                    step.messages
                }
                _ => step.messages,
            };
            history.extend(messages.iter().cloned());
            turns.extend(messages.iter().map(Turn::sent));
            let request = self.request(history.clone(), sample.thinking, sample.tools.as_ref());
            let call = ChatCall {
                idle_timeout: Duration::from_secs(settings.idle_timeout_secs.into()),
                deadline: settings.deadline_secs.map(|s| Duration::from_secs(s.into())),
                markers: self.endpoint.span_markers(&settings.model).await,
            };
            let sent = self.endpoint.sending();
            let result = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => {
                    let record = TryRecord { error_kind: Some("interrupted"), error: Some("the run was cancelled or the worker stopped".into()), started_at: Some(started_at), endpoint_id: Some(self.endpoint.id), ..Default::default() };
                    let held = self.release(sample, Duration::ZERO, record).await?;
                    return Ok((if held { TryResult::Interrupted } else { TryResult::LeaseLost }, usage.completion));
                }
                result = self.endpoint.client.chat_observed(&request, call, |p| self.endpoint.progress(p)) => result,
            };
            match result {
                Ok(completion) => {
                    self.endpoint.served(sent);
                    first_ttft = first_ttft.or(completion.ttft);
                    usage.add(&completion);
                    match classify::completion_outcome(&completion) {
                        Err(reason) => {
                            let failure = Failure {
                                kind: crate::vllm::FailureKind::ErrorChunk,
                                message: reason.to_string(),
                                partial: crate::vllm::Partial {
                                    reasoning: completion.reasoning,
                                    content: completion.content,
                                    ttft: completion.ttft,
                                    usage: completion.usage,
                                },
                                duration: completion.duration,
                            };
                            return self.failed(sample, failure, started_at, &usage).await;
                        }
                        Ok(state) => {
                            tokens = tokens.zip(completion.tokens.clone()).map(|(mut all, this)| {
                                all.push(this);
                                all
                            });
                            spec_decode =
                                SpecDecode::sum(spec_decode.iter().chain(completion.spec_decode.figures()));
                            let answer = ChatMessage {
                                tool_calls: completion.tool_calls.clone(),
                                ..ChatMessage::text("assistant", completion.content.clone())
                            };
                            turns.push(Turn {
                                reasoning_content: Some(completion.reasoning.clone())
                                    .filter(|r| !r.is_empty()),
                                ..Turn::sent(&answer)
                            });
                            generated_calls.extend(answer.tool_calls.iter().cloned());
                            history.push(answer);
                            last = Some(completion);
                            outcome = state;
                            if state != SampleState::Ok {
                                break; // a truncated or empty turn ends the conversation
                            }
                        }
                    }
                }
                Err(failure) => return self.failed(sample, failure, started_at, &usage).await,
            }
        }

        let last = last.expect("a plan has at least one step");
        // Checked against the functions the row offers (any name is unknown to a row offering none).
        let offered = sample.tools.as_ref().map(tool_names).transpose().ok().flatten().unwrap_or_default();
        found_flags.extend(call_problems(&generated_calls, Some(&offered)).into_iter().map(|p| p.flag()));
        let (reasoning_tokens, answer_tokens, tool_call_tokens) = usage.spans(tokens.is_some());
        let record = TryRecord {
            result: outcome.as_str(),
            endpoint_id: Some(self.endpoint.id),
            started_at: Some(started_at),
            finish_reason: Some(last.finish_reason.clone()),
            prompt_tokens: usage.prompt.map(to_i32),
            completion_tokens: Some(to_i32(usage.completion)),
            reasoning_tokens: reasoning_tokens.map(to_i32),
            answer_tokens: answer_tokens.map(to_i32),
            tool_call_tokens: tool_call_tokens.map(to_i32),
            ttft_ms: first_ttft.map(millis),
            duration_ms: Some(millis(clock.elapsed())),
            spec_decode,
            ..Default::default()
        };
        let output = Output {
            reasoning: Some(last.reasoning),
            content: Some(last.content),
            calls_tools: !last.tool_calls.is_empty(),
            messages: Some(serde_json::to_value(&turns).expect("turns serialize")),
            tokens,
            found_flags,
        };
        let result = TryResult::Finished(outcome);
        self.settle(sample, Next::Finish(outcome), output, record, result, usage.completion).await
    }

    fn request(
        &self,
        messages: Vec<ChatMessage>,
        thinking: Option<bool>,
        tools: Option<&serde_json::Value>,
    ) -> ChatRequest {
        let s = &self.run.settings;
        ChatRequest {
            model: s.model.clone(),
            messages,
            tools: tools.cloned(),
            tool_choice: tools.map(|_| s.tool_choice.as_str()),
            parallel_tool_calls: tools.and((!s.parallel_tool_calls).then_some(false)),
            max_tokens: s.max_tokens,
            temperature: s.temperature,
            top_p: s.top_p,
            seed: s.seed,
            // Qwen-style templates read `enable_thinking`, DeepSeek/Kimi-style ones `thinking`;
            // a template ignores the name it does not use.
            chat_template_kwargs: thinking
                .map(|on| serde_json::json!({ "enable_thinking": on, "thinking": on })),
            stream_interval: Some(chunking::stream_interval(
                s.stream_interval,
                s.idle_timeout_secs,
                self.endpoint.per_request_tps(),
            )),
            stream: true,
            stream_options: StreamOptions { include_usage: true },
            return_token_ids: true,
        }
    }

    async fn failed(
        &self,
        sample: &Claimed,
        failure: Failure,
        started_at: OffsetDateTime,
        usage: &UsageSum,
    ) -> Result<(TryResult, u32), GaveUp> {
        self.slot.free();
        let tries_after = sample.attempts as u32 + 1;
        let record = TryRecord {
            result: if failure.is_timeout() { "timed_out" } else { "error" },
            endpoint_id: Some(self.endpoint.id),
            started_at: Some(started_at),
            http_status: failure.http_status().map(i32::from),
            error_kind: Some(failure.kind.as_str()),
            error: Some(failure.message.clone()),
            prompt_tokens: failure.partial.usage.map(|u| to_i32(u.prompt_tokens)),
            completion_tokens: failure.partial.usage.map(|u| to_i32(u.completion_tokens)),
            ttft_ms: failure.partial.ttft.map(millis),
            duration_ms: Some(millis(failure.duration)),
            partial_reasoning: Some(failure.partial.reasoning.clone()).filter(|s| !s.is_empty()),
            partial_content: Some(failure.partial.content.clone()).filter(|s| !s.is_empty()),
            ..Default::default()
        };
        let output = Output {
            reasoning: Some(failure.partial.reasoning.clone()).filter(|s| !s.is_empty()),
            content: Some(failure.partial.content.clone()).filter(|s| !s.is_empty()),
            ..Output::default()
        };
        if self.endpoint.judge(&failure).await == Verdict::Outage {
            // Not the sample's fault: back to the queue uncounted, taken again once the
            // endpoint serves (or by another endpoint of the run).
            let held = self.release(sample, Duration::from_secs(1), record).await?;
            return Ok((if held { TryResult::Released } else { TryResult::LeaseLost }, usage.completion));
        }
        match classify::after_failure(&failure, tries_after, self.run.settings.max_attempts) {
            AfterFailure::Retry => {
                let next = Next::RetryAfter(backoff::delay(tries_after));
                let result = TryResult::Retrying { timeout_or_server_error: true };
                self.settle(sample, next, output, record, result, usage.completion).await
            }
            AfterFailure::Finish(state) => {
                let result = TryResult::Finished(state);
                self.settle(sample, Next::Finish(state), output, record, result, usage.completion).await
            }
        }
    }

    /// Puts the sample back uncounted, holding the write while the database is away.
    async fn release(
        &self,
        sample: &Claimed,
        retry_after: Duration,
        record: TryRecord,
    ) -> Result<bool, GaveUp> {
        self.slot.free();
        let bytes = record.bytes();
        let release =
            || queue::release(&self.run.results, sample.id, self.run.worker_id, retry_after, record.clone());
        write_back::persist(&self.run.hold_budget, bytes, "returning a sample to the queue", release).await
    }

    /// Writes the try, holding it while the database is away; `result` is what it means when
    /// this worker still held the lease.
    async fn settle(
        &self,
        sample: &Claimed,
        next: Next,
        output: Output,
        record: TryRecord,
        result: TryResult,
        tokens: u32,
    ) -> Result<(TryResult, u32), GaveUp> {
        self.slot.free();
        let bytes = record.bytes() + output.bytes();
        let write = || {
            queue::settle(
                &self.run.results,
                sample.id,
                self.run.worker_id,
                next,
                output.clone(),
                record.clone(),
            )
        };
        if write_back::persist(&self.run.hold_budget, bytes, "recording a try", write).await? {
            Ok((result, tokens))
        } else {
            tracing::warn!(
                sample.id = sample.id,
                "lease lost before the result was saved; another worker has the sample"
            );
            Ok((TryResult::LeaseLost, tokens))
        }
    }
}

/// What a try's requests used, summed over the turns it generated.
struct UsageSum {
    /// Prompt tokens of the last request (the longest, for multi-turn conversations).
    prompt: Option<u32>,
    completion: u32,
    /// The server's `reasoning_tokens`, used only when the ids give no count.
    server_reasoning: Option<u32>,
    /// Counted from the ids, while every request so far had them.
    counted: Option<SpanCounts>,
}

impl Default for UsageSum {
    fn default() -> Self {
        Self { prompt: None, completion: 0, server_reasoning: None, counted: Some(SpanCounts::default()) }
    }
}

impl UsageSum {
    fn add(&mut self, completion: &Completion) {
        if let Some(usage) = completion.usage {
            self.prompt = Some(usage.prompt_tokens);
            self.completion += usage.completion_tokens;
            if let Some(r) = usage.reasoning_tokens {
                self.server_reasoning = Some(self.server_reasoning.unwrap_or(0) + r);
            }
        }
        self.counted = self.counted.zip(completion.span_counts).map(|(sum, this)| sum + this);
    }

    /// Reasoning, answer and call tokens: counted from the ids; without them, the server's
    /// reasoning figure alone; with ids that could not be split, none (never a wrong one).
    fn spans(&self, ids_came: bool) -> (Option<u32>, Option<u32>, Option<u32>) {
        match self.counted {
            Some(c) if ids_came => (Some(c.reasoning), Some(c.answer), Some(c.tool_calls)),
            _ if ids_came => (None, None, None),
            _ => (self.server_reasoning, None, None),
        }
    }
}

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

fn to_i32(n: u32) -> i32 {
    n.min(i32::MAX as u32) as i32
}
