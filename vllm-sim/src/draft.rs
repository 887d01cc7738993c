//! A speculative-decoding draft, as vLLM 0.32 reports it: per request (`metrics.speculative_decoding`
//! with `--per-request-spec-decode-metrics`) and in the `spec_decode` counters of `/metrics`.
//!
//! Each verify step proposes `num_speculative_tokens` tokens; each is accepted with the
//! configured probability while the ones before it were, and the step emits its accepted tokens
//! and the target's own one. The first token comes from the prefill, without a step. Acceptance
//! can differ by prompt text (a word a dataset category's prompts carry), so a test can make one
//! category weak and see the product find it. Draws are fixed per prompt, like its length.

use crate::hash::mix64;
use clap::Args;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::Serialize;

#[derive(Clone, Debug, Args)]
pub struct DraftSettings {
    /// Draft tokens proposed per verify step; 0 serves no draft (no `spec_decode` metrics).
    #[arg(long, default_value_t = 0)]
    pub num_speculative_tokens: u32,

    /// Chance that a draft token is accepted, given the ones before it in the step were.
    #[arg(long, default_value_t = 0.7)]
    pub draft_acceptance: f64,

    /// `TEXT=P`: prompts whose messages contain TEXT accept with chance P instead (repeatable;
    /// the first that matches wins).
    #[arg(long = "draft-acceptance-if-prompt-contains", value_parser = parse_rule)]
    pub draft_acceptance_rules: Vec<AcceptanceRule>,

    /// Report each request's figures on its last chunk (vLLM's `--per-request-spec-decode-metrics
    /// summary`); without it only `/metrics` tells.
    #[arg(long)]
    pub per_request_spec_decode_metrics: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AcceptanceRule {
    pub contains: String,
    pub chance: f64,
}

fn parse_rule(raw: &str) -> Result<AcceptanceRule, String> {
    let (contains, chance) =
        raw.rsplit_once('=').ok_or_else(|| format!("write TEXT=P (a chance from 0 to 1), not `{raw}`"))?;
    let chance: f64 = chance.trim().parse().map_err(|_| format!("`{chance}` is not a chance from 0 to 1"))?;
    if contains.is_empty() {
        return Err("the text to look for is empty".into());
    }
    Ok(AcceptanceRule { contains: contains.to_string(), chance })
}

impl DraftSettings {
    pub fn validate(&self) -> Result<(), String> {
        let chances = std::iter::once(self.draft_acceptance)
            .chain(self.draft_acceptance_rules.iter().map(|r| r.chance));
        for chance in chances {
            if !(0.0..=1.0).contains(&chance) {
                return Err(format!("a draft acceptance chance must be from 0 to 1, got {chance}"));
            }
        }
        if self.num_speculative_tokens > 64 {
            return Err(format!(
                "num_speculative_tokens must be at most 64, got {}",
                self.num_speculative_tokens
            ));
        }
        Ok(())
    }

    pub fn serves_draft(&self) -> bool {
        self.num_speculative_tokens > 0
    }

    /// The chance of acceptance for a prompt; `prompt_contains` says whether its text holds a
    /// given piece.
    pub fn chance_for(&self, prompt_contains: impl Fn(&str) -> bool) -> f64 {
        self.draft_acceptance_rules
            .iter()
            .find(|rule| prompt_contains(&rule.contains))
            .map_or(self.draft_acceptance, |rule| rule.chance)
    }
}

/// `metrics.speculative_decoding` of one request, as vLLM names the fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpecDecodeMetrics {
    pub mean_acceptance_length: f64,
    pub draft_acceptance_rate: f64,
    pub acceptance_histogram: Vec<u32>,
    pub num_spec_steps: u32,
    pub num_accepted_draft_tokens: u32,
    pub num_draft_tokens: u32,
    pub num_spec_tokens: u32,
}

/// The verify steps of a completion of `tokens` tokens under a draft of `k` tokens a step, each
/// accepted with `chance` while its predecessors were. `seed` fixes the draws.
pub fn verify(tokens: u32, k: u32, chance: f64, seed: u64) -> SpecDecodeMetrics {
    let mut rng = StdRng::seed_from_u64(mix64(seed ^ 0x5eed_d4af));
    let mut histogram = vec![0u32; k as usize + 1];
    let mut emitted = 1; // the prefill's token
    let (mut steps, mut accepted) = (0u32, 0u32);
    while emitted < tokens {
        let mut step = 0;
        while step < k && rng.gen::<f64>() < chance {
            step += 1;
        }
        histogram[step as usize] += 1;
        steps += 1;
        accepted += step;
        emitted += step + 1;
    }
    let drafted = steps * k;
    SpecDecodeMetrics {
        // vLLM's own formulas (`RequestSpecDecodeMetrics.to_dict`), 1.0 and 0.0 without steps.
        mean_acceptance_length: if steps > 0 { 1.0 + f64::from(accepted) / f64::from(steps) } else { 1.0 },
        draft_acceptance_rate: if drafted > 0 { f64::from(accepted) / f64::from(drafted) } else { 0.0 },
        acceptance_histogram: histogram,
        num_spec_steps: steps,
        num_accepted_draft_tokens: accepted,
        num_draft_tokens: drafted,
        num_spec_tokens: k,
    }
}

/// The `metrics` object of a response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseMetrics {
    pub speculative_decoding: SpecDecodeMetrics,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draft_accepted_every_time_emits_k_plus_one_a_step() {
        let m = verify(65, 3, 1.0, 7);
        assert_eq!((m.num_spec_steps, m.num_accepted_draft_tokens, m.num_draft_tokens), (16, 48, 48));
        assert_eq!(m.acceptance_histogram, [0, 0, 0, 16]);
        assert_eq!(m.mean_acceptance_length, 4.0);
    }

    #[test]
    fn a_draft_never_accepted_takes_a_step_a_token() {
        let m = verify(10, 3, 0.0, 7);
        assert_eq!((m.num_spec_steps, m.num_accepted_draft_tokens), (9, 0));
        assert_eq!(m.mean_acceptance_length, 1.0);
        assert_eq!(verify(1, 3, 0.5, 7).num_spec_steps, 0, "one token is the prefill's alone");
    }

    #[test]
    fn acceptance_follows_the_chance_and_is_fixed_by_the_seed() {
        let high = verify(20_000, 4, 0.8, 1);
        let low = verify(20_000, 4, 0.3, 1);
        assert!(high.mean_acceptance_length > 3.0 && low.mean_acceptance_length < 1.5, "{high:?} {low:?}");
        assert_eq!(verify(500, 4, 0.6, 9), verify(500, 4, 0.6, 9));
    }

    #[test]
    fn rules_pick_the_chance_by_prompt_text() {
        let settings = DraftSettings {
            num_speculative_tokens: 3,
            draft_acceptance: 0.7,
            draft_acceptance_rules: vec![parse_rule("MATH=0.2").unwrap(), parse_rule("a=b=0.5").unwrap()],
            per_request_spec_decode_metrics: true,
        };
        settings.validate().unwrap();
        let prompt = |text: &'static str| move |piece: &str| text.contains(piece);
        assert_eq!(settings.chance_for(prompt("solve this MATH problem")), 0.2);
        assert_eq!(settings.chance_for(prompt("x a=b y")), 0.5);
        assert_eq!(settings.chance_for(prompt("hello")), 0.7);
        assert!(parse_rule("nothing").is_err());
        assert!(DraftSettings { draft_acceptance: 1.5, ..settings }.validate().is_err());
    }
}
