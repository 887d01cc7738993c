//! Choosing the samples of an export: the filters in SQL, then duplicate removal, the thinking
//! mix and the train/validation split, all deterministic for a given seed.
//!
//! The plan is made from light rows (ids, flags, token counts and a content hash) read in keyset
//! batches, so it costs a few bytes per selected sample; the full conversations are read later,
//! batch by batch, while writing.

use crate::samples::query;
use crate::{Error, Result};
use domain::acceptance::Pool;
use domain::export::{Duplicates, ExportPreview, ExportSelection, ThinkingMix};
use domain::review::ReviewState;
use domain::sample_query::SampleQuery;
use sha2::{Digest, Sha256};
use sqlx::{PgPool, Postgres, QueryBuilder};
use std::collections::{BTreeMap, HashSet};

const PLAN_BATCH: i64 = 5_000;

/// Which file a sample goes to.
pub use domain::export::ExportSplit as Split;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedSample {
    pub id: i64,
    pub split: Split,
}

/// The samples to export in id order, and what the preview shows about them.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub samples: Vec<PlannedSample>,
    pub preview: ExportPreview,
}

#[derive(sqlx::FromRow)]
struct LightRow {
    id: i64,
    thinking: Option<bool>,
    state: String,
    review_state: String,
    prompt_tokens: Option<i32>,
    completion_tokens: Option<i32>,
    reasoning_tokens: Option<i32>,
    content_hash: Vec<u8>,
    category: Option<String>,
    spec_steps: Option<i32>,
    spec_accepted: Option<i32>,
}

struct Candidate {
    id: i64,
    thinking: Option<bool>,
    state: String,
    review_state: String,
    prompt_tokens: u64,
    completion_tokens: u64,
    reasoning_tokens: u64,
    category: Option<String>,
    /// The draft's (accepted tokens, verify steps) on it, when measured.
    figures: Option<(u64, u64)>,
}

impl Candidate {
    fn length(&self) -> Option<f64> {
        self.figures.map(|(accepted, steps)| 1.0 + accepted as f64 / steps as f64)
    }
}

/// The review states left after dropping `dropped` (none dropped: every state, an open list).
fn keeping(dropped: &[ReviewState]) -> Vec<ReviewState> {
    if dropped.is_empty() {
        return Vec::new();
    }
    ReviewState::ALL.into_iter().filter(|s| !dropped.contains(s)).collect()
}

/// How many candidates the review filter and the excluded flags leave out: (rejected, flagged,
/// unreviewed), each sample counted under the first reason that applies, so that the kept ones
/// and these add up to every candidate. One scan: the candidates, and how many of them pass
/// each stage (not rejected; nor flagged or carrying an excluded flag; kept).
async fn removed(pool: &PgPool, selection: &ExportSelection) -> Result<(u64, u64, u64)> {
    let review = selection.review;
    let mut dropped = Vec::new();
    if review.drops_rejected() {
        dropped.push(ReviewState::Rejected);
    }
    let not_rejected = SampleQuery { review: keeping(&dropped), ..SampleQuery::default() };
    if review.drops_flagged() {
        dropped.push(ReviewState::Flagged);
    }
    let not_flagged = SampleQuery {
        review: keeping(&dropped),
        flags_none: selection.excluded_flags.clone(),
        ..SampleQuery::default()
    };
    let kept = SampleQuery { review: review.states(), ..not_flagged.clone() };
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new("SELECT count(*)");
    for stage in [&not_rejected, &not_flagged, &kept] {
        qb.push(", count(*) FILTER (WHERE true");
        query::push_and(&mut qb, stage);
        qb.push(")");
    }
    query::push_from(&mut qb, &selection.candidates());
    let (candidates, not_rejected, not_flagged, kept): (i64, i64, i64, i64) =
        qb.build_query_as().fetch_one(pool).await?;
    Ok(((candidates - not_rejected) as u64, (not_rejected - not_flagged) as u64, (not_flagged - kept) as u64))
}

/// Reads the matching samples and decides which are exported, and into which split.
pub async fn plan(pool: &PgPool, selection: &ExportSelection, validation_share: f64) -> Result<Plan> {
    let kept = selection.query();
    if let Some(problem) = kept.problems() {
        return Err(Error::Invalid(problem));
    }
    let mut matched = 0u64;
    let mut duplicates_removed = 0u64;
    let mut seen: HashSet<[u8; 16]> = HashSet::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut after = 0i64;
    loop {
        let mut qb: QueryBuilder<Postgres> = QueryBuilder::new(
            "SELECT s.id, s.thinking, s.state::text AS state, s.review_state::text AS review_state, \
                    s.prompt_tokens, s.completion_tokens, s.reasoning_tokens, \
                    sha256(convert_to(s.messages::text, 'UTF8')) AS content_hash, \
                    d.category, s.spec_steps, s.spec_accepted",
        );
        query::push_from_rows(&mut qb, &kept);
        qb.push(" AND s.id > ").push_bind(after).push(" ORDER BY s.id LIMIT ").push_bind(PLAN_BATCH);
        let rows: Vec<LightRow> = qb.build_query_as().fetch_all(pool).await?;
        let Some(last) = rows.last() else { break };
        after = last.id;
        for row in rows {
            matched += 1;
            let mode_ok = match selection.thinking {
                ThinkingMix::ThinkingOnly => row.thinking == Some(true),
                ThinkingMix::NonThinkingOnly => row.thinking == Some(false),
                ThinkingMix::Any | ThinkingMix::Ratio { .. } => true,
            };
            if !mode_ok {
                continue;
            }
            if selection.duplicates == Duplicates::Remove {
                let key: [u8; 16] = row.content_hash[..16].try_into().expect("sha256 is 32 bytes");
                if !seen.insert(key) {
                    duplicates_removed += 1;
                    continue;
                }
            }
            candidates.push(Candidate {
                id: row.id,
                thinking: row.thinking,
                state: row.state,
                review_state: row.review_state,
                prompt_tokens: count(row.prompt_tokens),
                completion_tokens: count(row.completion_tokens),
                reasoning_tokens: count(row.reasoning_tokens),
                category: row.category,
                figures: row
                    .spec_steps
                    .zip(row.spec_accepted)
                    .filter(|(steps, _)| *steps > 0)
                    .map(|(steps, accepted)| (count(Some(accepted)), count(Some(steps)))),
            });
        }
    }
    drop(seen);

    let before_cut = candidates.len() as u64;
    if let Some(share) = selection.weakest {
        candidates = weakest(candidates, share);
    }
    let acceptance_removed = before_cut - candidates.len() as u64;

    let before_mix = candidates.len() as u64;
    if let ThinkingMix::Ratio { thinking_share } = selection.thinking {
        let keep = mix_fractions(&candidates, thinking_share);
        candidates.retain(|c| match c.thinking {
            Some(mode) => unit(selection.seed, "mix", c.id) < if mode { keep.0 } else { keep.1 },
            None => true,
        });
    }

    let (rejected_removed, flagged_removed, unreviewed_removed) = removed(pool, selection).await?;
    let mut preview = ExportPreview {
        matched,
        rejected_removed,
        flagged_removed,
        unreviewed_removed,
        duplicates_removed,
        acceptance_removed,
        mix_removed: before_mix - candidates.len() as u64,
        selected: candidates.len() as u64,
        ..Default::default()
    };
    let mut by_outcome: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_review: BTreeMap<String, u64> = BTreeMap::new();
    let mut acceptance = Pool::default();
    let mut acceptance_by_category: BTreeMap<String, Pool> = BTreeMap::new();
    let mut samples = Vec::with_capacity(candidates.len());
    for c in candidates {
        if let Some((accepted, steps)) = c.figures {
            acceptance.add(accepted, steps);
            let category = c.category.clone().unwrap_or_else(|| "(none)".into());
            acceptance_by_category.entry(category).or_default().add(accepted, steps);
        }
        let split = split_of(selection.seed, c.id, validation_share);
        match split {
            Split::Train => preview.train += 1,
            Split::Validation => preview.validation += 1,
        }
        match c.thinking {
            Some(true) => preview.thinking += 1,
            Some(false) => preview.non_thinking += 1,
            None => {}
        }
        preview.prompt_tokens += c.prompt_tokens;
        preview.completion_tokens += c.completion_tokens;
        preview.reasoning_tokens += c.reasoning_tokens;
        *by_outcome.entry(c.state).or_default() += 1;
        *by_review.entry(c.review_state).or_default() += 1;
        samples.push(PlannedSample { id: c.id, split });
    }
    preview.by_outcome = by_outcome.into_iter().collect();
    preview.by_review_state = by_review.into_iter().collect();
    preview.acceptance = acceptance.pooled();
    preview.acceptance_by_category =
        acceptance_by_category.into_iter().filter_map(|(c, pool)| Some((c, pool.pooled()?))).collect();
    Ok(Plan { samples, preview })
}

/// In each category, the `share` of its samples with a figure that the draft accepted least
/// on (rounded up, ties by id); samples without a figure cannot be ranked and are left out.
/// Keeps id order.
fn weakest(candidates: Vec<Candidate>, share: f64) -> Vec<Candidate> {
    let mut by_category: BTreeMap<Option<String>, Vec<(f64, i64)>> = BTreeMap::new();
    for c in &candidates {
        if let Some(length) = c.length() {
            by_category.entry(c.category.clone()).or_default().push((length, c.id));
        }
    }
    let mut kept: HashSet<i64> = HashSet::new();
    for (_, mut ranked) in by_category {
        ranked.sort_by(|(a, i), (b, j)| a.total_cmp(b).then(i.cmp(j)));
        let take = (share * ranked.len() as f64).ceil() as usize;
        kept.extend(ranked.into_iter().take(take).map(|(_, id)| id));
    }
    candidates.into_iter().filter(|c| kept.contains(&c.id)).collect()
}

fn count(value: Option<i32>) -> u64 {
    value.map_or(0, |v| v.max(0) as u64)
}

/// The fractions of thinking and non-thinking samples to keep so that `share` of those kept
/// think, keeping every sample of the smaller group.
fn mix_fractions(candidates: &[Candidate], share: f64) -> (f64, f64) {
    let on = candidates.iter().filter(|c| c.thinking == Some(true)).count() as f64;
    let off = candidates.iter().filter(|c| c.thinking == Some(false)).count() as f64;
    if on + off == 0.0 {
        return (1.0, 1.0);
    }
    if share <= 0.0 {
        return (0.0, 1.0);
    }
    if share >= 1.0 {
        return (1.0, 0.0);
    }
    if on / (on + off) > share {
        // Too many thinking samples: keep every non-thinking one.
        let wanted_on = off * share / (1.0 - share);
        ((wanted_on / on).min(1.0), 1.0)
    } else {
        let wanted_off = on * (1.0 - share) / share;
        (1.0, if off == 0.0 { 1.0 } else { (wanted_off / off).min(1.0) })
    }
}

/// A number in [0, 1) fixed by the seed, a purpose and the sample id.
fn unit(seed: u64, purpose: &str, id: i64) -> f64 {
    let digest = Sha256::new()
        .chain_update(seed.to_le_bytes())
        .chain_update(purpose.as_bytes())
        .chain_update(id.to_le_bytes())
        .finalize();
    let n = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
    (n >> 11) as f64 / (1u64 << 53) as f64
}

pub fn split_of(seed: u64, id: i64, validation_share: f64) -> Split {
    if unit(seed, "split", id) < validation_share {
        Split::Validation
    } else {
        Split::Train
    }
}

/// A sample as it is exported.
#[derive(sqlx::FromRow)]
pub struct FullRow {
    pub id: i64,
    pub run_id: i64,
    pub row_key: String,
    pub thinking: Option<bool>,
    pub messages: serde_json::Value,
    /// The draft's verify steps and accepted tokens on it, when measured.
    #[sqlx(default)]
    pub spec_steps: Option<i32>,
    #[sqlx(default)]
    pub spec_accepted: Option<i32>,
    /// The functions its dataset row offers.
    #[sqlx(default)]
    pub tools: Option<serde_json::Value>,
}

impl FullRow {
    /// What its exported row says beside its content.
    pub fn metadata(&self) -> Option<super::writer::RowMetadata> {
        let (steps, accepted) = self.spec_steps.zip(self.spec_accepted).filter(|(steps, _)| *steps > 0)?;
        Some(super::writer::RowMetadata {
            acceptance_length: 1.0 + f64::from(accepted) / f64::from(steps),
            verify_steps: steps as u32,
        })
    }
}

/// Reads the conversations of `ids` (one batch of the plan), in id order.
pub async fn fetch(pool: &PgPool, ids: &[i64]) -> Result<Vec<FullRow>> {
    let rows = sqlx::query_as::<_, FullRow>(
        "SELECT s.id, s.run_id, r.row_key, s.thinking, s.messages, s.spec_steps, s.spec_accepted, r.tools \
         FROM samples s JOIN dataset_rows r ON r.id = s.row_id \
         WHERE s.id = ANY($1) AND s.messages IS NOT NULL ORDER BY s.id",
    )
    .bind(ids)
    .fetch_all(pool)
    .await?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(id: i64, thinking: Option<bool>) -> Candidate {
        Candidate {
            id,
            thinking,
            state: "ok".into(),
            review_state: "unreviewed".into(),
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
            category: None,
            figures: None,
        }
    }

    #[test]
    fn the_weakest_share_is_taken_per_category_and_unmeasured_samples_are_left_out() {
        let measured = |id: i64, category: &str, accepted: u64| Candidate {
            category: Some(category.into()),
            figures: Some((accepted, 10)),
            ..candidate(id, None)
        };
        let mut all: Vec<Candidate> = (0..10).map(|i| measured(i, "math", (i as u64 * 7) % 10)).collect();
        all.extend((10..14).map(|i| measured(i, "chat", 30 - i as u64)));
        all.push(candidate(99, None));
        let kept: Vec<i64> = weakest(all, 0.3).into_iter().map(|c| c.id).collect();
        // math: the 3 lowest of accepted (0, 7, 4, 1, 8, 5, 2, 9, 6, 3) are ids 0, 3, 6;
        // chat: ceil(0.3 × 4) = 2 lowest, ids 13 (17) and 12 (18).
        assert_eq!(kept, [0, 3, 6, 12, 13]);
    }

    #[test]
    fn the_split_is_fixed_by_the_seed_and_near_the_share() {
        let validation = (0..10_000).filter(|&id| split_of(7, id, 0.1) == Split::Validation).count();
        assert!((800..1200).contains(&validation), "{validation}");
        let again = (0..10_000).filter(|&id| split_of(7, id, 0.1) == Split::Validation).count();
        assert_eq!(validation, again);
        let other = (0..10_000).filter(|&id| split_of(8, id, 0.1) != split_of(7, id, 0.1)).count();
        assert!(other > 0, "another seed splits differently");
        assert!((0..1000).all(|id| split_of(1, id, 0.0) == Split::Train));
    }

    #[test]
    fn the_mix_thins_out_the_larger_group() {
        let mut c: Vec<Candidate> = (0..900).map(|i| candidate(i, Some(true))).collect();
        c.extend((900..1000).map(|i| candidate(i, Some(false))));
        let (on, off) = mix_fractions(&c, 0.5);
        assert!((on - 100.0 / 900.0).abs() < 1e-9 && off == 1.0, "{on} {off}");
        let (on, off) = mix_fractions(&c, 0.95);
        assert_eq!(on, 1.0);
        assert!((off * 100.0 - 900.0 * 0.05 / 0.95).abs() < 1e-6, "{off}");
    }
}
