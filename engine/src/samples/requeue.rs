//! A finished sample back to the generation queue: the one transition out of a finished state,
//! shared by a run's retry pass and a reviewer's regeneration. Its text is about to change, so
//! its decision is dropped here, in the same statement, and kept in the audit log with a hash
//! of the text it applied to.

use crate::Result;
use domain::review::ReviewEventKind;
use sqlx::{Postgres, Transaction};

/// Why a sample goes back to the queue (the audit log's kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// A run's retry pass: logged only for samples that had a decision, flags or a note.
    RetryPass,
    /// A reviewer asked for a new answer: always logged.
    Regenerate,
}

impl Why {
    fn kind(self) -> ReviewEventKind {
        match self {
            Why::RetryPass => ReviewEventKind::Requeue,
            Why::Regenerate => ReviewEventKind::Regenerate,
        }
    }
}

/// Puts every finished sample of `ids` back in the queue with a fresh attempt budget (earlier
/// tries stay in `sample_attempts`), its review state unreviewed. Samples of `ids` that are
/// pending or running are left alone. Returns how many were re-queued.
pub async fn requeue(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[i64],
    why: Why,
    actor: Option<i64>,
) -> Result<u64> {
    let requeued = sqlx::query_scalar!(
        r#"WITH target AS (
               SELECT id, review_state, flags, review_note, reviewed_by, reviewed_at,
                      sample_text_hash(messages, reasoning, content) AS text_hash
               FROM samples WHERE id = ANY($1) AND state NOT IN ('pending', 'running')
               FOR UPDATE),
           requeued AS (
               UPDATE samples s SET state = 'pending', attempts = 0, not_before = NULL, finished_at = NULL,
                      review_state = 'unreviewed', flags = '{}', auto_flags = '{}', review_note = NULL,
                      reviewed_by = NULL, reviewed_at = NULL, review_version = s.review_version + 1,
                      review_lease_owner = NULL, review_lease_expires = NULL
               FROM target t WHERE s.id = t.id
               RETURNING s.id, s.review_version),
           logged AS (
               INSERT INTO review_events (sample_id, kind, actor, from_state, to_state, from_flags, to_flags,
                                          from_note, to_note, from_reviewed_by, from_reviewed_at, version, text_hash)
               SELECT t.id, $2, $3, t.review_state, 'unreviewed', t.flags, '{}', t.review_note, NULL,
                      t.reviewed_by, t.reviewed_at, r.review_version, t.text_hash
               FROM target t JOIN requeued r ON r.id = t.id
               WHERE $2 = 'regenerate'::review_event_kind OR t.review_state <> 'unreviewed'
                  OR cardinality(t.flags) > 0 OR t.review_note IS NOT NULL)
           SELECT count(*) AS "n!" FROM requeued"#,
        ids,
        why.kind() as ReviewEventKind,
        actor
    )
    .fetch_one(&mut **tx)
    .await?;
    Ok(requeued as u64)
}
