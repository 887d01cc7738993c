//! A served speculative-decoding draft: per-request figures on the last chunk (or the body),
//! `spec_decode` counters in `/metrics`, and acceptance set per prompt text.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod common;

use common::{chat, client, exposition, fast_config, sse_chunks, start, user};
use serde_json::{json, Value};
use vllm_sim::{AcceptanceRule, SimConfig};

fn draft_config(k: u32, per_request: bool) -> SimConfig {
    let mut config = fast_config();
    config.draft.num_speculative_tokens = k;
    config.draft.draft_acceptance = 0.9;
    config.draft.draft_acceptance_rules = vec![AcceptanceRule { contains: "MATH".into(), chance: 0.1 }];
    config.draft.per_request_spec_decode_metrics = per_request;
    config
}

async fn streamed(sim: &vllm_sim::RunningSim, text: &str) -> Vec<Value> {
    let body = json!({
        "messages": user(text), "max_tokens": 300, "stream": true,
        "stream_options": {"include_usage": true}
    });
    sse_chunks(&chat(sim, body).await.text().await.unwrap())
}

async fn spec_counters(sim: &vllm_sim::RunningSim) -> Option<(f64, f64, f64)> {
    let text =
        client().get(format!("{}/metrics", sim.base_url())).send().await.unwrap().text().await.unwrap();
    let samples = exposition::parse(&text);
    let get = |name: &str| samples.iter().find(|s| s.name == name).map(|s| s.value);
    Some((
        get("vllm:spec_decode_num_drafts_total")?,
        get("vllm:spec_decode_num_draft_tokens_total")?,
        get("vllm:spec_decode_num_accepted_tokens_total")?,
    ))
}

#[tokio::test]
async fn the_last_chunk_carries_the_requests_figures_and_the_counters_add_them_up() {
    let sim = start(draft_config(3, true)).await;
    assert_eq!(spec_counters(&sim).await, Some((0.0, 0.0, 0.0)), "counters exist from the start");
    let mut totals = (0.0, 0.0, 0.0);
    let mut lengths = Vec::new();
    for text in ["Tell me a story.", "Solve this MATH problem: 2 + 2."] {
        let chunks = streamed(&sim, text).await;
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"], json!([]), "the usage chunk");
        let spec = &last["metrics"]["speculative_decoding"];
        let steps = spec["num_spec_steps"].as_f64().unwrap();
        let accepted = spec["num_accepted_draft_tokens"].as_f64().unwrap();
        assert!(steps > 0.0, "{spec}");
        assert_eq!(spec["num_spec_tokens"], 3);
        assert_eq!(spec["num_draft_tokens"].as_f64().unwrap(), steps * 3.0);
        assert_eq!(spec["acceptance_histogram"].as_array().unwrap().len(), 4);
        let histogram_steps: f64 =
            spec["acceptance_histogram"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).sum();
        assert_eq!(histogram_steps, steps);
        assert!(
            (spec["mean_acceptance_length"].as_f64().unwrap() - (1.0 + accepted / steps)).abs() < 1e-12,
            "{spec}"
        );
        // Every verify step emits its accepted tokens and one of the target's; the first token
        // is the prefill's.
        let generated = last["usage"]["completion_tokens"].as_f64().unwrap();
        assert!(
            1.0 + accepted + steps >= generated && accepted + steps < generated + 4.0,
            "{spec} {generated}"
        );
        lengths.push(spec["mean_acceptance_length"].as_f64().unwrap());
        totals = (totals.0 + steps, totals.1 + steps * 3.0, totals.2 + accepted);
        // No other chunk carries metrics.
        assert!(chunks[..chunks.len() - 1].iter().all(|c| c.get("metrics").is_none()));
    }
    assert!(lengths[0] > 3.0 && lengths[1] < 1.5, "MATH prompts accept at 0.1, others at 0.9: {lengths:?}");
    assert_eq!(spec_counters(&sim).await, Some(totals));

    // A whole (non-streamed) answer carries the same object at the top level.
    let body: Value = chat(&sim, json!({"messages": user("Tell me a story."), "max_tokens": 300}))
        .await
        .json()
        .await
        .unwrap();
    assert!(body["metrics"]["speculative_decoding"]["num_spec_steps"].as_u64().unwrap() > 0, "{body}");
}

#[tokio::test]
async fn without_per_request_figures_only_the_counters_tell_and_without_a_draft_nothing_does() {
    let counters_only = start(draft_config(2, false)).await;
    let chunks = streamed(&counters_only, "Tell me a story.").await;
    assert!(chunks.iter().all(|c| c.get("metrics").is_none()));
    assert!(spec_counters(&counters_only).await.unwrap().0 > 0.0);

    let no_draft = start(draft_config(0, true)).await;
    let chunks = streamed(&no_draft, "Tell me a story.").await;
    assert!(chunks.iter().all(|c| c.get("metrics").is_none()));
    assert_eq!(spec_counters(&no_draft).await, None, "vLLM exports no spec_decode counters without a draft");
}
