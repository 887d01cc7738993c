//! Two evaluations of the same prompts, side by side: each prompt's two figures paired, pooled
//! and differenced with an interval over pairs (`domain::acceptance::Pairs`), overall and per
//! category, and the prompts where the second draft falls furthest below the first.

use super::report::head;
use crate::{Error, Result};
use domain::acceptance::{Comparison, PairedSample, Pairs, RunLabel};
use futures::TryStreamExt;
use sqlx::PgPool;
use std::collections::{BTreeMap, BinaryHeap};

/// How many of the largest drops the comparison lists.
pub const LARGEST_DROPS: usize = 20;

/// A prompt where B's length is below A's, ordered so the heap's top is the smallest drop kept.
#[derive(PartialEq)]
struct Drop {
    by: f64,
    sample: PairedSample,
}

impl Eq for Drop {}

impl PartialOrd for Drop {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Drop {
    // A max-heap on how small the drop is: its top is the first to leave when a larger one comes.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.by.total_cmp(&self.by).then_with(|| self.sample.row_id.cmp(&other.sample.row_id))
    }
}

pub async fn compare(pool: &PgPool, a: i64, b: i64) -> Result<Comparison> {
    if a == b {
        return Err(Error::invalid("choose two different runs to compare"));
    }
    let (head_a, head_b) = (head(pool, a).await?, head(pool, b).await?);
    let mut overall = Pairs::default();
    let mut by_category: BTreeMap<String, Pairs> = BTreeMap::new();
    let (mut shared, mut mismatches) = (0u64, 0u64);
    let mut drops: BinaryHeap<Drop> = BinaryHeap::new();
    // Each of A's samples and B's sample of the same row (samples_one_per_row).
    let mut rows = sqlx::query!(
        r#"SELECT x.row_id, x.id AS a_id, y.id AS b_id, d.category,
                  x.spec_steps AS a_steps, x.spec_accepted AS a_accepted,
                  y.spec_steps AS b_steps, y.spec_accepted AS b_accepted,
                  x.thinking IS DISTINCT FROM y.thinking AS "mismatch!"
           FROM samples x JOIN samples y ON y.row_id = x.row_id AND y.run_id = $2
           JOIN dataset_rows d ON d.id = x.row_id
           WHERE x.run_id = $1"#,
        a,
        b
    )
    .fetch(pool);
    while let Some(row) = rows.try_next().await? {
        shared += 1;
        mismatches += u64::from(row.mismatch);
        let figure = |steps: Option<i32>, accepted: Option<i32>| {
            steps.zip(accepted).map(|(s, a)| (a.max(0) as u64, s.max(0) as u64))
        };
        let (Some(fa), Some(fb)) = (figure(row.a_steps, row.a_accepted), figure(row.b_steps, row.b_accepted))
        else {
            continue;
        };
        let category = row.category.clone().unwrap_or_else(|| "(none)".into());
        overall.add(fa, fb);
        by_category.entry(category).or_default().add(fa, fb);
        let length = |(accepted, steps): (u64, u64)| 1.0 + accepted as f64 / steps.max(1) as f64;
        let (a_length, b_length) = (length(fa), length(fb));
        if b_length < a_length {
            drops.push(Drop {
                by: a_length - b_length,
                sample: PairedSample {
                    row_id: row.row_id,
                    a_sample_id: row.a_id,
                    b_sample_id: row.b_id,
                    category: row.category,
                    a_length,
                    b_length,
                    preview: String::new(),
                },
            });
            if drops.len() > LARGEST_DROPS {
                drops.pop();
            }
        }
    }
    drop(rows);
    if shared == 0 {
        return Err(Error::invalid(format!(
            "`{}` and `{}` sent no prompt in common: start the second evaluation from the first's prompts",
            head_a.name, head_b.name
        )));
    }
    let mut largest_drops: Vec<PairedSample> =
        drops.into_sorted_vec().into_iter().map(|d| d.sample).collect();
    let rows: Vec<i64> = largest_drops.iter().map(|d| d.row_id).collect();
    let previews: BTreeMap<i64, String> = sqlx::query!(
        r#"SELECT d.id, left(jsonb_path_query_first(d.messages, '$[*] ? (@.role == "user").content') #>> '{}', 200)
                  AS preview
           FROM dataset_rows d WHERE d.id = ANY($1)"#,
        &rows
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.id, r.preview.unwrap_or_default()))
    .collect();
    for drop in &mut largest_drops {
        drop.preview = previews.get(&drop.row_id).cloned().unwrap_or_default();
    }
    let label =
        |run_id, head: super::report::RunHead| RunLabel { run_id, name: head.name, draft: head.draft };
    Ok(Comparison {
        a: label(a, head_a),
        b: label(b, head_b),
        shared_prompts: shared,
        mode_mismatches: mismatches,
        overall: overall.figure(),
        by_category: by_category.into_iter().map(|(category, pairs)| (category, pairs.figure())).collect(),
        largest_drops,
    })
}
