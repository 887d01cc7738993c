//! Named server profiles: the engine and workload settings of a kind of server, so tests and
//! benchmarks can run against servers that behave differently under load. A profile is a list
//! of flags applied before the caller's own, which override it.
//!
//! - `flat-knee`: the generation rate stops rising at 25 running sequences (aggregate decode
//!   speed 1,500 tok/s, 60 tok/s per sequence alone), 200 sequences at most, lognormal
//!   completions with a median of 120 tokens up to 8,192. Past the knee a bigger batch only
//!   makes each request slower.
//! - `seed-deployment`: modelled on the seed's deployment (Kimi-K2.5 INT4 on 8 GPUs): a
//!   forward pass costs 32.5 ms plus 0.48 ms per decoding sequence, so the rate keeps rising
//!   with the batch (885 tok/s at 50, 1,242 at 100, 1,550 at 200, 1,650 at 256) until the KV
//!   cache is full and the scheduler preempts; completions average about 1,260 tokens with a
//!   tail to 8,192; prefill at 20,000 tok/s in chunks of 8,192 tokens, so a wave of new prompts
//!   dips the generation rate.
//! - `real-vllm-cpu`: calibrated against the real vLLM 0.32 CPU server of
//!   `shared/tools/real-vllm` (tiny random-weight model, 2 cores, `--max-num-seqs 64`) from its
//!   own concurrency sweep (vllm-sim/README.md, "Profiles"; `tests/profiles.rs` holds the
//!   profile to it): a step costs 11 ms plus 0.42 ms per running sequence, so the rate rises
//!   sublinearly (900 tok/s at 16, 1,300 at 32, 1,700 at 64) and stops at 64 running, where
//!   more requests only wait. Every answer runs to `max_tokens`.

use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    FlatKnee,
    SeedDeployment,
    RealVllmCpu,
}

impl Profile {
    pub const ALL: [Profile; 3] = [Profile::FlatKnee, Profile::SeedDeployment, Profile::RealVllmCpu];

    pub fn name(self) -> &'static str {
        match self {
            Profile::FlatKnee => "flat-knee",
            Profile::SeedDeployment => "seed-deployment",
            Profile::RealVllmCpu => "real-vllm-cpu",
        }
    }

    /// The flags this profile stands for.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Profile::FlatKnee => &[
                "--aggregate-tokens-per-s",
                "1500",
                "--per-seq-tokens-per-s",
                "60",
                "--max-num-seqs",
                "200",
                "--median-completion-tokens",
                "120",
                "--completion-sigma",
                "1.2",
                "--completion-cap",
                "8192",
            ],
            Profile::SeedDeployment => &[
                "--aggregate-tokens-per-s",
                "0",
                "--per-seq-tokens-per-s",
                "0",
                "--step-base-ms",
                "32.5",
                "--step-ms-per-seq",
                "0.48",
                "--prefill-tokens-per-s",
                "20000",
                "--max-num-batched-tokens",
                "8192",
                "--max-num-seqs",
                "1024",
                "--kv-cache-tokens",
                "393216",
                "--median-completion-tokens",
                "800",
                "--completion-sigma",
                "1.0",
                "--completion-cap",
                "8192",
            ],
            Profile::RealVllmCpu => &[
                "--aggregate-tokens-per-s",
                "0",
                "--per-seq-tokens-per-s",
                "0",
                "--step-base-ms",
                "11.05",
                "--step-ms-per-seq",
                "0.417",
                "--prefill-tokens-per-s",
                "50000",
                "--max-num-batched-tokens",
                "2048",
                "--max-num-seqs",
                "64",
                "--max-model-len",
                "4096",
                "--kv-cache-tokens",
                "131072",
                "--median-completion-tokens",
                "100000",
                "--completion-sigma",
                "0",
                "--completion-cap",
                "100000",
            ],
        }
    }
}
