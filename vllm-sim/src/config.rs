//! Everything a simulated server is set up with.
//!
//! The clap attributes are the single source of defaults: `Default` parses an empty command
//! line, so the CLI help, the binary and in-process users can never disagree.

use crate::draft::DraftSettings;
use crate::faults::FaultSettings;
use crate::profile::Profile;
use clap::{Args, FromArgMatches, ValueEnum};
use serde::{Deserialize, Serialize};

/// Tokens per KV-cache block, vLLM's default on GPUs. Capacity is allocated in whole blocks.
pub const BLOCK_SIZE: u32 = 16;

#[derive(Clone, Debug, Args)]
pub struct SimConfig {
    /// Model name served and required in requests (vLLM's `--served-model-name`).
    #[arg(long, default_value = "sim-model")]
    pub model: String,

    /// Context length: prompt plus completion tokens of one request.
    #[arg(long, default_value_t = 32_768)]
    pub max_model_len: u32,

    #[command(flatten)]
    pub engine: EngineSettings,

    #[command(flatten)]
    pub lengths: LengthSettings,

    /// Speed-up of simulated time: 20 makes every rate 20× faster and every delay 20× shorter.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,

    /// Seed of every pseudo-random choice (completion lengths, fault draws).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Field name(s) that carry reasoning text in responses.
    #[arg(long, value_enum, default_value_t = ReasoningField::Reasoning)]
    pub reasoning_field: ReasoningField,

    /// Answer errors in the flat pre-0.10.1 shape `{"object":"error","message",...}`.
    #[arg(long)]
    pub legacy_error_shape: bool,

    /// Serve no `/metrics` endpoint (404), like a server behind a proxy that hides it.
    #[arg(long)]
    pub no_metrics: bool,

    /// Ignore the `stream_interval` request field, like servers older than its introduction.
    #[arg(long)]
    pub ignore_stream_interval: bool,

    /// Ignore the `return_token_ids` request field, like servers before vLLM 0.10.2.
    #[arg(long)]
    pub ignore_return_token_ids: bool,

    /// Run no tool parser, as vLLM started without `--enable-auto-tool-choice
    /// --tool-call-parser`: a request offering tools with `tool_choice` auto (or none given)
    /// gets vLLM's 400.
    #[arg(long)]
    pub no_tool_parser: bool,

    /// Report `reasoning_tokens: 0` in every usage, as real vLLM 0.32 (deepseek_r1 parser) did
    /// on 1,167 of 2,038 samples holding reasoning.
    #[arg(long)]
    pub zero_reasoning_tokens: bool,

    #[command(flatten)]
    pub faults: FaultSettings,

    #[command(flatten)]
    pub draft: DraftSettings,
}

/// The continuous-batching engine: speed, batch limits and KV-cache capacity.
#[derive(Clone, Debug, Args)]
pub struct EngineSettings {
    /// Decode tokens per second shared by all running sequences (0 = unlimited).
    #[arg(long, default_value_t = 2_500.0)]
    pub aggregate_tokens_per_s: f64,

    /// Decode tokens per second of one sequence when the batch is small (0 = unlimited).
    #[arg(long, default_value_t = 60.0)]
    pub per_seq_tokens_per_s: f64,

    /// Prompt tokens prefilled per second (0 = unlimited).
    #[arg(long, default_value_t = 16_000.0)]
    pub prefill_tokens_per_s: f64,

    /// Fixed cost of one forward pass in simulated milliseconds, whatever the batch (0 = none).
    /// With `--step-ms-per-seq` it gives a rate that keeps rising with the batch, ever more
    /// slowly, as on a GPU server: n / (base + n × per-seq) tokens per second.
    #[arg(long, default_value_t = 0.0)]
    pub step_base_ms: f64,

    /// Cost of one more decoding sequence in a forward pass, in simulated milliseconds.
    #[arg(long, default_value_t = 0.0)]
    pub step_ms_per_seq: f64,

    /// Most sequences running at once; the rest wait in a FCFS queue.
    #[arg(long, default_value_t = 256)]
    pub max_num_seqs: u32,

    /// Token budget of one step: one per decoding sequence, the rest for prefill chunks.
    #[arg(long, default_value_t = 2_048)]
    pub max_num_batched_tokens: u32,

    /// KV-cache capacity in tokens, shared by every running sequence's context.
    #[arg(long, default_value_t = 262_144)]
    pub kv_cache_tokens: u32,
}

/// Completion lengths: lognormal, fixed per prompt.
#[derive(Clone, Debug, Args)]
pub struct LengthSettings {
    /// Median completion length in tokens (reasoning plus answer).
    #[arg(long, default_value_t = 700)]
    pub median_completion_tokens: u32,

    /// Lognormal sigma of completion lengths; larger means a heavier tail.
    #[arg(long, default_value_t = 1.0)]
    pub completion_sigma: f64,

    /// Longest natural completion; the tail of the distribution is clipped here.
    #[arg(long, default_value_t = 8_192)]
    pub completion_cap: u32,

    /// Smallest share of a completion spent reasoning.
    #[arg(long, default_value_t = 0.4)]
    pub reasoning_share_min: f64,

    /// Largest share of a completion spent reasoning.
    #[arg(long, default_value_t = 0.8)]
    pub reasoning_share_max: f64,
}

/// Which response field(s) carry reasoning text; vLLM renamed the field in 0.11.1 and sent
/// both for a while.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum ReasoningField {
    Reasoning,
    ReasoningContent,
    Both,
}

impl ReasoningField {
    pub fn uses_reasoning(self) -> bool {
        matches!(self, Self::Reasoning | Self::Both)
    }

    pub fn uses_reasoning_content(self) -> bool {
        matches!(self, Self::ReasoningContent | Self::Both)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("invalid simulator configuration: {0}")]
pub struct InvalidConfig(String);

impl From<String> for InvalidConfig {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl SimConfig {
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let engine = &self.engine;
        let lengths = &self.lengths;
        let fail = |message: String| Err(InvalidConfig(message));
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return fail(format!("time_scale must be positive, got {}", self.time_scale));
        }
        for (name, rate) in [
            ("aggregate_tokens_per_s", engine.aggregate_tokens_per_s),
            ("per_seq_tokens_per_s", engine.per_seq_tokens_per_s),
            ("prefill_tokens_per_s", engine.prefill_tokens_per_s),
            ("step_base_ms", engine.step_base_ms),
            ("step_ms_per_seq", engine.step_ms_per_seq),
        ] {
            if !(rate.is_finite() && rate >= 0.0) {
                return fail(format!("{name} must be 0 (unlimited) or positive, got {rate}"));
            }
        }
        if self.max_model_len == 0 || engine.max_num_seqs == 0 {
            return fail("max_model_len and max_num_seqs must be at least 1".into());
        }
        // vLLM refuses both at startup: every decoding sequence needs one token of the step
        // budget, and a lone request of full context length must fit in the cache.
        if engine.max_num_batched_tokens < engine.max_num_seqs {
            return fail(format!(
                "max_num_batched_tokens ({}) must be at least max_num_seqs ({})",
                engine.max_num_batched_tokens, engine.max_num_seqs
            ));
        }
        if engine.kv_cache_tokens < self.max_model_len + BLOCK_SIZE {
            return fail(format!(
                "kv_cache_tokens ({}) cannot hold one request of max_model_len ({})",
                engine.kv_cache_tokens, self.max_model_len
            ));
        }
        if lengths.median_completion_tokens == 0 || lengths.completion_cap < 2 {
            return fail("median_completion_tokens must be ≥ 1 and completion_cap ≥ 2".into());
        }
        if !(lengths.completion_sigma.is_finite() && lengths.completion_sigma >= 0.0) {
            return fail(format!("completion_sigma must be ≥ 0, got {}", lengths.completion_sigma));
        }
        if !(0.0 <= lengths.reasoning_share_min
            && lengths.reasoning_share_min <= lengths.reasoning_share_max
            && lengths.reasoning_share_max <= 1.0)
        {
            return fail("reasoning shares must satisfy 0 ≤ min ≤ max ≤ 1".into());
        }
        self.draft.validate().map_err(InvalidConfig)?;
        self.faults.validate().map_err(InvalidConfig)
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        clap_defaults()
    }
}

impl SimConfig {
    /// A named profile's settings with `overrides` (flags as on the command line) on top.
    pub fn from_profile(profile: Profile, overrides: &[&str]) -> Result<Self, clap::Error> {
        let command = Self::augment_args(clap::Command::new("vllm-sim")).args_override_self(true);
        let args = std::iter::once("vllm-sim")
            .chain(profile.args().iter().copied())
            .chain(overrides.iter().copied());
        Self::from_arg_matches(&command.try_get_matches_from(args)?)
    }
}

/// The value a clap `Args` type takes on an empty command line.
pub(crate) fn clap_defaults<T: Args + FromArgMatches>() -> T {
    let matches = T::augment_args(clap::Command::new("defaults"))
        .try_get_matches_from(["defaults"])
        .expect("every flag has a default");
    T::from_arg_matches(&matches).expect("defaults parse")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_come_from_the_clap_attributes_and_are_valid() {
        let config = SimConfig::default();
        assert_eq!(config.model, "sim-model");
        assert_eq!(config.engine.max_num_seqs, 256);
        assert_eq!(config.lengths.completion_cap, 8_192);
        assert_eq!(config.time_scale, 1.0);
        config.validate().unwrap();
    }

    #[test]
    fn profiles_are_valid_and_later_flags_override_them() {
        for profile in Profile::ALL {
            let config = SimConfig::from_profile(profile, &[]).unwrap();
            config.validate().unwrap_or_else(|e| panic!("{}: {e}", profile.name()));
        }
        let flat = SimConfig::from_profile(Profile::FlatKnee, &["--max-num-seqs", "64"]).unwrap();
        assert_eq!(flat.engine.max_num_seqs, 64);
        assert_eq!(flat.engine.aggregate_tokens_per_s, 1_500.0);
        let seed = SimConfig::from_profile(Profile::SeedDeployment, &[]).unwrap();
        assert_eq!(seed.engine.step_ms_per_seq, 0.48);
    }

    #[test]
    fn a_cache_smaller_than_one_full_context_is_refused() {
        let mut config = SimConfig::default();
        config.engine.kv_cache_tokens = config.max_model_len;
        assert!(config.validate().is_err());
    }
}
