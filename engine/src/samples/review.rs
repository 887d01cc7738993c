//! Review transitions: a decision, a bulk decision, and undo. Each is one statement guarded by
//! what the reviewer saw (the review version), the sample being finished, and the reviewer
//! queue's lease; each logs the change with a hash of the text it applied to, so the audit log
//! says which text an approval was about even after the sample is regenerated.
//!
//! `None` or a short count means a guard failed: `review::decisions` and `review::bulk` check
//! the same conditions first to say why, so here it only happens in a race.

use crate::Result;
use domain::review::ReviewState;
use sqlx::{Postgres, Transaction};

/// What a decision sets.
#[derive(Clone, Copy, Debug)]
pub struct Verdict<'a> {
    pub state: ReviewState,
    pub flags: &'a [String],
    pub note: Option<&'a str>,
}

/// `by`'s decision on a finished sample still at review version `seen` and not held by another
/// reviewer's live queue lease. Returns the new version.
pub async fn decide(
    tx: &mut Transaction<'_, Postgres>,
    sample_id: i64,
    seen: i32,
    by: i64,
    verdict: Verdict<'_>,
) -> Result<Option<i32>> {
    Ok(sqlx::query_scalar!(
        r#"WITH before AS (
               SELECT id, review_state, flags, review_note, reviewed_by, reviewed_at,
                      sample_text_hash(messages, reasoning, content) AS text_hash
               FROM samples
               WHERE id = $1 AND review_version = $2 AND state NOT IN ('pending', 'running')
                 AND (review_lease_owner IS NULL OR review_lease_owner = $3 OR review_lease_expires <= now())
               FOR UPDATE),
           updated AS (
               UPDATE samples s SET review_state = $4, flags = $5, review_note = $6, reviewed_by = $3,
                      reviewed_at = now(), review_version = s.review_version + 1,
                      review_lease_owner = NULL, review_lease_expires = NULL
               FROM before b WHERE s.id = b.id
               RETURNING s.id, s.review_version),
           logged AS (
               INSERT INTO review_events (sample_id, kind, actor, from_state, to_state, from_flags, to_flags,
                                          from_note, to_note, from_reviewed_by, from_reviewed_at, version, text_hash)
               SELECT b.id, 'decision', $3, b.review_state, $4, b.flags, $5, b.review_note, $6,
                      b.reviewed_by, b.reviewed_at, u.review_version, b.text_hash
               FROM before b JOIN updated u ON u.id = b.id)
           SELECT review_version FROM updated"#,
        sample_id,
        seen,
        by,
        verdict.state as ReviewState,
        verdict.flags,
        verdict.note,
    )
    .fetch_optional(&mut **tx)
    .await?)
}

/// One decision for every finished sample of `ids` (locked by the caller) that it changes, one
/// event each. A sample that already has this state, these flags and this note is left alone:
/// a retried bulk action (a client that timed out waiting and sent it again) neither logs a
/// second event nor bumps the version another reviewer's page holds. Returns how many changed.
pub async fn decide_many(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[i64],
    by: i64,
    verdict: Verdict<'_>,
) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        r#"WITH before AS (
               SELECT id, review_state, flags, review_note, reviewed_by, reviewed_at,
                      sample_text_hash(messages, reasoning, content) AS text_hash
               FROM samples WHERE id = ANY($1) AND state NOT IN ('pending', 'running')
                 AND (review_state IS DISTINCT FROM $2 OR flags IS DISTINCT FROM $3
                      OR review_note IS DISTINCT FROM $4)
               FOR UPDATE),
           updated AS (
               UPDATE samples s SET review_state = $2, flags = $3, review_note = $4, reviewed_by = $5,
                      reviewed_at = now(), review_version = s.review_version + 1,
                      review_lease_owner = NULL, review_lease_expires = NULL
               FROM before b WHERE s.id = b.id
               RETURNING s.id, s.review_version),
           logged AS (
               INSERT INTO review_events (sample_id, kind, actor, from_state, to_state, from_flags, to_flags,
                                          from_note, to_note, from_reviewed_by, from_reviewed_at, version, text_hash)
               SELECT b.id, 'bulk', $5, b.review_state, $2, b.flags, $3, b.review_note, $4, b.reviewed_by,
                      b.reviewed_at, u.review_version, b.text_hash
               FROM before b JOIN updated u ON u.id = b.id
               RETURNING 1)
           SELECT count(*) AS "n!" FROM logged"#,
        ids,
        verdict.state as ReviewState,
        verdict.flags,
        verdict.note,
        by
    )
    .fetch_one(&mut **tx)
    .await?)
}

/// Undoes decision event `event` of a finished sample still at version `seen` (the version
/// that decision left), restoring what was there before it, and marks the event undone.
/// Returns the new version.
pub async fn undo(
    tx: &mut Transaction<'_, Postgres>,
    sample_id: i64,
    event: i64,
    seen: i32,
    by: i64,
) -> Result<Option<i32>> {
    Ok(sqlx::query_scalar!(
        r#"WITH last AS (
               SELECT id, from_state, from_flags, from_note, from_reviewed_by, from_reviewed_at
               FROM review_events
               WHERE id = $2 AND sample_id = $1 AND undone_by IS NULL AND version = $3
                 AND kind IN ('decision', 'bulk')),
           before AS (
               SELECT s.id, s.review_state, s.flags, s.review_note, s.reviewed_by, s.reviewed_at,
                      sample_text_hash(s.messages, s.reasoning, s.content) AS text_hash
               FROM samples s
               WHERE s.id = $1 AND s.review_version = $3 AND s.state NOT IN ('pending', 'running')
                 AND (s.review_lease_owner IS NULL OR s.review_lease_owner = $4 OR s.review_lease_expires <= now())
                 AND EXISTS (SELECT 1 FROM last)
               FOR UPDATE OF s),
           updated AS (
               UPDATE samples s SET review_state = l.from_state, flags = l.from_flags, review_note = l.from_note,
                      reviewed_by = l.from_reviewed_by, reviewed_at = l.from_reviewed_at,
                      review_version = s.review_version + 1
               FROM before b, last l WHERE s.id = b.id
               RETURNING s.review_version),
           logged AS (
               INSERT INTO review_events (sample_id, kind, actor, from_state, to_state, from_flags, to_flags,
                                          from_note, to_note, from_reviewed_by, from_reviewed_at, version, text_hash)
               SELECT b.id, 'undo', $4, b.review_state, l.from_state, b.flags, l.from_flags, b.review_note,
                      l.from_note, b.reviewed_by, b.reviewed_at, u.review_version, b.text_hash
               FROM before b, last l, updated u
               RETURNING id),
           marked AS (
               UPDATE review_events e SET undone_by = logged.id FROM logged WHERE e.id = $2)
           SELECT review_version FROM updated"#,
        sample_id,
        event,
        seen,
        by
    )
    .fetch_optional(&mut **tx)
    .await?)
}
