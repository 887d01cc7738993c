//! The `real-vllm-cpu` profile against the sweep of the real server it was calibrated to.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod common;

use common::{client, start, user, wait_for_stats};
use serde_json::json;
use std::time::Duration;
use vllm_sim::{Profile, SimConfig};

/// The real vLLM 0.32 CPU server of `shared/tools/real-vllm` (tiny random-weight model,
/// `--max-num-seqs 64`, 2 cores): steady generation tokens/s from its own `/metrics`, with this
/// many clients in a closed loop of the benchmark's requests, measured 2026-12-03
/// (vllm-sim/README.md, "Profiles"). Past 64 the extra requests only wait.
const REAL_SWEEP: [(u64, f64); 4] = [(16, 954.0), (32, 1_241.0), (64, 1_714.0), (128, 1_733.0)];

/// Simulated tokens/s with `clients` streaming requests held open.
async fn steady_rate(clients: u64) -> f64 {
    const SCALE: f64 = 20.0;
    let config = SimConfig::from_profile(Profile::RealVllmCpu, &["--time-scale", "20"]).unwrap();
    let sim = start(config).await;
    let requests: Vec<_> = (0..clients)
        .map(|i| {
            let url = format!("{}/v1/chat/completions", sim.base_url());
            tokio::spawn(async move {
                let body =
                    json!({"messages": user(&format!("Client {i}")), "stream": true, "max_tokens": 3000});
                let mut response = client().post(url).json(&body).send().await.unwrap();
                while let Ok(Some(_)) = response.chunk().await {}
            })
        })
        .collect();
    let running = clients.min(64);
    wait_for_stats(&sim, Duration::from_secs(10), |s| s.running == running).await;
    let window = Duration::from_millis(800);
    let before = sim.stats().generation_tokens;
    tokio::time::sleep(window).await;
    let generated = sim.stats().generation_tokens - before;
    for request in requests {
        request.abort();
    }
    sim.shutdown().await;
    generated as f64 / window.as_secs_f64() / SCALE
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_vllm_cpu_profile_follows_the_real_servers_sweep() {
    for (clients, real) in REAL_SWEEP {
        let simulated = steady_rate(clients).await;
        let ratio = simulated / real;
        assert!(
            (0.85..1.15).contains(&ratio),
            "{clients} clients: the profile generates {simulated:.0} tokens/s, the real server {real:.0} ({ratio:.2}×)"
        );
    }
}
