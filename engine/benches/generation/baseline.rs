//! The script the issue describes as failing: a fixed number of non-streaming requests in
//! flight, each with a total timeout, no retry.

use std::{sync::Arc, time::Duration};
use tokio::sync::Semaphore;

pub struct Outcome {
    /// Completion tokens, when the request came back.
    pub tokens: Option<u32>,
}

pub async fn run(
    base_url: &str,
    model: &str,
    prompts: &[String],
    concurrency: usize,
    timeout: Duration,
    max_tokens: u32,
) -> Vec<Outcome> {
    let http = reqwest::Client::builder().pool_max_idle_per_host(1024).build().unwrap();
    let slots = Arc::new(Semaphore::new(concurrency));
    let mut tasks = Vec::new();
    for prompt in prompts {
        let permit = slots.clone().acquire_owned().await.unwrap();
        let body = serde_json::json!({
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
        });
        let (http, url) = (http.clone(), format!("{base_url}/v1/chat/completions"));
        tasks.push(tokio::spawn(async move {
            let result = http.post(url).json(&body).timeout(timeout).send().await;
            let tokens = match result {
                Ok(response) if response.status().is_success() => response
                    .json::<serde_json::Value>()
                    .await
                    .ok()
                    .and_then(|v| v["usage"]["completion_tokens"].as_u64())
                    .map(|t| t as u32),
                _ => None,
            };
            drop(permit);
            Outcome { tokens }
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    outcomes
}
