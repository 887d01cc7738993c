//! Generation runs: their settings, and the states and outcomes of their samples.

use crate::export::ExportSplit;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Whether the target model thinks before answering, sent as `chat_template_kwargs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Thinking {
    /// `enable_thinking: true` for every sample.
    On,
    /// `enable_thinking: false` for every sample.
    Off,
    /// Each sample thinks with probability `on_ratio`, fixed per sample by the run's seed, so a
    /// draft model learns both modes.
    Mix { on_ratio: f64 },
    /// Send no `chat_template_kwargs`; the server's template decides.
    ServerDefault,
    /// Each prompt keeps the mode it had in the run or export it comes from (a run drawing
    /// from one: `Selection::Run` or `Selection::Export`), so an evaluation sends exactly what
    /// was generated before.
    AsSource,
}

/// Which assistant turns of a conversation are regenerated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnMode {
    /// Keep the conversation up to its last assistant turn and regenerate that turn.
    LastAssistant,
    /// Send only the first user turn (and the system prompt) and regenerate its answer.
    FirstUser,
    /// Regenerate every assistant turn in order, each given the regenerated history.
    EveryAssistant,
}

impl TurnMode {
    /// What the run page shows.
    pub fn describe(self) -> &'static str {
        match self {
            Self::LastAssistant => "the last assistant turn",
            Self::FirstUser => "the answer to the first user turn",
            Self::EveryAssistant => "every assistant turn, in order",
        }
    }
}

/// How many requests may be outstanding per endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Concurrency {
    /// Driven by the server's own load (`/metrics`), between these bounds.
    Adaptive { min: u32, max: u32 },
    /// Exactly this many per endpoint, shared by all worker processes.
    Fixed { limit: u32 },
}

/// Which dataset rows become samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Selection {
    All,
    /// Only rows whose category is one of these.
    Categories {
        categories: Vec<String>,
    },
    /// `count` rows drawn uniformly with `seed` (the same seed draws the same rows).
    Sample {
        count: u64,
        seed: u64,
    },
    /// The prompts of an earlier run: the same rows of the same dataset.
    Run {
        run_id: i64,
    },
    /// The prompts of one split of a finished export (its rows must all be of one dataset).
    Export {
        export_id: i64,
        split: ExportSplit,
    },
    /// `count` rows drawn with `seed`, with a quota per category weighted toward the categories
    /// where evaluation run `evaluation_run_id` accepted least
    /// (`acceptance::weighted_quotas`).
    Weighted {
        evaluation_run_id: i64,
        count: u64,
        seed: u64,
    },
}

impl Selection {
    /// Whether the rows come from an earlier run or export, whose thinking modes a run can keep.
    pub fn has_source_modes(&self) -> bool {
        matches!(self, Selection::Run { .. } | Selection::Export { .. })
    }
}

/// Everything a run sends and how it behaves. Stored with the run as versioned JSON
/// (`stored::to_stored`); every field added after the first release has a default, so a run
/// stored by an older release still runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub model: String,
    pub endpoint_ids: Vec<i64>,
    pub max_tokens: u32,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default = "default_thinking")]
    pub thinking: Thinking,
    #[serde(default = "default_turns")]
    pub turns: TurnMode,
    #[serde(default = "default_concurrency")]
    pub concurrency: Concurrency,
    /// A request is cut only when no token arrives for this long.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_secs: u32,
    /// Optional cap on one request's total time, for servers that must not be held forever.
    #[serde(default)]
    pub deadline_secs: Option<u32>,
    /// Tries per sample, the first included.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// The fewest tokens a streamed chunk carries (servers without `stream_interval` ignore it).
    /// The engine asks for more, a chunk every few seconds per request, once it knows the
    /// server's per-request rate (`engine::generation::chunking`).
    #[serde(default = "default_stream_interval")]
    pub stream_interval: u32,
    /// This run's part of a shared endpoint's adaptive capacity against other runs on it:
    /// a run of weight 2 gets twice the requests of a run of weight 1.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Whether the model must call one of a row's tools, may, or must not (sent only with rows
    /// that offer tools).
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Whether a turn may make several calls. Off, a server constraining a `required` call
    /// (guided decoding) stops after one: a list of calls has no end a model must reach.
    #[serde(default = "default_parallel_tool_calls")]
    pub parallel_tool_calls: bool,
}

fn default_parallel_tool_calls() -> bool {
    true
}

/// OpenAI's `tool_choice` for rows that offer tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides whether to call a tool (the server needs `--enable-auto-tool-choice`).
    #[default]
    Auto,
    /// The model must call a tool; the server constrains its output to a valid call.
    Required,
    /// The tools are shown to the model, which answers in text.
    None,
}

impl ToolChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Required => "required",
            Self::None => "none",
        }
    }
}

fn default_weight() -> u32 {
    RunSettings::DEFAULT_WEIGHT
}

fn default_thinking() -> Thinking {
    Thinking::ServerDefault
}

fn default_turns() -> TurnMode {
    TurnMode::LastAssistant
}

fn default_concurrency() -> Concurrency {
    RunSettings::DEFAULT_CONCURRENCY
}

fn default_idle_timeout() -> u32 {
    RunSettings::DEFAULT_IDLE_TIMEOUT_SECS
}

fn default_max_attempts() -> u32 {
    RunSettings::DEFAULT_MAX_ATTEMPTS
}

fn default_stream_interval() -> u32 {
    RunSettings::DEFAULT_STREAM_INTERVAL
}

impl crate::stored::Stored for RunSettings {
    const WHAT: &'static str = "run settings";
    /// 1: the first release (no `weight`, no `version`); 2: `weight`.
    const VERSION: u32 = 2;
}

impl RunSettings {
    pub const DEFAULT_IDLE_TIMEOUT_SECS: u32 = 120;
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
    pub const DEFAULT_STREAM_INTERVAL: u32 = 16;
    pub const DEFAULT_WEIGHT: u32 = 1;
    pub const DEFAULT_CONCURRENCY: Concurrency = Concurrency::Adaptive { min: 4, max: 512 };

    pub fn with_defaults(model: impl Into<String>, endpoint_ids: Vec<i64>, max_tokens: u32) -> Self {
        Self {
            model: model.into(),
            endpoint_ids,
            max_tokens,
            temperature: None,
            top_p: None,
            seed: None,
            system_prompt: None,
            thinking: Thinking::ServerDefault,
            turns: TurnMode::LastAssistant,
            concurrency: Self::DEFAULT_CONCURRENCY,
            idle_timeout_secs: Self::DEFAULT_IDLE_TIMEOUT_SECS,
            deadline_secs: None,
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            stream_interval: Self::DEFAULT_STREAM_INTERVAL,
            weight: Self::DEFAULT_WEIGHT,
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: true,
        }
    }

    /// Every problem with these settings that can be seen without asking a server, each
    /// phrased as what to change. Empty when the settings are usable.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.model.trim().is_empty() {
            problems.push("choose the model to generate with".to_string());
        }
        if self.endpoint_ids.is_empty() {
            problems.push("choose at least one endpoint".to_string());
        }
        if self.max_tokens == 0 {
            problems.push("max_tokens must be at least 1".to_string());
        }
        if let Some(t) = self.temperature {
            if !(0.0..=2.0).contains(&t) {
                problems.push(format!("temperature must be between 0 and 2, not {t}"));
            }
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                problems.push(format!("top_p must be above 0 and at most 1, not {p}"));
            }
        }
        if let Thinking::Mix { on_ratio } = self.thinking {
            if !(0.0..=1.0).contains(&on_ratio) {
                problems.push(format!("the thinking ratio must be between 0 and 1, not {on_ratio}"));
            }
        }
        match self.concurrency {
            Concurrency::Adaptive { min, max } if min == 0 || min > max => problems
                .push(format!("adaptive concurrency needs 1 ≤ min ≤ max, got min {min} and max {max}")),
            Concurrency::Fixed { limit: 0 } => problems.push("fixed concurrency must be at least 1".into()),
            _ => {}
        }
        if self.idle_timeout_secs == 0 {
            problems.push("the idle timeout must be at least 1 s".to_string());
        }
        if self.deadline_secs == Some(0) {
            problems.push("the deadline must be at least 1 s, or unset".to_string());
        }
        if self.max_attempts == 0 {
            problems.push("attempts must be at least 1".to_string());
        }
        if self.stream_interval == 0 {
            problems.push("the stream interval must be at least 1 token".to_string());
        }
        if !(1..=1000).contains(&self.weight) {
            problems.push(format!("the weight must be between 1 and 1000, not {}", self.weight));
        }
        problems
    }
}

/// Where a sample is in its life. Terminal states carry the outcome: what really came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "sample_state", rename_all = "snake_case"))]
pub enum SampleState {
    /// Waiting for a worker (possibly not before a backoff time).
    Pending,
    /// Leased by a worker that is generating it.
    Running,
    /// Finished normally with an answer.
    Ok,
    /// Cut at `max_tokens` (finish_reason `length`).
    Truncated,
    /// No token arrived for the idle timeout (or the deadline passed) on the last attempt.
    TimedOut,
    /// A non-retryable error, or every attempt failed.
    Failed,
    /// The server finished but sent no answer text.
    Empty,
}

impl SampleState {
    pub const ALL: [SampleState; 7] = [
        SampleState::Pending,
        SampleState::Running,
        SampleState::Ok,
        SampleState::Truncated,
        SampleState::TimedOut,
        SampleState::Failed,
        SampleState::Empty,
    ];
    pub const OUTCOMES: [SampleState; 5] = [
        SampleState::Ok,
        SampleState::Truncated,
        SampleState::TimedOut,
        SampleState::Failed,
        SampleState::Empty,
    ];

    pub fn is_terminal(self) -> bool {
        !matches!(self, SampleState::Pending | SampleState::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SampleState::Pending => "pending",
            SampleState::Running => "running",
            SampleState::Ok => "ok",
            SampleState::Truncated => "truncated",
            SampleState::TimedOut => "timed_out",
            SampleState::Failed => "failed",
            SampleState::Empty => "empty",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

impl fmt::Display for SampleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "run_status", rename_all = "snake_case"))]
pub enum RunStatus {
    Running,
    Paused,
    Completed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Completed => "completed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_usable_and_bad_values_are_named() {
        let ok = RunSettings::with_defaults("m", vec![1], 1024);
        assert!(ok.problems().is_empty(), "{:?}", ok.problems());
        let mut bad = ok.clone();
        bad.temperature = Some(3.0);
        bad.concurrency = Concurrency::Adaptive { min: 10, max: 2 };
        bad.endpoint_ids.clear();
        let problems = bad.problems().join("; ");
        assert!(problems.contains("temperature must be between 0 and 2, not 3"), "{problems}");
        assert!(problems.contains("min 10 and max 2"), "{problems}");
        assert!(problems.contains("at least one endpoint"), "{problems}");
    }

    #[test]
    fn settings_round_trip_through_json() {
        let mut s = RunSettings::with_defaults("qwen", vec![1, 2], 4096);
        s.thinking = Thinking::Mix { on_ratio: 0.5 };
        s.concurrency = Concurrency::Fixed { limit: 64 };
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<RunSettings>(&json).unwrap(), s);
    }

    #[test]
    fn only_outcomes_are_terminal() {
        for state in SampleState::ALL {
            assert_eq!(state.is_terminal(), SampleState::OUTCOMES.contains(&state), "{state}");
            assert_eq!(SampleState::parse(state.as_str()), Some(state));
        }
    }
}
