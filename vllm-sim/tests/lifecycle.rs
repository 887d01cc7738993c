//! Aborts on disconnect, injected faults, and outages.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod common;

use common::{chat, client, fast_config, post, sse_payloads, start, stats, user, wait_for_stats};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use vllm_sim::{FaultSettings, SimConfig};

const PATIENCE: Duration = Duration::from_secs(5);

/// Every completion is exactly 20,000 tokens, generated at 5,000 tokens per real second.
fn long_completions() -> SimConfig {
    let mut config = SimConfig { time_scale: 100.0, ..SimConfig::default() };
    config.engine.per_seq_tokens_per_s = 50.0;
    config.lengths.median_completion_tokens = 20_000;
    config.lengths.completion_sigma = 0.0;
    config.lengths.completion_cap = 20_000;
    config
}

fn with_faults(faults: FaultSettings) -> SimConfig {
    SimConfig { faults, ..fast_config() }
}

fn streaming(text: &str) -> Value {
    json!({"messages": user(text), "stream": true})
}

#[tokio::test]
async fn closing_a_stream_aborts_its_generation_at_once() {
    let sim = start(long_completions()).await;
    let mut response = chat(&sim, streaming("Go on and on.")).await;
    for _ in 0..3 {
        response.chunk().await.unwrap().expect("the stream is flowing");
    }
    wait_for_stats(&sim, PATIENCE, |s| s.running == 1).await;
    drop(response);

    let after = wait_for_stats(&sim, PATIENCE, |s| s.running == 0 && s.requests_aborted == 1).await;
    assert_eq!(after.kv_cache_usage, 0.0, "its cache blocks are freed");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let later = sim.stats();
    assert_eq!(later.generation_tokens, after.generation_tokens, "the generation counter stopped");
    assert!(later.generation_tokens < 20_000);
    assert_eq!(
        (later.requests_finished.stop, later.requests_finished.length),
        (0, 0),
        "an abort is no success"
    );
}

#[tokio::test]
async fn a_client_timeout_on_a_whole_completion_aborts_it() {
    let sim = start(long_completions()).await;
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(300)).build().unwrap();
    let result = impatient
        .post(format!("{}/v1/chat/completions", sim.base_url()))
        .json(&json!({"messages": user("Take your time.")}))
        .send()
        .await;
    assert!(result.unwrap_err().is_timeout());
    let after = wait_for_stats(&sim, PATIENCE, |s| s.running == 0 && s.requests_aborted == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(sim.stats().generation_tokens, after.generation_tokens);
}

#[tokio::test]
async fn http_500_fault_answers_with_the_nested_error() {
    let sim = start(with_faults(FaultSettings { http_500: 1.0, ..FaultSettings::default() })).await;
    let response = chat(&sim, json!({"messages": user("x")})).await;
    assert_eq!(response.status(), 500);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "InternalServerError");
    assert_eq!(body["error"]["code"], 500);
    assert_eq!(stats(&sim).await.faults.http_500, 1);
    assert_eq!(sim.stats().requests_started, 0, "it never reached the engine");
}

#[tokio::test]
async fn stream_error_fault_sends_an_error_chunk_then_done() {
    let sim = start(fast_config()).await;
    let control = post(&sim, "/sim/control", json!({"faults": {"stream_error": 1.0}})).await;
    assert_eq!(control.status(), 200);
    let response = chat(&sim, streaming("Fail midway.")).await;
    assert_eq!(response.status(), 200, "the failure comes after the headers");
    let payloads = sse_payloads(&response.text().await.unwrap());
    let (done, rest) = payloads.split_last().unwrap();
    assert_eq!(done, "[DONE]");
    let error: Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(error["error"]["type"], "InternalServerError");
    for payload in &rest[..rest.len() - 1] {
        let chunk: Value = serde_json::from_str(payload).unwrap();
        assert_eq!(chunk["choices"][0]["finish_reason"], Value::Null, "it never finished");
    }
    assert_eq!(sim.stats().faults.stream_error, 1);

    post(&sim, "/sim/control", json!({"faults": {}})).await;
    let payloads = sse_payloads(&chat(&sim, streaming("Fail midway.")).await.text().await.unwrap());
    assert!(payloads.iter().all(|p| !p.contains("\"error\"")), "faults can be switched off live");
}

#[tokio::test]
async fn stall_fault_pauses_the_stream() {
    // 40 simulated seconds at 200× are 200 ms; the completion itself takes a few.
    let faults = FaultSettings { stall: 1.0, stall_ms: 40_000, ..FaultSettings::default() };
    let sim = start(with_faults(faults)).await;
    let started = Instant::now();
    let body = chat(&sim, streaming("Pause.")).await.text().await.unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(195) && took < Duration::from_secs(1), "took {took:?}");
    assert_eq!(sse_payloads(&body).last().unwrap(), "[DONE]", "a stall is not a failure");
    assert_eq!(sim.stats().faults.stall, 1);
}

#[tokio::test]
async fn drop_fault_cuts_the_connection_without_a_clean_end() {
    let sim = start(with_faults(FaultSettings { drop_connection: 1.0, ..FaultSettings::default() })).await;
    let response = chat(&sim, streaming("Hang up on me.")).await;
    assert_eq!(response.status(), 200);
    assert!(response.text().await.is_err(), "the body ends abruptly");

    let whole = client()
        .post(format!("{}/v1/chat/completions", sim.base_url()))
        .json(&json!({"messages": user("x")}))
        .send()
        .await;
    assert!(whole.is_err(), "no response at all");
    assert_eq!(sim.stats().faults.drop_connection, 2);
}

#[tokio::test]
async fn slow_start_fault_delays_the_first_token_not_the_headers() {
    let faults = FaultSettings { slow_start: 1.0, slow_start_ms: 40_000, ..FaultSettings::default() };
    let sim = start(with_faults(faults)).await;
    let started = Instant::now();
    let mut response = chat(&sim, streaming("Slowly.")).await;
    let headers_after = started.elapsed();
    response.chunk().await.unwrap().unwrap();
    let first_token_after = started.elapsed();
    assert!(headers_after < Duration::from_millis(150), "headers after {headers_after:?}");
    assert!(
        first_token_after >= Duration::from_millis(195) && first_token_after < Duration::from_secs(1),
        "first token after {first_token_after:?}"
    );
    assert_eq!(sim.stats().faults.slow_start, 1);
}

#[tokio::test]
async fn an_outage_refuses_connections_cuts_streams_and_ends() {
    let sim = start(long_completions()).await;
    let mut in_flight = chat(&sim, streaming("Keep going.")).await;
    in_flight.chunk().await.unwrap().unwrap();

    // 50 simulated seconds at 100× are half a second.
    let control = post(&sim, "/sim/control", json!({"down_for_ms": 50_000})).await;
    assert_eq!(control.status(), 200);
    assert_eq!(control.headers()["connection"], "close");
    let went_down = Instant::now();

    let cut = async {
        loop {
            match in_flight.chunk().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the stream must not end cleanly"),
                Err(_) => return,
            }
        }
    };
    tokio::time::timeout(PATIENCE, cut).await.expect("the in-flight stream is cut");

    let health = format!("{}/health", sim.base_url());
    let refused = client().get(&health).send().await.unwrap_err();
    assert!(refused.is_connect(), "connections are refused: {refused}");

    let up = loop {
        if let Ok(response) = client().get(&health).send().await {
            break response;
        }
        assert!(went_down.elapsed() < PATIENCE, "the server never came back");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(up.status(), 200);
    let down_for = went_down.elapsed();
    assert!(
        down_for >= Duration::from_millis(450) && down_for < Duration::from_secs(2),
        "back after {down_for:?}"
    );
    let after = wait_for_stats(&sim, PATIENCE, |s| s.requests_aborted == 1).await;
    assert_eq!(after.outages, 1);
    assert_eq!(after.running, 0);
}

#[tokio::test]
async fn an_overcommitted_cache_preempts_and_still_finishes_everything() {
    let mut config = fast_config();
    config.max_model_len = 1_024;
    config.engine.kv_cache_tokens = 2_048;
    config.engine.max_num_seqs = 16;
    config.engine.max_num_batched_tokens = 2_048;
    config.lengths.median_completion_tokens = 400;
    config.lengths.completion_sigma = 0.0;
    let sim = start(config).await;
    let requests = (0..16).map(|i| chat(&sim, json!({"messages": user(&format!("Request {i}"))})));
    for response in futures::future::join_all(requests).await {
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["completion_tokens"], 400);
    }
    let after = sim.stats();
    assert!(after.preemptions > 0, "{after:?}");
    assert_eq!(after.requests_finished.stop, 16);
}

#[tokio::test]
async fn a_restart_behind_a_proxy_cuts_streams_and_answers_the_gateway_status_everywhere() {
    for (status, body_has) in
        [(503, "no healthy upstream"), (502, "502 Bad Gateway"), (504, "504 Gateway Time-out")]
    {
        let sim = start(long_completions()).await;
        let mut in_flight = chat(&sim, streaming("Keep going.")).await;
        in_flight.chunk().await.unwrap().unwrap();

        // 50 simulated seconds at 100× are half a second.
        let control =
            post(&sim, "/sim/control", json!({"unavailable_for_ms": 50_000, "unavailable_status": status}))
                .await;
        assert_eq!(control.status(), 200);
        let started = Instant::now();
        let cut = async {
            loop {
                match in_flight.chunk().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("the stream must not end cleanly"),
                    Err(_) => return,
                }
            }
        };
        tokio::time::timeout(PATIENCE, cut).await.expect("the in-flight stream is cut");

        for path in ["/health", "/v1/models", "/metrics"] {
            let response = client().get(format!("{}{path}", sim.base_url())).send().await.unwrap();
            assert_eq!(response.status(), status, "{path}");
            assert!(response.text().await.unwrap().contains(body_has), "{path}");
        }
        assert_eq!(chat(&sim, json!({"messages": user("x")})).await.status(), status);
        assert_eq!(stats(&sim).await.unavailable_answers, 4, "its controls stay reachable");

        let health = format!("{}/health", sim.base_url());
        loop {
            if client().get(&health).send().await.unwrap().status() == 200 {
                break;
            }
            assert!(started.elapsed() < PATIENCE, "the engine never came back");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let back_after = started.elapsed();
        assert!(back_after >= Duration::from_millis(450), "back after {back_after:?}");
        assert_eq!(chat(&sim, json!({"messages": user("x")})).await.status(), 200);
    }
}

#[tokio::test]
async fn a_failing_engine_errors_every_request_while_health_stays_up() {
    let sim = start(long_completions()).await;
    let mut in_flight = chat(&sim, streaming("Keep going.")).await;
    in_flight.chunk().await.unwrap().unwrap();
    let control = post(&sim, "/sim/control", json!({"failing_for_ms": 50_000})).await;
    assert_eq!(control.status(), 200);
    let started = Instant::now();

    let mut rest = Vec::new();
    while let Some(chunk) = in_flight.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    let rest = String::from_utf8(rest).unwrap();
    assert!(rest.contains("EngineCore encountered an issue"), "{rest}");
    assert!(rest.ends_with("data: [DONE]\n\n"));

    let refused = chat(&sim, json!({"messages": user("x")})).await;
    assert_eq!(refused.status(), 500);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["type"], "InternalServerError");
    let health = client().get(format!("{}/health", sim.base_url())).send().await.unwrap();
    assert_eq!(health.status(), 200, "the process still says it is healthy");
    assert_eq!(stats(&sim).await.engine_failures, 2);

    let remaining = Duration::from_millis(520).saturating_sub(started.elapsed());
    tokio::time::sleep(remaining).await;
    let mut config_ok = chat(&sim, streaming("Now it works.")).await;
    assert_eq!(config_ok.status(), 200);
    config_ok.chunk().await.unwrap().expect("streams again");
}

#[tokio::test]
async fn an_outage_status_must_be_a_server_error() {
    let sim = start(fast_config()).await;
    let control =
        post(&sim, "/sim/control", json!({"unavailable_for_ms": 1_000, "unavailable_status": 404})).await;
    assert_eq!(control.status(), 400);
    let body: Value = control.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("5xx"), "{body}");
}
