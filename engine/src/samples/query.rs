//! `SampleQuery` as SQL: the one place that turns "which samples" into conditions, used by the
//! review list, its counts and bulk decisions, export selection and retry passes, so they
//! always agree on the set they mean.
//!
//! Conditions are on `samples s`, and on `dataset_rows d` when the query `needs_rows` (a
//! category). Each is written the way an index serves it: one run or state as `=`
//! (`samples_run_outcome_idx (run_id, state, id)`), flags as array overlap (the GIN indexes),
//! the text through `sample_search_idx` (the vectors kept apart, in `sample_search`), and a
//! completion range also on the expression the length orders are indexed by.
//!
//! The conditions on what a tally keeps (run, state, finish reason, review state, reviewer,
//! category, flags; see `samples::tally`) can be put to a tally's rows `t` instead: the counts
//! panel reads the stored tally when the query narrows nothing else (`tally_answers`), else a
//! tally grouped from the samples that pass the rest (`beyond_tally`).

use domain::review::TokenRange;
use domain::sample_query::SampleQuery;
use sqlx::{Postgres, QueryBuilder};

/// Where each dimension a tally keeps is read from.
struct Columns {
    run: &'static str,
    state: &'static str,
    finish_reason: &'static str,
    review_state: &'static str,
    reviewed_by: &'static str,
    category: &'static str,
    /// A sample keeps the reviewer's and the engine's flags apart; a tally row, together.
    flags: &'static [&'static str],
}

const SAMPLE: Columns = Columns {
    run: "s.run_id",
    state: "s.state",
    finish_reason: "s.finish_reason",
    review_state: "s.review_state",
    reviewed_by: "s.reviewed_by",
    category: "d.category",
    flags: &["s.flags", "s.auto_flags"],
};

const TALLY: Columns = Columns {
    run: "t.run_id",
    state: "t.state",
    finish_reason: "t.finish_reason",
    review_state: "t.review_state",
    reviewed_by: "t.reviewed_by",
    category: "t.category",
    flags: &["t.flags"],
};

/// `FROM samples s` (joining the dataset row when the query needs it) `WHERE` its conditions.
pub fn push_from(qb: &mut QueryBuilder<'_, Postgres>, query: &SampleQuery) {
    qb.push(" FROM samples s");
    if query.needs_rows() {
        qb.push(" JOIN dataset_rows d ON d.id = s.row_id");
    }
    qb.push(" WHERE true");
    push_and(qb, query);
}

/// `push_from`, always joining the dataset row `d`, for a query that reads its columns.
pub fn push_from_rows(qb: &mut QueryBuilder<'_, Postgres>, query: &SampleQuery) {
    qb.push(" FROM samples s JOIN dataset_rows d ON d.id = s.row_id WHERE true");
    push_and(qb, query);
}

/// Appends ` AND <condition>` for every dimension the query narrows.
pub fn push_and(qb: &mut QueryBuilder<'_, Postgres>, query: &SampleQuery) {
    push_kept(qb, query, &SAMPLE);
    if query.with_conversation {
        qb.push(" AND s.messages IS NOT NULL");
    }
    push_range(qb, "s.prompt_tokens", query.prompt_tokens);
    push_range(qb, "s.reasoning_tokens", query.reasoning_tokens);
    push_range(qb, "s.completion_tokens", query.completion_tokens);
    // The same bounds on the expression the length orders are indexed by, so a range sorted
    // by length is read from that index instead of being filtered out of it.
    if !query.completion_tokens.is_open() {
        push_range(qb, "COALESCE(s.completion_tokens, -1)", query.completion_tokens);
    }
    if !query.acceptance.is_open() {
        // Thousandths of a token, as `acceptance_milli` keeps it.
        let milli = |v: f64| (v * 1000.0).round().clamp(0.0, f64::from(i32::MAX)) as i32;
        push_range(
            qb,
            "s.acceptance_milli",
            TokenRange { min: query.acceptance.min.map(milli), max: query.acceptance.max.map(milli) },
        );
    }
    if let Some(text) = query.text.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        // The vectors are kept apart (`sample_search`, migration 0019).
        qb.push(" AND EXISTS (SELECT 1 FROM sample_search x WHERE x.sample_id = s.id AND x.search @@ websearch_to_tsquery('simple', ")
            .push_bind(text.to_string())
            .push("))");
    }
    if let Some(error) = query.error_contains.as_deref().filter(|e| !e.trim().is_empty()) {
        qb.push(" AND s.error ILIKE '%' || ").push_bind(error.to_string()).push(" || '%'");
    }
}

/// Whether the tally can count the query's samples: it narrows only the dimensions a tally row
/// keeps (no conversation test, length or acceptance range, text or error search).
pub fn tally_answers(query: &SampleQuery) -> bool {
    !query.with_conversation
        && query.prompt_tokens.is_open()
        && query.reasoning_tokens.is_open()
        && query.completion_tokens.is_open()
        && query.acceptance.is_open()
        && query.text.as_deref().is_none_or(|q| q.trim().is_empty())
        && query.error_contains.as_deref().is_none_or(|e| e.trim().is_empty())
}

/// The part of the query a tally cannot answer (the conversation test, lengths, acceptance,
/// text, error): what a tally made on the spot from the samples must be made of.
pub fn beyond_tally(query: &SampleQuery) -> SampleQuery {
    SampleQuery {
        with_conversation: query.with_conversation,
        prompt_tokens: query.prompt_tokens,
        reasoning_tokens: query.reasoning_tokens,
        completion_tokens: query.completion_tokens,
        acceptance: query.acceptance,
        text: query.text.clone(),
        error_contains: query.error_contains.clone(),
        ..SampleQuery::default()
    }
}

/// Appends the conditions on what a tally row `t` keeps (runs, states, finish reasons, flags,
/// review states, reviewer, categories); the rest of the query is `beyond_tally`'s.
pub fn push_kept_on_tally(qb: &mut QueryBuilder<'_, Postgres>, query: &SampleQuery) {
    push_kept(qb, query, &TALLY);
}

/// The conditions on what a tally row keeps, on `columns`.
fn push_kept(qb: &mut QueryBuilder<'_, Postgres>, query: &SampleQuery, columns: &Columns) {
    push_in(qb, columns.run, &query.runs);
    push_in(qb, columns.state, &query.states);
    if query.finished {
        qb.push(format!(" AND {} NOT IN ('pending', 'running')", columns.state));
    }
    push_nullable_in(qb, columns.finish_reason, &query.finish_reasons);
    if !query.flags_any.is_empty() {
        qb.push(" AND ");
        push_has_flag(qb, columns.flags, &query.flags_any);
    }
    if !query.flags_none.is_empty() {
        qb.push(" AND NOT ");
        push_has_flag(qb, columns.flags, &query.flags_none);
    }
    push_in(qb, columns.review_state, &query.review);
    if let Some(reviewer) = query.reviewer {
        qb.push(format!(" AND {} = ", columns.reviewed_by)).push_bind(reviewer);
    }
    push_nullable_in(qb, columns.category, &query.categories);
}

/// `column` among `values`: `=` for one (what a btree index serves best), `= ANY` for more.
fn push_in<'q, T>(qb: &mut QueryBuilder<'q, Postgres>, column: &'static str, values: &[T])
where
    T: Clone + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres> + Send + 'q,
    Vec<T>: sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
{
    match values {
        [] => {}
        [one] => {
            qb.push(format!(" AND {column} = ")).push_bind(one.clone());
        }
        many => {
            qb.push(format!(" AND {column} = ANY(")).push_bind(many.to_vec()).push(")");
        }
    }
}

/// One of `flags` among the flags kept in `columns` (a reviewer's or the engine's).
fn push_has_flag(qb: &mut QueryBuilder<'_, Postgres>, columns: &[&'static str], flags: &[String]) {
    qb.push("(");
    for (i, column) in columns.iter().enumerate() {
        if i > 0 {
            qb.push(" OR ");
        }
        qb.push(format!("{column} && ")).push_bind(flags.to_vec()).push("::text[]");
    }
    qb.push(")");
}

/// `column` among `values`, `None` standing for NULL.
fn push_nullable_in(qb: &mut QueryBuilder<'_, Postgres>, column: &'static str, values: &[Option<String>]) {
    if values.is_empty() {
        return;
    }
    let known: Vec<String> = values.iter().flatten().cloned().collect();
    let null = values.iter().any(Option::is_none);
    match (known.as_slice(), null) {
        ([], _) => {
            qb.push(format!(" AND {column} IS NULL"));
        }
        ([one], false) => {
            qb.push(format!(" AND {column} = ")).push_bind(one.clone());
        }
        (_, false) => {
            qb.push(format!(" AND {column} = ANY(")).push_bind(known).push(")");
        }
        (_, true) => {
            qb.push(format!(" AND ({column} IS NULL OR {column} = ANY(")).push_bind(known).push("))");
        }
    }
}

fn push_range(qb: &mut QueryBuilder<'_, Postgres>, column: &'static str, range: TokenRange) {
    if let Some(min) = range.min {
        qb.push(format!(" AND {column} >= ")).push_bind(min);
    }
    if let Some(max) = range.max {
        qb.push(format!(" AND {column} <= ")).push_bind(max);
    }
}
