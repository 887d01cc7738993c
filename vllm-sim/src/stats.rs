//! The simulator's own view of what happened, served as JSON at `GET /sim/stats` so tests
//! and benchmarks can assert on the server side of a run.

use crate::engine::FinishReason;
use crate::metrics::Metrics;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Events that vLLM has no metric for.
#[derive(Debug, Default)]
pub(crate) struct SimCounters {
    pub requests_started: AtomicU64,
    pub requests_aborted: AtomicU64,
    pub http_500: AtomicU64,
    pub stream_errors: AtomicU64,
    pub stalls: AtomicU64,
    pub dropped_connections: AtomicU64,
    pub slow_starts: AtomicU64,
    pub outages: AtomicU64,
    /// Requests answered by the proxy while the engine was away.
    pub unavailable_answers: AtomicU64,
    pub unavailable_chat_answers: AtomicU64,
    /// Requests and streams failed while the engine was failing everything.
    pub engine_failures: AtomicU64,
    pub metrics_scrapes: AtomicU64,
    /// Streamed requests by the tokens per chunk they streamed at.
    pub stream_intervals: Mutex<BTreeMap<u32, u64>>,
}

impl SimCounters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn streaming(&self, interval: u32) {
        *self.stream_intervals.lock().expect("stream interval counts").entry(interval).or_default() += 1;
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimStats {
    /// Requests that passed validation and reached the engine.
    pub requests_started: u64,
    pub requests_finished: FinishedCounts,
    /// Requests removed before their end: client gone, or an injected failure.
    pub requests_aborted: u64,
    pub preemptions: u64,
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    pub running: u64,
    pub waiting: u64,
    pub kv_cache_usage: f64,
    pub faults: FaultCounts,
    /// Times the server went down through the control endpoint.
    pub outages: u64,
    /// Requests answered with a gateway status while the engine restarted behind its proxy.
    pub unavailable_answers: u64,
    /// Of those, chat completion requests.
    pub unavailable_chat_answers: u64,
    /// Requests and streams failed while the engine failed everything.
    pub engine_failures: u64,
    /// `GET /metrics` requests answered.
    #[serde(default)]
    pub metrics_scrapes: u64,
    /// Streamed requests by the tokens per chunk they streamed at (`stream_interval`, 1 when
    /// the request asked for none or the server ignores it).
    #[serde(default)]
    pub stream_intervals: BTreeMap<u32, u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishedCounts {
    pub stop: u64,
    pub length: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounts {
    pub http_500: u64,
    pub stream_error: u64,
    pub stall: u64,
    pub drop_connection: u64,
    pub slow_start: u64,
}

impl SimStats {
    pub(crate) fn collect(metrics: &Metrics, counters: &SimCounters) -> Self {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Self {
            requests_started: read(&counters.requests_started),
            requests_finished: FinishedCounts {
                stop: metrics.finished_count(FinishReason::Stop),
                length: metrics.finished_count(FinishReason::Length),
            },
            requests_aborted: read(&counters.requests_aborted),
            preemptions: metrics.preemptions.get(),
            prompt_tokens: metrics.prompt_tokens.get(),
            generation_tokens: metrics.generation_tokens.get(),
            running: metrics.running.get() as u64,
            waiting: metrics.waiting.get() as u64,
            kv_cache_usage: metrics.kv_cache_usage.get(),
            faults: FaultCounts {
                http_500: read(&counters.http_500),
                stream_error: read(&counters.stream_errors),
                stall: read(&counters.stalls),
                drop_connection: read(&counters.dropped_connections),
                slow_start: read(&counters.slow_starts),
            },
            outages: read(&counters.outages),
            unavailable_answers: read(&counters.unavailable_answers),
            unavailable_chat_answers: read(&counters.unavailable_chat_answers),
            engine_failures: read(&counters.engine_failures),
            metrics_scrapes: read(&counters.metrics_scrapes),
            stream_intervals: counters.stream_intervals.lock().expect("stream interval counts").clone(),
        }
    }
}
