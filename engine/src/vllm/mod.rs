//! A client for vLLM's OpenAI-compatible server: streamed chat completions, models, health and
//! the Prometheus `/metrics` load signals. It tolerates every wire variation vLLM has shipped
//! (see `shared/reference/vllm-facts.md`): `reasoning` or `reasoning_content`, nested or flat
//! error bodies, error chunks after a 200, empty deltas, `finish_reason` as an open set.

mod chat;
mod client;
mod error_body;
mod load;
mod span_counts;
mod tool_calls;
mod wire;

pub use chat::{Completion, Failure, FailureKind, Partial, Progress, SpecReport, TokenIds, Usage};
pub use client::{http_client, ChatCall, ServedModel, VllmClient};
pub use load::{ServerLoad, SpecCounters};
pub use span_counts::{SpanCounts, SpanMarkers};
pub use wire::{ChatMessage, ChatRequest, StreamOptions};
