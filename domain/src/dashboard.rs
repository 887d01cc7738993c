//! What the run pages show: the runs list, a run's live snapshot (sent every second over
//! server-sent events), its throughput history and the selection-bias report.

use crate::generation::{RunSettings, RunStatus, SampleState};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// How many samples of a run are in each state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StateCounts {
    pub pending: i64,
    pub running: i64,
    pub ok: i64,
    pub truncated: i64,
    pub timed_out: i64,
    pub failed: i64,
    pub empty: i64,
}

impl StateCounts {
    pub fn add(&mut self, state: SampleState, n: i64) {
        *self.slot(state) += n;
    }

    pub fn get(&self, state: SampleState) -> i64 {
        match state {
            SampleState::Pending => self.pending,
            SampleState::Running => self.running,
            SampleState::Ok => self.ok,
            SampleState::Truncated => self.truncated,
            SampleState::TimedOut => self.timed_out,
            SampleState::Failed => self.failed,
            SampleState::Empty => self.empty,
        }
    }

    fn slot(&mut self, state: SampleState) -> &mut i64 {
        match state {
            SampleState::Pending => &mut self.pending,
            SampleState::Running => &mut self.running,
            SampleState::Ok => &mut self.ok,
            SampleState::Truncated => &mut self.truncated,
            SampleState::TimedOut => &mut self.timed_out,
            SampleState::Failed => &mut self.failed,
            SampleState::Empty => &mut self.empty,
        }
    }

    pub fn total(&self) -> i64 {
        SampleState::ALL.iter().map(|s| self.get(*s)).sum()
    }

    /// Samples in a terminal state.
    pub fn finished(&self) -> i64 {
        SampleState::OUTCOMES.iter().map(|s| self.get(*s)).sum()
    }

    /// Finished samples that did not end `ok`.
    pub fn not_ok(&self) -> i64 {
        self.finished() - self.ok
    }
}

/// One line of the runs list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunListItem {
    pub id: i64,
    pub name: String,
    pub status: RunStatus,
    pub dataset: String,
    pub model: String,
    pub created_by: Option<String>,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
    pub counts: StateCounts,
    /// Client tokens/s in one-minute buckets over the run's last half hour of activity.
    pub sparkline: Vec<f64>,
}

/// A vLLM server as one run uses it, at the moment of the snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointLive {
    pub endpoint_id: i64,
    pub name: String,
    pub healthy: bool,
    pub concurrency_limit: i32,
    pub limit_reason: String,
    pub limit_changed_at: OffsetDateTime,
    /// Requests outstanding from this run, as the workers last recorded.
    pub in_flight: i32,
    /// From the server's own `/metrics`; `None` when it has none.
    pub prompt_tps: Option<f64>,
    pub generation_tps: Option<f64>,
    pub running: Option<i32>,
    pub waiting: Option<i32>,
    pub kv_usage: Option<f64>,
    /// When these figures were recorded (they lag by at most a few seconds).
    pub at: Option<OffsetDateTime>,
}

/// Mean and percentiles of a length, in tokens.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LengthStats {
    pub count: i64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
}

/// Recent errors of one kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorGroup {
    pub kind: String,
    pub count: i64,
    pub last_message: String,
    pub last_at: OffsetDateTime,
}

/// Something the person running the job should look at now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A running run finished no sample for longer than the configured time.
    NoProgress,
    /// The recent error rate is far above what the run has seen so far.
    ErrorSpike,
    /// An endpoint stopped answering; dispatch to it is paused.
    EndpointDown,
}

impl AlertKind {
    pub const ALL: [AlertKind; 3] = [AlertKind::NoProgress, AlertKind::ErrorSpike, AlertKind::EndpointDown];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::NoProgress => "no_progress",
            AlertKind::ErrorSpike => "error_spike",
            AlertKind::EndpointDown => "endpoint_down",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub kind: AlertKind,
    pub message: String,
}

/// One point of the throughput chart: per-second rates averaged over `seconds`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChartPoint {
    /// Start of the bucket, Unix seconds.
    pub t: i64,
    /// Width of the bucket in seconds.
    pub seconds: i32,
    /// Server-side prompt and generation tokens/s, summed over endpoints (from `/metrics`).
    pub prompt_tps: Option<f64>,
    pub generation_tps: Option<f64>,
    /// Completion tokens/s as received by the workers.
    pub client_tps: f64,
    pub in_flight: f64,
    /// Failed tries per second.
    pub errors: f64,
    /// Finished samples per second.
    pub completed: f64,
}

/// Everything the live run page shows, computed once per second per run whatever the number of
/// viewers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSnapshot {
    pub at: OffsetDateTime,
    pub id: i64,
    pub name: String,
    pub status: RunStatus,
    pub dataset: String,
    pub created_by: Option<String>,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
    pub settings: RunSettings,
    pub counts: StateCounts,
    /// Finished samples and received completion tokens per second over the last minute.
    pub requests_per_s: f64,
    pub client_tokens_per_s: f64,
    pub eta_secs: Option<f64>,
    pub endpoints: Vec<EndpointLive>,
    /// Completion tokens of samples that finished `ok` or `truncated`.
    pub completion: LengthStats,
    /// Finished samples by the number of tries they took.
    pub attempts: Vec<(i32, i64)>,
    /// Errors of the last 15 minutes, most frequent first.
    pub errors: Vec<ErrorGroup>,
    pub alerts: Vec<Alert>,
    /// The newest complete second of the throughput chart.
    pub latest: Option<ChartPoint>,
}

/// Distribution of one length over a run's outcomes, in bands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BandRow {
    /// Human label, e.g. "1,024–2,047".
    pub label: String,
    pub counts: StateCounts,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CategoryRow {
    pub category: String,
    pub counts: StateCounts,
}

/// Whether the finished samples are a fair picture of the prompts: failures concentrated in long
/// completions or one category bias the training set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BiasReport {
    /// Share of finished samples that did not end `ok`.
    pub failure_rate: f64,
    /// Completion tokens (received so far for samples that did not finish).
    pub completion_bands: Vec<BandRow>,
    /// Reasoning tokens (counted from the ids, else about 4 characters a token); the first band
    /// holds samples without reasoning. A run that loses its long traces shows it here.
    #[serde(default)]
    pub reasoning_bands: Vec<BandRow>,
    /// Prompt length in characters.
    pub prompt_bands: Vec<BandRow>,
    pub categories: Vec<CategoryRow>,
    pub warnings: Vec<String>,
}

/// A running or paused run as the overview shows it: progress, its rate over the last minute
/// and when it should finish.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInProgress {
    pub id: i64,
    pub name: String,
    pub status: RunStatus,
    pub dataset: String,
    pub counts: StateCounts,
    /// Client tokens/s over the last minute (0 while paused or stalled).
    pub tokens_per_s: f64,
    /// Seconds left at the last minute's request rate; `None` while paused or without a rate.
    pub eta_secs: Option<f64>,
}

/// Where review stands on one run's finished samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReviewProgress {
    pub run_id: i64,
    pub run_name: String,
    pub to_review: i64,
    pub approved: i64,
    pub rejected: i64,
    pub flagged: i64,
}

impl ReviewProgress {
    pub fn decided(&self) -> i64 {
        self.approved + self.rejected + self.flagged
    }

    pub fn total(&self) -> i64 {
        self.to_review + self.decided()
    }
}
