//! One run's acceptance: pooled over its samples by verify steps, broken down by category,
//! prompt and completion length, thinking mode and user turns, and its weakest samples.
//!
//! The figures are read once, streamed, and added up per group in memory: a run of 100,000
//! samples is a few megabytes of numbers, and one pass gives every breakdown.

use crate::{Error, Result};
use domain::acceptance::{
    length_band, Dimension, DraftRef, GroupFigure, Pool, RunAcceptance, SampleFigure, LENGTH_BANDS,
};
use futures::TryStreamExt;
use sqlx::PgPool;
use std::collections::BTreeMap;

/// How many of the weakest samples the report lists.
pub const WEAKEST: i64 = 20;

/// The run's name and draft.
pub(crate) struct RunHead {
    pub name: String,
    pub draft: Option<DraftRef>,
}

pub(crate) async fn head(pool: &PgPool, run_id: i64) -> Result<RunHead> {
    let row = sqlx::query!("SELECT name, draft_name, draft_revision FROM runs WHERE id = $1", run_id)
        .fetch_optional(pool)
        .await?
        .ok_or(Error::NotFound("run"))?;
    Ok(RunHead {
        name: row.name,
        draft: row.draft_name.map(|name| DraftRef { name, revision: row.draft_revision.unwrap_or_default() }),
    })
}

/// Samples per group, and their pooled figures.
#[derive(Default)]
struct Group {
    samples: u64,
    pool: Pool,
}

pub async fn run(pool: &PgPool, run_id: i64) -> Result<RunAcceptance> {
    let head = head(pool, run_id).await?;
    let mut overall = Pool::default();
    let mut finished = 0u64;
    let mut spec_tokens: Option<u32> = None;
    let mut groups: BTreeMap<(Dimension, String), Group> = BTreeMap::new();
    // Served by samples_run_outcome_idx (run_id, state, id).
    let mut rows = sqlx::query!(
        r#"SELECT s.spec_steps, s.spec_accepted, s.spec_tokens, s.prompt_tokens, s.completion_tokens, s.thinking,
                  d.category,
                  jsonb_array_length(jsonb_path_query_array(COALESCE(s.messages, d.messages), '$[*] ? (@.role == "user")'))
                      AS "user_turns!"
           FROM samples s JOIN dataset_rows d ON d.id = s.row_id
           WHERE s.run_id = $1 AND s.state NOT IN ('pending', 'running')"#,
        run_id
    )
    .fetch(pool);
    while let Some(row) = rows.try_next().await? {
        finished += 1;
        let figures = row.spec_steps.zip(row.spec_accepted).map(|(s, a)| (a.max(0) as u64, s.max(0) as u64));
        if let Some((accepted, steps)) = figures {
            overall.add(accepted, steps);
        }
        if let Some(k) = row.spec_tokens {
            spec_tokens = Some(spec_tokens.unwrap_or(0).max(k.max(0) as u32));
        }
        let band =
            |tokens: Option<i32>| tokens.map_or("unknown", |t| length_band(t.max(0) as u32)).to_string();
        let keys = [
            (Dimension::Category, row.category.clone().unwrap_or_else(|| "(none)".into())),
            (Dimension::PromptLength, band(row.prompt_tokens)),
            (Dimension::CompletionLength, band(row.completion_tokens)),
            (Dimension::Thinking, thinking_label(row.thinking).to_string()),
            (Dimension::Turns, row.user_turns.to_string()),
        ];
        for key in keys {
            let group = groups.entry(key).or_default();
            group.samples += 1;
            if let Some((accepted, steps)) = figures {
                group.pool.add(accepted, steps);
            }
        }
    }
    let breakdowns = Dimension::ALL
        .into_iter()
        .map(|dimension| {
            let mut figures: Vec<GroupFigure> = groups
                .iter()
                .filter(|((d, _), _)| *d == dimension)
                .map(|((_, group), g)| GroupFigure {
                    group: group.clone(),
                    samples: g.samples,
                    pooled: g.pool.pooled(),
                })
                .collect();
            sort_groups(dimension, &mut figures);
            (dimension, figures)
        })
        .collect();
    Ok(RunAcceptance {
        run_id,
        run_name: head.name,
        draft: head.draft,
        finished,
        spec_tokens,
        overall: overall.pooled(),
        breakdowns,
        weakest: weakest(pool, run_id).await?,
    })
}

pub(crate) fn thinking_label(thinking: Option<bool>) -> &'static str {
    match thinking {
        Some(true) => "thinking",
        Some(false) => "not thinking",
        None => "server default",
    }
}

/// Lengths in band order, turns in number order, the rest by samples, most first.
fn sort_groups(dimension: Dimension, figures: &mut [GroupFigure]) {
    match dimension {
        Dimension::PromptLength | Dimension::CompletionLength => figures.sort_by_key(|f| {
            LENGTH_BANDS
                .iter()
                .position(|(from, _)| length_band(*from) == f.group)
                .unwrap_or(LENGTH_BANDS.len())
        }),
        Dimension::Turns => figures.sort_by_key(|f| f.group.parse::<u64>().unwrap_or(u64::MAX)),
        Dimension::Category | Dimension::Thinking => {
            figures.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.group.cmp(&b.group)))
        }
    }
}

/// The samples with the lowest acceptance length, through the review list's own order
/// (samples_acceptance_low_idx).
async fn weakest(pool: &PgPool, run_id: i64) -> Result<Vec<SampleFigure>> {
    let rows = sqlx::query!(
        r#"SELECT s.id, d.category, s.completion_tokens, s.spec_steps AS "steps!", s.spec_accepted AS "accepted!",
                  left(jsonb_path_query_first(d.messages, '$[*] ? (@.role == "user").content') #>> '{}', 200) AS preview
           FROM samples s JOIN dataset_rows d ON d.id = s.row_id
           WHERE s.run_id = $1 AND s.spec_steps IS NOT NULL
           ORDER BY COALESCE(s.acceptance_milli, 2147483647), s.id
           LIMIT $2"#,
        run_id,
        WEAKEST
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| SampleFigure {
            sample_id: r.id,
            category: r.category,
            completion_tokens: r.completion_tokens,
            length: 1.0 + f64::from(r.accepted) / f64::from(r.steps.max(1)),
            steps: r.steps.max(0) as u32,
            preview: r.preview.unwrap_or_default(),
        })
        .collect())
}
