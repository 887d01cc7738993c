//! Everything the sample page shows, in a few indexed queries.

use super::{decisions, markdown};
use crate::{Error, Result};
use domain::{
    acceptance::SpecDecode,
    conversation::ToolCall,
    generation::SampleState,
    review::{
        AttemptView, RegeneratedSince, ReviewEventKind, ReviewEventView, ReviewState, SampleDetail, Turn,
    },
    Viewer,
};
use sqlx::PgPool;

pub async fn load(pool: &PgPool, viewer: &Viewer, sample_id: i64) -> Result<SampleDetail> {
    let s = sqlx::query!(
        r#"SELECT s.id, s.run_id, r.name AS run_name, r.settings AS run_settings, d.category, d.row_key,
                  d.messages AS source, d.tools, s.messages, s.state AS "state: SampleState", s.thinking, s.finish_reason,
                  s.reasoning, s.content, s.prompt_tokens, s.completion_tokens, s.reasoning_tokens, s.answer_tokens, s.tool_call_tokens, s.ttft_ms,
                  s.duration_ms, s.spec_steps, s.spec_accepted, s.spec_drafted, s.spec_tokens, s.spec_histogram,
                  e.name AS "endpoint?", s.error, s.review_state AS "review_state: ReviewState",
                  s.review_version, s.flags, s.auto_flags, s.review_note, ru.username AS "reviewer?", s.reviewed_at,
                  CASE WHEN s.review_lease_owner <> $2 AND s.review_lease_expires > now() THEN lu.username END
                      AS "leased_by_other?"
           FROM samples s
           JOIN runs r ON r.id = s.run_id
           JOIN dataset_rows d ON d.id = s.row_id
           LEFT JOIN endpoints e ON e.id = s.endpoint_id
           LEFT JOIN users ru ON ru.id = s.reviewed_by
           LEFT JOIN users lu ON lu.id = s.review_lease_owner
           WHERE s.id = $1"#,
        sample_id,
        viewer.id
    )
    .fetch_optional(pool)
    .await?
    .ok_or(Error::NotFound("sample"))?;
    let attempts = sqlx::query!(
        r#"SELECT a.result, a.counted, e.name AS "endpoint?", a.started_at, a.finished_at, a.http_status, a.error_kind,
                  a.error, a.finish_reason, a.completion_tokens, a.duration_ms
           FROM sample_attempts a LEFT JOIN endpoints e ON e.id = a.endpoint_id
           WHERE a.sample_id = $1 ORDER BY a.id"#,
        sample_id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|a| AttemptView {
        result: a.result,
        counted: a.counted,
        endpoint: a.endpoint,
        started_at: a.started_at,
        finished_at: a.finished_at,
        http_status: a.http_status,
        error_kind: a.error_kind,
        error: a.error,
        finish_reason: a.finish_reason,
        completion_tokens: a.completion_tokens,
        duration_ms: a.duration_ms,
    })
    .collect();
    let events = events(pool, sample_id).await?;
    let regenerated_since = regenerated_since(pool, sample_id).await?;
    let can_undo = decisions::undoable(pool, viewer, sample_id).await?;
    let (turns, answer_tool_calls) = turns(s.messages.as_ref(), &s.source);
    let answer_rendered = s.content.as_deref().filter(|c| !c.trim().is_empty()).map(markdown::render);
    Ok(SampleDetail {
        id: s.id,
        run_id: s.run_id,
        run_name: s.run_name,
        run_settings: s.run_settings,
        category: s.category,
        row_key: s.row_key,
        state: s.state,
        thinking: s.thinking,
        finish_reason: s.finish_reason,
        turns,
        reasoning: s.reasoning,
        answer: s.content,
        answer_rendered,
        answer_tool_calls,
        tools: s.tools,
        prompt_tokens: s.prompt_tokens,
        completion_tokens: s.completion_tokens,
        reasoning_tokens: s.reasoning_tokens,
        answer_tokens: s.answer_tokens,
        tool_call_tokens: s.tool_call_tokens,
        ttft_ms: s.ttft_ms,
        duration_ms: s.duration_ms,
        spec_decode: match (s.spec_steps, s.spec_accepted, s.spec_drafted, s.spec_tokens, s.spec_histogram) {
            (Some(steps), Some(accepted), Some(drafted), Some(k), Some(histogram)) => {
                let count = |n: i32| n.max(0) as u32;
                SpecDecode::new(
                    count(steps),
                    count(accepted),
                    count(drafted),
                    u32::from(k.max(0) as u16),
                    histogram.into_iter().map(count).collect(),
                )
            }
            _ => None,
        },
        endpoint: s.endpoint,
        error: s.error,
        attempts,
        review_state: s.review_state,
        review_version: s.review_version,
        flags: s.flags,
        auto_flags: s.auto_flags,
        note: s.review_note,
        reviewer: s.reviewer,
        reviewed_at: s.reviewed_at,
        leased_by_other: s.leased_by_other,
        events,
        can_undo,
        regenerated_since,
    })
}

/// The decision the sample's latest event dropped when it went back for generation, if that is
/// where its review stands (no decision since).
pub async fn regenerated_since(pool: &PgPool, sample_id: i64) -> Result<Option<RegeneratedSince>> {
    let row = sqlx::query!(
        r#"SELECT e.kind AS "kind: ReviewEventKind", e.at, e.from_state AS "from_state: ReviewState",
                  u.username AS "reviewer?", e.from_reviewed_at,
                  e.text_hash IS DISTINCT FROM sample_text_hash(s.messages, s.reasoning, s.content) AS "text_changed!",
                  s.state NOT IN ('pending', 'running') AS "finished!"
           FROM samples s
           JOIN LATERAL (SELECT * FROM review_events e WHERE e.sample_id = s.id ORDER BY e.id DESC LIMIT 1) e ON true
           LEFT JOIN users u ON u.id = e.from_reviewed_by
           WHERE s.id = $1 AND e.kind IN ('regenerate', 'requeue') AND e.from_state <> 'unreviewed'"#,
        sample_id
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| RegeneratedSince {
        decision: r.from_state,
        reviewer: r.reviewer,
        decided_at: r.from_reviewed_at,
        kind: r.kind,
        at: r.at,
        text_changed: r.finished && r.text_changed,
    }))
}

pub async fn events(pool: &PgPool, sample_id: i64) -> Result<Vec<ReviewEventView>> {
    Ok(sqlx::query!(
        r#"SELECT e.id, e.kind AS "kind: ReviewEventKind", u.username AS "actor?", e.at,
                  e.from_state AS "from_state: ReviewState", e.to_state AS "to_state: ReviewState",
                  e.from_flags, e.to_flags, e.to_note, e.undone_by
           FROM review_events e LEFT JOIN users u ON u.id = e.actor
           WHERE e.sample_id = $1 ORDER BY e.id DESC"#,
        sample_id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|e| ReviewEventView {
        id: e.id,
        kind: e.kind,
        actor: e.actor,
        at: e.at,
        from_state: e.from_state,
        to_state: e.to_state,
        from_flags: e.from_flags,
        to_flags: e.to_flags,
        note: e.to_note,
        undone: e.undone_by.is_some(),
    })
    .collect())
}

/// The conversation before the generated answer (the turns as sent, with earlier regenerated
/// turns and their reasoning, or the dataset row's own when nothing was sent yet), and the calls
/// the generated answer makes.
fn turns(sent: Option<&serde_json::Value>, source: &serde_json::Value) -> (Vec<Turn>, Vec<ToolCall>) {
    #[derive(serde::Deserialize)]
    struct Message {
        role: String,
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        reasoning_content: Option<String>,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
        #[serde(default)]
        tool_call_id: Option<String>,
    }
    let mut turns: Vec<Turn> = serde_json::from_value::<Vec<Message>>(sent.unwrap_or(source).clone())
        .unwrap_or_default()
        .into_iter()
        .map(|m| Turn {
            role: m.role,
            content: m.content.unwrap_or_default(),
            reasoning: m.reasoning_content,
            tool_calls: m.tool_calls,
            tool_call_id: m.tool_call_id,
        })
        .collect();
    // The last assistant turn is the generated answer, shown on its own; without a result yet,
    // the row's old answer is not what is under review.
    let answer = turns.pop_if(|t| t.role == "assistant");
    let calls = answer.filter(|_| sent.is_some()).map(|a| a.tool_calls).unwrap_or_default();
    (turns, calls)
}
