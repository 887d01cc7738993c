//! The load signals a vLLM server exposes on `/metrics` (Prometheus text format).

use std::time::Instant;

/// One scrape of a server's load. Counters are cumulative; rates come from two scrapes.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerLoad {
    pub at: Instant,
    pub running: f64,
    pub waiting: f64,
    /// Fraction 0–1 of the KV cache in use.
    pub kv_usage: f64,
    pub preemptions_total: f64,
    pub prompt_tokens_total: f64,
    pub generation_tokens_total: f64,
    /// The speculative-decoding counters; `None` when the server runs no draft (vLLM exports
    /// them only with a `--speculative-config`).
    pub spec: Option<SpecCounters>,
}

/// vLLM's `spec_decode` counters, summed over engines.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpecCounters {
    /// Verify steps (`vllm:spec_decode_num_drafts_total`).
    pub drafts: f64,
    pub draft_tokens: f64,
    pub accepted: f64,
}

impl SpecCounters {
    /// The acceptance length over the steps between `earlier` and these: `1 + Δaccepted ÷
    /// Δdrafts`; `None` when no step was verified in between.
    pub fn length_since(&self, earlier: &SpecCounters) -> Option<f64> {
        let drafts = self.drafts - earlier.drafts;
        (drafts > 0.0).then(|| 1.0 + (self.accepted - earlier.accepted).max(0.0) / drafts)
    }
}

impl ServerLoad {
    /// Per second since `previous`, of the counter `counter` picks; `None` when no time passed
    /// (the same scrape read twice).
    pub fn rate_since(&self, previous: &ServerLoad, counter: fn(&ServerLoad) -> f64) -> Option<f64> {
        let seconds = self.at.duration_since(previous.at).as_secs_f64();
        (seconds > 0.0).then(|| (counter(self) - counter(previous)).max(0.0) / seconds)
    }

    /// Reads the vLLM metrics out of a scrape; `None` when it has none of them (not vLLM).
    /// Values are summed over engines (data parallelism); KV use is the busiest engine's.
    pub fn parse(text: &str) -> Option<Self> {
        let mut load = ServerLoad {
            at: Instant::now(),
            running: 0.0,
            waiting: 0.0,
            kv_usage: 0.0,
            preemptions_total: 0.0,
            prompt_tokens_total: 0.0,
            generation_tokens_total: 0.0,
            spec: None,
        };
        let mut seen = false;
        for (name, value) in samples(text) {
            match name {
                "vllm:spec_decode_num_drafts_total" => spec(&mut load).drafts += value,
                "vllm:spec_decode_num_draft_tokens_total" => spec(&mut load).draft_tokens += value,
                "vllm:spec_decode_num_accepted_tokens_total" => spec(&mut load).accepted += value,
                "vllm:num_requests_running" => load.running += value,
                "vllm:num_requests_waiting" => load.waiting += value,
                // The old name, still emitted by servers before ~0.10.
                "vllm:kv_cache_usage_perc" | "vllm:gpu_cache_usage_perc" => {
                    load.kv_usage = load.kv_usage.max(value)
                }
                "vllm:num_preemptions_total" | "vllm:num_preemptions" => load.preemptions_total += value,
                "vllm:prompt_tokens_total" | "vllm:prompt_tokens" => load.prompt_tokens_total += value,
                "vllm:generation_tokens_total" | "vllm:generation_tokens" => {
                    load.generation_tokens_total += value
                }
                _ => continue,
            }
            seen = true;
        }
        seen.then_some(load)
    }
}

fn spec(load: &mut ServerLoad) -> &mut SpecCounters {
    load.spec.get_or_insert_with(SpecCounters::default)
}

/// `(metric name, value)` of every sample line. Written here rather than taken from
/// `prometheus-parse`, whose name pattern (`\w+`) silently skips names with a colon — which is
/// every `vllm:*` metric. Labels are not needed: we sum or take the maximum over them.
fn samples(text: &str) -> impl Iterator<Item = (&str, f64)> {
    text.lines().filter_map(|line| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
        let name = &line[..name_end];
        let rest = &line[name_end..];
        // Skip the label set; label values are quoted and may contain '}' or spaces.
        let after_labels = if rest.starts_with('{') { skip_labels(rest)? } else { rest };
        let value = after_labels.split_whitespace().next()?;
        Some((name, parse_value(value)?))
    })
}

fn skip_labels(s: &str) -> Option<&str> {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '}' if !in_quotes => return Some(&s[i + 1..]),
            _ => {}
        }
    }
    None
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::{samples, ServerLoad, SpecCounters};

    const SCRAPE: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 12.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.42
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="tiny"} 7.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 1500.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 98765.0
vllm:generation_tokens_created{engine="0",model_name="tiny"} 1.7e9
# TYPE http_requests_total counter
http_requests_total{handler="/v1/chat/completions",method="POST",status="2xx"} 100.0
"#;

    #[test]
    fn reads_vllm_gauges_and_counters() {
        let load = ServerLoad::parse(SCRAPE).unwrap();
        assert_eq!((load.running, load.waiting), (12.0, 3.0));
        assert_eq!(load.kv_usage, 0.42);
        assert_eq!(load.preemptions_total, 7.0);
        assert_eq!(load.prompt_tokens_total, 1500.0);
        assert_eq!(load.generation_tokens_total, 98765.0);
    }

    #[test]
    fn spec_decode_counters_mean_a_draft_and_give_the_acceptance_length() {
        assert_eq!(ServerLoad::parse(SCRAPE).unwrap().spec, None, "no draft, no counters");
        let text = format!(
            "{SCRAPE}vllm:spec_decode_num_drafts_total{{engine=\"0\",model_name=\"tiny\"}} 160.0\n\
             vllm:spec_decode_num_draft_tokens_total{{engine=\"0\",model_name=\"tiny\"}} 480.0\n\
             vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\",model_name=\"tiny\"}} 400.0\n\
             vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine=\"0\",position=\"0\"}} 150.0\n"
        );
        let spec = ServerLoad::parse(&text).unwrap().spec.unwrap();
        assert_eq!(spec, SpecCounters { drafts: 160.0, draft_tokens: 480.0, accepted: 400.0 });
        let earlier = SpecCounters { drafts: 60.0, draft_tokens: 180.0, accepted: 150.0 };
        assert_eq!(spec.length_since(&earlier), Some(1.0 + 250.0 / 100.0));
        assert_eq!(spec.length_since(&spec), None, "no step in between");
    }

    #[test]
    fn sums_engines_and_accepts_the_old_cache_name() {
        let text = "vllm:num_requests_running{engine=\"0\"} 2\nvllm:num_requests_running{engine=\"1\"} 3\nvllm:gpu_cache_usage_perc{engine=\"0\"} 0.9\n";
        let load = ServerLoad::parse(text).unwrap();
        assert_eq!(load.running, 5.0);
        assert_eq!(load.kv_usage, 0.9);
    }

    #[test]
    fn label_values_with_braces_and_spaces_do_not_confuse_the_reader() {
        let text = "a:b{path=\"/x} y\",q=\"\\\"\"} 4 1700000000\nplain 2.5\nbad{x=\"1\"} notanumber\n";
        let parsed: Vec<_> = samples(text).collect();
        assert_eq!(parsed, vec![("a:b", 4.0), ("plain", 2.5)]);
    }

    #[test]
    fn a_scrape_without_vllm_metrics_is_none() {
        assert!(ServerLoad::parse("http_requests_total 3\n").is_none());
        assert!(ServerLoad::parse("").is_none());
    }
}
