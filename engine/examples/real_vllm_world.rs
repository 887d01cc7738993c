//! Real structure through the whole product (issue 47, item 5), against the real vLLM server
//! serving the world's trained target (`scripts/world`), which reasons, then answers or calls the
//! offered tools in the Hermes format on its own. Not a test: CI has no vLLM; run by
//! `scripts/real-vllm-world.sh`, which starts two servers: the target with the hermes tool parser
//! (`REAL_VLLM_URL`) and the same target without one (`REAL_VLLM_PLAIN_URL`).
//!
//! 1. The world's tool prompts and as many of its other prompts, `tool_choice: auto`, thinking on,
//!    16 tokens a streamed chunk (the end of the reasoning falls inside chunks): every tool
//!    prompt's calls are assembled, whole JSON objects naming an offered function, some answers
//!    make several; exported pre-tokenized from the captured ids, every row equals the server's own
//!    ids (`/tokenize` for the prompt, the same request again for the completion) and our render
//!    of the prompt; on every finished sample reasoning + answer + call tokens = completion
//!    tokens, counted from the ids; the review list sorted by longest reasoning pages in that
//!    order, and the selection-bias view's reasoning bands hold every finished sample.
//! 2. Conversations whose source call is the one the model makes, and the same with one argument
//!    changed, each answered by the source's result, every assistant turn regenerated: the changed
//!    ones are flagged `tool_arguments_changed`, the others are not.
//! 3. Conversations where the source answered in text before a second user turn: where the model
//!    calls instead, the sample is flagged `unanswered_tool_call`.
//! 4. A run with tools and `tool_choice: auto` on the server without a tool parser is refused
//!    before it starts, naming the flags to add; the server's own answer to such a request is the
//!    400 the check reads.
//!
//! Exits non-zero when a check fails.
#![allow(clippy::unwrap_used)] // Examples may unwrap: a failure there is a failure of the example, with its message.

#[path = "common/real_vllm.rs"]
mod real_vllm;
#[path = "common/scratch_database.rs"]
mod scratch_database;

use domain::conversation::ToolCall;
use domain::export::Overlong;
use domain::generation::{Concurrency, RunSettings, Selection, Thinking, ToolChoice, TurnMode};
use domain::review::{SampleFilter, SortKey};
use engine::export::conversation::Conversation;
use engine::export::tokenize::RowTokenizer;
use engine::generation::conversation::Turn;
use engine::testing::*;
use serde_json::{json, Value};
use std::time::Duration;

const MAX_TOKENS: u32 = 384;

/// The world's prompt set: (category, messages, tools).
fn world_prompts(per_category: usize) -> anyhow::Result<Vec<(String, Value, Option<Value>)>> {
    let world = std::env::var("WORLD_DIR").unwrap_or_else(|_| {
        format!("{}/.cache/draft-studio/world", std::env::var("HOME").unwrap_or_default())
    });
    let text = std::fs::read_to_string(format!("{world}/datasets/prompts.jsonl"))
        .map_err(|e| anyhow::anyhow!("no world prompts in {world} ({e}): run scripts/world/make-world.sh"))?;
    let mut taken: std::collections::HashMap<String, usize> = Default::default();
    let mut out = Vec::new();
    for line in text.lines() {
        // The key order of `tools` is kept: serde_json preserves it.
        let row: Value = serde_json::from_str(line)?;
        let category = row["category"].as_str().unwrap_or_default().to_string();
        let n = taken.entry(category.clone()).or_default();
        if *n < per_category {
            *n += 1;
            out.push((category, row["messages"].clone(), row.get("tools").cloned()));
        }
    }
    Ok(out)
}

/// A dataset of these conversations, each row with its category and tools (kept as written).
async fn world_dataset(pool: &sqlx::PgPool, rows: &[(String, Value, Option<Value>)]) -> anyhow::Result<i64> {
    let conversations: Vec<Value> = rows.iter().map(|(_, m, _)| m.clone()).collect();
    let dataset = dataset_of_conversations(pool, &conversations).await;
    for (i, (category, _, tools)) in rows.iter().enumerate() {
        sqlx::query(
            "UPDATE dataset_rows SET category = $3, tools = $4::json WHERE dataset_id = $1 AND row_key = $2",
        )
        .bind(dataset)
        .bind(format!("row-{i}"))
        .bind(category)
        .bind(tools.as_ref().map(Value::to_string))
        .execute(pool)
        .await?;
    }
    Ok(dataset)
}

fn world_settings(endpoint: i64, turns: TurnMode) -> RunSettings {
    let mut s = settings(vec![endpoint]);
    s.model = "tiny".into();
    s.max_tokens = MAX_TOKENS;
    s.temperature = Some(0.0);
    s.turns = turns;
    s.thinking = Thinking::On;
    s.tool_choice = ToolChoice::Auto;
    s.stream_interval = 16;
    s.concurrency = Concurrency::Fixed { limit: 8 };
    s.idle_timeout_secs = 300;
    s
}

async fn run_all(pool: &sqlx::PgPool, runs: &[i64]) -> anyhow::Result<()> {
    let (stop, worker) = start_worker(pool);
    for &run in runs {
        wait_for_status(pool, run, "completed", Duration::from_secs(3600)).await;
    }
    stop.cancel();
    worker.await??;
    Ok(())
}

/// A sample as stored: id, state, row key, conversation, automatic flags.
type StoredSample = (i64, String, String, Option<Value>, Vec<String>);
/// A sample's span counts: id, reasoning text, reasoning, answer, call and completion tokens.
type Spans = (i64, String, Option<i32>, Option<i32>, Option<i32>, Option<i32>);

/// Each sample of `run`: id, state, row key, conversation, automatic flags.
async fn samples(
    pool: &sqlx::PgPool,
    run: i64,
) -> anyhow::Result<Vec<(i64, String, String, Vec<Turn>, Vec<String>)>> {
    let rows: Vec<StoredSample> = sqlx::query_as(
        "SELECT s.id, s.state::text, r.row_key, s.messages, s.auto_flags FROM samples s
         JOIN dataset_rows r ON r.id = s.row_id WHERE s.run_id = $1 ORDER BY s.id",
    )
    .bind(run)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, state, key, messages, flags)| {
            let turns = messages.map(serde_json::from_value).transpose().unwrap().unwrap_or_default();
            (id, state, key, turns, flags)
        })
        .collect())
}

/// The call with its first argument's value changed.
fn changed(call: &ToolCall) -> Option<ToolCall> {
    let mut arguments = call.parsed_arguments().ok()?;
    let (_, value) = arguments.iter_mut().next()?;
    *value = match value {
        Value::String(s) => json!(format!("{s} (another)")),
        Value::Number(n) => json!(n.as_f64().unwrap_or(0.0) + 17.0),
        _ => json!("another"),
    };
    Some(ToolCall::new(&call.id, &call.function.name, Value::Object(arguments).to_string()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let per_category: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(12);
    let (base, model_dir) = real_vllm::server("http://127.0.0.1:8046")?;
    let plain_base = std::env::var("REAL_VLLM_PLAIN_URL").unwrap_or_else(|_| "http://127.0.0.1:8047".into());
    let pool = scratch_database::scratch_database("draft_studio_real_vllm_world").await?;
    let by = user(&pool).await;
    let endpoint = endpoint_at(&pool, &base, by).await;
    let mut failures: Vec<String> = Vec::new();

    // 1. tool_choice auto on the world's prompts.
    let prompts = world_prompts(per_category)?;
    let offered = |tools: &Option<Value>| -> Vec<String> {
        tools
            .iter()
            .flat_map(|t| t.as_array().cloned().unwrap_or_default())
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
            .collect()
    };
    let dataset = world_dataset(&pool, &prompts).await?;
    let first = create_run(&pool, dataset, world_settings(endpoint, TurnMode::FirstUser), by).await;
    run_all(&pool, &[first]).await?;
    let done = samples(&pool, first).await?;
    let (mut calling, mut several, mut calls_total, mut tool_prompts) = (0, 0, 0, 0);
    let mut model_calls: Vec<(usize, Vec<ToolCall>)> = Vec::new();
    for (id, state, key, turns, flags) in &done {
        let index: usize = key.trim_start_matches("row-").parse()?;
        let (category, _, tools) = &prompts[index];
        let names = offered(tools);
        let made: Vec<ToolCall> = turns.last().map(|t| t.tool_calls.clone()).unwrap_or_default();
        if category == "tools" {
            tool_prompts += 1;
        }
        if !made.is_empty() {
            calling += 1;
            several += usize::from(made.len() > 1);
            calls_total += made.len();
            model_calls.push((index, made.clone()));
        }
        for call in &made {
            if call.parsed_arguments().is_err() || !names.contains(&call.function.name) {
                failures.push(format!(
                    "sample {id} ({category}, {state}): call {call:?} is not a whole call to {names:?}"
                ));
            }
        }
        if flags.iter().any(|f| f == "bad_tool_arguments" || f == "unknown_tool") {
            failures.push(format!("sample {id}: flags {flags:?}"));
        }
    }
    println!(
        "1. auto: {} samples ({tool_prompts} tool prompts); {calling} answers call ({calls_total} calls, {several} with \
         several), every call a whole JSON object naming an offered function",
        done.len()
    );
    if calling == 0 || several == 0 {
        failures.push(format!(
            "{calling} answers called and {several} called several times: the world should do both"
        ));
    }

    // Exported rows against the server's own ids and our render.
    let rows = real_vllm::export(&pool, &[first]).await?;
    let ours = RowTokenizer::from_dir(&model_dir, 1 << 20, Overlong::Drop)?;
    let http = reqwest::Client::new();
    let mut tally = real_vllm::Tally::default();
    for (_, state, key, turns, _) in &done {
        if state != "ok" && state != "truncated" {
            continue; // an empty answer is not exported
        }
        let index: usize = key.trim_start_matches("row-").parse()?;
        let (_, messages, tools) = &prompts[index];
        let row_id = format!("{first}-{key}");
        let Some(row) = rows.iter().find(|r| r["id"] == row_id.as_str()) else {
            tally.missing(&row_id);
            continue;
        };
        let mut request = json!({"model": "tiny", "messages": messages, "max_tokens": MAX_TOKENS,
            "chat_template_kwargs": {"enable_thinking": true}});
        if let Some(tools) = tools {
            request["tools"] = tools.clone();
            request["tool_choice"] = json!("auto");
        }
        let check = real_vllm::check(&http, &base, row, &request).await?;
        let conversation = Conversation {
            id: row_id.clone(),
            thinking: Some(true),
            turns: turns.clone(),
            tools: tools.clone(),
        };
        let rendered = ours.turn_prompts(&conversation)?;
        tally.add(&row_id, &check, rendered.last().map(|p| p.input_ids.as_slice()));
    }
    println!("   export: {} rows; {}", rows.len(), tally.summary());
    if tally.checked == 0 || tally.prompt_diff + tally.completion_diff + tally.render_diff > 0 {
        failures.push(format!("exported rows: {}", tally.summary()));
    }

    // Span counts from the ids, on every finished sample.
    let counts: Vec<Spans> = sqlx::query_as(
        "SELECT id, COALESCE(reasoning, ''), reasoning_tokens, answer_tokens, tool_call_tokens, completion_tokens
         FROM samples WHERE run_id = $1 AND state IN ('ok', 'truncated', 'empty') ORDER BY id",
    )
    .bind(first)
    .fetch_all(&pool)
    .await?;
    let mut adds_up = 0;
    for (id, reasoning, r, a, t, completion) in &counts {
        match (r, a, t, completion) {
            (Some(r), Some(a), Some(t), Some(c)) if r + a + t == *c && (*r > 0) != reasoning.is_empty() => {
                adds_up += 1
            }
            _ => failures.push(format!(
                "sample {id}: spans {r:?} + {a:?} + {t:?} against {completion:?} completion tokens"
            )),
        }
    }
    println!(
        "   span counts: {adds_up} of {} finished samples: reasoning + answer + calls = completion tokens",
        counts.len()
    );

    // The review list by longest reasoning, and the bias view's reasoning bands.
    let filter = SampleFilter { run: Some(first), sort: SortKey::LongestReasoning, ..Default::default() };
    let mut after: Option<String> = None;
    let mut seen: Vec<Option<i32>> = Vec::new();
    loop {
        let page = engine::review::list::page(&pool, &filter, after.as_deref(), Some(10)).await?;
        seen.extend(page.rows.iter().map(|r| r.reasoning_tokens));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    if seen.len() != done.len() || !seen.windows(2).all(|w| w[0] >= w[1]) {
        failures.push(format!("the list by longest reasoning: {seen:?}"));
    }
    let bias = engine::dashboard::bias::report(&pool, first).await?;
    let banded: i64 = bias.reasoning_bands.iter().map(|b| b.counts.finished()).sum();
    println!(
        "   review by longest reasoning: {} samples, {:?} first; bias by reasoning: {}",
        seen.len(),
        seen.first().copied().flatten(),
        bias.reasoning_bands
            .iter()
            .filter(|b| b.counts.finished() > 0)
            .map(|b| format!("{} {}", b.label, b.counts.finished()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if banded != done.len() as i64 {
        failures.push(format!("the bias view's reasoning bands hold {banded} of {} samples", done.len()));
    }

    // 2. The model's own calls as the source's, as they were and with an argument changed, each
    // answered by the source's result; 3. a text answer before a second question.
    let mut conversations = Vec::new();
    let mut expected = Vec::new();
    for (index, calls) in model_calls.iter().take(12) {
        let (category, messages, tools) = &prompts[*index];
        let answered = |calls: &[ToolCall]| {
            let mut m = messages.as_array().cloned().unwrap_or_default();
            m.push(json!({"role": "assistant", "content": "", "tool_calls": calls}));
            for call in calls {
                m.push(json!({"role": "tool", "tool_call_id": call.id, "content": "{\"result\": \"done\"}"}));
            }
            m.push(json!({"role": "assistant", "content": "Done."}));
            Value::Array(m)
        };
        conversations.push((category.clone(), answered(calls), tools.clone()));
        expected.push("same");
        let mut other = calls.clone();
        if let Some(c) = changed(&other[0]) {
            other[0] = c;
            conversations.push((category.clone(), answered(&other), tools.clone()));
            expected.push("changed");
        }
        let mut m = messages.as_array().cloned().unwrap_or_default();
        m.push(json!({"role": "assistant", "content": "I cannot check that now."}));
        m.push(json!({"role": "user", "content": "Thank you anyway."}));
        m.push(json!({"role": "assistant", "content": "You are welcome."}));
        conversations.push((category.clone(), Value::Array(m), tools.clone()));
        expected.push("text first");
    }
    let regenerated = world_dataset(&pool, &conversations).await?;
    let second = create_run(&pool, regenerated, world_settings(endpoint, TurnMode::EveryAssistant), by).await;
    run_all(&pool, &[second]).await?;
    let mut tally2 = std::collections::BTreeMap::<String, (u32, u32)>::new();
    for (id, state, key, turns, flags) in samples(&pool, second).await? {
        let index: usize = key.trim_start_matches("row-").parse()?;
        let has = |f: &str| flags.iter().any(|x| x == f);
        let first_turn_calls =
            turns.iter().find(|t| t.role == "assistant").is_some_and(|t| !t.tool_calls.is_empty());
        let (right, what) = match expected[index] {
            // The model repeats its own calls at temperature 0: the results fit.
            "same" => (!has("tool_arguments_changed") && !has("tool_result_mismatch"), "same calls: no flag"),
            "changed" => (has("tool_arguments_changed"), "changed arguments: tool_arguments_changed"),
            _ => (
                has("unanswered_tool_call") == first_turn_calls,
                "a call before the next question: unanswered_tool_call",
            ),
        };
        let entry = tally2.entry(what.to_string()).or_default();
        entry.0 += 1;
        if right {
            entry.1 += 1;
        } else {
            failures.push(format!(
                "sample {id} ({}, {state}): flags {flags:?}; turns {turns:?}",
                expected[index]
            ));
        }
    }
    for (what, (n, right)) in &tally2 {
        println!("2-3. {what}: {right} of {n}");
    }

    // 4. A server without a tool parser.
    let plain = endpoint_at(&pool, &plain_base, by).await;
    let raw: Value = http
        .post(format!("{plain_base}/v1/chat/completions"))
        .json(&json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
                       "tools": prompts.iter().find_map(|p| p.2.clone()), "tool_choice": "auto"}))
        .send()
        .await?
        .json()
        .await?;
    let refused = engine::runs::create(
        &pool,
        &engine::vllm::http_client(),
        engine::runs::NewRun {
            name: "tools without a parser".into(),
            dataset_id: dataset,
            selection: Selection::All,
            settings: world_settings(plain, TurnMode::FirstUser),
            draft: None,
            trained_on: None,
        },
        by,
    )
    .await;
    match refused {
        Err(e) if e.to_string().contains("--enable-auto-tool-choice --tool-call-parser") => {
            println!("4. refused before it started: {e}\n   (the server said: {})", raw["error"]["message"]);
        }
        other => failures
            .push(format!("a run with tools on a server without a parser: {other:?}; the server said {raw}")),
    }

    for failure in &failures {
        println!("FAIL {failure}");
    }
    anyhow::ensure!(failures.is_empty(), "{} checks failed", failures.len());
    println!("all checks passed");
    Ok(())
}
