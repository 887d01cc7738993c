//! How fast the simulator streams when nothing limits it: 64 concurrent streaming clients,
//! each reading and discarding whole completions, against unlimited engine rates. The
//! client does as little as possible, so the figure is the simulator's own cost per token.
//!
//! `cargo run --release -p vllm-sim --example unlimited_load -- [stream_interval]`
#![allow(clippy::unwrap_used)] // Examples may unwrap: a failure there is a failure of the example, with its message.

use serde_json::json;
use std::time::Instant;
use vllm_sim::SimConfig;

const CLIENTS: usize = 64;
const REQUESTS_PER_CLIENT: usize = 16;

#[tokio::main]
async fn main() {
    let interval: u32 = std::env::args().nth(1).map_or(1, |arg| arg.parse().expect("a stream interval"));
    let mut config = SimConfig::default();
    config.engine.aggregate_tokens_per_s = 0.0;
    config.engine.per_seq_tokens_per_s = 0.0;
    config.engine.prefill_tokens_per_s = 0.0;
    let sim = vllm_sim::spawn(config).await.expect("simulator starts");
    let url = format!("{}/v1/chat/completions", sim.base_url());
    let client = reqwest::Client::new();

    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let mut bytes = 0;
                for r in 0..REQUESTS_PER_CLIENT {
                    let body = json!({"messages": [{"role": "user", "content": format!("client {c} request {r}")}],
                                      "stream": true, "stream_interval": interval});
                    let mut response = client.post(&url).json(&body).send().await.expect("answered");
                    while let Some(chunk) = response.chunk().await.expect("body arrives") {
                        bytes += chunk.len();
                    }
                }
                bytes
            })
        })
        .collect();
    let mut bytes = 0;
    for client in clients {
        bytes += client.await.expect("client finishes");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let tokens = sim.stats().generation_tokens;
    println!(
        "stream_interval {interval}: {tokens} tokens in {elapsed:.2} s = {:.0} tokens/s ({:.0} MB/s of SSE)",
        tokens as f64 / elapsed,
        bytes as f64 / elapsed / 1e6
    );
}
