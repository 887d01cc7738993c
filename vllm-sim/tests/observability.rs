//! `/metrics`, the time scale, and throughput as a client sees it.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod common;

use common::exposition::{self, Sample};
use common::{chat, client, fast_config, start, user, wait_for_stats};
use serde_json::json;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use vllm_sim::SimConfig;

async fn scrape(sim: &vllm_sim::RunningSim) -> Vec<Sample> {
    let response = client().get(format!("{}/metrics", sim.base_url())).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/plain; version=0.0.4");
    exposition::parse(&response.text().await.unwrap())
}

/// Sample values by name and `finished_reason` label (empty when absent); histograms by
/// their `_count`.
fn values(samples: &[Sample]) -> HashMap<(String, String), f64> {
    samples
        .iter()
        .filter(|sample| !sample.name.ends_with("_bucket") && !sample.name.ends_with("_sum"))
        .map(|sample| {
            let name = sample.name.strip_suffix("_count").unwrap_or(&sample.name).to_owned();
            let reason = sample.labels.get("finished_reason").cloned().unwrap_or_default();
            ((name, reason), sample.value)
        })
        .collect()
}

#[tokio::test]
async fn metrics_use_vllms_names_and_labels_and_move_with_work() {
    let sim = start(fast_config()).await;
    let idle = values(&scrape(&sim).await);
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:num_preemptions_total",
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
    ] {
        assert_eq!(idle.get(&(name.to_owned(), String::new())), Some(&0.0), "{name} at rest");
    }
    for reason in ["stop", "length", "abort", "error"] {
        let key = ("vllm:request_success_total".to_owned(), reason.to_owned());
        assert_eq!(idle.get(&key), Some(&0.0), "success counter for {reason} exists from the start");
    }

    let body: serde_json::Value =
        chat(&sim, json!({"messages": user("Measure me."), "max_tokens": 7})).await.json().await.unwrap();
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    let samples = scrape(&sim).await;
    let busy = values(&samples);
    let get = |name: &str, reason: &str| busy[&(name.to_owned(), reason.to_owned())];
    assert_eq!(get("vllm:generation_tokens_total", ""), 7.0);
    assert_eq!(get("vllm:prompt_tokens_total", ""), body["usage"]["prompt_tokens"].as_f64().unwrap());
    assert_eq!(get("vllm:request_success_total", "length"), 1.0);
    assert_eq!(get("vllm:time_to_first_token_seconds", ""), 1.0);
    assert_eq!(get("vllm:e2e_request_latency_seconds", ""), 1.0);

    for sample in samples.iter().filter(|s| s.name != "vllm:cache_config_info") {
        assert_eq!(sample.labels["model_name"], "sim-model", "{}", sample.name);
        assert_eq!(sample.labels["engine"], "0", "{}", sample.name);
    }
    let info = samples.iter().find(|s| s.name == "vllm:cache_config_info").expect("cache info");
    assert_eq!(info.value, 1.0);
    assert_eq!(info.labels["block_size"], "16");
    assert_eq!(info.labels["num_gpu_blocks"], "16384", "262,144 tokens in blocks of 16");
}

#[tokio::test]
async fn metrics_can_be_switched_off() {
    let sim = start(SimConfig { no_metrics: true, ..fast_config() }).await;
    let response = client().get(format!("{}/metrics", sim.base_url())).send().await.unwrap();
    assert_eq!(response.status(), 404);
}

/// Real time a request for exactly `tokens` tokens takes at 100 simulated tokens/s.
async fn request_duration(time_scale: f64, tokens: u32) -> Duration {
    let mut config = SimConfig { time_scale, ..SimConfig::default() };
    config.engine.per_seq_tokens_per_s = 100.0;
    config.engine.prefill_tokens_per_s = 0.0;
    config.lengths.median_completion_tokens = tokens;
    config.lengths.completion_sigma = 0.0;
    let sim = start(config).await;
    let started = Instant::now();
    let body: serde_json::Value =
        chat(&sim, json!({"messages": user("Fixed length.")})).await.json().await.unwrap();
    assert_eq!(body["usage"]["completion_tokens"], tokens);
    started.elapsed()
}

#[tokio::test]
async fn the_time_scale_divides_real_time() {
    // 200 tokens at 100 tokens/s: 2 simulated seconds.
    let at_10x = request_duration(10.0, 200).await;
    let at_40x = request_duration(40.0, 200).await;
    assert!(at_10x >= Duration::from_millis(195) && at_10x < Duration::from_millis(400), "10×: {at_10x:?}");
    assert!(at_40x >= Duration::from_millis(48) && at_40x < Duration::from_millis(150), "40×: {at_40x:?}");
}

#[tokio::test]
async fn many_streaming_clients_get_the_aggregate_rate_and_no_more() {
    let mut config = SimConfig { time_scale: 20.0, ..SimConfig::default() };
    config.engine.aggregate_tokens_per_s = 1_000.0;
    config.engine.per_seq_tokens_per_s = 50.0;
    config.lengths.median_completion_tokens = 100_000;
    config.lengths.completion_cap = 100_000;
    config.lengths.completion_sigma = 0.0;
    let sim = start(config).await;
    // 50 clients could take 2,500 tokens/s from the per-sequence rate alone.
    let clients: Vec<_> = (0..50)
        .map(|i| {
            let url = format!("{}/v1/chat/completions", sim.base_url());
            tokio::spawn(async move {
                let body = json!({"messages": user(&format!("Client {i}")), "stream": true});
                let mut response = client().post(url).json(&body).send().await.unwrap();
                while let Ok(Some(_)) = response.chunk().await {}
            })
        })
        .collect();
    wait_for_stats(&sim, Duration::from_secs(5), |s| s.running == 50).await;

    let window = Duration::from_millis(500);
    let before = sim.stats().generation_tokens;
    tokio::time::sleep(window).await;
    let generated = sim.stats().generation_tokens - before;
    // 1,000 simulated tokens/s at 20× is 20,000 real tokens/s: 10,000 in the window.
    let rate = generated as f64 / window.as_secs_f64() / 20.0;
    assert!((850.0..1_100.0).contains(&rate), "{rate} simulated tokens/s");
    for client in clients {
        client.abort();
    }
}
