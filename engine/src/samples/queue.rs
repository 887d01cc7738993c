//! PostgreSQL as the work queue. Workers claim pending samples with `FOR UPDATE SKIP LOCKED`
//! under a lease they renew, and settle each try in one statement that moves the sample to its
//! next state and records the try — only if they still hold the lease, so a sample never gets
//! two results even when a slow worker and its successor both finish.

use super::{auto_flags, token_ids};
use crate::{vllm::TokenIds, Result};
use domain::{acceptance::SpecDecode, generation::SampleState};
use sqlx::PgPool;
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

/// A sample leased to this worker, with the conversation it starts from.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub id: i64,
    pub thinking: Option<bool>,
    /// Tries already counted against the run's attempt limit.
    pub attempts: i32,
    /// The dataset row's normalized messages: `[{"role","content"}]`.
    pub source: serde_json::Value,
    /// The functions the row offers (`[{"type": "function", ...}]`), sent as `tools`.
    pub tools: Option<serde_json::Value>,
}

pub async fn claim(
    pool: &PgPool,
    run_id: i64,
    worker: Uuid,
    lease: Duration,
    limit: i64,
) -> Result<Vec<Claimed>> {
    let rows = sqlx::query!(
        r#"WITH picked AS (
               SELECT id FROM samples
               WHERE run_id = $1 AND state = 'pending' AND (not_before IS NULL OR not_before <= now())
               ORDER BY id
               LIMIT $4
               FOR UPDATE SKIP LOCKED)
           UPDATE samples s
           SET state = 'running', lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3)
           FROM picked, dataset_rows r
           WHERE s.id = picked.id AND r.id = s.row_id
           RETURNING s.id, s.thinking, s.attempts, r.messages, r.tools"#,
        run_id,
        worker,
        lease.as_secs_f64(),
        limit
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Claimed {
            id: r.id,
            thinking: r.thinking,
            attempts: r.attempts,
            source: r.messages,
            tools: r.tools,
        })
        .collect())
}

/// Extends the leases of the samples this worker is working on (`held`): a sample whose try
/// ended unrecorded is left to expire and be reaped. Returns the ids it still holds.
pub async fn renew_leases(pool: &PgPool, worker: Uuid, lease: Duration, held: &[i64]) -> Result<Vec<i64>> {
    Ok(sqlx::query_scalar!(
        "UPDATE samples SET lease_expires_at = now() + make_interval(secs => $2)
         WHERE id = ANY($3) AND lease_owner = $1 AND state = 'running' RETURNING id",
        worker,
        lease.as_secs_f64(),
        held
    )
    .fetch_all(pool)
    .await?)
}

/// Returns samples whose worker stopped renewing (it died, or lost the database) to the queue,
/// recording the interrupted try as not counted.
pub async fn reap_expired_leases(pool: &PgPool) -> Result<u64> {
    let reaped = sqlx::query!(
        r#"WITH expired AS (
               SELECT id, lease_owner, lease_expires_at FROM samples
               WHERE state = 'running' AND lease_expires_at < now()
               FOR UPDATE SKIP LOCKED
               LIMIT 1000),
           reset AS (
               UPDATE samples s SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL
               FROM expired e WHERE s.id = e.id
               RETURNING s.id)
           INSERT INTO sample_attempts (sample_id, result, counted, worker_id, started_at, error_kind, error)
           SELECT e.id, 'abandoned', false, e.lease_owner, e.lease_expires_at, 'lease_expired',
                  'the worker stopped renewing its lease (it stopped or lost the database); the sample was queued again'
           FROM expired e JOIN reset r ON r.id = e.id"#
    )
    .execute(pool)
    .await?;
    Ok(reaped.rows_affected())
}

/// One try's record, written together with the sample's next state.
#[derive(Clone, Debug, Default)]
pub struct TryRecord {
    /// ok | truncated | empty | error | timed_out | abandoned
    pub result: &'static str,
    pub endpoint_id: Option<i64>,
    pub started_at: Option<OffsetDateTime>,
    pub http_status: Option<i32>,
    pub error_kind: Option<&'static str>,
    pub error: Option<String>,
    pub finish_reason: Option<String>,
    pub prompt_tokens: Option<i32>,
    pub completion_tokens: Option<i32>,
    /// Counted from the token ids when they came, as are the next two; without ids, the
    /// server's own figure here and none for the other two (the server gives none).
    pub reasoning_tokens: Option<i32>,
    pub answer_tokens: Option<i32>,
    pub tool_call_tokens: Option<i32>,
    pub ttft_ms: Option<i32>,
    pub duration_ms: Option<i32>,
    pub partial_reasoning: Option<String>,
    pub partial_content: Option<String>,
    /// How the server's draft did over the try's requests, when it runs one and reports it.
    pub spec_decode: Option<SpecDecode>,
}

/// The figures as their five columns (all NULL without a figure).
struct SpecColumns {
    steps: Option<i32>,
    accepted: Option<i32>,
    drafted: Option<i32>,
    tokens: Option<i16>,
    histogram: Option<Vec<i32>>,
}

impl SpecColumns {
    fn of(figures: Option<&SpecDecode>) -> Self {
        let int = |n: u32| n.min(i32::MAX as u32) as i32;
        Self {
            steps: figures.map(|f| int(f.steps)),
            accepted: figures.map(|f| int(f.accepted)),
            drafted: figures.map(|f| int(f.drafted)),
            tokens: figures.map(|f| f.spec_tokens.min(i16::MAX as u32) as i16),
            histogram: figures.map(|f| f.histogram.iter().map(|&n| int(n)).collect()),
        }
    }
}

/// The sample's result fields after a counted try.
#[derive(Clone, Debug, Default)]
pub struct Output {
    pub reasoning: Option<String>,
    pub content: Option<String>,
    pub messages: Option<serde_json::Value>,
    /// The answer calls a tool (its text may then be empty).
    pub calls_tools: bool,
    /// The server's token ids, one entry per request of the try, for an answer; `None` when
    /// the server did not return them (or the try has no answer).
    pub tokens: Option<Vec<TokenIds>>,
    /// Flags found while generating that the text alone does not show (a generated call that
    /// the source's tool result no longer answers, arguments that are not JSON).
    pub found_flags: Vec<&'static str>,
}

/// Where a counted try leaves the sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A terminal state.
    Finish(SampleState),
    /// Back to the queue, not before the given delay.
    RetryAfter(Duration),
}

/// PostgreSQL's text and jsonb cannot hold U+0000, and models emit it (a real vLLM server with
/// a random-weight model did, in 32 of 120 answers): it is stored as U+FFFD so the rest of the
/// result is kept rather than the whole write refused.
fn storable(text: Option<String>) -> Option<String> {
    text.map(|t| if t.contains('\0') { t.replace('\0', "\u{FFFD}") } else { t })
}

fn storable_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) if s.contains('\0') => *s = s.replace('\0', "\u{FFFD}"),
        serde_json::Value::Array(items) => items.iter_mut().for_each(storable_json),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(storable_json),
        _ => {}
    }
}

impl Output {
    fn storable(mut self) -> Self {
        self.reasoning = storable(self.reasoning);
        self.content = storable(self.content);
        if let Some(messages) = self.messages.as_mut() {
            storable_json(messages);
        }
        self
    }
}

fn text_bytes(text: &Option<String>) -> usize {
    text.as_ref().map_or(0, String::len)
}

impl Output {
    /// Roughly what it holds in memory.
    pub fn bytes(&self) -> usize {
        text_bytes(&self.reasoning)
            + text_bytes(&self.content)
            + self.messages.as_ref().map_or(0, |m| m.to_string().len())
            + self.tokens.iter().flatten().map(|t| 4 * (t.prompt.len() + t.completion.len())).sum::<usize>()
    }
}

impl TryRecord {
    /// Roughly what it holds in memory.
    pub fn bytes(&self) -> usize {
        256 + text_bytes(&self.error)
            + text_bytes(&self.partial_reasoning)
            + text_bytes(&self.partial_content)
    }

    fn storable(mut self) -> Self {
        self.error = storable(self.error);
        self.finish_reason = storable(self.finish_reason);
        self.partial_reasoning = storable(self.partial_reasoning);
        self.partial_content = storable(self.partial_content);
        self
    }
}

/// Settles a counted try. `Ok(false)` when the lease was lost: another worker owns the sample
/// now, and this result is dropped.
///
/// Every result field is replaced, never merged: a try that failed leaves no conversation
/// (`messages` NULL, only its partial reasoning and answer) and no token ids, so an earlier
/// try's text never looks like the current result.
pub async fn settle(
    pool: &PgPool,
    sample_id: i64,
    worker: Uuid,
    next: Next,
    output: Output,
    record: TryRecord,
) -> Result<bool> {
    let (output, record) = (output.storable(), record.storable());
    let (state, retry_secs) = match next {
        Next::Finish(state) => {
            debug_assert!(state.is_terminal());
            (state, None)
        }
        Next::RetryAfter(delay) => (SampleState::Pending, Some(delay.as_secs_f64())),
    };
    // Review flags found from the result itself (none while the sample goes back to the queue).
    let auto_flags: Vec<String> = auto_flags::auto_flags(
        state,
        output.reasoning.as_deref(),
        output.content.as_deref(),
        output.calls_tools,
    )
    .into_iter()
    .chain(output.found_flags.iter().copied().filter(|_| state.is_terminal()))
    .map(String::from)
    .collect();
    // An answer records whether the server gave its token ids; a try without one has none.
    let answered = matches!(state, SampleState::Ok | SampleState::Truncated | SampleState::Empty);
    let captured = answered.then_some(output.tokens.is_some());
    let tokens = output.tokens.unwrap_or_default();
    let turns: Vec<i16> = (0..tokens.len() as i16).collect();
    let prompts: Vec<Vec<u8>> = tokens.iter().map(|t| token_ids::pack(&t.prompt)).collect();
    let completions: Vec<Vec<u8>> = tokens.iter().map(|t| token_ids::pack(&t.completion)).collect();
    let spec = SpecColumns::of(record.spec_decode.as_ref());
    let settled = sqlx::query_scalar!(
        r#"WITH updated AS (
               UPDATE samples SET
                   state = $3, attempts = attempts + 1, lease_owner = NULL, lease_expires_at = NULL,
                   not_before = now() + make_interval(secs => $4),
                   finish_reason = $5, reasoning = $6, content = $7, messages = $8,
                   prompt_tokens = $9, completion_tokens = $10, reasoning_tokens = $11,
                   ttft_ms = $12, duration_ms = $13, endpoint_id = $14, error = $15,
                   finished_at = CASE WHEN $3 = 'pending'::sample_state THEN NULL ELSE now() END,
                   auto_flags = $22, captured_token_ids = $23,
                   spec_steps = $27, spec_accepted = $28, spec_drafted = $29, spec_tokens = $30, spec_histogram = $31,
                   answer_tokens = $32, tool_call_tokens = $33
               WHERE id = $1 AND state = 'running' AND lease_owner = $2
               RETURNING id),
           cleared AS (
               DELETE FROM sample_tokens t USING updated u
               WHERE t.sample_id = u.id AND t.turn >= cardinality($24::smallint[])),
           stored AS (
               INSERT INTO sample_tokens (sample_id, turn, prompt_ids, completion_ids)
               SELECT u.id, x.turn, x.prompt_ids, x.completion_ids
               FROM updated u, unnest($24::smallint[], $25::bytea[], $26::bytea[]) AS x(turn, prompt_ids, completion_ids)
               ON CONFLICT (sample_id, turn) DO UPDATE
                   SET prompt_ids = excluded.prompt_ids, completion_ids = excluded.completion_ids)
           INSERT INTO sample_attempts (
               sample_id, result, counted, endpoint_id, worker_id, started_at, http_status, error_kind, error,
               finish_reason, prompt_tokens, completion_tokens, reasoning_tokens, ttft_ms, duration_ms,
               partial_reasoning, partial_content, spec_steps, spec_accepted, spec_drafted, spec_tokens, spec_histogram,
               answer_tokens, tool_call_tokens)
           SELECT id, $16, true, $14, $2, COALESCE($17, now()), $18, $19, $15,
                  $5, $9, $10, $11, $12, $13, $20, $21, $27, $28, $29, $30, $31, $32, $33
           FROM updated
           RETURNING sample_id"#,
        sample_id,
        worker,
        state as SampleState,
        retry_secs,
        record.finish_reason,
        output.reasoning,
        output.content,
        output.messages,
        record.prompt_tokens,
        record.completion_tokens,
        record.reasoning_tokens,
        record.ttft_ms,
        record.duration_ms,
        record.endpoint_id,
        record.error,
        record.result,
        record.started_at,
        record.http_status,
        record.error_kind,
        record.partial_reasoning,
        record.partial_content,
        &auto_flags,
        captured,
        &turns,
        &prompts,
        &completions,
        spec.steps,
        spec.accepted,
        spec.drafted,
        spec.tokens,
        spec.histogram.as_deref(),
        record.answer_tokens,
        record.tool_call_tokens,
    )
    .fetch_optional(pool)
    .await?;
    Ok(settled.is_some())
}

/// Ends a sample whose try could not be recorded (`settle` failed), so that it is not left
/// running under a lease this worker keeps renewing. Counted as a failed try; a user can retry
/// failed samples from the run page.
pub async fn fail_unrecorded(pool: &PgPool, sample_id: i64, worker: Uuid, error: &str) -> Result<bool> {
    let error = format!("the result could not be stored: {error}").replace('\0', "\u{FFFD}");
    let failed = sqlx::query_scalar!(
        r#"WITH updated AS (
               UPDATE samples SET state = 'failed', attempts = attempts + 1, lease_owner = NULL,
                   lease_expires_at = NULL, finished_at = now(), error = $3
               WHERE id = $1 AND state = 'running' AND lease_owner = $2
               RETURNING id)
           INSERT INTO sample_attempts (sample_id, result, counted, worker_id, started_at, error_kind, error)
           SELECT id, 'error', true, $2, now(), 'unrecorded', $3 FROM updated
           RETURNING sample_id"#,
        sample_id,
        worker,
        error
    )
    .fetch_optional(pool)
    .await?;
    Ok(failed.is_some())
}

/// Puts a leased sample back in the queue without counting the try: the endpoint was
/// unreachable, the run was paused, or this worker is stopping.
pub async fn release(
    pool: &PgPool,
    sample_id: i64,
    worker: Uuid,
    retry_after: Duration,
    record: TryRecord,
) -> Result<bool> {
    let released = sqlx::query_scalar!(
        r#"WITH updated AS (
               UPDATE samples SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL,
                   not_before = now() + make_interval(secs => $3)
               WHERE id = $1 AND state = 'running' AND lease_owner = $2
               RETURNING id)
           INSERT INTO sample_attempts (sample_id, result, counted, endpoint_id, worker_id, started_at, error_kind, error,
                                        duration_ms, partial_reasoning, partial_content)
           SELECT id, 'abandoned', false, $4, $2, COALESCE($5, now()), $6, $7, $8, $9, $10 FROM updated
           RETURNING sample_id"#,
        sample_id,
        worker,
        retry_after.as_secs_f64(),
        record.endpoint_id,
        record.started_at,
        record.error_kind,
        record.error,
        record.duration_ms,
        record.partial_reasoning,
        record.partial_content,
    )
    .fetch_optional(pool)
    .await?;
    Ok(released.is_some())
}

/// Returns samples this worker claimed ahead of a free slot but never sent: no try happened,
/// so none is recorded. Returns how many it still held.
pub async fn unclaim(pool: &PgPool, worker: Uuid, sample_ids: &[i64]) -> Result<u64> {
    let returned = sqlx::query!(
        "UPDATE samples SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL
         WHERE id = ANY($2) AND state = 'running' AND lease_owner = $1",
        worker,
        sample_ids
    )
    .execute(pool)
    .await?;
    Ok(returned.rows_affected())
}

/// Releases everything this worker still holds (used when it stops).
pub async fn release_all(pool: &PgPool, worker: Uuid, reason: &str) -> Result<u64> {
    let released = sqlx::query!(
        r#"WITH held AS (
               SELECT id FROM samples WHERE lease_owner = $1 AND state = 'running' FOR UPDATE),
           reset AS (
               UPDATE samples s SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL
               FROM held WHERE s.id = held.id RETURNING s.id)
           INSERT INTO sample_attempts (sample_id, result, counted, worker_id, started_at, error_kind, error)
           SELECT id, 'abandoned', false, $1, now(), 'released', $2 FROM reset"#,
        worker,
        reason
    )
    .execute(pool)
    .await?;
    Ok(released.rows_affected())
}
