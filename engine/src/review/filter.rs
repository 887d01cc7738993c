//! The sample filter as SQL: one place that turns a `SampleFilter` into joins and conditions,
//! shared by the list, its counts and bulk actions so they always agree on "the filtered set".

use domain::review::{SampleFilter, TokenRange};
use sqlx::{Postgres, QueryBuilder};

/// Stands for a NULL finish_reason or category in URLs and counts.
pub const NONE_VALUE: &str = "-";

/// Filter dimensions that have counts per value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    Run,
    Outcome,
    FinishReason,
    Flag,
    Review,
    Reviewer,
    Category,
}

/// Whether the query must join `dataset_rows d`.
pub fn needs_rows(filter: &SampleFilter, except: Option<Dim>) -> bool {
    filter.category.is_some() && except != Some(Dim::Category)
}

/// Appends ` AND <condition>` for every set field of the filter except the `except` dimension.
/// The query must alias samples as `s` (and dataset_rows as `d` when `needs_rows`).
pub fn push_conditions(qb: &mut QueryBuilder<'_, Postgres>, filter: &SampleFilter, except: Option<Dim>) {
    let active = |dim: Dim| except != Some(dim);
    if let (Some(run), true) = (filter.run, active(Dim::Run)) {
        qb.push(" AND s.run_id = ").push_bind(run);
    }
    if let (Some(state), true) = (filter.outcome, active(Dim::Outcome)) {
        qb.push(" AND s.state = ").push_bind(state);
    }
    if let (Some(reason), true) = (&filter.finish_reason, active(Dim::FinishReason)) {
        if reason == NONE_VALUE {
            qb.push(" AND s.finish_reason IS NULL");
        } else {
            qb.push(" AND s.finish_reason = ").push_bind(reason.clone());
        }
    }
    if let (Some(flag), true) = (&filter.flag, active(Dim::Flag)) {
        qb.push(" AND (s.flags @> ARRAY[")
            .push_bind(flag.clone())
            .push("]::text[] OR s.auto_flags @> ARRAY[")
            .push_bind(flag.clone())
            .push("]::text[])");
    }
    if let (Some(review), true) = (filter.review, active(Dim::Review)) {
        qb.push(" AND s.review_state = ").push_bind(review);
    }
    if let (Some(reviewer), true) = (filter.reviewer, active(Dim::Reviewer)) {
        qb.push(" AND s.reviewed_by = ").push_bind(reviewer);
    }
    if let (Some(category), true) = (&filter.category, active(Dim::Category)) {
        if category == NONE_VALUE {
            qb.push(" AND d.category IS NULL");
        } else {
            qb.push(" AND d.category = ").push_bind(category.clone());
        }
    }
    push_range(qb, "s.prompt_tokens", filter.prompt_tokens);
    push_range(qb, "s.reasoning_tokens", filter.reasoning_tokens);
    push_range(qb, "s.completion_tokens", filter.completion_tokens);
    // The same bounds on the expression the length orders are indexed by, so a range sorted
    // by length is read from that index instead of being filtered out of it.
    if filter.completion_tokens.min.is_some() || filter.completion_tokens.max.is_some() {
        push_range(qb, "COALESCE(s.completion_tokens, -1)", filter.completion_tokens);
    }
    if let Some(q) = filter.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        qb.push(" AND s.search @@ websearch_to_tsquery('simple', ").push_bind(q.to_string()).push(")");
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

/// Says what to change when a filter cannot be right.
pub fn problems(filter: &SampleFilter) -> Option<String> {
    for (name, range) in [
        ("prompt", filter.prompt_tokens),
        ("reasoning", filter.reasoning_tokens),
        ("completion", filter.completion_tokens),
    ] {
        if let (Some(min), Some(max)) = (range.min, range.max) {
            if min > max {
                return Some(format!(
                    "the {name} token range is empty: its minimum {min} is above its maximum {max}"
                ));
            }
        }
        if range.min.is_some_and(|v| v < 0) || range.max.is_some_and(|v| v < 0) {
            return Some(format!("{name} token counts cannot be negative"));
        }
    }
    if filter.q.as_ref().is_some_and(|q| q.len() > 500) {
        return Some("the search text is too long: keep it under 500 characters".into());
    }
    None
}
