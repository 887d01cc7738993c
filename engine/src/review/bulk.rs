//! One decision for every finished sample of a filter ("reject every truncated sample"). The
//! caller first asks for the count and shows it; the apply names that count and is refused
//! when the filtered set changed in between, so a confirmation always covers what it says.

use super::{decisions::MAX_NOTE_CHARS, reasons};
use crate::samples::{self, query};
use crate::{Error, Result};
use domain::review::{Decision, SampleFilter};
use domain::sample_query::SampleQuery;
use domain::{Role, Viewer};
use sqlx::{PgPool, Postgres, QueryBuilder};

/// The most samples one bulk action may touch.
pub const MAX_BULK: i64 = 200_000;

/// The finished samples of the filter: the ones a decision can apply to.
fn target(f: &SampleFilter) -> Result<SampleQuery> {
    let target = SampleQuery { finished: true, ..f.query() };
    match target.problems() {
        Some(problem) => Err(Error::Invalid(problem)),
        None => Ok(target),
    }
}

/// How many samples a bulk action on this filter would touch (finished ones only).
pub async fn count(pool: &PgPool, f: &SampleFilter) -> Result<i64> {
    let target = target(f)?;
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new("SELECT count(*)");
    query::push_from(&mut qb, &target);
    Ok(qb.build_query_scalar().fetch_one(pool).await?)
}

#[derive(Clone, Debug)]
pub struct BulkInput {
    pub filter: SampleFilter,
    pub decision: Decision,
    pub flags: Vec<String>,
    pub note: Option<String>,
    /// The count the user confirmed.
    pub expected: i64,
}

/// Applies the decision to every finished sample of the filter and logs one event per sample it
/// changed (one that already has this decision is left alone, so a retry is harmless).
/// Engineers and admins only. Returns how many samples changed.
pub async fn apply(pool: &PgPool, by: &Viewer, input: BulkInput) -> Result<i64> {
    if !by.role.allows(Role::Engineer) {
        return Err(Error::invalid("bulk actions are for engineers and admins"));
    }
    let target = target(&input.filter)?;
    let flags = reasons::validate(pool, &input.flags).await?;
    if input.decision == Decision::Flag && flags.is_empty() {
        return Err(Error::invalid("choose at least one reason to flag these samples"));
    }
    let note = input.note.map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
    if note.as_ref().is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS) {
        return Err(Error::invalid(format!(
            "the note is too long: keep it under {MAX_NOTE_CHARS} characters"
        )));
    }
    if input.expected > MAX_BULK {
        return Err(Error::invalid(format!(
            "a bulk action can touch at most {MAX_BULK} samples; narrow the filter"
        )));
    }
    let to_state = input.decision.state();
    let mut tx = pool.begin().await?;
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new("SELECT s.id");
    query::push_from(&mut qb, &target);
    qb.push(" ORDER BY s.id FOR UPDATE OF s");
    let ids: Vec<i64> = qb.build_query_scalar().fetch_all(&mut *tx).await?;
    if ids.len() as i64 != input.expected {
        return Err(Error::conflict(format!(
            "the filter now matches {} finished samples, not the {} you confirmed; nothing was changed. Check the list and confirm again.",
            ids.len(),
            input.expected
        )));
    }
    let verdict = samples::review::Verdict { state: to_state, flags: &flags, note: note.as_deref() };
    let changed = samples::review::decide_many(&mut tx, &ids, by.id, verdict).await?;
    tx.commit().await?;
    tracing::info!(by = %by.username, decision = input.decision.as_str(), changed, "bulk review action");
    Ok(changed)
}
