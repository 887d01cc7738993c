//! Speculative-decoding acceptance: what vLLM reports for each request, pooled over samples by
//! verify steps with a confidence interval, and two evaluations of the same prompts compared
//! sample by sample.
//!
//! Why pooled by steps: the acceptance length of a set of requests is the tokens the target
//! emitted per verify step over all of them, `1 + Σ accepted ÷ Σ steps`, which is what vLLM's
//! and SGLang's counters give. The mean of per-request means weighs a 20-token answer like a
//! 2,000-token one and disagrees with them (vLLM issue #42508); it is never shown.
//!
//! Why this interval: the steps of one request are not independent draws (a draft that misses
//! a kind of text misses all of it), so the sample is the unit. The pooled figure is a ratio of
//! two sums; its standard error is the ratio estimator's (the delta method over samples), and a
//! comparison of two evaluations on the same prompts pairs each prompt's two figures, which
//! removes the prompt-to-prompt spread from the difference.

use serde::{Deserialize, Serialize};

/// One request's speculative decoding as vLLM 0.32 reports it with
/// `--per-request-spec-decode-metrics` (the `metrics.speculative_decoding` object of the last
/// streamed chunk), or a sample's requests summed. A request without a verify step has none: a
/// server without a draft reports nothing, and a draft that proposed nothing (`ngram` on text it
/// cannot match) reports `num_spec_steps: 0`; neither is an acceptance of zero.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecDecode {
    /// Verify steps: target forward passes that checked a draft (`num_spec_steps`).
    pub steps: u32,
    /// Draft tokens the target accepted (`num_accepted_draft_tokens`).
    pub accepted: u32,
    /// Draft tokens proposed (`num_draft_tokens`).
    pub drafted: u32,
    /// The most draft tokens one step proposes: the server's `num_speculative_tokens`.
    pub spec_tokens: u32,
    /// Steps by how many draft tokens they accepted: entry `i` counts the steps that accepted
    /// `i` (`acceptance_histogram`, `spec_tokens + 1` entries).
    pub histogram: Vec<u32>,
}

impl SpecDecode {
    /// The figures of a request, or `None` when it had no verify step.
    pub fn new(
        steps: u32,
        accepted: u32,
        drafted: u32,
        spec_tokens: u32,
        histogram: Vec<u32>,
    ) -> Option<Self> {
        (steps > 0).then_some(Self { steps, accepted, drafted, spec_tokens, histogram })
    }

    /// Tokens the target emitted per verify step: its accepted draft tokens and its own one.
    pub fn length(&self) -> f64 {
        1.0 + f64::from(self.accepted) / f64::from(self.steps)
    }

    /// Adds another request of the same sample (a conversation regenerated turn by turn).
    pub fn add(&mut self, other: &SpecDecode) {
        self.steps += other.steps;
        self.accepted += other.accepted;
        self.drafted += other.drafted;
        self.spec_tokens = self.spec_tokens.max(other.spec_tokens);
        if self.histogram.len() < other.histogram.len() {
            self.histogram.resize(other.histogram.len(), 0);
        }
        for (mine, theirs) in self.histogram.iter_mut().zip(&other.histogram) {
            *mine += theirs;
        }
    }

    /// The sum of the figures of several requests; `None` when none had one.
    pub fn sum<'a>(requests: impl IntoIterator<Item = &'a SpecDecode>) -> Option<SpecDecode> {
        let mut total: Option<SpecDecode> = None;
        for request in requests {
            match &mut total {
                Some(total) => total.add(request),
                None => total = Some(request.clone()),
            }
        }
        total
    }
}

/// The two-sided 95% quantile of Student's t with `df` degrees of freedom (the normal's 1.96
/// from 120 on), so a handful of samples gets the wider interval it deserves.
fn t_975(df: u64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df as usize - 1],
        31..=40 => 2.021,
        41..=60 => 2.000,
        61..=119 => 1.980,
        _ => 1.960,
    }
}

/// A 95% confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    fn around(centre: f64, standard_error: f64, samples: u64) -> Option<Self> {
        if samples < 2 || !standard_error.is_finite() {
            return None;
        }
        let half = t_975(samples - 1) * standard_error;
        Some(Self { low: centre - half, high: centre + half })
    }

    pub fn contains(&self, value: f64) -> bool {
        self.low <= value && value <= self.high
    }
}

/// Samples' acceptance pooled by verify steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    /// Samples with a figure.
    pub samples: u64,
    pub steps: u64,
    pub accepted: u64,
    /// `1 + accepted ÷ steps`.
    pub length: f64,
    /// 95%, over samples; none below two samples.
    pub interval: Option<Interval>,
}

/// Adds samples' figures up, as the sums the pooled figure and its interval need.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pool {
    n: u64,
    steps: f64,
    accepted: f64,
    /// Σ accepted², Σ accepted·steps, Σ steps².
    aa: f64,
    a_s: f64,
    ss: f64,
}

impl Pool {
    /// One sample's accepted draft tokens and verify steps (a sample without steps is skipped).
    pub fn add(&mut self, accepted: u64, steps: u64) {
        if steps == 0 {
            return;
        }
        let (a, s) = (accepted as f64, steps as f64);
        self.n += 1;
        self.accepted += a;
        self.steps += s;
        self.aa += a * a;
        self.a_s += a * s;
        self.ss += s * s;
    }

    /// A pool from sums a database adds up: samples, Σ accepted, Σ steps, Σ accepted²,
    /// Σ accepted·steps and Σ steps², over samples with at least one step.
    pub fn from_sums(n: u64, accepted: f64, steps: f64, aa: f64, a_s: f64, ss: f64) -> Self {
        Self { n, steps, accepted, aa, a_s, ss }
    }

    /// Both pools' samples together.
    pub fn merge(&mut self, other: &Pool) {
        self.n += other.n;
        self.steps += other.steps;
        self.accepted += other.accepted;
        self.aa += other.aa;
        self.a_s += other.a_s;
        self.ss += other.ss;
    }

    pub fn samples(&self) -> u64 {
        self.n
    }

    /// The accepted tokens per step (`length - 1`); `None` without samples.
    fn ratio(&self) -> Option<f64> {
        (self.n > 0).then(|| self.accepted / self.steps)
    }

    /// The pooled figure; `None` when no sample had a verify step.
    pub fn pooled(&self) -> Option<Pooled> {
        let r = self.ratio()?;
        let n = self.n as f64;
        let mean_steps = self.steps / n;
        // Σ (aᵢ − r·sᵢ)², each residual in units of the mean sample's steps.
        let residuals = (self.aa - 2.0 * r * self.a_s + r * r * self.ss).max(0.0) / (mean_steps * mean_steps);
        let standard_error = (residuals / (n * (n - 1.0))).sqrt();
        Some(Pooled {
            samples: self.n,
            steps: self.steps as u64,
            accepted: self.accepted as u64,
            length: 1.0 + r,
            interval: Interval::around(1.0 + r, standard_error, self.n),
        })
    }
}

/// Two evaluations' figures of the same prompts, compared prompt by prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairedFigure {
    /// Prompts with a figure in both evaluations.
    pub pairs: u64,
    pub a: Pooled,
    pub b: Pooled,
    /// B's pooled length minus A's.
    pub difference: f64,
    /// 95%, over pairs; none below two pairs.
    pub interval: Option<Interval>,
    /// Prompts on which B's length is above A's, and below.
    pub b_higher: u64,
    pub a_higher: u64,
}

/// Adds pairs up: each prompt's (accepted, steps) under draft A and under draft B.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pairs {
    a: Pool,
    b: Pool,
    /// Σ x and Σ x·xᵀ of x = (a_B, s_B, a_A, s_A): the linearised difference of each pair is a
    /// fixed combination of x, so these sums give its variance exactly in one pass.
    sum: [f64; 4],
    cross: [[f64; 4]; 4],
    b_higher: u64,
    a_higher: u64,
}

impl Pairs {
    /// One prompt's figures under both drafts; a prompt without steps under either is skipped.
    pub fn add(&mut self, a: (u64, u64), b: (u64, u64)) {
        if a.1 == 0 || b.1 == 0 {
            return;
        }
        self.a.add(a.0, a.1);
        self.b.add(b.0, b.1);
        let x = [b.0 as f64, b.1 as f64, a.0 as f64, a.1 as f64];
        for i in 0..4 {
            self.sum[i] += x[i];
            for j in 0..4 {
                self.cross[i][j] += x[i] * x[j];
            }
        }
        let (len_a, len_b) = (x[2] / x[3], x[0] / x[1]);
        if len_b > len_a {
            self.b_higher += 1;
        } else if len_a > len_b {
            self.a_higher += 1;
        }
    }

    pub fn figure(&self) -> Option<PairedFigure> {
        let (a, b) = (self.a.pooled()?, self.b.pooled()?);
        let (ra, rb) = (self.a.ratio()?, self.b.ratio()?);
        let n = self.a.n as f64;
        let (mean_sa, mean_sb) = (self.a.steps / n, self.b.steps / n);
        // uᵢ = (a_Bᵢ − r_B·s_Bᵢ)/s̄_B − (a_Aᵢ − r_A·s_Aᵢ)/s̄_A = c·xᵢ
        let c = [1.0 / mean_sb, -rb / mean_sb, -1.0 / mean_sa, ra / mean_sa];
        let mut sum_u = 0.0;
        let mut sum_uu = 0.0;
        for i in 0..4 {
            sum_u += c[i] * self.sum[i];
            for j in 0..4 {
                sum_uu += c[i] * c[j] * self.cross[i][j];
            }
        }
        let spread = (sum_uu - sum_u * sum_u / n).max(0.0);
        let standard_error = (spread / (n * (n - 1.0))).sqrt();
        let difference = b.length - a.length;
        Some(PairedFigure {
            pairs: self.a.n,
            interval: Interval::around(difference, standard_error, self.a.n),
            difference,
            a,
            b,
            b_higher: self.b_higher,
            a_higher: self.a_higher,
        })
    }
}

/// Token-length bands the acceptance views group by: `[from, to)`, the last open.
pub const LENGTH_BANDS: [(u32, Option<u32>); 5] =
    [(0, Some(256)), (256, Some(1024)), (1024, Some(4096)), (4096, Some(16384)), (16384, None)];

/// The label of the band `tokens` falls in ("256–1,023").
pub fn length_band(tokens: u32) -> &'static str {
    const LABELS: [&str; 5] = ["0–255", "256–1,023", "1,024–4,095", "4,096–16,383", "16,384+"];
    let i = LENGTH_BANDS.iter().position(|(_, to)| to.is_none_or(|to| tokens < to)).unwrap_or(4);
    LABELS[i]
}

/// What a breakdown groups samples by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// The dataset row's category.
    Category,
    /// The prompt's tokens, in `LENGTH_BANDS`.
    PromptLength,
    /// The completion's tokens, in `LENGTH_BANDS`.
    CompletionLength,
    /// Thinking on, off, or the server's default.
    Thinking,
    /// User turns in the conversation sent.
    Turns,
}

impl Dimension {
    pub const ALL: [Dimension; 5] = [
        Dimension::Category,
        Dimension::PromptLength,
        Dimension::CompletionLength,
        Dimension::Thinking,
        Dimension::Turns,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Dimension::Category => "category",
            Dimension::PromptLength => "prompt tokens",
            Dimension::CompletionLength => "completion tokens",
            Dimension::Thinking => "thinking",
            Dimension::Turns => "user turns",
        }
    }
}

/// A named draft model, as an evaluation records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftRef {
    pub name: String,
    /// A checkpoint, commit or tag; empty when not given.
    #[serde(default)]
    pub revision: String,
}

impl DraftRef {
    /// "eagle3-qwen3@step-4000", or the name alone.
    pub fn describe(&self) -> String {
        if self.revision.is_empty() {
            self.name.clone()
        } else {
            format!("{}@{}", self.name, self.revision)
        }
    }
}

/// An evaluation run, as the pages that pick one list it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvaluationSummary {
    pub run_id: i64,
    pub name: String,
    pub draft: DraftRef,
    pub dataset_id: i64,
    pub dataset: String,
    pub status: crate::generation::RunStatus,
    pub samples: i64,
    pub created_at: time::OffsetDateTime,
}

/// One group of a breakdown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupFigure {
    pub group: String,
    /// Finished samples of the group, with a figure or not.
    pub samples: u64,
    pub pooled: Option<Pooled>,
}

/// A sample and its own acceptance, for the lists of the weakest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleFigure {
    pub sample_id: i64,
    pub category: Option<String>,
    pub completion_tokens: Option<i32>,
    pub length: f64,
    pub steps: u32,
    /// The start of the last user turn.
    pub preview: String,
}

/// A run's acceptance: pooled, broken down, and its weakest samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunAcceptance {
    pub run_id: i64,
    pub run_name: String,
    pub draft: Option<DraftRef>,
    /// Finished samples of the run.
    pub finished: u64,
    /// The server's `num_speculative_tokens` (the most a step can accept, less one).
    pub spec_tokens: Option<u32>,
    pub overall: Option<Pooled>,
    pub breakdowns: Vec<(Dimension, Vec<GroupFigure>)>,
    pub weakest: Vec<SampleFigure>,
}

/// One prompt's figures under both evaluations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairedSample {
    pub row_id: i64,
    pub a_sample_id: i64,
    pub b_sample_id: i64,
    pub category: Option<String>,
    pub a_length: f64,
    pub b_length: f64,
    pub preview: String,
}

/// Two evaluations of the same prompts side by side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub a: RunLabel,
    pub b: RunLabel,
    /// Prompts both runs sent.
    pub shared_prompts: u64,
    /// Of those, prompts sent with a different thinking mode by the two runs: their pairs
    /// compare more than the drafts.
    pub mode_mismatches: u64,
    pub overall: Option<PairedFigure>,
    pub by_category: Vec<(String, Option<PairedFigure>)>,
    /// The prompts where B falls furthest below A.
    pub largest_drops: Vec<PairedSample>,
}

/// A run as a comparison names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunLabel {
    pub run_id: i64,
    pub name: String,
    pub draft: Option<DraftRef>,
}

impl RunLabel {
    pub fn describe(&self) -> String {
        match &self.draft {
            Some(draft) => format!("{} ({})", self.name, draft.describe()),
            None => self.name.clone(),
        }
    }
}

/// One category's part of a draw weighted toward a draft's weak spots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CategoryQuota {
    /// `None`: rows without a category.
    pub category: Option<String>,
    /// The evaluation's pooled acceptance length for the category, if it measured one.
    pub acceptance: Option<f64>,
    /// How far below the most a step can emit (`spec_tokens + 1`) the category accepts: its
    /// weight. Categories the evaluation did not measure take its overall figure.
    pub headroom: f64,
    /// Rows of the dataset in the category.
    pub available: u64,
    /// Rows drawn.
    pub quota: u64,
}

/// A category the weighted draw can take rows from.
#[derive(Clone, Debug, PartialEq)]
pub struct CategoryRows {
    pub category: Option<String>,
    pub available: u64,
    /// The evaluation's pooled acceptance length in it, when it measured one.
    pub acceptance: Option<f64>,
}

/// Splits `count` rows between categories in proportion to their headroom, `max_length`
/// (`spec_tokens + 1`) minus their acceptance length: the weaker the draft on a category, the
/// more of the new prompts come from it. A category never gets more rows than it has; what it
/// cannot take goes to the others by the same weights. A category the draft already accepts
/// perfectly only gets rows once the others run out. Rounding gives the largest remainders
/// the extra rows, ties by category, so the split is fixed by its inputs.
pub fn weighted_quotas(
    count: u64,
    max_length: f64,
    overall: f64,
    categories: &[CategoryRows],
) -> Vec<CategoryQuota> {
    // A perfectly accepted category keeps a weight too small to matter until the rest are used.
    const FLOOR: f64 = 1e-9;
    let mut quotas: Vec<CategoryQuota> = categories
        .iter()
        .map(|c| CategoryQuota {
            category: c.category.clone(),
            acceptance: c.acceptance,
            headroom: (max_length - c.acceptance.unwrap_or(overall)).max(0.0),
            available: c.available,
            quota: 0,
        })
        .collect();
    let mut left = count.min(quotas.iter().map(|q| q.available).sum());
    // Water-filling: categories whose share exceeds what they have get all of it, and the rest
    // is shared again among the others.
    let mut open: Vec<usize> = (0..quotas.len()).filter(|&i| quotas[i].available > 0).collect();
    loop {
        let weight = |q: &CategoryQuota| q.headroom.max(FLOOR);
        let total: f64 = open.iter().map(|&i| weight(&quotas[i])).sum();
        let full: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| left as f64 * weight(&quotas[i]) / total >= quotas[i].available as f64)
            .collect();
        if full.is_empty() || total == 0.0 {
            let shares: Vec<(usize, f64)> =
                open.iter().map(|&i| (i, left as f64 * weight(&quotas[i]) / total)).collect();
            let mut given = 0;
            for &(i, share) in &shares {
                quotas[i].quota = share.floor() as u64;
                given += quotas[i].quota;
            }
            let mut by_remainder = shares;
            by_remainder.sort_by(|(i, a), (j, b)| {
                (b - b.floor())
                    .total_cmp(&(a - a.floor()))
                    .then_with(|| quotas[*i].category.cmp(&quotas[*j].category))
            });
            for (i, _) in by_remainder.into_iter().take((left - given) as usize) {
                quotas[i].quota += 1;
            }
            return quotas;
        }
        for i in full {
            quotas[i].quota = quotas[i].available;
            left -= quotas[i].available;
            open.retain(|&j| j != i);
        }
        if open.is_empty() {
            return quotas;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(samples: &[(u64, u64)]) -> Pool {
        let mut pool = Pool::default();
        for &(a, s) in samples {
            pool.add(a, s);
        }
        pool
    }

    #[test]
    fn a_pool_from_sums_or_merged_equals_one_added_sample_by_sample() {
        let samples = [(3u64, 4u64), (0, 2), (7, 5), (1, 1)];
        let mut whole = Pool::default();
        samples.iter().for_each(|&(a, s)| whole.add(a, s));
        let (mut first, mut second) = (Pool::default(), Pool::default());
        samples[..2].iter().for_each(|&(a, s)| first.add(a, s));
        samples[2..].iter().for_each(|&(a, s)| second.add(a, s));
        first.merge(&second);
        assert_eq!(first.pooled(), whole.pooled());
        let sum = |f: fn(f64, f64) -> f64| samples.iter().map(|&(a, s)| f(a as f64, s as f64)).sum::<f64>();
        let summed = Pool::from_sums(
            4,
            sum(|a, _| a),
            sum(|_, s| s),
            sum(|a, _| a * a),
            sum(|a, s| a * s),
            sum(|_, s| s * s),
        );
        assert_eq!(summed.pooled(), whole.pooled());
    }

    #[test]
    fn a_request_without_verify_steps_has_no_figure() {
        assert_eq!(SpecDecode::new(0, 0, 0, 3, vec![0, 0, 0, 0]), None);
        let d = SpecDecode::new(16, 48, 48, 3, vec![0, 0, 0, 16]).unwrap();
        assert_eq!(d.length(), 4.0);
        assert_eq!(Pool::default().pooled(), None);
        assert_eq!(pool(&[(0, 0)]).pooled(), None, "a sample without steps adds nothing");
    }

    #[test]
    fn requests_of_one_sample_add_up() {
        let mut a = SpecDecode::new(10, 20, 30, 3, vec![1, 2, 3, 4]).unwrap();
        a.add(&SpecDecode::new(5, 1, 15, 3, vec![4, 1, 0, 0]).unwrap());
        assert_eq!(
            a,
            SpecDecode { steps: 15, accepted: 21, drafted: 45, spec_tokens: 3, histogram: vec![5, 3, 3, 4] }
        );
        assert_eq!(SpecDecode::sum(&[]), None);
    }

    #[test]
    fn pooling_is_by_steps_not_a_mean_of_means() {
        // A short answer the draft got right and a long one it got wrong.
        let p = pool(&[(30, 10), (0, 100)]).pooled().unwrap();
        let mean_of_means = ((1.0 + 30.0 / 10.0) + (1.0 + 0.0 / 100.0)) / 2.0;
        assert_eq!(mean_of_means, 2.5);
        assert!((p.length - (1.0 + 30.0 / 110.0)).abs() < 1e-12, "{}", p.length);
        assert_eq!((p.samples, p.steps, p.accepted), (2, 110, 30));
    }

    #[test]
    fn the_interval_narrows_with_samples_and_is_empty_for_identical_ones() {
        let same = pool(&[(30, 10); 20]).pooled().unwrap();
        assert_eq!(same.length, 4.0);
        let i = same.interval.unwrap();
        assert!((i.low - 4.0).abs() < 1e-9 && (i.high - 4.0).abs() < 1e-9, "{i:?}");
        let few: Vec<(u64, u64)> = (0..5).map(|i| (10 + 5 * i, 20)).collect();
        let many: Vec<(u64, u64)> = (0..500).map(|i| (10 + 5 * (i % 5), 20)).collect();
        let (few, many) = (pool(&few).pooled().unwrap(), pool(&many).pooled().unwrap());
        let width = |p: &Pooled| p.interval.map(|i| i.high - i.low).unwrap();
        assert!((few.length - many.length).abs() < 1e-12);
        assert!(width(&many) < width(&few) / 5.0, "{} vs {}", width(&many), width(&few));
        assert!(few.interval.unwrap().contains(few.length));
        assert_eq!(pool(&[(5, 5)]).pooled().unwrap().interval, None, "one sample has no interval");
    }

    #[test]
    fn the_interval_matches_the_ratio_estimators_standard_error() {
        // By hand: r = 60/60 = 1; residuals aᵢ − sᵢ = (−10, 0, 10); s̄ = 20;
        // Σ(u²) = 200/400 = 0.5; se = sqrt(0.5 / (3·2)) = 0.288675…; t(2) = 4.303.
        let p = pool(&[(10, 20), (20, 20), (30, 20)]).pooled().unwrap();
        assert_eq!(p.length, 2.0);
        let half = p.interval.unwrap().high - 2.0;
        assert!((half - 4.303 * (0.5f64 / 6.0).sqrt()).abs() < 1e-9, "{half}");
    }

    #[test]
    fn pairing_removes_the_spread_between_prompts() {
        // Prompts differ a lot; draft B accepts exactly one token more per 10 steps on each.
        let mut pairs = Pairs::default();
        let mut unpaired_a = Pool::default();
        for i in 0..40u64 {
            let steps = 50 + 10 * (i % 7);
            let a = steps * (i % 3) / 2;
            pairs.add((a, steps), (a + steps / 10, steps));
            unpaired_a.add(a, steps);
        }
        let f = pairs.figure().unwrap();
        assert_eq!(f.pairs, 40);
        assert!((f.difference - 0.1).abs() < 1e-9, "{}", f.difference);
        assert_eq!((f.b_higher, f.a_higher), (40, 0));
        let paired = f.interval.unwrap();
        assert!(paired.low > 0.0, "the paired interval excludes no difference: {paired:?}");
        let unpaired_half = unpaired_a.pooled().unwrap().interval.map(|i| i.high - i.low).unwrap() / 2.0;
        assert!(paired.high - paired.low < unpaired_half, "{paired:?} vs ±{unpaired_half}");
    }

    #[test]
    fn the_paired_interval_matches_the_difference_of_linearised_terms() {
        let data = [((10u64, 20u64), (12u64, 20u64)), ((5, 10), (9, 10)), ((40, 40), (41, 40))];
        let mut pairs = Pairs::default();
        for (a, b) in data {
            pairs.add(a, b);
        }
        let f = pairs.figure().unwrap();
        // The same by hand, pair by pair.
        let ra = 55.0 / 70.0;
        let rb = 62.0 / 70.0;
        let (sa, sb) = (70.0 / 3.0, 70.0 / 3.0);
        let u: Vec<f64> = data
            .iter()
            .map(|&((aa, asx), (ba, bs))| {
                (ba as f64 - rb * bs as f64) / sb - (aa as f64 - ra * asx as f64) / sa
            })
            .collect();
        let mean = u.iter().sum::<f64>() / 3.0;
        let var = u.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (3.0 * 2.0);
        let half = f.interval.unwrap().high - f.difference;
        assert!((half - 4.303 * var.sqrt()).abs() < 1e-9, "{half} vs {}", 4.303 * var.sqrt());
        assert!((f.difference - (rb - ra)).abs() < 1e-12);
    }

    fn rows(category: &str, available: u64, acceptance: Option<f64>) -> CategoryRows {
        CategoryRows { category: Some(category.into()), available, acceptance }
    }

    #[test]
    fn a_weighted_draw_leans_toward_the_weak_categories() {
        // Draft of 3 tokens: at most 4 a step. Math accepts 1.5 (headroom 2.5), chat 3.5 (0.5).
        let q = weighted_quotas(
            600,
            4.0,
            3.0,
            &[rows("math", 10_000, Some(1.5)), rows("chat", 10_000, Some(3.5))],
        );
        assert_eq!(q.iter().map(|q| q.quota).collect::<Vec<_>>(), [500, 100]);
        assert_eq!(q[0].headroom, 2.5);
        // An unmeasured category takes the overall figure's headroom (4 − 3 = 1).
        let q = weighted_quotas(400, 4.0, 3.0, &[rows("math", 1000, Some(2.0)), rows("new", 1000, None)]);
        assert_eq!(q.iter().map(|q| q.quota).collect::<Vec<_>>(), [267, 133]);
        assert_eq!(q.iter().map(|q| q.quota).sum::<u64>(), 400);
    }

    #[test]
    fn a_category_short_of_rows_gives_the_rest_to_the_others() {
        let q = weighted_quotas(
            1000,
            4.0,
            3.0,
            &[rows("math", 50, Some(1.0)), rows("code", 10_000, Some(2.0)), rows("chat", 10_000, Some(3.0))],
        );
        assert_eq!(q[0].quota, 50, "all it has");
        assert_eq!(q[1].quota + q[2].quota, 950);
        assert_eq!(q[1].quota, 633, "950 split 2:1");
        // More than there is: every row.
        let q = weighted_quotas(10, 4.0, 3.0, &[rows("a", 3, Some(1.0)), rows("b", 4, Some(4.0))]);
        assert_eq!(q.iter().map(|q| q.quota).collect::<Vec<_>>(), [3, 4]);
        // A perfect category gets rows only once the others are used up.
        let q = weighted_quotas(5, 4.0, 3.0, &[rows("a", 3, Some(2.0)), rows("b", 100, Some(4.0))]);
        assert_eq!(q.iter().map(|q| q.quota).collect::<Vec<_>>(), [3, 2]);
        assert_eq!(weighted_quotas(0, 4.0, 3.0, &[rows("a", 3, Some(2.0))])[0].quota, 0);
    }

    #[test]
    fn bands_cover_every_length() {
        assert_eq!(length_band(0), "0–255");
        assert_eq!(length_band(255), "0–255");
        assert_eq!(length_band(256), "256–1,023");
        assert_eq!(length_band(4095), "1,024–4,095");
        assert_eq!(length_band(1_000_000), "16,384+");
    }
}
