//! Checks pre-tokenized exports against a real vLLM server (not a test: CI has no vLLM; run by
//! `scripts/real-vllm-check.sh`). A run of PROMPTS conversations (half single-turn, half two
//! user turns regenerated turn by turn) at temperature 0 is exported from the captured ids, one
//! row per request, and every row is compared with what the server says itself:
//!
//! - the row's prompt part with the server's `/tokenize` of the same messages (vLLM 0.32 answers
//!   `/v1/chat/completions/render` only with `--enable-scale-out`, so `/tokenize` is the render
//!   route it offers);
//! - the row's completion part with the `token_ids` of the same request sent again, alone, at
//!   temperature 0 (the run also sends one request at a time, so both see a batch of one);
//! - our own render of the same turns (the model folder's chat template, as the re-tokenizing
//!   export renders it) with the server's, row by row.
//!
//! Exits non-zero when an exported row differs from the server's ids.
//!
//!   REAL_VLLM_URL=http://127.0.0.1:8011 REAL_VLLM_MODEL_DIR=~/.cache/real-vllm/tiny-model \
//!   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo run --profile bench -p engine --example real_vllm_export -- [PROMPTS]
#![allow(clippy::unwrap_used)] // Examples may unwrap: a failure there is a failure of the example, with its message.

#[path = "common/real_vllm.rs"]
mod real_vllm;
#[path = "common/scratch_database.rs"]
mod scratch_database;

use domain::export::Overlong;
use domain::generation::{Concurrency, TurnMode};
use engine::export::conversation::Conversation;
use engine::export::tokenize::RowTokenizer;
use engine::generation::conversation::Turn;
use engine::testing::*;
use serde_json::{json, Value};
use std::time::Duration;

const MAX_TOKENS: u32 = 48;

/// The messages of the request that produced assistant turn `index` (history answers without
/// their reasoning, as generation sends them).
fn request_messages(turns: &[Turn], index: usize) -> Value {
    Value::Array(turns[..index].iter().map(|t| json!({"role": t.role, "content": t.content})).collect())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let prompts: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(40);
    let (base, model_dir) = real_vllm::server("http://127.0.0.1:8011")?;
    let pool = scratch_database::scratch_database("draft_studio_real_vllm_export").await?;

    // Half single-turn questions, half two-turn conversations regenerated turn by turn.
    let by = user(&pool).await;
    let endpoint = endpoint_at(&pool, &base, by).await;
    let single: Vec<String> =
        (0..prompts.div_ceil(2)).map(|i| format!("Question {i}: what is {i} times 7?")).collect();
    let single_set = dataset_of(&pool, &single).await;
    let multi: Vec<_> = (0..prompts / 2)
        .map(|i| two_turns(&format!("Tell me about the number {i}."), "And its square?"))
        .collect();
    let multi_set = dataset_of_conversations(&pool, &multi).await;
    let mut runs_made = Vec::new();
    for (set, turns) in [(single_set, TurnMode::LastAssistant), (multi_set, TurnMode::EveryAssistant)] {
        let mut s = settings(vec![endpoint]);
        s.model = "tiny".into();
        s.max_tokens = MAX_TOKENS;
        s.temperature = Some(0.0);
        s.turns = turns;
        s.concurrency = Concurrency::Fixed { limit: 1 };
        s.idle_timeout_secs = 60;
        runs_made.push(create_run(&pool, set, s, by).await);
    }
    let (stop, worker) = start_worker(&pool);
    for &run in &runs_made {
        wait_for_status(&pool, run, "completed", Duration::from_secs(1800)).await;
    }
    stop.cancel();
    worker.await??;
    let captured: i64 =
        sqlx::query_scalar("SELECT count(*) FROM samples WHERE captured_token_ids").fetch_one(&pool).await?;
    println!("generated {prompts} conversations; {captured} came with the server's token ids");

    let rows = real_vllm::export(&pool, &runs_made).await?;

    // The conversations behind the rows, by export id.
    let stored: Vec<(i64, String, Value)> = sqlx::query_as(
        "SELECT s.run_id, r.row_key, s.messages FROM samples s JOIN dataset_rows r ON r.id = s.row_id
         WHERE s.captured_token_ids",
    )
    .fetch_all(&pool)
    .await?;
    let ours = RowTokenizer::from_dir(&model_dir, 1 << 20, Overlong::Drop)?;
    let http = reqwest::Client::new();
    let mut tally = real_vllm::Tally::default();
    for (run, key, messages) in stored {
        let turns: Vec<Turn> = serde_json::from_value(messages)?;
        let id = format!("{run}-{key}");
        let assistant: Vec<usize> = (0..turns.len()).filter(|&i| turns[i].role == "assistant").collect();
        let conversation = Conversation { id: id.clone(), thinking: None, turns: turns.clone(), tools: None };
        let our_prompts = ours.turn_prompts(&conversation)?;
        for (k, &index) in assistant.iter().enumerate() {
            let row_id = if assistant.len() > 1 { format!("{id}_turn{k}") } else { id.clone() };
            let Some(row) = rows.iter().find(|r| r["id"] == row_id.as_str()) else {
                tally.missing(&row_id);
                continue;
            };
            let request = json!({"model": "tiny", "messages": request_messages(&turns, index), "max_tokens": MAX_TOKENS});
            let check = real_vllm::check(&http, &base, row, &request).await?;
            let ours = our_prompts.iter().find(|p| p.turn == index).map(|p| p.input_ids.as_slice());
            tally.add(&row_id, &check, ours);
        }
    }
    println!("{}", tally.summary());
    anyhow::ensure!(tally.checked > 0, "no row was checked");
    anyhow::ensure!(
        tally.prompt_diff + tally.completion_diff == 0,
        "exported rows differ from the server's ids"
    );
    Ok(())
}
