//! The review list's counts panel: how many samples each value of every filter dimension would
//! give, each dimension counted with the other filters applied, in one statement over a tally
//! (rows `t`, one per run, state, finish reason, review state, reviewer, category and flags):
//!
//!   filter narrows only what a tally keeps ──▶ the stored tally (`samples::tally`)   exact, ms
//!   else (a text search, a length range) ───▶ a pass over the samples that pass it   exact
//!        the pass past `exact_within` ─────▶ the same over a sample of table pages   estimated
//!
//! A pass costs a few µs per matching sample, and a broad search at a million samples matches
//! most of them: 0.7–3 s. Search engines stop counting past a bound and say so; the panel does
//! the same, within a time rather than a count (the planner's row estimates for text are too
//! rough to choose by): past `exact_within` the pass is cancelled and the counts are scaled up
//! from the samples on a random set of pages, and `Facets::counted` says they are estimates.
//! The list itself, bulk decisions and exports always count every sample.

use super::reasons;
use crate::samples::{query, tally};
use crate::{Error, Result};
use domain::review::{Counted, FacetDim, FacetValue, Facets, SampleFilter};
use sqlx::{PgPool, Postgres, QueryBuilder};
use std::time::Duration;

/// How far the counts go to be exact when the filter needs a pass over the samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counting {
    /// Exactly, however long the pass takes (the API's `exact=true`).
    Exact,
    /// Exactly when the pass ends within `exact_within`; else estimated from the samples on a
    /// random set of pages holding about `sample_rows` samples.
    Bounded { exact_within: Duration, sample_rows: i64 },
}

impl Counting {
    /// The review page's: a pass given up at 200 ms, then a sample of about 10,000 samples
    /// (60–85 ms at a million; see docs/benchmarks.md for how near the estimates come).
    pub const PANEL: Counting =
        Counting::Bounded { exact_within: Duration::from_millis(200), sample_rows: 10_000 };
}

/// The most values listed per dimension.
const FACET_LIMIT: i64 = 50;

/// The statement's answer: (dimension, value, label, count). Dimension `TOTAL` is the total,
/// `SAMPLED` how many samples an estimate was made from, else an index into `DIMS`.
type Row = (i32, String, String, i64);
const TOTAL: i32 = -1;
const SAMPLED: i32 = -2;

/// Each dimension of the counts panel: its number in the statement's answer, its value and
/// label on a tally row `t`, and what it joins to name them.
const DIMS: [(FacetDim, &str, &str, &str); 7] = [
    (FacetDim::Run, "t.run_id::text", "r.name", " JOIN runs r ON r.id = t.run_id"),
    (FacetDim::Outcome, "t.state::text", "t.state::text", ""),
    (FacetDim::FinishReason, "COALESCE(t.finish_reason, '-')", "COALESCE(t.finish_reason, '(none)')", ""),
    (FacetDim::Flag, "f.code", "f.code", " CROSS JOIN LATERAL unnest(t.flags) AS f(code)"),
    (FacetDim::Review, "t.review_state::text", "t.review_state::text", ""),
    (FacetDim::Reviewer, "t.reviewed_by::text", "u.username", " JOIN users u ON u.id = t.reviewed_by"),
    (FacetDim::Category, "COALESCE(t.category, '-')", "COALESCE(t.category, '(none)')", ""),
];

/// Where the tally rows `t` come from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// The stored tally.
    Stored,
    /// Grouped from every sample that passes the rest of the filter (lengths, acceptance, text).
    Pass,
    /// The same from the samples on `percent` % of the table's pages, scaled up to `of` samples.
    Sample { percent: f32, of: i64 },
}

/// Counts per value of every dimension, each with the other filters applied.
pub async fn count(pool: &PgPool, filter: &SampleFilter, counting: Counting) -> Result<Facets> {
    let whole = filter.query();
    if let Some(problem) = whole.problems() {
        return Err(Error::Invalid(problem));
    }
    let (rows, counted) = if query::tally_answers(&whole) {
        tally::fold(pool, tally::FOLD_ABOVE).await?;
        (run(pool, filter, Source::Stored, None).await?, Counted::Exact)
    } else {
        match counting {
            Counting::Exact => (run(pool, filter, Source::Pass, None).await?, Counted::Exact),
            Counting::Bounded { exact_within, sample_rows } => {
                match quick_pass(pool, filter, exact_within).await? {
                    Some(rows) => (rows, Counted::Exact),
                    None => estimate(pool, filter, sample_rows).await?,
                }
            }
        }
    };
    named(pool, rows, counted).await
}

/// The exact pass if it ends `within` that time; `None` if it was given up (or not tried).
async fn quick_pass(pool: &PgPool, filter: &SampleFilter, within: Duration) -> Result<Option<Vec<Row>>> {
    if within.is_zero() {
        return Ok(None);
    }
    match run(pool, filter, Source::Pass, Some(within)).await {
        Err(Error::Database(e)) if cancelled(&e) => Ok(None),
        other => other.map(Some),
    }
}

/// The counts from a sample of about `sample_rows` samples; exact when that is all of them.
async fn estimate(pool: &PgPool, filter: &SampleFilter, sample_rows: i64) -> Result<(Vec<Row>, Counted)> {
    // The tally holds every sample (a sum over its deltas is the same without a fold).
    let of = sqlx::query_scalar!(r#"SELECT COALESCE(sum(n), 0)::bigint AS "of!" FROM sample_tally"#)
        .fetch_one(pool)
        .await?;
    let percent = 100.0 * sample_rows.max(1) as f64 / of.max(1) as f64;
    if percent >= 100.0 {
        return Ok((run(pool, filter, Source::Pass, None).await?, Counted::Exact));
    }
    let rows = run(pool, filter, Source::Sample { percent: percent as f32, of }, None).await?;
    let sampled = rows.iter().find(|r| r.0 == SAMPLED).map_or(0, |r| r.3);
    Ok((rows, Counted::Estimated { sampled, of }))
}

/// Whether the statement was cancelled by its timeout.
fn cancelled(e: &sqlx::Error) -> bool {
    e.as_database_error().and_then(|d| d.code()).is_some_and(|code| code == "57014")
}

/// Runs the counts statement over `source`, given up after `within` when set.
async fn run(
    pool: &PgPool,
    filter: &SampleFilter,
    source: Source,
    within: Option<Duration>,
) -> Result<Vec<Row>> {
    let mut tx = pool.begin().await?;
    if !matches!(source, Source::Stored) {
        // The samples a search matches come from a bitmap of their places. Past work_mem (4 MB
        // by default: about 60,000 pages of samples) it keeps whole pages instead, and every
        // sample on those pages has its search vector read again to test it: at a million
        // samples a rare word's pass took 1.13 s instead of 0.86–0.92 s. 64 MB keeps it exact
        // to about 7 GB of samples. Compiling the pass's expressions (JIT) took longer than it
        // saved: 0.80 s with it against 0.67 s without for a word in a sixth of a million.
        // A plan for the words searched, never the connection's generic one: not knowing the
        // word, that one reads every match from the search index, and a sample of 10,000
        // samples for a word in all of a million took 430–500 ms that way, 50–80 ms looking
        // each sampled sample's vector up by its key.
        let timeout = within.map_or_else(|| "0".to_string(), |w| w.as_millis().max(1).to_string());
        sqlx::query!(
            r#"SELECT set_config('work_mem', '64MB', true) AS "work_mem", set_config('jit', 'off', true) AS "jit",
                      set_config('plan_cache_mode', 'force_custom_plan', true) AS "plan_cache_mode",
                      set_config('statement_timeout', $1, true) AS "statement_timeout""#,
            timeout
        )
        .fetch_one(&mut *tx)
        .await?;
    }
    let rows = statement(filter, source).build_query_as().fetch_all(&mut *tx).await?;
    tx.commit().await?;
    Ok(rows)
}

/// The one statement: the tally rows `t` from `source`, then the total and each dimension's
/// values over them, each with the filter's other dimensions applied.
fn statement(filter: &SampleFilter, source: Source) -> QueryBuilder<'_, Postgres> {
    let whole = filter.query();
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new("WITH ");
    let grouped = "SELECT s.run_id, s.state, s.finish_reason, s.review_state, s.reviewed_by, d.category,
                          s.flags, s.auto_flags, count(*) AS n";
    let keys = "g.run_id, g.state, g.finish_reason, g.review_state, g.reviewed_by, g.category,
                tally_flags(g.flags, g.auto_flags) AS flags";
    match source {
        Source::Stored => {
            qb.push("t AS MATERIALIZED (SELECT * FROM sample_tally)");
        }
        Source::Pass => {
            qb.push(format!("t AS MATERIALIZED (SELECT {keys}, g.n FROM ({grouped}"));
            query::push_from_rows(&mut qb, &query::beyond_tally(&whole));
            qb.push(" GROUP BY 1, 2, 3, 4, 5, 6, 7, 8) AS g)");
        }
        Source::Sample { percent, of } => {
            // A number the engine computed, written out (it appears twice). REPEATABLE: the
            // same pages each time while the table stays the same, so the numbers hold still
            // from one load to the next.
            let pages = format!(" TABLESAMPLE SYSTEM ({percent}) REPEATABLE (0)");
            qb.push(format!("sampled AS (SELECT count(*) AS n FROM samples{pages}), "));
            qb.push(format!("t AS MATERIALIZED (SELECT {keys}, round(g.n * ")).push_bind(of).push(format!(
                "::numeric / (SELECT greatest(n, 1) FROM sampled))::bigint AS n FROM ({grouped}"
            ));
            qb.push(format!(" FROM samples s{pages} JOIN dataset_rows d ON d.id = s.row_id WHERE true"));
            query::push_and(&mut qb, &query::beyond_tally(&whole));
            qb.push(" GROUP BY 1, 2, 3, 4, 5, 6, 7, 8) AS g)");
        }
    }
    qb.push(format!(" SELECT {TOTAL} AS dim, '' AS value, '' AS label, COALESCE(sum(t.n), 0)::bigint AS count FROM t WHERE true"));
    query::push_kept_on_tally(&mut qb, &whole);
    if matches!(source, Source::Sample { .. }) {
        qb.push(format!(" UNION ALL SELECT {SAMPLED}, '', '', n FROM sampled"));
    }
    for (i, (dim, value, label, joins)) in DIMS.iter().enumerate() {
        qb.push(format!(
            " UNION ALL (SELECT {i}, {value}, {label}, sum(t.n)::bigint FROM t{joins} WHERE true"
        ));
        query::push_kept_on_tally(&mut qb, &filter.query_without(Some(*dim)));
        qb.push(" GROUP BY 2, 3 HAVING sum(t.n) > 0 ORDER BY 4 DESC, 2 LIMIT ")
            .push_bind(FACET_LIMIT)
            .push(")");
    }
    // Each dimension's values most first (a UNION ALL keeps no order of its parts).
    qb.push(" ORDER BY 1, 4 DESC, 2");
    qb
}

/// The statement's rows as the panel's `Facets`, flags named by their reasons' labels.
async fn named(pool: &PgPool, rows: Vec<Row>, counted: Counted) -> Result<Facets> {
    let reasons = reasons::list(pool).await?;
    let mut facets = Facets { counted, ..Facets::default() };
    for (dim, value, label, count) in rows {
        let Some((dim, ..)) = usize::try_from(dim).ok().and_then(|i| DIMS.get(i)) else {
            if dim == TOTAL {
                facets.total = count;
            }
            continue;
        };
        let label = match dim {
            FacetDim::Flag => reasons.iter().find(|r| r.code == value).map_or(label, |r| r.label.clone()),
            _ => label,
        };
        let values = match dim {
            FacetDim::Run => &mut facets.run,
            FacetDim::Outcome => &mut facets.outcome,
            FacetDim::FinishReason => &mut facets.finish_reason,
            FacetDim::Flag => &mut facets.flag,
            FacetDim::Review => &mut facets.review,
            FacetDim::Reviewer => &mut facets.reviewer,
            FacetDim::Category => &mut facets.category,
        };
        values.push(FacetValue { value, label, count });
    }
    Ok(facets)
}
