//! A run's samples, made with the run: one pending sample per prompt row, each with its thinking
//! mode (`sample_thinking` in the database, one rule for every source). These are the only
//! statements that insert samples.

use crate::Result;
use domain::export::ExportSplit;
use domain::generation::Thinking;
use sqlx::{Postgres, Transaction};

/// Which rows become the run's samples.
#[derive(Clone, Debug)]
pub enum Rows<'a> {
    /// The dataset's rows, of some categories or all; `sample` draws `count` of them, ordered
    /// by a hash seeded with `seed`, so the same seed draws the same rows.
    Dataset { categories: Option<&'a [String]>, sample: Option<(u64, u64)> },
    /// The rows an earlier run sent, with their thinking modes there.
    Run(i64),
    /// The rows an export wrote into one split, with their thinking modes (the first sample's,
    /// when two runs of the export sent the same row).
    Export(i64, ExportSplit),
    /// `quota` rows of each category (`None`: rows without one), each category's drawn by a
    /// hash seeded with `seed`.
    Quotas { quotas: &'a [(Option<String>, u64)], seed: u64 },
}

/// How a sample's thinking mode is chosen: the `mode`, `seed` and `ratio` arguments of
/// `sample_thinking`.
fn mode(thinking: &Thinking, run_seed: i64) -> (&'static str, i64, f64) {
    match thinking {
        Thinking::On => ("on", run_seed, 1.0),
        Thinking::Off => ("off", run_seed, 0.0),
        Thinking::Mix { on_ratio } => ("mix", run_seed, *on_ratio),
        Thinking::ServerDefault => ("server", run_seed, 0.0),
        Thinking::AsSource => ("source", run_seed, 0.0),
    }
}

/// Inserts run `run_id`'s samples from `rows` of dataset `dataset_id`. A mixed thinking mode is
/// drawn per row from `run_seed`, so the same settings give the same mix. Returns how many.
pub async fn for_run(
    tx: &mut Transaction<'_, Postgres>,
    run_id: i64,
    dataset_id: i64,
    rows: Rows<'_>,
    thinking: &Thinking,
    run_seed: i64,
) -> Result<u64> {
    let (mode, seed, ratio) = mode(thinking, run_seed);
    let inserted = match rows {
        Rows::Dataset { categories, sample } => {
            let (count, sample_seed) =
                sample.map_or((None, 0), |(count, seed)| (Some(count as i64), seed as i64));
            sqlx::query!(
                "INSERT INTO samples (run_id, row_id, thinking)
                 SELECT $1, r.id, sample_thinking($3, r.id, $4, $5, NULL)
                 FROM dataset_rows r
                 WHERE r.dataset_id = $2 AND ($6::text[] IS NULL OR r.category = ANY($6))
                 ORDER BY CASE WHEN $7::bigint IS NULL THEN r.id ELSE hashint8(r.id # $8) END, r.id
                 LIMIT $7",
                run_id,
                dataset_id,
                mode,
                seed,
                ratio,
                categories,
                count,
                sample_seed,
            )
            .execute(&mut **tx)
            .await?
        }
        // Served by samples_run_id_idx (run_id, id).
        Rows::Run(source) => {
            sqlx::query!(
                "INSERT INTO samples (run_id, row_id, thinking)
                 SELECT $1, s.row_id, sample_thinking($3, s.row_id, $4, $5, s.thinking)
                 FROM samples s JOIN dataset_rows r ON r.id = s.row_id
                 WHERE s.run_id = $2 AND r.dataset_id = $6
                 ORDER BY s.id",
                run_id,
                source,
                mode,
                seed,
                ratio,
                dataset_id,
            )
            .execute(&mut **tx)
            .await?
        }
        Rows::Export(export, split) => {
            sqlx::query!(
                "INSERT INTO samples (run_id, row_id, thinking)
                 SELECT $1, row_id, sample_thinking($3, row_id, $4, $5, thinking)
                 FROM (SELECT DISTINCT ON (s.row_id) s.row_id, s.thinking
                       FROM export_samples e JOIN samples s ON s.id = e.sample_id
                       JOIN dataset_rows r ON r.id = s.row_id
                       WHERE e.export_id = $2 AND e.split = $7 AND r.dataset_id = $6
                       ORDER BY s.row_id, s.id) source
                 ORDER BY row_id",
                run_id,
                export,
                mode,
                seed,
                ratio,
                dataset_id,
                split as ExportSplit,
            )
            .execute(&mut **tx)
            .await?
        }
        Rows::Quotas { quotas, seed: draw_seed } => {
            let categories: Vec<Option<String>> = quotas.iter().map(|(c, _)| c.clone()).collect();
            let counts: Vec<i64> = quotas.iter().map(|(_, n)| *n as i64).collect();
            sqlx::query!(
                "INSERT INTO samples (run_id, row_id, thinking)
                 SELECT $1, x.id, sample_thinking($3, x.id, $4, $5, NULL)
                 FROM (SELECT r.id, r.category,
                              row_number() OVER (PARTITION BY r.category ORDER BY hashint8(r.id # $6), r.id) AS k
                       FROM dataset_rows r WHERE r.dataset_id = $2) x
                 JOIN unnest($7::text[], $8::bigint[]) AS q(category, quota)
                   ON x.category IS NOT DISTINCT FROM q.category
                 WHERE x.k <= q.quota
                 ORDER BY x.id",
                run_id,
                dataset_id,
                mode,
                seed,
                ratio,
                draw_seed as i64,
                &categories as &[Option<String>],
                &counts,
            )
            .execute(&mut **tx)
            .await?
        }
    };
    Ok(inserted.rows_affected())
}
