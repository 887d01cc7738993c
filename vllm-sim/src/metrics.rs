//! vLLM's Prometheus metrics, under vLLM's names and labels, in text format 0.0.4.
//! Times are in simulated seconds, as a server running at simulated speed would report.

use crate::config::BLOCK_SIZE;
use crate::engine::FinishReason;
use prometheus::{Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry, TextEncoder};

/// vLLM's `time_to_first_token_seconds` buckets.
const TTFT_BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0,
];

/// vLLM's request-latency buckets (`e2e_request_latency_seconds` and friends).
const LATENCY_BUCKETS: [f64; 21] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
];

/// Every `finished_reason` vLLM pre-creates, so each series exists from the start at 0.
const FINISHED_REASONS: [&str; 4] = ["stop", "length", "abort", "error"];

pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

pub(crate) struct Metrics {
    registry: Registry,
    pub running: Gauge,
    pub waiting: Gauge,
    pub kv_cache_usage: Gauge,
    pub prompt_tokens: IntCounter,
    pub generation_tokens: IntCounter,
    pub preemptions: IntCounter,
    finished_stop: IntCounter,
    finished_length: IntCounter,
    time_to_first_token: Histogram,
    e2e_latency: Histogram,
    /// vLLM's `spec_decode` counters, registered only when a draft is served (as vLLM does).
    spec_decode: Option<SpecDecodeCounters>,
}

struct SpecDecodeCounters {
    drafts: IntCounter,
    draft_tokens: IntCounter,
    accepted: IntCounter,
}

impl Metrics {
    pub fn new(model: &str, num_gpu_blocks: u32, serves_draft: bool) -> Self {
        let registry = Registry::new();
        let opts = |name: &str, help: &str| {
            Opts::new(name, help).const_label("model_name", model).const_label("engine", "0")
        };
        let register = |metric: Box<dyn prometheus::core::Collector>| {
            registry.register(metric).expect("metric names are unique and valid");
        };
        let gauge = |name, help| {
            let gauge = Gauge::with_opts(opts(name, help)).expect("valid gauge");
            register(Box::new(gauge.clone()));
            gauge
        };
        let counter = |name, help| {
            let counter = IntCounter::with_opts(opts(name, help)).expect("valid counter");
            register(Box::new(counter.clone()));
            counter
        };
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            let opts = HistogramOpts::from(opts(name, help)).buckets(buckets.to_vec());
            let histogram = Histogram::with_opts(opts).expect("valid histogram");
            register(Box::new(histogram.clone()));
            histogram
        };

        let running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.");
        let waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.");
        let kv_cache_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.");
        let prompt_tokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.");
        let generation_tokens =
            counter("vllm:generation_tokens_total", "Number of generation tokens processed.");
        let preemptions =
            counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.");

        let finished = IntCounterVec::new(
            opts("vllm:request_success_total", "Count of successfully processed requests."),
            &["finished_reason"],
        )
        .expect("valid counter family");
        register(Box::new(finished.clone()));
        for reason in FINISHED_REASONS {
            finished.with_label_values(&[reason]);
        }

        let time_to_first_token = histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            &TTFT_BUCKETS,
        );
        let e2e_latency = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            &LATENCY_BUCKETS,
        );

        let cache_config = Gauge::with_opts(
            Opts::new("vllm:cache_config_info", "Information of the LLMEngine CacheConfig")
                .const_label("engine", "0")
                .const_label("block_size", BLOCK_SIZE.to_string())
                .const_label("num_gpu_blocks", num_gpu_blocks.to_string())
                .const_label("cache_dtype", "auto")
                .const_label("gpu_memory_utilization", "0.9"),
        )
        .expect("valid info gauge");
        cache_config.set(1.0);
        register(Box::new(cache_config));

        let spec_decode = serves_draft.then(|| SpecDecodeCounters {
            drafts: counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts."),
            draft_tokens: counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens."),
            accepted: counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens."),
        });

        Self {
            finished_stop: finished.with_label_values(&["stop"]),
            finished_length: finished.with_label_values(&["length"]),
            registry,
            running,
            waiting,
            kv_cache_usage,
            prompt_tokens,
            generation_tokens,
            preemptions,
            time_to_first_token,
            e2e_latency,
            spec_decode,
        }
    }

    /// Adds a finished request's verify steps (vLLM counts them step by step; the simulator
    /// when the request's last chunk is written).
    pub fn spec_decoded(&self, figures: &crate::draft::SpecDecodeMetrics) {
        if let Some(spec) = &self.spec_decode {
            spec.drafts.inc_by(u64::from(figures.num_spec_steps));
            spec.draft_tokens.inc_by(u64::from(figures.num_draft_tokens));
            spec.accepted.inc_by(u64::from(figures.num_accepted_draft_tokens));
        }
    }

    pub fn first_token(&self, seconds_since_arrival: f64) {
        self.time_to_first_token.observe(seconds_since_arrival);
    }

    /// Aborted requests never get here: vLLM counts only requests that ran to an end.
    pub fn finished(&self, reason: FinishReason, seconds_since_arrival: f64) {
        self.finished_counter(reason).inc();
        self.e2e_latency.observe(seconds_since_arrival);
    }

    pub fn finished_count(&self, reason: FinishReason) -> u64 {
        self.finished_counter(reason).get()
    }

    fn finished_counter(&self, reason: FinishReason) -> &IntCounter {
        match reason {
            FinishReason::Stop => &self.finished_stop,
            FinishReason::Length => &self.finished_length,
        }
    }

    /// The exposition text served at `/metrics`.
    pub fn render(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .expect("text encoding of well-formed metrics cannot fail")
    }
}
