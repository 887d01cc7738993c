//! Checks tool calling and span counts against a real vLLM server (not a test: CI has no vLLM;
//! run by `scripts/real-vllm-tools.sh`, which starts the server). Three runs at temperature 0:
//!
//! 1. PROMPTS questions offering two functions, the last assistant turn regenerated with
//!    `tool_choice: "required"` (vLLM's guided decoding makes even a random model write valid
//!    calls) and one call per turn, thinking off;
//! 2. PROMPTS/2 agent conversations (question, call, the source's tool result, answer), every
//!    assistant turn regenerated in order, the source's results kept;
//! 3. PROMPTS plain questions with thinking on, no tools.
//!
//! Then: every sample of runs 1 and 2 finished with calls assembled from the stream (finish
//! `tool_calls`, arguments a JSON object naming an offered function); a pre-tokenized export of
//! runs 1 and 2 from the captured ids, one row per request, equals the server's own ids row by
//! row (`/tokenize` of the same messages and tools for the prompt, the same request sent again for
//! the completion), and our render of each prompt (the model folder's template with `tools`)
//! equals the server's; in run 3 every sample holding reasoning text has reasoning tokens > 0,
//! and the counts add up to the completion tokens, where the server's own `reasoning_tokens` for
//! the same request is printed beside them.
//!
//! Exits non-zero when a check fails.
//!
//!   REAL_VLLM_URL=http://127.0.0.1:8013 REAL_VLLM_MODEL_DIR=~/.cache/real-vllm/tiny-tools-model \
//!   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo run -p engine --example real_vllm_tools -- [PROMPTS]
#![allow(clippy::unwrap_used)] // Examples may unwrap: a failure there is a failure of the example, with its message.

#[path = "common/real_vllm.rs"]
mod real_vllm;
#[path = "common/scratch_database.rs"]
mod scratch_database;

use domain::export::Overlong;
use domain::generation::{Concurrency, Thinking, ToolChoice, TurnMode};
use engine::export::conversation::Conversation;
use engine::export::tokenize::RowTokenizer;
use engine::generation::conversation::Turn;
use engine::testing::*;
use serde_json::{json, Value};
use std::time::Duration;

const MAX_TOKENS: u32 = 64;

/// A tool sample: id, state, finish reason, conversation, automatic flags.
type ToolSample = (i64, String, Option<String>, Value, Vec<String>);
/// A reasoning sample: id, reasoning, answer, its counts (reasoning, answer, calls, completion)
/// and the source row's messages.
type CountedSample = (i64, String, String, Option<i32>, Option<i32>, Option<i32>, Option<i32>, Value);

/// vLLM constrains a required call's arguments to the function's schema only for a `strict`
/// function, and a random model then writes whitespace forever inside any property, so the strict
/// one takes none: its arguments are always `{}`.
fn get_time() -> Value {
    json!({"type": "function", "function": {"name": "get_time", "description": "The local time here.", "strict": true,
        "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}})
}

/// The questions' functions: the random model always picks `get_weather`, whose arguments are
/// free, and writes `null` there, which must be flagged `bad_tool_arguments`.
fn question_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "description": "The city"}}, "required": ["city"]}}},
        get_time()
    ])
}

/// The agent conversations' function: their calls are whole JSON objects.
fn agent_tools() -> Value {
    json!([get_time()])
}

/// The messages of the request behind assistant turn `index`, as generation sent them.
fn request_messages(turns: &[Turn], index: usize) -> Value {
    Value::Array(
        turns[..index]
            .iter()
            .map(|t| {
                let mut m = json!({"role": t.role, "content": t.content});
                if !t.tool_calls.is_empty() {
                    m["tool_calls"] = serde_json::to_value(&t.tool_calls).unwrap();
                }
                if let Some(id) = &t.tool_call_id {
                    m["tool_call_id"] = json!(id);
                }
                m
            })
            .collect(),
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let prompts: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(24);
    let (base, model_dir) = real_vllm::server("http://127.0.0.1:8013")?;
    let pool = scratch_database::scratch_database("draft_studio_real_vllm_tools").await?;

    let by = user(&pool).await;
    let endpoint = endpoint_at(&pool, &base, by).await;
    let cities = ["Paris", "Tokyo", "Lima"];
    let questions: Vec<Value> = (0..prompts)
        .map(|i| {
            json!([{"role": "user", "content": format!("What is the weather in {} ({i})?", cities[i % 3])},
                   {"role": "assistant", "content": "an old answer"}])
        })
        .collect();
    let agents: Vec<Value> = (0..prompts / 2)
        .map(|i| {
            json!([
                {"role": "user", "content": format!("Is it warm in {} ({i})?", cities[i % 3])},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "source-1", "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "source-1", "content": format!("{{\"time\": \"{}:00\"}}", 10 + i % 12)},
                {"role": "assistant", "content": "It is the afternoon."}
            ])
        })
        .collect();
    let plain: Vec<String> = (0..prompts).map(|i| format!("Question {i}: what is {i} times 7?")).collect();
    let question_set = dataset_of_conversations(&pool, &questions).await;
    let agent_set = dataset_of_conversations(&pool, &agents).await;
    let plain_set = dataset_of(&pool, &plain).await;
    for (set, tools) in [(question_set, question_tools()), (agent_set, agent_tools())] {
        // As text: a bound Value is jsonb, which would sort the keys the check depends on.
        sqlx::query("UPDATE dataset_rows SET tools = $2::json WHERE dataset_id = $1")
            .bind(set)
            .bind(tools.to_string())
            .execute(&pool)
            .await?;
    }

    let mut runs = Vec::new();
    for (set, turns, thinking) in [
        (question_set, TurnMode::LastAssistant, Thinking::Off),
        (agent_set, TurnMode::EveryAssistant, Thinking::Off),
        (plain_set, TurnMode::LastAssistant, Thinking::On),
    ] {
        let mut s = settings(vec![endpoint]);
        s.model = "tiny".into();
        s.max_tokens = MAX_TOKENS;
        s.temperature = Some(0.0);
        s.turns = turns;
        s.thinking = thinking;
        s.tool_choice = ToolChoice::Required;
        s.parallel_tool_calls = false;
        s.concurrency = Concurrency::Fixed { limit: 1 };
        s.idle_timeout_secs = 120;
        runs.push(create_run(&pool, set, s, by).await);
    }
    let (stop, worker) = start_worker(&pool);
    for &run in &runs {
        wait_for_status(&pool, run, "completed", Duration::from_secs(3600)).await;
    }
    stop.cancel();
    worker.await??;
    let mut failures = Vec::new();

    // 1. Calls assembled from the stream, finished as answers.
    let tool_runs = vec![runs[0], runs[1]];
    let calls: Vec<ToolSample> = sqlx::query_as(
        "SELECT s.id, s.state::text, s.finish_reason, s.messages, s.auto_flags FROM samples s
         WHERE s.run_id = ANY($1) ORDER BY s.id",
    )
    .bind(&tool_runs)
    .fetch_all(&pool)
    .await?;
    let (mut with_calls, mut objects, mut flagged) = (0, 0, 0);
    for (id, state, finish, messages, flags) in &calls {
        let turns: Vec<Turn> = serde_json::from_value(messages.clone())?;
        let made: Vec<_> = turns.iter().flat_map(|t| &t.tool_calls).collect();
        let last = turns.last().unwrap();
        let named = made.iter().all(|c| ["get_weather", "get_time"].contains(&c.function.name.as_str()));
        if state == "ok" && finish.as_deref() == Some("tool_calls") && !last.tool_calls.is_empty() && named {
            with_calls += 1;
        } else {
            failures.push(format!("sample {id}: {state}, finish {finish:?}, calls {:?}", last.tool_calls));
        }
        // Arguments that are not a JSON object are flagged, and only they.
        let bad = made.iter().any(|c| c.parsed_arguments().is_err());
        objects += made.iter().filter(|c| c.parsed_arguments().is_ok()).count();
        if bad != flags.iter().any(|f| f == "bad_tool_arguments") {
            failures.push(format!("sample {id}: calls {made:?} but flags {flags:?}"));
        }
        flagged += usize::from(bad);
    }
    println!(
        "tools: {} samples; {with_calls} ended in whole calls to offered functions (finish tool_calls); {objects} calls \
         had JSON-object arguments; {flagged} samples with other arguments, each flagged bad_tool_arguments",
        calls.len()
    );

    // 2. Exported rows against the server's own ids.
    let rows = real_vllm::export(&pool, &tool_runs).await?;
    let stored: Vec<(i64, String, Value)> = sqlx::query_as(
        "SELECT s.run_id, r.row_key, s.messages FROM samples s JOIN dataset_rows r ON r.id = s.row_id
         WHERE s.captured_token_ids AND s.run_id = ANY($1)",
    )
    .bind(&tool_runs)
    .fetch_all(&pool)
    .await?;
    let ours = RowTokenizer::from_dir(&model_dir, 1 << 20, Overlong::Drop)?;
    let http = reqwest::Client::new();
    let mut tally = real_vllm::Tally::default();
    for (run, key, messages) in stored {
        let turns: Vec<Turn> = serde_json::from_value(messages)?;
        let id = format!("{run}-{key}");
        let assistant: Vec<usize> = (0..turns.len()).filter(|&i| turns[i].role == "assistant").collect();
        let tools = if run == runs[1] { agent_tools() } else { question_tools() };
        let conversation = Conversation {
            id: id.clone(),
            thinking: Some(false),
            turns: turns.clone(),
            tools: Some(tools.clone()),
        };
        let our_prompts = ours.turn_prompts(&conversation)?;
        // Every-assistant runs regenerate each assistant turn; a question run only the last.
        let generated: Vec<usize> =
            if run == runs[1] { assistant.clone() } else { assistant.last().copied().into_iter().collect() };
        for (k, &index) in generated.iter().enumerate() {
            let row_id = if generated.len() > 1 { format!("{id}_turn{k}") } else { id.clone() };
            let Some(row) = rows.iter().find(|r| r["id"] == row_id.as_str()) else {
                tally.missing(&row_id);
                continue;
            };
            let request = json!({"model": "tiny", "messages": request_messages(&turns, index), "tools": tools,
                "tool_choice": "required", "parallel_tool_calls": false, "max_tokens": MAX_TOKENS,
                "chat_template_kwargs": {"enable_thinking": false}});
            let check = real_vllm::check(&http, &base, row, &request).await?;
            let ours = our_prompts.iter().find(|p| p.turn == index).map(|p| p.input_ids.as_slice());
            tally.add(&row_id, &check, ours);
        }
    }
    println!("export: {} rows; {}", rows.len(), tally.summary());
    if tally.checked == 0 || tally.prompt_diff + tally.completion_diff + tally.render_diff > 0 {
        failures.push(format!("exported rows: {}", tally.summary()));
    }

    // 3. Span counts on reasoning.
    let counted: Vec<CountedSample> =
        sqlx::query_as(
            "SELECT s.id, COALESCE(s.reasoning, ''), COALESCE(s.content, ''), s.reasoning_tokens, s.answer_tokens,
                    s.tool_call_tokens, s.completion_tokens, r.messages
             FROM samples s JOIN dataset_rows r ON r.id = s.row_id WHERE s.run_id = $1 ORDER BY s.id",
        )
        .bind(runs[2])
        .fetch_all(&pool)
        .await?;
    let (mut reasoning_samples, mut positive, mut adds_up, mut server_zero) = (0, 0, 0, 0);
    for (id, reasoning, _content, r, a, t, completion, source) in &counted {
        if reasoning.is_empty() {
            continue;
        }
        reasoning_samples += 1;
        if r.is_some_and(|r| r > 0) {
            positive += 1;
        } else {
            failures.push(format!(
                "sample {id}: {} characters of reasoning, reasoning tokens {r:?}",
                reasoning.len()
            ));
        }
        if r.zip(*a).zip(*t).map(|((r, a), t)| r + a + t) == *completion {
            adds_up += 1;
        } else {
            failures
                .push(format!("sample {id}: {r:?} + {a:?} + {t:?} is not {completion:?} completion tokens"));
        }
        // The server's own figure for the same request (temperature 0, sent alone).
        let question = source[0]["content"].clone();
        let again: Value = http
            .post(format!("{base}/v1/chat/completions"))
            .json(&json!({"model": "tiny", "messages": [{"role": "user", "content": question}], "max_tokens": MAX_TOKENS,
                          "temperature": 0.0, "chat_template_kwargs": {"enable_thinking": true}}))
            .send()
            .await?
            .json()
            .await?;
        if again["usage"]["completion_tokens_details"]["reasoning_tokens"].as_u64().unwrap_or(0) == 0 {
            server_zero += 1;
        }
    }
    println!(
        "span counts: {} samples, {reasoning_samples} with reasoning text; {positive} of them have reasoning tokens > 0, \
         {adds_up} add up to their completion tokens; the server's own reasoning_tokens is 0 or absent on {server_zero}",
        counted.len()
    );
    if reasoning_samples == 0 {
        failures.push("no sample of the reasoning run holds reasoning text".into());
    }
    for failure in &failures {
        println!("FAIL {failure}");
    }
    anyhow::ensure!(failures.is_empty(), "{} checks failed", failures.len());
    println!("all checks passed");
    Ok(())
}
