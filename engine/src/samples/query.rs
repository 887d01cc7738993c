//! `SampleQuery` as SQL: the one place that turns "which samples" into conditions, used by the
//! review list, its counts and bulk decisions, export selection and retry passes, so they
//! always agree on the set they mean.
//!
//! Conditions are on `samples s`, and on `dataset_rows d` when the query `needs_rows` (a
//! category). Each is written the way an index serves it: one run or state as `=`
//! (`samples_run_outcome_idx (run_id, state, id)`), flags as array overlap (the GIN indexes),
//! the text through `samples_search_idx`, and a completion range also on the expression the
//! length orders are indexed by.

use domain::review::TokenRange;
use domain::sample_query::SampleQuery;
use sqlx::{Postgres, QueryBuilder};

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
    match query.runs.as_slice() {
        [] => {}
        [run] => {
            qb.push(" AND s.run_id = ").push_bind(*run);
        }
        runs => {
            qb.push(" AND s.run_id = ANY(").push_bind(runs.to_vec()).push(")");
        }
    }
    match query.states.as_slice() {
        [] => {}
        [state] => {
            qb.push(" AND s.state = ").push_bind(*state);
        }
        states => {
            qb.push(" AND s.state = ANY(").push_bind(states.to_vec()).push(")");
        }
    }
    if query.finished {
        qb.push(" AND s.state NOT IN ('pending', 'running')");
    }
    if query.with_conversation {
        qb.push(" AND s.messages IS NOT NULL");
    }
    push_nullable_in(qb, "s.finish_reason", &query.finish_reasons);
    if !query.flags_any.is_empty() {
        qb.push(" AND ");
        push_has_flag(qb, &query.flags_any);
    }
    if !query.flags_none.is_empty() {
        qb.push(" AND NOT ");
        push_has_flag(qb, &query.flags_none);
    }
    match query.review.as_slice() {
        [] => {}
        [state] => {
            qb.push(" AND s.review_state = ").push_bind(*state);
        }
        states => {
            qb.push(" AND s.review_state = ANY(").push_bind(states.to_vec()).push(")");
        }
    }
    if let Some(reviewer) = query.reviewer {
        qb.push(" AND s.reviewed_by = ").push_bind(reviewer);
    }
    push_nullable_in(qb, "d.category", &query.categories);
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
        qb.push(" AND s.search @@ websearch_to_tsquery('simple', ").push_bind(text.to_string()).push(")");
    }
    if let Some(error) = query.error_contains.as_deref().filter(|e| !e.trim().is_empty()) {
        qb.push(" AND s.error ILIKE '%' || ").push_bind(error.to_string()).push(" || '%'");
    }
}

/// A reviewer's or the engine's flag among `flags`.
fn push_has_flag(qb: &mut QueryBuilder<'_, Postgres>, flags: &[String]) {
    qb.push("(s.flags && ")
        .push_bind(flags.to_vec())
        .push("::text[] OR s.auto_flags && ")
        .push_bind(flags.to_vec())
        .push("::text[])");
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
