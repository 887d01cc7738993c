//! The engine's own Prometheus metrics, exported on the app's `/metrics`.

use domain::dashboard::AlertKind;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabel {
    pub endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AlertLabel {
    pub run: i64,
    pub kind: &'static str,
}

#[derive(Clone, Debug, Default)]
pub struct EngineMetrics {
    pub samples_finished: Family<OutcomeLabel, Counter>,
    pub tries: Family<OutcomeLabel, Counter>,
    pub generated_tokens: Counter,
    pub requests_in_flight: Family<EndpointLabel, Gauge>,
    pub endpoint_up: Family<EndpointLabel, Gauge>,
    pub run_alerts: Family<AlertLabel, Gauge>,
    /// Finished tries whose result waited in memory while the database was away.
    pub results_held: Counter,
    /// Of those, results given up (held too long, or beyond the memory budget).
    pub results_given_up: Counter,
}

impl EngineMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "samples_finished",
            "Samples that reached a terminal state, by outcome",
            self.samples_finished.clone(),
        );
        registry.register(
            "tries",
            "Generation tries, by result (abandoned tries are not counted against a sample)",
            self.tries.clone(),
        );
        registry.register(
            "generated_tokens",
            "Completion tokens received from vLLM servers",
            self.generated_tokens.clone(),
        );
        registry.register(
            "requests_in_flight",
            "Generation requests outstanding, by endpoint",
            self.requests_in_flight.clone(),
        );
        registry.register(
            "endpoint_up",
            "1 when the endpoint answers, 0 while dispatch to it is paused",
            self.endpoint_up.clone(),
        );
        registry.register(
            "results_held",
            "Finished tries whose result waited in memory while the database was away",
            self.results_held.clone(),
        );
        registry.register(
            "results_given_up",
            "Held results given up (the database was away too long, or memory ran out); their samples are tried again",
            self.results_given_up.clone(),
        );
        registry.register(
            "run_alert",
            "1 while a running run has this alert raised (no_progress, error_spike, endpoint_down)",
            self.run_alerts.clone(),
        );
    }

    /// Raises `raised` for the run and lowers its other alerts.
    pub fn set_alerts(&self, run: i64, raised: &[AlertKind]) {
        for kind in AlertKind::ALL {
            let value = i64::from(raised.contains(&kind));
            self.run_alerts.get_or_create(&AlertLabel { run, kind: kind.as_str() }).set(value);
        }
    }

    /// Forgets a run that is no longer running.
    pub fn clear_alerts(&self, run: i64) {
        for kind in AlertKind::ALL {
            self.run_alerts.remove(&AlertLabel { run, kind: kind.as_str() });
        }
    }

    pub fn finished(&self, outcome: &str) {
        self.samples_finished.get_or_create(&OutcomeLabel { outcome: outcome.to_string() }).inc();
    }

    pub fn tried(&self, result: &str) {
        self.tries.get_or_create(&OutcomeLabel { outcome: result.to_string() }).inc();
    }
}
