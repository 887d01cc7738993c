//! Dashboard benchmark (issue 5). Not a test: prints figures for the README.
//!
//!   cargo build --release -p server -p vllm-sim && cargo bench -p server --bench dashboard
//!
//! Starts the real `draft-studio serve` (release) on a scratch database and a simulator as
//! separate processes, creates a 100,000-sample run, and alternates phases with no dashboard
//! open and with 50 open through the SSE endpoint (A B A B ...). Reports the run's throughput in
//! each kind of phase (ratio), and the server's and PostgreSQL's CPU per viewer.
#![allow(clippy::unwrap_used)] // Benchmarks may unwrap: a failure there is a failure of the benchmark, with its message.

#[path = "common/procs.rs"]
mod procs;

use futures::StreamExt;
use procs::{bin as release_bin, cpu_secs, free_port, login, postgres_cpu_secs, Proc};
use sqlx::{migrate::MigrateDatabase, PgPool, Postgres};
use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

const SAMPLES: i64 = 100_000;
const VIEWERS: usize = 50;

struct Phase {
    viewers: usize,
    secs: f64,
    tokens: i64,
    server_cpu: f64,
    postgres_cpu: f64,
    events: usize,
}

#[tokio::main]
async fn main() {
    let phase_secs: u64 = std::env::var("BENCH_PHASE_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let base = std::env::var("BENCH_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let db_url = format!("{base}/draft_studio_bench_dashboard");
    let _ = Postgres::drop_database(&db_url).await;

    let sim_port = free_port();
    let _sim = Proc(
        Command::new(release_bin("vllm-sim"))
            .args(["--port", &sim_port.to_string(), "--time-scale", "20", "--max-num-seqs", "256"])
            .args(["--median-completion-tokens", "300", "--completion-cap", "4096"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("build first: cargo build --release -p server -p vllm-sim"),
    );
    let sim_url = format!("http://127.0.0.1:{sim_port}");
    procs::wait_for(&format!("{sim_url}/health"), Duration::from_secs(30)).await;

    let data = tempdir();
    let app_port = free_port();
    let app_url = format!("http://127.0.0.1:{app_port}");
    let bin = release_bin("draft-studio");
    let status = Command::new(&bin)
        .args(["user", "add", "bench", "--role", "admin"])
        .env("DATABASE_URL", &db_url)
        .env("DS_DATA_DIR", &data)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"bench-password-1\n")?;
            child.wait()
        })
        .expect("draft-studio user add");
    assert!(status.success());
    let server = Proc(
        Command::new(&bin)
            .arg("serve")
            .env("DATABASE_URL", &db_url)
            .env("DS_DATA_DIR", &data)
            .env("DS_BIND", format!("127.0.0.1:{app_port}"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    procs::wait_for(&format!("{app_url}/healthz"), Duration::from_secs(30)).await;
    let pool = PgPool::connect(&db_url).await.unwrap();
    let run_id = seed_run(&pool, &sim_url).await;
    println!("# Dashboard benchmark: run of {SAMPLES} samples, {VIEWERS} viewers, {rounds}×2 phases of {phase_secs} s\n");

    let cookie = login(&app_url, "bench", "bench-password-1").await;
    // Let the run reach its steady state first.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let mut phases = Vec::new();
    for _ in 0..rounds {
        for viewers in [0, VIEWERS] {
            phases.push(phase(&pool, server.0.id(), &app_url, &cookie, run_id, viewers, phase_secs).await);
        }
    }
    let sum = |v: usize, f: fn(&Phase) -> f64| phases.iter().filter(|p| p.viewers == v).map(f).sum::<f64>();
    let tps = |v| sum(v, |p| p.tokens as f64) / sum(v, |p| p.secs);
    let cpu = |v, f: fn(&Phase) -> f64| sum(v, f) / sum(v, |p| p.secs);
    println!("| phase | client tokens/s | server CPU (cores) | PostgreSQL CPU (cores) | events received |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for p in &phases {
        println!(
            "| {} viewers | {:.0} | {:.3} | {:.3} | {} |",
            p.viewers,
            p.tokens as f64 / p.secs,
            p.server_cpu / p.secs,
            p.postgres_cpu / p.secs,
            p.events
        );
    }
    let ratio = tps(VIEWERS) / tps(0);
    let per_viewer_server = (cpu(VIEWERS, |p| p.server_cpu) - cpu(0, |p| p.server_cpu)) / VIEWERS as f64;
    let per_viewer_pg = (cpu(VIEWERS, |p| p.postgres_cpu) - cpu(0, |p| p.postgres_cpu)) / VIEWERS as f64;
    println!("\nthroughput with {VIEWERS} viewers / without: {ratio:.3} (target ≥ 0.98)");
    println!(
        "CPU per viewer: server {:.2} ms/s, PostgreSQL {:.2} ms/s (all {VIEWERS} share one snapshot per second)",
        per_viewer_server * 1000.0,
        per_viewer_pg * 1000.0
    );
    sqlx::query("UPDATE runs SET status = 'cancelled', finished_at = now() WHERE id = $1")
        .bind(run_id)
        .execute(&pool)
        .await
        .unwrap();
    drop(server);
    pool.close().await;
    let _ = Postgres::drop_database(&db_url).await;
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ds-bench-dashboard-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A ready dataset of SAMPLES prompts, the simulator as an endpoint, and an adaptive run.
async fn seed_run(pool: &PgPool, sim_url: &str) -> i64 {
    let dataset: i64 = sqlx::query_scalar(
        "INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
         VALUES ('bench', 'ready', '{\"kind\":\"bench\"}', 'jsonl', '{\"schema\":\"openai\"}', $1) RETURNING id",
    )
    .bind(SAMPLES)
    .fetch_one(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
         SELECT $1, 'row-' || i, jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'Question ' || i || ': explain it.')),
                sha256(('row-' || i)::bytea), 'c' || (i % 7), 1, 25
         FROM generate_series(1, $2) AS i",
    )
    .bind(dataset)
    .bind(SAMPLES)
    .execute(pool)
    .await
    .unwrap();
    let http = engine::vllm::http_client();
    let by: i64 = sqlx::query_scalar("SELECT id FROM users LIMIT 1").fetch_one(pool).await.unwrap();
    let endpoint = engine::endpoints::create(
        pool,
        &http,
        engine::endpoints::NewEndpoint { name: "sim", base_url: sim_url, api_key: None },
        by,
    )
    .await
    .unwrap();
    let settings = domain::generation::RunSettings::with_defaults("sim-model", vec![endpoint.id], 4096);
    engine::runs::create(
        pool,
        &http,
        engine::runs::NewRun {
            name: "dashboard bench".into(),
            dataset_id: dataset,
            selection: domain::generation::Selection::All,
            settings,
            draft: None,
            trained_on: None,
        },
        by,
    )
    .await
    .unwrap()
}

async fn phase(
    pool: &PgPool,
    server_pid: u32,
    app_url: &str,
    cookie: &str,
    run_id: i64,
    viewers: usize,
    secs: u64,
) -> Phase {
    let stop = tokio_util::sync::CancellationToken::new();
    let counters: Vec<_> = (0..viewers)
        .map(|_| {
            let (url, cookie, stop) = (format!("{app_url}/api/runs/{run_id}/events"), cookie.to_string(), stop.clone());
            tokio::spawn(async move {
                let response = reqwest::Client::new().get(url).header("cookie", cookie).send().await.unwrap();
                assert!(response.status().is_success(), "events: {}", response.status());
                let mut body = response.bytes_stream();
                let mut events = 0;
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return events,
                        chunk = body.next() => match chunk {
                            Some(Ok(bytes)) => events += bytes.windows(15).filter(|w| w == b"event: snapshot").count(),
                            _ => return events,
                        }
                    }
                }
            })
        })
        .collect();
    // Let the viewers connect before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let tokens = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT COALESCE(sum(client_tokens), 0)::bigint FROM run_metrics WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap()
    };
    let (t0, cpu0, pg0, started) =
        (tokens().await, cpu_secs(server_pid), postgres_cpu_secs(), Instant::now());
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (t1, cpu1, pg1, elapsed) =
        (tokens().await, cpu_secs(server_pid), postgres_cpu_secs(), started.elapsed());
    stop.cancel();
    let mut events = 0;
    for c in counters {
        events += c.await.unwrap();
    }
    Phase {
        viewers,
        secs: elapsed.as_secs_f64(),
        tokens: t1 - t0,
        server_cpu: cpu1 - cpu0,
        postgres_cpu: pg1 - pg0,
        events,
    }
}
