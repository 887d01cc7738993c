//! Decisions on one sample: each save names the version it was based on and is refused when
//! the sample changed since, so nothing is silently overwritten. Every change is logged in
//! `review_events`, and the last decision can be undone.

use super::reasons;
use crate::{samples, Error, Result};
use domain::{
    review::{Decision, ReviewEventKind, ReviewState},
    Role, Viewer,
};
use sqlx::{PgPool, Postgres, Transaction};

/// Longest note kept with a decision, in characters.
pub const MAX_NOTE_CHARS: usize = 4_000;

#[derive(Clone, Debug)]
pub struct DecisionInput {
    pub sample_id: i64,
    /// The `review_version` the reviewer saw.
    pub version: i32,
    pub decision: Decision,
    pub flags: Vec<String>,
    pub note: Option<String>,
}

/// What the checks before a review change need, the sample locked for the rest of the
/// transaction (the change itself is `samples::review`).
struct Current {
    state: domain::generation::SampleState,
    review_version: i32,
    lease_owner: Option<i64>,
    lease_holder: Option<String>,
    lease_live: bool,
}

async fn lock(tx: &mut Transaction<'_, Postgres>, sample_id: i64) -> Result<Current> {
    sqlx::query_as!(
        Current,
        r#"SELECT s.state AS "state: domain::generation::SampleState", s.review_version,
                  s.review_lease_owner AS lease_owner, u.username AS "lease_holder?",
                  COALESCE(s.review_lease_expires > now(), false) AS "lease_live!"
           FROM samples s LEFT JOIN users u ON u.id = s.review_lease_owner
           WHERE s.id = $1 FOR UPDATE OF s"#,
        sample_id
    )
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(Error::NotFound("sample"))
}

/// Refuses a save based on an older version, saying what changed.
async fn check_version(
    tx: &mut Transaction<'_, Postgres>,
    sample_id: i64,
    current: &Current,
    seen: i32,
) -> Result<()> {
    if current.review_version == seen {
        return Ok(());
    }
    let last = sqlx::query!(
        r#"SELECT u.username AS "actor?", e.at, e.to_state AS "to_state: ReviewState", e.kind AS "kind: ReviewEventKind"
           FROM review_events e LEFT JOIN users u ON u.id = e.actor
           WHERE e.sample_id = $1 ORDER BY e.id DESC LIMIT 1"#,
        sample_id
    )
    .fetch_optional(&mut **tx)
    .await?;
    let what = match last {
        Some(e) => format!(
            "{} changed it to {} ({}, {} UTC)",
            e.actor.as_deref().unwrap_or("someone"),
            e.to_state,
            e.kind.as_str(),
            e.at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
        ),
        None => "it was changed".to_string(),
    };
    Err(Error::conflict(format!(
        "This sample changed since you opened it: {what}. Nothing was saved; reload the sample to see the current decision."
    )))
}

fn check_lease(current: &Current, by: &Viewer) -> Result<()> {
    match (&current.lease_owner, current.lease_live) {
        (Some(owner), true) if *owner != by.id => Err(Error::conflict(format!(
            "{} is reviewing this sample in queue mode right now; nothing was saved. Pick another sample.",
            current.lease_holder.as_deref().unwrap_or("another reviewer")
        ))),
        _ => Ok(()),
    }
}

fn clean_note(note: Option<String>) -> Result<Option<String>> {
    let note = note.map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
    if let Some(n) = &note {
        if n.chars().count() > MAX_NOTE_CHARS {
            return Err(Error::invalid(format!(
                "the note is too long: keep it under {MAX_NOTE_CHARS} characters"
            )));
        }
    }
    Ok(note)
}

/// Records a decision. Returns the sample's new version.
pub async fn decide(pool: &PgPool, by: &Viewer, input: DecisionInput) -> Result<i32> {
    let flags = reasons::validate(pool, &input.flags).await?;
    if input.decision == Decision::Flag && flags.is_empty() {
        return Err(Error::invalid("choose at least one reason to flag a sample"));
    }
    let note = clean_note(input.note)?;
    let mut tx = pool.begin().await?;
    let current = lock(&mut tx, input.sample_id).await?;
    check_version(&mut tx, input.sample_id, &current, input.version).await?;
    check_lease(&current, by)?;
    if !current.state.is_terminal() {
        return Err(Error::conflict(format!(
            "this sample is still {}: wait for its result before deciding",
            current.state
        )));
    }
    let verdict =
        samples::review::Verdict { state: input.decision.state(), flags: &flags, note: note.as_deref() };
    let version =
        samples::review::decide(&mut tx, input.sample_id, input.version, by.id, verdict).await?.ok_or_else(
            || Error::conflict("this sample changed at the same moment; nothing was saved. Reload it."),
        )?;
    tx.commit().await?;
    Ok(version)
}

/// Whether `by` may undo the latest change of the sample now: it is a decision (single or
/// bulk) that nothing came after, and it is theirs, or they are an engineer or admin.
pub async fn undoable(pool: &PgPool, by: &Viewer, sample_id: i64) -> Result<bool> {
    let last = sqlx::query!(
        r#"SELECT e.actor, e.kind AS "kind: ReviewEventKind", e.undone_by, e.version = s.review_version AS "latest!"
           FROM review_events e JOIN samples s ON s.id = e.sample_id
           WHERE e.sample_id = $1 ORDER BY e.id DESC LIMIT 1"#,
        sample_id
    )
    .fetch_optional(pool)
    .await?;
    Ok(last.is_some_and(|e| {
        matches!(e.kind, ReviewEventKind::Decision | ReviewEventKind::Bulk)
            && e.undone_by.is_none()
            && e.latest
            && (e.actor == Some(by.id) || by.role.allows(Role::Engineer))
    }))
}

/// Undoes the latest decision, restoring what was there before it. Returns the new version.
pub async fn undo(pool: &PgPool, by: &Viewer, sample_id: i64, version: i32) -> Result<i32> {
    let mut tx = pool.begin().await?;
    let current = lock(&mut tx, sample_id).await?;
    check_version(&mut tx, sample_id, &current, version).await?;
    check_lease(&current, by)?;
    let last = sqlx::query!(
        r#"SELECT id, actor, kind AS "kind: ReviewEventKind", undone_by, version
           FROM review_events WHERE sample_id = $1 ORDER BY id DESC LIMIT 1"#,
        sample_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(last) = last.filter(|e| {
        matches!(e.kind, ReviewEventKind::Decision | ReviewEventKind::Bulk)
            && e.undone_by.is_none()
            && e.version == current.review_version
    }) else {
        return Err(Error::conflict("there is no decision to undo on this sample"));
    };
    if last.actor != Some(by.id) && !by.role.allows(Role::Engineer) {
        return Err(Error::conflict(
            "the last decision is another reviewer's; only they or an engineer can undo it",
        ));
    }
    if !current.state.is_terminal() {
        return Err(Error::conflict(format!(
            "this sample is {} again: wait for its new result",
            current.state
        )));
    }
    let new_version =
        samples::review::undo(&mut tx, sample_id, last.id, version, by.id).await?.ok_or_else(|| {
            Error::conflict("this sample changed at the same moment; nothing was undone. Reload it.")
        })?;
    tx.commit().await?;
    Ok(new_version)
}
