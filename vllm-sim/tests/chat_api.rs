//! Wire fidelity of `/v1/chat/completions` and the other OpenAI/vLLM routes.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod common;

use common::{chat, client, fast_config, post, sse_chunks, start, user};
use serde_json::{json, Value};
use vllm_sim::ReasoningField;

/// Counts tokens of a text with the server's own tokenizer.
async fn token_count(sim: &vllm_sim::RunningSim, text: &str) -> u64 {
    let body: Value = post(sim, "/tokenize", json!({"prompt": text})).await.json().await.unwrap();
    body["count"].as_u64().unwrap()
}

fn delta_text(chunks: &[Value], field: &str) -> String {
    chunks.iter().filter_map(|chunk| chunk["choices"][0]["delta"][field].as_str()).collect()
}

#[tokio::test]
async fn a_stream_is_role_deltas_finish_usage_then_done() {
    let sim = start(fast_config()).await;
    let response = chat(
        &sim,
        json!({"model": "sim-model", "messages": user("Explain batching."), "max_tokens": 5_000,
               "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream; charset=utf-8");
    let chunks = sse_chunks(&response.text().await.unwrap());

    let id = chunks[0]["id"].as_str().unwrap();
    assert!(id.starts_with("chatcmpl-"));
    for chunk in &chunks {
        assert_eq!(chunk["id"], id);
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "sim-model");
    }
    let first = &chunks[0]["choices"][0];
    assert_eq!(first["delta"], json!({"role": "assistant", "content": ""}));
    assert_eq!(first["finish_reason"], Value::Null);

    let (usage_chunk, choice_chunks) = chunks.split_last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    let (finish, deltas) = choice_chunks.split_last().unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert_eq!(finish["choices"][0]["stop_reason"], Value::Null);
    for chunk in &deltas[1..] {
        let choice = &chunk["choices"][0];
        assert_eq!(choice["finish_reason"], Value::Null);
        assert!(choice.get("stop_reason").is_none(), "stop_reason only on the finishing chunk");
        assert!(chunk.get("usage").is_none());
    }

    let usage = &usage_chunk["usage"];
    let completion = usage["completion_tokens"].as_u64().unwrap();
    let reasoning_tokens = usage["completion_tokens_details"]["reasoning_tokens"].as_u64().unwrap();
    assert_eq!(usage["total_tokens"], usage["prompt_tokens"].as_u64().unwrap() + completion);
    // One token per delta chunk (plus the role chunk), and the text re-tokenizes to the count.
    assert_eq!(choice_chunks.len() as u64, completion + 1);
    let reasoning = delta_text(&chunks, "reasoning");
    let content = delta_text(&chunks, "content");
    assert!(reasoning_tokens > 0 && !content.is_empty(), "reasoning comes first, then the answer");
    // The reasoning's last token is `</think>`, which writes no text.
    assert_eq!(token_count(&sim, &reasoning).await + 1, reasoning_tokens);
    assert_eq!(token_count(&sim, &content).await, completion - reasoning_tokens);
    let first_content = chunks
        .iter()
        .position(|c| c["choices"][0]["delta"]["content"].as_str().is_some_and(|t| !t.is_empty()));
    let last_reasoning = chunks.iter().rposition(|c| c["choices"][0]["delta"]["reasoning"].is_string());
    assert!(last_reasoning < first_content);
}

#[tokio::test]
async fn stream_interval_groups_tokens_unless_the_server_ignores_it() {
    let body = json!({"messages": user("Group me."), "max_tokens": 40, "stream": true,
                      "stream_interval": 8, "chat_template_kwargs": {"enable_thinking": false}});
    let sim = start(fast_config()).await;
    let chunks = sse_chunks(&chat(&sim, body.clone()).await.text().await.unwrap());
    let (last, full) = chunks[1..].split_last().unwrap();
    assert!(!full.is_empty());
    for chunk in full {
        let text = chunk["choices"][0]["delta"]["content"].as_str().unwrap();
        assert_eq!(token_count(&sim, text).await, 8, "chunk {text:?}");
    }
    let rest = token_count(&sim, last["choices"][0]["delta"]["content"].as_str().unwrap()).await;
    assert!((1..=8).contains(&rest));

    let old_server = start(vllm_sim::SimConfig { ignore_stream_interval: true, ..fast_config() }).await;
    let chunks = sse_chunks(&chat(&old_server, body).await.text().await.unwrap());
    for chunk in &chunks[1..] {
        let text = chunk["choices"][0]["delta"]["content"].as_str().unwrap();
        assert_eq!(token_count(&old_server, text).await, 1);
    }
}

#[tokio::test]
async fn continuous_usage_puts_running_counts_on_every_chunk() {
    let sim = start(fast_config()).await;
    let body = json!({"messages": user("Count along."), "max_tokens": 12, "stream": true,
                      "stream_options": {"include_usage": true, "continuous_usage_stats": true}});
    let chunks = sse_chunks(&chat(&sim, body).await.text().await.unwrap());
    let counts: Vec<u64> = chunks.iter().map(|c| c["usage"]["completion_tokens"].as_u64().unwrap()).collect();
    let completion = *counts.last().unwrap();
    let expected: Vec<u64> = (0..=completion).chain([completion]).collect();
    assert_eq!(counts, expected, "role chunk at 0, one more per chunk, then the usage chunk");
    assert!(chunks[..chunks.len() - 1].iter().all(|c| c["usage"].get("completion_tokens_details").is_none()));
}

#[tokio::test]
async fn a_whole_completion_has_vllms_shape() {
    let sim = start(fast_config()).await;
    let response =
        chat(&sim, json!({"model": "sim-model", "messages": user("Whole please."), "request_id": "abc-1"}))
            .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["id"], "chatcmpl-abc-1");
    assert_eq!(body["object"], "chat.completion");
    let choice = &body["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["stop_reason"], Value::Null);
    let message = &choice["message"];
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["tool_calls"], json!([]));
    assert!(message.get("reasoning_content").is_none());
    let usage = &body["usage"];
    let reasoning_tokens = usage["completion_tokens_details"]["reasoning_tokens"].as_u64().unwrap();
    let completion = usage["completion_tokens"].as_u64().unwrap();
    assert_eq!(token_count(&sim, message["reasoning"].as_str().unwrap()).await + 1, reasoning_tokens);
    assert_eq!(token_count(&sim, message["content"].as_str().unwrap()).await, completion - reasoning_tokens);
}

#[tokio::test]
async fn the_reasoning_field_name_follows_the_server_version() {
    for (field, present, absent) in [
        (ReasoningField::ReasoningContent, vec!["reasoning_content"], vec!["reasoning"]),
        (ReasoningField::Both, vec!["reasoning", "reasoning_content"], vec![]),
    ] {
        let sim = start(vllm_sim::SimConfig { reasoning_field: field, ..fast_config() }).await;
        let body: Value =
            chat(&sim, json!({"messages": user("Think."), "max_tokens": 5})).await.json().await.unwrap();
        let message = &body["choices"][0]["message"];
        for name in &present {
            assert!(message[name].is_string(), "{field:?}: {name} missing in {message}");
        }
        for name in &absent {
            assert!(message.get(name).is_none(), "{field:?}: {name} present");
        }
        let body = json!({"messages": user("Think."), "max_tokens": 5, "stream": true});
        let chunks = sse_chunks(&chat(&sim, body).await.text().await.unwrap());
        for name in &present {
            assert!(!delta_text(&chunks, name).is_empty(), "{field:?}: no {name} deltas");
        }
    }
}

#[tokio::test]
async fn max_tokens_inside_reasoning_ends_with_length_and_no_content() {
    let sim = start(fast_config()).await;
    let body: Value = chat(&sim, json!({"messages": user("Think long."), "max_completion_tokens": 3}))
        .await
        .json()
        .await
        .unwrap();
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(choice["message"]["content"], Value::Null);
    assert!(choice["message"]["reasoning"].is_string());
    assert_eq!(body["usage"]["completion_tokens"], 3);
    assert_eq!(body["usage"]["completion_tokens_details"]["reasoning_tokens"], 3);

    let stream = json!({"messages": user("Think long."), "max_tokens": 3, "stream": true});
    let chunks = sse_chunks(&chat(&sim, stream).await.text().await.unwrap());
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "length");
    assert_eq!(delta_text(&chunks, "content"), "", "only the role chunk's empty content");
}

#[tokio::test]
async fn thinking_off_means_no_reasoning_at_all() {
    let sim = start(fast_config()).await;
    for kwargs in [json!({"enable_thinking": false}), json!({"thinking": false})] {
        let body: Value =
            chat(&sim, json!({"messages": user("Answer directly."), "chat_template_kwargs": kwargs}))
                .await
                .json()
                .await
                .unwrap();
        let message = &body["choices"][0]["message"];
        assert_eq!(message["reasoning"], Value::Null);
        assert!(message["content"].is_string());
        assert_eq!(body["usage"]["completion_tokens_details"]["reasoning_tokens"], 0);
    }
}

#[tokio::test]
async fn the_same_prompt_always_gets_the_same_completion() {
    let sim = start(fast_config()).await;
    let ask = |text: &'static str| {
        let sim = &sim;
        async move {
            let body: Value = chat(sim, json!({"messages": user(text)})).await.json().await.unwrap();
            (
                body["usage"]["completion_tokens"].as_u64().unwrap(),
                body["choices"][0]["message"]["content"].clone(),
            )
        }
    };
    let first = ask("Same prompt.").await;
    assert_eq!(ask("Same prompt.").await, first);
    let mut others = Vec::new();
    for text in ["Another prompt.", "A third one.", "And a fourth."] {
        others.push(ask(text).await);
    }
    assert!(others.iter().any(|other| other.0 != first.0), "lengths vary between prompts");
}

#[tokio::test]
async fn validation_errors_use_vllms_nested_shape() {
    let sim = start(fast_config()).await;
    let cases = [
        (json!({"model": "nope", "messages": user("x")}), 404, "NotFoundError", "The model `nope` does not exist.", "model"),
        (
            json!({"messages": user("x"), "stream_options": {"include_usage": true}}),
            400,
            "BadRequestError",
            "Stream options can only be defined when `stream=True`.",
            "stream_options",
        ),
        (
            json!({"messages": user("x"), "max_tokens": 40_000}),
            400,
            "BadRequestError",
            "max_tokens=40000 cannot be greater than max_model_len=32768. Please request fewer output tokens.",
            "max_tokens",
        ),
    ];
    for (request, status, kind, message, param) in cases {
        let response = chat(&sim, request).await;
        assert_eq!(response.status(), status);
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            body,
            json!({"error": {"message": message, "type": kind, "param": param, "code": status}})
        );
    }

    let long_prompt = "word ".repeat(32_000);
    let body: Value =
        chat(&sim, json!({"messages": user(&long_prompt), "max_tokens": 1_000})).await.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "This model's maximum context length is 32768 tokens. However, you requested 1000 output tokens \
             and your prompt contains at least 32009 input tokens, for a total of at least 33009 tokens."
        ),
        "{message}"
    );
    assert_eq!(body["error"]["param"], "input_tokens");

    let response = client()
        .post(format!("{}/v1/chat/completions", sim.base_url()))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(response.json::<Value>().await.unwrap()["error"]["type"], "BadRequestError");
}

#[tokio::test]
async fn the_legacy_flag_switches_to_the_flat_error_shape() {
    let sim = start(vllm_sim::SimConfig { legacy_error_shape: true, ..fast_config() }).await;
    let response = chat(&sim, json!({"model": "nope", "messages": user("x")})).await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"object": "error", "message": "The model `nope` does not exist.", "type": "NotFoundError", "param": "model", "code": 404})
    );
}

#[tokio::test]
async fn models_tokenize_and_health() {
    let sim = start(fast_config()).await;
    let base = sim.base_url();
    let models: Value = client().get(format!("{base}/v1/models")).send().await.unwrap().json().await.unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "sim-model");
    assert_eq!(models["data"][0]["max_model_len"], 32_768);

    let raw: Value = post(&sim, "/tokenize", json!({"prompt": "Hello, world"})).await.json().await.unwrap();
    assert_eq!(raw["count"], 3);
    assert_eq!(raw["max_model_len"], 32_768);
    assert_eq!(raw["tokens"].as_array().unwrap().len(), 3);
    let chat_tokens: Value =
        post(&sim, "/tokenize", json!({"messages": user("Hello, world"), "return_token_strs": true}))
            .await
            .json()
            .await
            .unwrap();
    let strs: Vec<&str> =
        chat_tokens["token_strs"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(strs.concat(), "<|im_start|>user\nHello, world<|im_end|>\n<|im_start|>assistant\n");
    // The usage of a chat request counts the same template.
    let completion: Value =
        chat(&sim, json!({"messages": user("Hello, world"), "max_tokens": 1})).await.json().await.unwrap();
    assert_eq!(completion["usage"]["prompt_tokens"], chat_tokens["count"]);

    let health = client().get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert!(health.text().await.unwrap().is_empty());
}

#[tokio::test]
async fn token_ids_come_with_the_first_chunk_and_each_delta_when_asked_for() {
    let sim = start(fast_config()).await;
    let body = json!({
        "messages": user("Count the tokens."),
        "stream": true,
        "stream_options": {"include_usage": true},
        "stream_interval": 4,
        "return_token_ids": true,
    });
    let chunks = sse_chunks(&chat(&sim, body).await.text().await.unwrap());
    let prompt: Vec<u64> =
        chunks[0]["prompt_token_ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(prompt.len() as u64, usage["prompt_tokens"].as_u64().unwrap());
    let completion: usize =
        chunks[1..].iter().filter_map(|c| c["choices"][0]["token_ids"].as_array()).map(Vec::len).sum();
    assert_eq!(completion as u64, usage["completion_tokens"].as_u64().unwrap(), "one id per token");

    let tokenize = post(
        &sim,
        "/tokenize",
        json!({"messages": user("Count the tokens."), "add_generation_prompt": true}),
    )
    .await
    .json::<Value>()
    .await
    .unwrap();
    let tokenized: Vec<u64> =
        tokenize["tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(prompt, tokenized, "the ids of the prompt as /tokenize gives them");

    // The reasoning ends with `</think>`, one token with no text of its own, as a Qwen3
    // tokenizer gives it; a completion cut inside its reasoning has none.
    let think_end =
        post(&sim, "/tokenize", json!({"prompt": "</think>"})).await.json::<Value>().await.unwrap();
    assert_eq!(think_end["tokens"], json!([151_668]));
    let ids: Vec<u64> = chunks[1..]
        .iter()
        .filter_map(|c| c["choices"][0]["token_ids"].as_array())
        .flatten()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let reasoning = usage["completion_tokens_details"]["reasoning_tokens"].as_u64().unwrap() as usize;
    assert_eq!(ids.iter().position(|&id| id == 151_668), Some(reasoning - 1), "{ids:?}");
    let cut = sse_chunks(
        &chat(&sim, json!({"messages": user("Count the tokens."), "stream": true, "max_tokens": 2, "return_token_ids": true}))
            .await
            .text()
            .await
            .unwrap(),
    );
    assert!(!cut
        .iter()
        .filter_map(|c| c["choices"][0]["token_ids"].as_array())
        .flatten()
        .any(|v| v == 151_668));

    let plain = sse_chunks(
        &chat(&sim, json!({"messages": user("Count the tokens."), "stream": true}))
            .await
            .text()
            .await
            .unwrap(),
    );
    assert!(plain
        .iter()
        .all(|c| c.get("prompt_token_ids").is_none() && c["choices"][0].get("token_ids").is_none()));
}
