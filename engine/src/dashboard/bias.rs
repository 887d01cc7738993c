//! Selection bias: a run that loses its long reasoning traces, or one category, trains a draft
//! model on a skewed set. Shows outcomes by completion length, reasoning length, prompt length
//! and category, and warns where a group fails far more often than the run as a whole.

use domain::{
    dashboard::{BandRow, BiasReport, CategoryRow, StateCounts},
    generation::SampleState,
};
use sqlx::PgPool;

/// Lower bounds of the completion-token bands (the last band is open).
pub const COMPLETION_BANDS: [i64; 6] = [0, 256, 1024, 2048, 4096, 8192];
/// Lower bounds of the reasoning-token bands: the first holds samples without reasoning.
pub const REASONING_BANDS: [i64; 6] = [0, 1, 256, 1024, 4096, 8192];
/// Lower bounds of the prompt-length bands, in characters.
pub const PROMPT_BANDS: [i64; 5] = [0, 200, 1000, 4000, 16000];

/// A group is called out when at least this many of its samples finished…
const MIN_GROUP: i64 = 10;
/// …and its failure rate is at least this…
const MIN_RATE: f64 = 0.10;
/// …and at least this multiple of the run's.
const FACTOR: f64 = 2.0;

pub async fn report(pool: &PgPool, run_id: i64) -> crate::Result<BiasReport> {
    // Completion length of a sample that did not finish is what arrived before it failed, so a
    // band's failures show where lengths were heading (tokens when counted, else ~4 chars/token).
    let rows = sqlx::query!(
        r#"SELECT s.state AS "state!: SampleState",
                  width_bucket(COALESCE(s.completion_tokens,
                      (COALESCE(length(s.reasoning), 0) + COALESCE(length(s.content), 0)) / 4), $2::bigint[]) AS "completion_band!",
                  width_bucket(r.prompt_chars, $3::bigint[]) AS "prompt_band!",
                  width_bucket(COALESCE(s.reasoning_tokens, length(s.reasoning) / 4, 0), $4::bigint[]) AS "reasoning_band!",
                  COALESCE(r.category, '(none)') AS "category!",
                  count(*) AS "n!"
           FROM samples s JOIN dataset_rows r ON r.id = s.row_id
           WHERE s.run_id = $1 AND s.state NOT IN ('pending', 'running')
           GROUP BY 1, 2, 3, 4, 5"#,
        run_id,
        &COMPLETION_BANDS[..],
        &PROMPT_BANDS[..],
        &REASONING_BANDS[..]
    )
    .fetch_all(pool)
    .await?;
    let mut completion = vec![StateCounts::default(); COMPLETION_BANDS.len()];
    let mut prompt = vec![StateCounts::default(); PROMPT_BANDS.len()];
    let mut reasoning = vec![StateCounts::default(); REASONING_BANDS.len()];
    let mut categories: Vec<CategoryRow> = Vec::new();
    let mut all = StateCounts::default();
    for row in rows {
        let band = |b: i32, len: usize| (b.max(1) as usize - 1).min(len - 1);
        completion[band(row.completion_band, COMPLETION_BANDS.len())].add(row.state, row.n);
        prompt[band(row.prompt_band, PROMPT_BANDS.len())].add(row.state, row.n);
        reasoning[band(row.reasoning_band, REASONING_BANDS.len())].add(row.state, row.n);
        match categories.iter_mut().find(|c| c.category == row.category) {
            Some(c) => c.counts.add(row.state, row.n),
            None => {
                let mut counts = StateCounts::default();
                counts.add(row.state, row.n);
                categories.push(CategoryRow { category: row.category, counts });
            }
        }
        all.add(row.state, row.n);
    }
    categories
        .sort_by(|a, b| b.counts.finished().cmp(&a.counts.finished()).then(a.category.cmp(&b.category)));
    let completion_bands = bands(&COMPLETION_BANDS, completion, "tokens");
    let prompt_bands = bands(&PROMPT_BANDS, prompt, "characters");
    let mut reasoning_bands = bands(&REASONING_BANDS, reasoning, "tokens");
    reasoning_bands[0].label = "no reasoning".into();
    let failure_rate = rate(&all);
    let mut warnings = Vec::new();
    for band in &completion_bands {
        warn_if_skewed(&mut warnings, &format!("Completions of {}", band.label), &band.counts, failure_rate);
    }
    for band in reasoning_bands.iter().skip(1) {
        warn_if_skewed(&mut warnings, &format!("Reasoning of {}", band.label), &band.counts, failure_rate);
    }
    for band in &prompt_bands {
        warn_if_skewed(&mut warnings, &format!("Prompts of {}", band.label), &band.counts, failure_rate);
    }
    for c in &categories {
        warn_if_skewed(&mut warnings, &format!("Category `{}`", c.category), &c.counts, failure_rate);
    }
    Ok(BiasReport { failure_rate, completion_bands, reasoning_bands, prompt_bands, categories, warnings })
}

fn rate(counts: &StateCounts) -> f64 {
    match counts.finished() {
        0 => 0.0,
        n => counts.not_ok() as f64 / n as f64,
    }
}

fn bands(bounds: &[i64], counts: Vec<StateCounts>, unit: &str) -> Vec<BandRow> {
    counts
        .into_iter()
        .enumerate()
        .map(|(i, counts)| BandRow {
            label: match bounds.get(i + 1) {
                Some(next) => format!("{}–{} {unit}", thousands(bounds[i]), thousands(next - 1)),
                None => format!("{}+ {unit}", thousands(bounds[i])),
            },
            counts,
        })
        .collect()
}

/// Adds a warning when `group` fails far more often than the run.
pub fn warn_if_skewed(warnings: &mut Vec<String>, group: &str, counts: &StateCounts, run_rate: f64) {
    let finished = counts.finished();
    if finished < MIN_GROUP {
        return;
    }
    let group_rate = rate(counts);
    if group_rate >= MIN_RATE && group_rate >= FACTOR * run_rate {
        warnings.push(format!(
            "{group} fail {:.0}% of the time against {:.0}% for the run ({} of {}): the finished set under-represents them; \
             consider a retry pass with a longer idle timeout or a higher max_tokens",
            group_rate * 100.0,
            run_rate * 100.0,
            counts.not_ok(),
            finished
        ));
    }
}

fn thousands(n: i64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ok: i64, timed_out: i64) -> StateCounts {
        StateCounts { ok, timed_out, ..Default::default() }
    }

    #[test]
    fn a_group_failing_far_above_the_run_is_called_out() {
        let mut warnings = vec![];
        warn_if_skewed(&mut warnings, "Completions of 4,096–8,191 tokens", &counts(6, 14), 0.035);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("Completions of 4,096–8,191 tokens fail 70% of the time against 4%"));
    }

    #[test]
    fn small_groups_and_groups_near_the_run_rate_are_not() {
        let mut warnings = vec![];
        warn_if_skewed(&mut warnings, "tiny", &counts(1, 5), 0.01);
        warn_if_skewed(&mut warnings, "usual", &counts(80, 20), 0.15);
        warn_if_skewed(&mut warnings, "low", &counts(95, 5), 0.01);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn band_labels_read_as_ranges() {
        let rows = bands(&COMPLETION_BANDS, vec![StateCounts::default(); 6], "tokens");
        assert_eq!(rows[0].label, "0–255 tokens");
        assert_eq!(rows[3].label, "2,048–4,095 tokens");
        assert_eq!(rows[5].label, "8,192+ tokens");
    }
}
