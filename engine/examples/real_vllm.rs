//! One run of the engine against a real vLLM server, beside a plain fixed-concurrency client on
//! the same server and prompts. Not part of CI: `scripts/real-vllm-check.sh` starts the server.
//!
//!   cargo run -p engine --features test-support --example real_vllm -- URL MODEL [PROMPTS]

#[allow(dead_code)] // the benchmark reads fields this check does not
#[path = "../benches/generation/baseline.rs"]
mod baseline;

use domain::generation::{Concurrency, RunSettings};
use engine::{generation::Worker, metrics::EngineMetrics, testing, vllm::http_client};
use sqlx::{migrate::MigrateDatabase, Postgres};
use std::{
    sync::Arc,
    time::{Duration, Instant},
};
use tokio_util::sync::CancellationToken;

const MAX_TOKENS: u32 = 256;
const BASELINE_CONCURRENCY: usize = 16;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).cloned().unwrap_or_else(|| "http://127.0.0.1:8011".into());
    let model = args.get(2).cloned().unwrap_or_else(|| "tiny".into());
    let n: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(200);
    let prompts: Vec<String> = (0..n)
        .map(|i| {
            format!("Question {i}: explain {} briefly.", ["sorting", "rain", "tax", "gravity", "TCP"][i % 5])
        })
        .collect();

    let server = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = format!("{}/draft_studio_real_vllm", server.rsplit_once('/').unwrap().0);
    let _ = Postgres::drop_database(&db).await;
    Postgres::create_database(&db).await.unwrap();
    let pool = engine::db::connect(&db, 16).await.unwrap();
    engine::db::migrate(&pool).await.unwrap();
    let by = testing::user(&pool).await;

    println!("# Real vLLM check: {n} prompts, max_tokens {MAX_TOKENS}, {url} model {model}\n");
    let start = Instant::now();
    let outcomes =
        baseline::run(&url, &model, &prompts, BASELINE_CONCURRENCY, Duration::from_secs(600), MAX_TOKENS)
            .await;
    let baseline_secs = start.elapsed().as_secs_f64();
    let baseline_tokens: u64 = outcomes.iter().filter_map(|o| o.tokens).map(u64::from).sum();
    let baseline_ok = outcomes.iter().filter(|o| o.tokens.is_some()).count();
    println!(
        "plain client, {BASELINE_CONCURRENCY} fixed, non-streaming: {baseline_ok}/{n} answered, {:.1} tokens/s over {baseline_secs:.0} s",
        baseline_tokens as f64 / baseline_secs
    );

    let dataset = testing::dataset_of(&pool, &prompts).await;
    let endpoint = testing::endpoint_at(&pool, &url, by).await;
    let mut settings = RunSettings::with_defaults(model.clone(), vec![endpoint], MAX_TOKENS);
    settings.concurrency = Concurrency::Adaptive { min: 4, max: 64 };
    let run = testing::create_run(&pool, dataset, settings, by).await;
    let stop = CancellationToken::new();
    let worker =
        Worker::new(pool.clone(), http_client(), Arc::new(EngineMetrics::default()), Default::default());
    let start = Instant::now();
    let handle = tokio::spawn(worker.run(stop.clone()));
    testing::wait_for_status(&pool, run, "completed", Duration::from_secs(3600)).await;
    let secs = start.elapsed().as_secs_f64();
    stop.cancel();
    handle.await.unwrap().unwrap();

    let tokens: i64 = sqlx::query_scalar(
        // Every settled sample's tokens, truncated ones too, as the plain client counts them.
        "SELECT COALESCE(sum(completion_tokens), 0)::bigint FROM samples WHERE run_id = $1",
    )
    .bind(run)
    .fetch_one(&pool)
    .await
    .unwrap();
    println!("Draft Studio, adaptive 4–64, streaming: {:.1} tokens/s over {secs:.0} s", tokens as f64 / secs);
    let rows: Vec<(String, Option<String>, i64, i64, i64)> = sqlx::query_as(
        "SELECT state::text, finish_reason, count(*), count(*) FILTER (WHERE reasoning <> ''),
                count(*) FILTER (WHERE reasoning_tokens IS NOT NULL)
         FROM samples WHERE run_id = $1 GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .bind(run)
    .fetch_all(&pool)
    .await
    .unwrap();
    println!("\n| outcome | finish_reason | samples | with reasoning text | with reasoning_tokens |\n| --- | --- | ---: | ---: | ---: |");
    for (state, finish, count, reasoning, reasoning_tokens) in rows {
        println!(
            "| {state} | {} | {count} | {reasoning} | {reasoning_tokens} |",
            finish.unwrap_or_else(|| "—".into())
        );
    }
    let tries: Vec<(String, Option<String>, i64)> = sqlx::query_as(
        "SELECT a.result, a.error_kind, count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 GROUP BY 1, 2 ORDER BY 3 DESC",
    )
    .bind(run)
    .fetch_all(&pool)
    .await
    .unwrap();
    println!("\ntries: {tries:?}");
    let limit: (i32, String) =
        sqlx::query_as("SELECT concurrency_limit, limit_reason FROM run_endpoints WHERE run_id = $1")
            .bind(run)
            .fetch_one(&pool)
            .await
            .unwrap();
    let metrics: (i64, i64) =
        sqlx::query_as("SELECT count(*), count(server_generation_tps) FROM run_metrics WHERE run_id = $1")
            .bind(run)
            .fetch_one(&pool)
            .await
            .unwrap();
    println!(
        "final limit {} ({}); {} of {} recorded seconds carried the server's /metrics",
        limit.0, limit.1, metrics.1, metrics.0
    );
    pool.close().await;
    let _ = Postgres::drop_database(&db).await;
}
