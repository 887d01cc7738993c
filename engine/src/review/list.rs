//! The sample list: filtered, sorted, paged by key (never by offset). Its counts per filter
//! value are `counts`'.

use crate::samples::query;
use crate::{Error, Result};
use domain::{
    generation::SampleState,
    review::{ReviewState, SampleFilter, SamplePage, SampleRow, SortKey},
};
use sqlx::{PgPool, Postgres, QueryBuilder};

pub const DEFAULT_PAGE: i64 = 50;
pub const MAX_PAGE: i64 = 200;

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    run_id: i64,
    run_name: String,
    state: SampleState,
    finish_reason: Option<String>,
    review_state: ReviewState,
    flags: Vec<String>,
    auto_flags: Vec<String>,
    prompt_tokens: Option<i32>,
    reasoning_tokens: Option<i32>,
    completion_tokens: Option<i32>,
    duration_ms: Option<i32>,
    spec_steps: Option<i32>,
    spec_accepted: Option<i32>,
    reviewer: Option<String>,
    preview: Option<String>,
    regenerated: Option<bool>,
    sort_value: i64,
}

/// Where a page starts: after this sort value and id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cursor {
    value: i64,
    id: i64,
}

fn parse_cursor(after: &str) -> Result<Cursor> {
    let bad = || Error::invalid("the page link is damaged: go back to the first page");
    let (value, id) = after.split_once('.').ok_or_else(bad)?;
    Ok(Cursor { value: value.parse().map_err(|_| bad())?, id: id.parse().map_err(|_| bad())? })
}

/// The ordering expression and direction of a sort key.
fn order(sort: SortKey) -> (&'static str, &'static str) {
    match sort {
        SortKey::Oldest => ("s.id", "ASC"),
        SortKey::Newest => ("s.id", "DESC"),
        SortKey::LongestCompletion => ("COALESCE(s.completion_tokens, -1)", "DESC"),
        SortKey::ShortestCompletion => ("COALESCE(s.completion_tokens, -1)", "ASC"),
        // samples_reasoning_order_idx
        SortKey::LongestReasoning => ("COALESCE(s.reasoning_tokens, -1)", "DESC"),
        SortKey::Slowest => ("COALESCE(s.duration_ms, -1)", "DESC"),
        // Samples without a figure sort last either way (samples_acceptance_low/high_idx).
        SortKey::LowestAcceptance => ("COALESCE(s.acceptance_milli, 2147483647)", "ASC"),
        SortKey::HighestAcceptance => ("COALESCE(s.acceptance_milli, -1)", "DESC"),
    }
}

/// One page of samples matching `filter`, starting after `after` (from the previous page).
pub async fn page(
    pool: &PgPool,
    filter: &SampleFilter,
    after: Option<&str>,
    limit: Option<i64>,
) -> Result<SamplePage> {
    let selected = filter.query();
    if let Some(problem) = selected.problems() {
        return Err(Error::Invalid(problem));
    }
    let limit = limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let cursor = after.filter(|a| !a.is_empty()).map(parse_cursor).transpose()?;
    let (expr, dir) = order(filter.sort);
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new(format!(
        r#"SELECT s.id, s.run_id, r.name AS run_name, s.state, s.finish_reason, s.review_state, s.flags, s.auto_flags,
                  s.prompt_tokens, s.reasoning_tokens, s.completion_tokens, s.duration_ms, s.spec_steps, s.spec_accepted,
                  u.username AS reviewer,
                  left(jsonb_path_query_first(d.messages, '$[*] ? (@.role == "user").content') #>> '{{}}', 200) AS preview,
                  (SELECT e.kind IN ('regenerate', 'requeue') AND e.from_state <> 'unreviewed'
                   FROM review_events e WHERE e.sample_id = s.id ORDER BY e.id DESC LIMIT 1) AS regenerated,
                  ({expr})::bigint AS sort_value
           FROM samples s
           JOIN runs r ON r.id = s.run_id
           JOIN dataset_rows d ON d.id = s.row_id
           LEFT JOIN users u ON u.id = s.reviewed_by
           WHERE true"#
    ));
    query::push_and(&mut qb, &selected);
    if let Some(c) = cursor {
        let cmp = if dir == "ASC" { ">" } else { "<" };
        if expr == "s.id" {
            qb.push(format!(" AND s.id {cmp} ")).push_bind(c.id);
        } else {
            qb.push(format!(" AND ({expr}, s.id) {cmp} ("))
                .push_bind(c.value)
                .push(", ")
                .push_bind(c.id)
                .push(")");
        }
    }
    qb.push(format!(" ORDER BY {expr} {dir}, s.id {dir} LIMIT ")).push_bind(limit + 1);
    let mut rows: Vec<Row> = qb.build_query_as().fetch_all(pool).await?;
    let next = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last().map(|r| format!("{}.{}", r.sort_value, r.id))
    } else {
        None
    };
    Ok(SamplePage {
        rows: rows
            .into_iter()
            .map(|r| SampleRow {
                id: r.id,
                run_id: r.run_id,
                run_name: r.run_name,
                state: r.state,
                finish_reason: r.finish_reason,
                review_state: r.review_state,
                flags: r.flags,
                auto_flags: r.auto_flags,
                prompt_tokens: r.prompt_tokens,
                reasoning_tokens: r.reasoning_tokens,
                completion_tokens: r.completion_tokens,
                duration_ms: r.duration_ms,
                acceptance: r
                    .spec_steps
                    .zip(r.spec_accepted)
                    .filter(|(steps, _)| *steps > 0)
                    .map(|(steps, accepted)| 1.0 + f64::from(accepted) / f64::from(steps)),
                reviewer: r.reviewer,
                preview: r.preview.unwrap_or_default(),
                regenerated_since_decision: r.regenerated.unwrap_or(false),
            })
            .collect(),
        next,
    })
}

/// The sample before or after `id` in the filtered, sorted list (for j/k on the sample page).
pub async fn neighbour(pool: &PgPool, filter: &SampleFilter, id: i64, forward: bool) -> Result<Option<i64>> {
    let (expr, dir) = order(filter.sort);
    let ascending = (dir == "ASC") == forward;
    let (cmp, dir) = if ascending { (">", "ASC") } else { ("<", "DESC") };
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new("SELECT s.id");
    query::push_from(&mut qb, &filter.query());
    qb.push(format!(" AND ({expr}, s.id) {cmp} (SELECT {expr}, s.id FROM samples s WHERE s.id = "))
        .push_bind(id)
        .push(format!(") ORDER BY {expr} {dir}, s.id {dir} LIMIT 1"));
    Ok(qb.build_query_scalar().fetch_optional(pool).await?)
}

/// How many samples match the filter.
pub async fn count(pool: &PgPool, filter: &SampleFilter) -> Result<i64> {
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new("SELECT count(*)");
    query::push_from(&mut qb, &filter.query());
    Ok(qb.build_query_scalar().fetch_one(pool).await?)
}
