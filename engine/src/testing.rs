//! Test fixtures (feature `test-support`): a dataset written straight to the tables, a
//! simulator, an endpoint for it, and a worker to run. Used by the engine's and the server's
//! tests; never compiled into the app.
#![allow(clippy::unwrap_used)] // Test fixtures may unwrap: a failure there fails the test that asked for them.

use crate::{
    generation::{Worker, WorkerOptions},
    metrics::EngineMetrics,
    runs,
    vllm::http_client,
};
use domain::generation::{RunSettings, SampleState, Selection};
use sqlx::PgPool;
use std::{sync::Arc, time::Duration};
use tokio_util::sync::CancellationToken;
use vllm_sim::{RunningSim, SimConfig};

pub const MODEL: &str = "sim-model";

/// A fast simulator: 50× time, short completions, no throughput cap.
pub fn fast_sim() -> SimConfig {
    let mut config = SimConfig { time_scale: 50.0, ..Default::default() };
    config.engine.aggregate_tokens_per_s = 0.0;
    config.engine.per_seq_tokens_per_s = 400.0;
    config.lengths.median_completion_tokens = 40;
    config.lengths.completion_sigma = 0.6;
    config.lengths.completion_cap = 300;
    config
}

pub async fn sim(config: SimConfig) -> RunningSim {
    vllm_sim::spawn(config).await.expect("simulator starts")
}

pub async fn user(pool: &PgPool) -> i64 {
    crate::auth::create_user(
        pool,
        crate::auth::NewUser { username: "eng", password: "engineer-password", role: domain::Role::Engineer },
    )
    .await
    .unwrap()
    .id
}

/// A ready dataset of `n` conversations, each a user question (and an old answer).
pub async fn dataset(pool: &PgPool, n: usize) -> i64 {
    let questions: Vec<String> = (0..n)
        .map(|i| format!("Question {i}: explain topic number {i} in a few sentences, please."))
        .collect();
    dataset_of(pool, &questions).await
}

/// A ready dataset with one conversation per question (category alternating even/odd).
pub async fn dataset_of(pool: &PgPool, questions: &[String]) -> i64 {
    let conversations: Vec<serde_json::Value> = questions
        .iter()
        .map(|question| {
            serde_json::json!([
                {"role": "user", "content": question},
                {"role": "assistant", "content": "an old answer"}
            ])
        })
        .collect();
    dataset_of_conversations(pool, &conversations).await
}

/// Two user turns, each followed by an old answer that a run regenerates.
pub fn two_turns(first: &str, second: &str) -> serde_json::Value {
    serde_json::json!([
        {"role": "user", "content": first},
        {"role": "assistant", "content": "an old answer"},
        {"role": "user", "content": second},
        {"role": "assistant", "content": "another old answer"}
    ])
}

/// A ready dataset holding `conversations` (each a JSON array of `{role, content}`) as rows
/// `row-0`, `row-1`, ... (category alternating even/odd).
pub async fn dataset_of_conversations(pool: &PgPool, conversations: &[serde_json::Value]) -> i64 {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
         VALUES ($1, 'ready', '{\"kind\":\"test\"}', 'jsonl', '{\"schema\":\"openai\"}', $2) RETURNING id",
    )
    .bind(format!("ds-{}", rand::random::<u32>()))
    .bind(conversations.len() as i64)
    .fetch_one(pool)
    .await
    .unwrap();
    for (i, messages) in conversations.iter().enumerate() {
        let turns = messages.as_array().map_or(0, Vec::len);
        let prompt_chars: usize = messages
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .map(str::len)
            .sum();
        sqlx::query(
            "INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(id)
        .bind(format!("row-{i}"))
        .bind(messages)
        .bind(format!("hash-{i}").into_bytes())
        .bind(if i % 2 == 0 { "even" } else { "odd" })
        .bind(turns as i32)
        .bind(prompt_chars as i32)
        .execute(pool)
        .await
        .unwrap();
    }
    id
}

/// Registers an endpoint for any server root.
pub async fn endpoint_at(pool: &PgPool, base_url: &str, by: i64) -> i64 {
    crate::endpoints::create(
        pool,
        &http_client(),
        crate::endpoints::NewEndpoint {
            name: &format!("ep-{}", rand::random::<u32>()),
            base_url,
            api_key: None,
        },
        by,
    )
    .await
    .expect("endpoint registers")
    .id
}

pub async fn endpoint(pool: &PgPool, sim: &RunningSim, by: i64) -> i64 {
    crate::endpoints::create(
        pool,
        &http_client(),
        crate::endpoints::NewEndpoint {
            name: &format!("sim-{}", sim.addr().port()),
            base_url: &sim.base_url(),
            api_key: None,
        },
        by,
    )
    .await
    .expect("endpoint registers")
    .id
}

pub fn settings(endpoint_ids: Vec<i64>) -> RunSettings {
    let mut s = RunSettings::with_defaults(MODEL, endpoint_ids, 1024);
    s.idle_timeout_secs = 5;
    s
}

pub async fn create_run(pool: &PgPool, dataset_id: i64, settings: RunSettings, by: i64) -> i64 {
    runs::create(
        pool,
        &http_client(),
        runs::NewRun {
            name: "test run".into(),
            dataset_id,
            selection: Selection::All,
            settings,
            draft: None,
            trained_on: None,
        },
        by,
    )
    .await
    .expect("run is created")
}

pub fn test_options() -> WorkerOptions {
    WorkerOptions { lease: Duration::from_secs(2), tick: Duration::from_millis(200), claim_batch: 16 }
}

/// A worker running in this process until the returned token is cancelled.
pub fn start_worker(pool: &PgPool) -> (CancellationToken, tokio::task::JoinHandle<crate::Result<()>>) {
    let stop = CancellationToken::new();
    let worker = Worker::new(pool.clone(), http_client(), Arc::new(EngineMetrics::default()), test_options());
    let handle = tokio::spawn(worker.run(stop.clone()));
    (stop, handle)
}

pub async fn wait_for_status(pool: &PgPool, run_id: i64, status: &str, within: Duration) {
    wait_for_status_every(pool, run_id, status, within, Duration::from_millis(100)).await
}

/// `wait_for_status`, asking every `poll` (a benchmark polls slowly, so as not to take CPU from
/// a server on the same machine).
pub async fn wait_for_status_every(
    pool: &PgPool,
    run_id: i64,
    status: &str,
    within: Duration,
    poll: Duration,
) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let current: String = sqlx::query_scalar("SELECT status::text FROM runs WHERE id = $1")
            .bind(run_id)
            .fetch_one(pool)
            .await
            .unwrap();
        if current == status {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            let counts = state_counts(pool, run_id).await;
            type Try = (i64, String, bool, Option<String>, Option<String>);
            let tries: Vec<Try> = sqlx::query_as(
                "SELECT a.sample_id, a.result, a.counted, a.error_kind, a.error FROM sample_attempts a
                 JOIN samples s ON s.id = a.sample_id WHERE s.run_id = $1 ORDER BY a.id DESC LIMIT 20",
            )
            .bind(run_id)
            .fetch_all(pool)
            .await
            .unwrap_or_default();
            panic!("run {run_id} is {current}, not {status}, after {within:?}: {counts:?}; latest tries: {tries:#?}");
        }
        tokio::time::sleep(poll).await;
    }
}

pub async fn state_counts(pool: &PgPool, run_id: i64) -> Vec<(SampleState, i64)> {
    sqlx::query_as("SELECT state, count(*) FROM samples WHERE run_id = $1 GROUP BY state ORDER BY state")
        .bind(run_id)
        .fetch_all(pool)
        .await
        .unwrap()
}

pub async fn count(pool: &PgPool, sql: &str, run_id: i64) -> i64 {
    sqlx::query_scalar(sql).bind(run_id).fetch_one(pool).await.unwrap()
}

/// Tries of the run recorded as abandoned (cut by a stop or a lost lease); a sample claimed
/// ahead of a free slot and never sent must record none.
pub async fn abandoned_tries(pool: &PgPool, run_id: i64) -> i64 {
    count(
        pool,
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND a.result = 'abandoned'",
        run_id,
    )
    .await
}

/// Every sample terminal, and exactly one counted try ended each (no sample has two results).
pub async fn assert_exactly_one_result_each(pool: &PgPool, run_id: i64) {
    let open = count(
        pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND state IN ('pending','running')",
        run_id,
    )
    .await;
    assert_eq!(open, 0, "samples still open");
    let bad = count(
        pool,
        "SELECT count(*) FROM samples s WHERE s.run_id = $1 AND (
             SELECT count(*) FROM sample_attempts a
             WHERE a.sample_id = s.id AND a.counted AND a.result IN ('ok','truncated','empty')) > 1",
        run_id,
    )
    .await;
    assert_eq!(bad, 0, "samples with two successful results");
}

/// A finished sample to seed for export tests: its outcome, mode, conversation and size.
#[derive(Clone, Debug)]
pub struct SeedSample {
    pub state: SampleState,
    pub thinking: Option<bool>,
    /// The stored conversation: `[{"role","content","reasoning_content"?}]`.
    pub messages: serde_json::Value,
    pub category: &'static str,
    pub completion_tokens: i32,
}

impl SeedSample {
    /// An `ok` single-turn sample answering `question` with `answer` after `reasoning`.
    pub fn answered(question: &str, reasoning: &str, answer: &str) -> Self {
        Self {
            state: SampleState::Ok,
            thinking: Some(!reasoning.is_empty()),
            messages: serde_json::json!([
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer, "reasoning_content": reasoning}
            ]),
            category: "general",
            completion_tokens: (reasoning.len() + answer.len()) as i32 / 4 + 1,
        }
    }
}

/// A completed run (with its dataset) holding exactly `samples`, in order; returns the run id.
pub async fn finished_run(pool: &PgPool, samples: &[SeedSample]) -> i64 {
    let dataset: i64 = sqlx::query_scalar(
        "INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
         VALUES ($1, 'ready', '{\"kind\":\"test\"}', 'jsonl', '{\"schema\":\"openai\"}', $2) RETURNING id",
    )
    .bind(format!("export-ds-{}", rand::random::<u32>()))
    .bind(samples.len() as i64)
    .fetch_one(pool)
    .await
    .unwrap();
    let settings = domain::stored::to_stored(&RunSettings::with_defaults(MODEL, vec![], 2048));
    let run: i64 = sqlx::query_scalar(
        "INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count, finished_at)
         VALUES ('export test run', $1, 'completed', $2, '{\"mode\":\"all\"}', $3, now()) RETURNING id",
    )
    .bind(dataset)
    .bind(settings)
    .bind(samples.len() as i32)
    .fetch_one(pool)
    .await
    .unwrap();
    for (i, s) in samples.iter().enumerate() {
        let row: i64 = sqlx::query_scalar(
            "INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
             VALUES ($1, $2, $3, $4, $5, 2, 10) RETURNING id",
        )
        .bind(dataset)
        .bind(format!("row-{i}"))
        .bind(&s.messages)
        .bind(format!("hash-{i}").into_bytes())
        .bind(s.category)
        .fetch_one(pool)
        .await
        .unwrap();
        let last = s.messages.as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        sqlx::query(
            "INSERT INTO samples (run_id, row_id, state, thinking, attempts, finish_reason, reasoning, content,
                                  messages, prompt_tokens, completion_tokens, reasoning_tokens, finished_at)
             VALUES ($1, $2, $3, $4, 1, 'stop', $5, $6, $7, 20, $8, 0, now())",
        )
        .bind(run)
        .bind(row)
        .bind(s.state)
        .bind(s.thinking)
        .bind(last.get("reasoning_content").and_then(|v| v.as_str()).unwrap_or(""))
        .bind(last.get("content").and_then(|v| v.as_str()).unwrap_or(""))
        .bind(&s.messages)
        .bind(s.completion_tokens)
        .execute(pool)
        .await
        .unwrap();
    }
    run
}

/// Stores, for every assistant turn of each sample of `run` (from the second message on), the ids
/// a server that regenerated the turns one by one and wrote the tokenizer's own tokens reports:
/// the prompt as `tokenizer`'s template renders it (the row's tools offered as vLLM serves them),
/// the answer through the token `end` (`<|im_end|>`), never the text the template writes after it,
/// which a server does not sample. Panics where a turn's prompt is not how the turn's own render
/// begins: there no server's ids are the tokenizer's own.
pub async fn seed_rendered_ids(
    pool: &PgPool,
    run: i64,
    tokenizer: &crate::export::tokenize::RowTokenizer,
    end: &str,
) {
    use crate::export::conversation::Conversation;
    use crate::generation::conversation::Turn;
    let end = tokenizer.tokenizer().token_to_id(end).unwrap_or_else(|| panic!("the tokenizer has no {end}"));
    type Row = (i64, serde_json::Value, Option<bool>, Option<serde_json::Value>);
    let samples: Vec<Row> = sqlx::query_as(
        "SELECT s.id, s.messages, s.thinking, r.tools FROM samples s JOIN dataset_rows r ON r.id = s.row_id
         WHERE s.run_id = $1 ORDER BY s.id",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap();
    for (id, messages, thinking, tools) in samples {
        let turns: Vec<Turn> = serde_json::from_value(messages).unwrap();
        let tools = tools.as_ref().map(domain::conversation::served_tools);
        let assistants = (1..turns.len()).filter(|&i| turns[i].role == "assistant");
        for (k, i) in assistants.enumerate() {
            let upto = Conversation {
                id: id.to_string(),
                thinking,
                turns: turns[..=i].to_vec(),
                tools: tools.clone(),
            };
            let full = tokenizer.encode_conversation(&upto).unwrap().input_ids;
            let prompt = tokenizer.turn_prompts(&upto).unwrap().pop().unwrap().input_ids;
            assert!(
                full.starts_with(&prompt),
                "sample {id}: the prompt of turn {i} is not how the turn begins"
            );
            let stop = full.iter().rposition(|&t| t == end).unwrap();
            sqlx::query("INSERT INTO sample_tokens (sample_id, turn, prompt_ids, completion_ids) VALUES ($1, $2, $3, $4)")
                .bind(id)
                .bind(k as i16)
                .bind(crate::samples::token_ids::pack(&prompt))
                .bind(crate::samples::token_ids::pack(&full[prompt.len()..=stop]))
                .execute(pool)
                .await
                .unwrap();
        }
        sqlx::query("UPDATE samples SET captured_token_ids = true WHERE id = $1")
            .bind(id)
            .execute(pool)
            .await
            .unwrap();
    }
}
