//! Helpers shared by the HTTP-level tests.
#![allow(dead_code)] // each test binary uses a different subset

pub mod exposition;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use vllm_sim::{RunningSim, SimConfig, SimStats};

/// A configuration that runs fast: 200× time scale, generous speeds.
pub fn fast_config() -> SimConfig {
    let mut config = SimConfig { time_scale: 200.0, ..SimConfig::default() };
    config.lengths.median_completion_tokens = 60;
    config.lengths.completion_cap = 400;
    config
}

pub async fn start(config: SimConfig) -> RunningSim {
    vllm_sim::spawn(config).await.expect("simulator starts")
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

pub fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

pub async fn post(sim: &RunningSim, path: &str, body: Value) -> reqwest::Response {
    client().post(format!("{}{path}", sim.base_url())).json(&body).send().await.expect("request is answered")
}

pub async fn chat(sim: &RunningSim, body: Value) -> reqwest::Response {
    post(sim, "/v1/chat/completions", body).await
}

/// The `data:` payloads of a complete SSE body, in order.
pub fn sse_payloads(body: &str) -> Vec<String> {
    assert!(body.ends_with("\n\n"), "a stream ends with a blank line: {body:?}");
    body.split_terminator("\n\n")
        .map(|event| {
            event.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data event: {event:?}")).to_owned()
        })
        .collect()
}

/// Parses every payload but the final `[DONE]`, which must be there.
pub fn sse_chunks(body: &str) -> Vec<Value> {
    let mut payloads = sse_payloads(body);
    assert_eq!(payloads.pop().as_deref(), Some("[DONE]"));
    payloads.iter().map(|payload| serde_json::from_str(payload).unwrap()).collect()
}

pub async fn stats(sim: &RunningSim) -> SimStats {
    client().get(format!("{}/sim/stats", sim.base_url())).send().await.unwrap().json().await.unwrap()
}

/// Polls the server's stats until `done` holds, failing after `within`.
pub async fn wait_for_stats(
    sim: &RunningSim,
    within: Duration,
    done: impl Fn(&SimStats) -> bool,
) -> SimStats {
    let deadline = Instant::now() + within;
    loop {
        let stats = sim.stats();
        if done(&stats) {
            return stats;
        }
        assert!(Instant::now() < deadline, "condition not reached in {within:?}: {stats:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
