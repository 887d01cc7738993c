//! How long a prompt's completion is, and how much of it is reasoning: heavy-tailed
//! (lognormal, clipped) and fixed per prompt, so retries and repeats see the same work.

use crate::config::LengthSettings;
use crate::hash::mix64;
use rand::{rngs::StdRng, Rng, SeedableRng};

/// The natural (unconstrained by `max_tokens`) completion of a prompt: reasoning first,
/// then the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CompletionShape {
    pub reasoning_tokens: u32,
    pub answer_tokens: u32,
}

impl CompletionShape {
    pub fn total(&self) -> u32 {
        self.reasoning_tokens + self.answer_tokens
    }

    /// With thinking disabled the model writes the same answer with no reasoning before it.
    pub fn without_reasoning(self) -> Self {
        Self { reasoning_tokens: 0, ..self }
    }
}

/// Draws the shape of the completion for the prompt with `fingerprint` on a server seeded
/// with `seed`.
pub fn completion_shape(settings: &LengthSettings, seed: u64, fingerprint: u64) -> CompletionShape {
    let mut rng = StdRng::seed_from_u64(mix64(fingerprint ^ seed));
    // Box–Muller; `1 - u` keeps the logarithm's argument in (0, 1].
    let (u1, u2): (f64, f64) = (1.0 - rng.gen::<f64>(), rng.gen());
    let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    let length = f64::from(settings.median_completion_tokens) * (settings.completion_sigma * normal).exp();
    let total = (length.round() as u32).clamp(2, settings.completion_cap);

    let share = rng.gen_range(settings.reasoning_share_min..=settings.reasoning_share_max);
    // At least one answer token, so a natural end always has content.
    let reasoning_tokens = ((f64::from(total) * share).round() as u32).min(total - 1);
    CompletionShape { reasoning_tokens, answer_tokens: total - reasoning_tokens }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::clap_defaults;

    fn settings() -> LengthSettings {
        clap_defaults()
    }

    #[test]
    fn the_same_prompt_always_gets_the_same_shape() {
        let settings = settings();
        assert_eq!(completion_shape(&settings, 3, 99), completion_shape(&settings, 3, 99));
        let distinct: std::collections::HashSet<_> =
            (0..50).map(|prompt| completion_shape(&settings, 3, prompt)).collect();
        assert!(distinct.len() > 40);
    }

    #[test]
    fn lengths_are_heavy_tailed_around_the_median_and_capped() {
        let settings = settings();
        let mut totals: Vec<u32> = (0..20_000).map(|p| completion_shape(&settings, 0, p).total()).collect();
        totals.sort_unstable();
        let median = totals[totals.len() / 2];
        let p99 = totals[totals.len() * 99 / 100];
        assert!((630..770).contains(&median), "median {median}");
        // Lognormal with sigma 1: the 99th percentile is ~10× the median.
        assert!(p99 > 6 * median, "p99 {p99} vs median {median}");
        assert!(*totals.last().unwrap() <= 8_192);
        assert!(totals.iter().filter(|&&t| t == 8_192).count() > 0, "the cap clips the tail");
    }

    #[test]
    fn reasoning_takes_its_configured_share_and_leaves_an_answer() {
        let settings = settings();
        for prompt in 0..2_000 {
            let shape = completion_shape(&settings, 0, prompt);
            assert!(shape.answer_tokens >= 1);
            let share = f64::from(shape.reasoning_tokens) / f64::from(shape.total());
            assert!((0.3..=0.9).contains(&share), "share {share} for {shape:?}");
        }
    }
}
