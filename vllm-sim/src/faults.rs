//! Injected failures: per-request probabilities, and the plan drawn for one request.

use clap::Args;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Probabilities (0–1) of each fault per request, and how long delays last in simulated
/// milliseconds. Also the body of `POST /sim/control`'s `faults`, where omitted keys take
/// these defaults.
#[derive(Clone, Debug, PartialEq, Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultSettings {
    /// Chance that a request is answered at once with HTTP 500.
    #[arg(long = "fault-http-500", default_value_t = 0.0)]
    pub http_500: f64,

    /// Chance that a stream ends with an error chunk and `[DONE]` part-way through.
    #[arg(long = "fault-stream-error", default_value_t = 0.0)]
    pub stream_error: f64,

    /// Chance that a stream pauses part-way through.
    #[arg(long = "fault-stall", default_value_t = 0.0)]
    pub stall: f64,

    /// Length of a stall, in simulated milliseconds.
    #[arg(long = "fault-stall-ms", default_value_t = 10_000)]
    pub stall_ms: u64,

    /// Chance that the connection is cut part-way through, without a clean end.
    #[arg(long = "fault-drop-connection", default_value_t = 0.0)]
    pub drop_connection: f64,

    /// Chance of an extra delay before generation starts.
    #[arg(long = "fault-slow-start", default_value_t = 0.0)]
    pub slow_start: f64,

    /// Length of a slow start, in simulated milliseconds.
    #[arg(long = "fault-slow-start-ms", default_value_t = 5_000)]
    pub slow_start_ms: u64,

    /// Answer HTTP 500 to every request whose messages contain this text: samples that fail
    /// on their own while the server serves the others.
    #[arg(long = "fault-http-500-if-prompt-contains")]
    pub http_500_if_prompt_contains: Option<String>,
}

impl Default for FaultSettings {
    fn default() -> Self {
        crate::config::clap_defaults()
    }
}

/// What goes wrong with one request.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultPlan {
    pub http_500: bool,
    /// Simulated delay before the request reaches the engine.
    pub slow_start: Option<Duration>,
    pub incident: Option<Incident>,
}

/// A failure once `at_token` completion tokens have been delivered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Incident {
    pub at_token: u32,
    pub kind: IncidentKind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IncidentKind {
    ErrorChunk,
    /// Simulated length of the pause.
    Stall(Duration),
    DropConnection,
}

impl FaultSettings {
    pub fn validate(&self) -> Result<(), String> {
        for (name, p) in [
            ("http_500", self.http_500),
            ("stream_error", self.stream_error),
            ("stall", self.stall),
            ("drop_connection", self.drop_connection),
            ("slow_start", self.slow_start),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("fault probability {name} must be within 0–1, got {p}"));
            }
        }
        Ok(())
    }

    /// Draws the faults of the `request_index`-th request of a server seeded with `seed`.
    /// Seeding by index keeps a run reproducible without a shared, locked generator.
    /// At most one mid-stream incident happens, placed uniformly before the last token.
    pub fn draw(&self, seed: u64, request_index: u64, completion_tokens: u32) -> FaultPlan {
        let mut rng = StdRng::seed_from_u64(seed ^ request_index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut happens = |p: f64| rng.gen_bool(p);
        let http_500 = happens(self.http_500);
        let slow_start = happens(self.slow_start).then(|| Duration::from_millis(self.slow_start_ms));
        let kind = if happens(self.stream_error) {
            Some(IncidentKind::ErrorChunk)
        } else if happens(self.drop_connection) {
            Some(IncidentKind::DropConnection)
        } else if happens(self.stall) {
            Some(IncidentKind::Stall(Duration::from_millis(self.stall_ms)))
        } else {
            None
        };
        let incident =
            kind.map(|kind| Incident { at_token: rng.gen_range(0..completion_tokens.max(1)), kind });
        FaultPlan { http_500, slow_start, incident }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_faults_by_default() {
        let settings = FaultSettings::default();
        for index in 0..1_000 {
            assert_eq!(settings.draw(7, index, 100), FaultPlan::default());
        }
    }

    #[test]
    fn certain_faults_always_happen_and_incidents_precede_the_last_token() {
        let settings = FaultSettings { http_500: 1.0, stream_error: 1.0, ..FaultSettings::default() };
        for index in 0..200 {
            let plan = settings.draw(7, index, 50);
            assert!(plan.http_500);
            let incident = plan.incident.unwrap();
            assert_eq!(incident.kind, IncidentKind::ErrorChunk);
            assert!(incident.at_token < 50);
        }
    }

    #[test]
    fn draws_are_reproducible_and_follow_the_rate() {
        let settings = FaultSettings { stall: 0.3, ..FaultSettings::default() };
        let stalls = (0..10_000).filter(|&i| settings.draw(1, i, 10).incident.is_some()).count();
        assert!((2_700..3_300).contains(&stalls), "{stalls} stalls in 10,000");
        assert_eq!(settings.draw(1, 42, 10), settings.draw(1, 42, 10));
    }
}
