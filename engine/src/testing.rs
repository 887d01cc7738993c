//! Test fixtures (feature `test-support`): a dataset written straight to the tables, a
//! simulator, an endpoint for it, and a worker to run. Used by the engine's and the server's
//! tests; never compiled into the app.

use crate::{
    generation::{runs, Worker, WorkerOptions},
    metrics::EngineMetrics,
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
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
         VALUES ($1, 'ready', '{\"kind\":\"test\"}', 'jsonl', '{\"schema\":\"openai\"}', $2) RETURNING id",
    )
    .bind(format!("ds-{}", rand::random::<u32>()))
    .bind(questions.len() as i64)
    .fetch_one(pool)
    .await
    .unwrap();
    for (i, question) in questions.iter().enumerate() {
        let messages = serde_json::json!([
            {"role": "user", "content": question},
            {"role": "assistant", "content": "an old answer"}
        ]);
        sqlx::query(
            "INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
             VALUES ($1, $2, $3, $4, $5, 2, $6)",
        )
        .bind(id)
        .bind(format!("row-{i}"))
        .bind(&messages)
        .bind(format!("hash-{i}").into_bytes())
        .bind(if i % 2 == 0 { "even" } else { "odd" })
        .bind(question.len() as i32)
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
        runs::NewRun { name: "test run".into(), dataset_id, selection: Selection::All, settings },
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
        let counts = state_counts(pool, run_id).await;
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {run_id} is {current}, not {status}, after {within:?}: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
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
