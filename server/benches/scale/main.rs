//! Scale benchmark (issue 38): the seed's run at its real size through the whole product, with
//! faults along the way. Not a test, not in CI; started by `scripts/bench-scale.sh`.
//!
//! 1. Imports `BENCH_PROMPTS` (25,000) prompts from a Parquet file shaped like a hub dataset
//!    (`id`, `category`, `messages`) through the API.
//! 2. Runs them once with adaptive concurrency across two simulators of the `seed-deployment`
//!    profile (completions of about 1,260 tokens with a tail to 8,192) at `BENCH_TIME_SCALE`
//!    (10) times real speed. Along the way: a SIGKILL of the app and a restart (at 20% of the
//!    samples finished), one simulator answering 503 for `BENCH_OUTAGE_SECS` (60) simulated
//!    seconds, as the whole run is in simulated time (at 40%), a restart of PostgreSQL (at 60%).
//! 3. Times the run page's snapshot every second during the run; then the review list, its
//!    counts, the sample page and the pages a user opens, a bulk approval by filter, and exports
//!    of the approved set as SpecForge JSONL and as pre-tokenized Parquet (time and the app's
//!    peak memory).
//! 4. Runs the same prompts again at a fixed limit (`BENCH_FIXED`, 256, the best of the
//!    generation benchmark's sweep on this profile) without faults, for the ratio of useful
//!    tokens per second over the whole run; `BENCH_BASELINE=0` leaves it out.
//!
//! Reports samples lost and done twice, useful tok/s against the fixed limit, the app's peak
//! memory, PostgreSQL bytes per sample, and p50/p95/max of every timed call, as markdown.
#![allow(clippy::unwrap_used)] // Benchmarks may unwrap: a failure there is a failure of the benchmark, with its message.

#[path = "../common/procs.rs"]
mod procs;

use procs::{free_port, percentiles, rss_bytes, wait_for, Proc};
use serde_json::{json, Value};
use sqlx::{migrate::MigrateDatabase, PgPool, Postgres};
use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicU32, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

const DB_NAME: &str = "draft_studio_bench_scale";
const USER: &str = "bench";
const PASSWORD: &str = "bench-password-1";

fn knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The app under test: one `draft-studio serve` at a time, which the benchmark kills and
/// starts again. Its current pid is shared with the memory sampler.
struct App {
    env: Vec<(String, String)>,
    url: String,
    process: Option<Proc>,
    pid: Arc<AtomicU32>,
}

impl App {
    async fn start(&mut self) {
        let child = Command::new(procs::bin("draft-studio"))
            .arg("serve")
            .envs(self.env.iter().cloned())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file("app.log")))
            .spawn()
            .expect("build first: scripts/bench-scale.sh builds the app and the simulator");
        self.pid.store(child.id(), Ordering::Relaxed);
        self.process = Some(Proc(child));
        wait_for(&format!("{}/healthz", self.url), Duration::from_secs(60)).await;
    }

    /// SIGKILL: no shutdown hook runs, leases are left to expire.
    fn kill(&mut self) {
        self.pid.store(0, Ordering::Relaxed);
        drop(self.process.take());
    }

    fn command(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut child = Command::new(procs::bin("draft-studio"))
            .args(args)
            .envs(self.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        if let Some(input) = stdin {
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "draft-studio {args:?} failed");
        String::from_utf8(out.stdout).unwrap()
    }
}

fn log_dir() -> PathBuf {
    std::env::temp_dir().join("ds-bench-scale")
}

fn log_file(name: &str) -> std::fs::File {
    std::fs::OpenOptions::new().create(true).append(true).open(log_dir().join(name)).unwrap()
}

/// The app's resident memory, sampled every 100 ms: the peak of the whole benchmark and of the
/// current window.
#[derive(Default)]
struct Memory {
    peak: AtomicU64,
    window: AtomicU64,
}

impl Memory {
    fn sample(self: &Arc<Self>, pid: Arc<AtomicU32>) {
        let memory = self.clone();
        tokio::spawn(async move {
            loop {
                let rss = match pid.load(Ordering::Relaxed) {
                    0 => 0,
                    pid => rss_bytes(pid),
                };
                memory.peak.fetch_max(rss, Ordering::Relaxed);
                memory.window.fetch_max(rss, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }

    fn new_window(&self) {
        self.window.store(0, Ordering::Relaxed);
    }
}

/// The API with a token. Calls are retried while the app is away (killed, restarting, or its
/// database restarting), so the benchmark's own polling never counts as a lost sample.
struct Api {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Api {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Value {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let mut request =
                self.http.request(method.clone(), format!("{}{path}", self.url)).bearer_auth(&self.token);
            if let Some(body) = body {
                request = request.json(body);
            }
            match request.send().await {
                Ok(r) if r.status().is_success() => return r.json().await.unwrap(),
                Ok(r) if r.status().is_client_error() => {
                    let status = r.status();
                    panic!("{method} {path}: {status} {}", r.text().await.unwrap_or_default())
                }
                other if Instant::now() > deadline => panic!("{method} {path}: {other:?}"),
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: &Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// Milliseconds to the whole body of `path`, requested `times` times in a row.
    async fn time(&self, path: &str, cookie: Option<&str>, times: usize) -> Vec<f64> {
        let mut ms = Vec::with_capacity(times);
        for _ in 0..times {
            let mut request = self.http.get(format!("{}{path}", self.url));
            request = match cookie {
                Some(cookie) => request.header("cookie", cookie),
                None => request.bearer_auth(&self.token),
            };
            let started = Instant::now();
            let response = request.send().await.unwrap();
            let status = response.status();
            let body = response.bytes().await.unwrap();
            ms.push(started.elapsed().as_secs_f64() * 1000.0);
            assert!(status.is_success(), "GET {path}: {status} {}", String::from_utf8_lossy(&body));
        }
        ms
    }
}

/// A hub-shaped dataset: an id, a category and an OpenAI `messages` list holding one user
/// prompt of a few hundred tokens, written as JSON Lines and converted to Parquet.
fn write_dataset(dir: &Path, prompts: usize) -> PathBuf {
    const CATEGORIES: &[&str] = &["math", "code", "reasoning", "writing", "chat", "science", "agentic"];
    const WORDS: &[&str] = &[
        "explain",
        "the",
        "proof",
        "of",
        "a",
        "lemma",
        "about",
        "graphs",
        "write",
        "function",
        "that",
        "sorts",
        "numbers",
        "compare",
        "two",
        "approaches",
        "to",
        "caching",
        "describe",
        "why",
        "training",
        "diverges",
        "when",
        "learning",
        "rate",
        "is",
        "high",
        "summarise",
        "this",
        "paper",
        "on",
        "speculative",
        "decoding",
    ];
    let jsonl = dir.join("prompts.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&jsonl).unwrap());
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..prompts {
        let words = 40 + (next() % 400) as usize;
        let text: Vec<&str> = (0..words).map(|_| WORDS[(next() % WORDS.len() as u64) as usize]).collect();
        let row = json!({
            "id": format!("seed-{i:06}"),
            "category": CATEGORIES[i % CATEGORIES.len()],
            "messages": [{"role": "user", "content": format!("Prompt {i}: {}?", text.join(" "))}],
        });
        serde_json::to_writer(&mut out, &row).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let parquet = dir.join("prompts.parquet");
    engine::dataset_files::jsonl_to_parquet(&jsonl, &parquet).unwrap();
    std::fs::remove_file(&jsonl).unwrap();
    parquet
}

/// What a run did, read from the database once it ended.
struct RunResult {
    secs: f64,
    useful_tokens: i64,
    samples: i64,
    by_state: Vec<(String, i64)>,
    /// Samples that did not end in an answer (ok or truncated at max_tokens).
    lost: i64,
    /// Samples with more than one try that ran to an answer.
    done_twice: i64,
}

impl RunResult {
    async fn read(pool: &PgPool, run: i64) -> Self {
        let by_state: Vec<(String, i64)> = sqlx::query_as(
            "SELECT state::text, count(*) FROM samples WHERE run_id = $1 GROUP BY 1 ORDER BY 2 DESC",
        )
        .bind(run)
        .fetch_all(pool)
        .await
        .unwrap();
        let samples = by_state.iter().map(|(_, n)| n).sum();
        let lost = by_state.iter().filter(|(s, _)| s != "ok" && s != "truncated").map(|(_, n)| n).sum();
        let (secs, useful_tokens): (f64, i64) = sqlx::query_as(
            "SELECT EXTRACT(EPOCH FROM max(a.finished_at) - min(a.started_at))::float8,
                    (SELECT COALESCE(sum(completion_tokens), 0)::bigint FROM samples
                     WHERE run_id = $1 AND state IN ('ok', 'truncated'))
             FROM sample_attempts a JOIN samples s ON s.id = a.sample_id WHERE s.run_id = $1",
        )
        .bind(run)
        .fetch_one(pool)
        .await
        .unwrap();
        let done_twice: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT a.sample_id FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
              WHERE s.run_id = $1 AND a.result IN ('ok', 'truncated', 'empty')
              GROUP BY a.sample_id HAVING count(*) > 1) AS twice",
        )
        .bind(run)
        .fetch_one(pool)
        .await
        .unwrap();
        RunResult { secs, useful_tokens, samples, by_state, lost, done_twice }
    }
}

/// Simulators' requests that ran to an answer (stop or length).
async fn sim_answers(http: &reqwest::Client, sims: &[String]) -> i64 {
    let mut n = 0;
    for sim in sims {
        let stats: Value = http.get(format!("{sim}/sim/stats")).send().await.unwrap().json().await.unwrap();
        n += stats["requests_finished"]["stop"].as_i64().unwrap()
            + stats["requests_finished"]["length"].as_i64().unwrap();
    }
    n
}

fn restart_postgres() {
    let version = std::fs::read_dir("/etc/postgresql")
        .expect("PostgreSQL of Debian's packages (/etc/postgresql)")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .max()
        .unwrap();
    let status = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status()
        .unwrap();
    assert!(status.success(), "pg_ctlcluster restart failed");
}

fn row(name: &str, ms: Vec<f64>) -> String {
    let (p50, p95, max) = percentiles(ms);
    format!("| {name} | {p50:.1} | {p95:.1} | {max:.1} |")
}

#[tokio::main]
async fn main() {
    let prompts: usize = knob("BENCH_PROMPTS", 25_000);
    let time_scale: f64 = knob("BENCH_TIME_SCALE", 10.0);
    let fixed: u32 = knob("BENCH_FIXED", 256);
    let baseline = knob("BENCH_BASELINE", 1) == 1;
    let faults = knob("BENCH_FAULTS", 1) == 1;
    let outage_secs: u64 = knob("BENCH_OUTAGE_SECS", 60);
    let base = std::env::var("BENCH_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let db_url = format!("{base}/{DB_NAME}");
    let _ = Postgres::drop_database(&db_url).await;
    let _ = std::fs::remove_dir_all(log_dir());
    std::fs::create_dir_all(log_dir()).unwrap();
    let data = log_dir().join("data");
    let datasets = data.join("datasets");
    let exports = data.join("exports");
    std::fs::create_dir_all(&datasets).unwrap();
    let tokenizer = exports.join("tokenizers/qwen");
    std::fs::create_dir_all(&tokenizer).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/fixtures/tokenizers/qwen");
    for file in std::fs::read_dir(&fixture).unwrap().flatten() {
        std::fs::copy(file.path(), tokenizer.join(file.file_name())).unwrap();
    }
    let started = Instant::now();
    let parquet = write_dataset(&datasets, prompts);
    let parquet_mib = std::fs::metadata(&parquet).unwrap().len() as f64 / (1 << 20) as f64;
    println!(
        "# Scale benchmark: {prompts} prompts, two seed-deployment simulators at {time_scale}× real time\n"
    );
    println!(
        "- dataset written: {parquet_mib:.1} MiB of Parquet in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut sims = Vec::new();
    let mut sim_urls = Vec::new();
    for name in ["sim-a", "sim-b"] {
        let port = free_port();
        let child = Command::new(procs::bin("vllm-sim"))
            .args(["--profile", "seed-deployment", "--time-scale", &time_scale.to_string()])
            .args(["--port", &port.to_string(), "--model", "seed-model"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file(&format!("{name}.log"))))
            .spawn()
            .unwrap();
        sims.push(Proc(child));
        let url = format!("http://127.0.0.1:{port}");
        wait_for(&format!("{url}/health"), Duration::from_secs(30)).await;
        sim_urls.push(url);
    }

    let port = free_port();
    let pid = Arc::new(AtomicU32::new(0));
    let mut app = App {
        env: vec![
            ("DATABASE_URL".into(), db_url.clone()),
            ("DS_DATA_DIR".into(), data.to_string_lossy().into()),
            ("DS_BIND".into(), format!("127.0.0.1:{port}")),
        ],
        url: format!("http://127.0.0.1:{port}"),
        process: None,
        pid: pid.clone(),
    };
    app.command(&["migrate"], None);
    app.command(&["user", "add", USER, "--role", "admin"], Some(&format!("{PASSWORD}\n")));
    let token = app
        .command(&["token", "create", USER, "--name", "bench"], None)
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_string();
    let memory = Arc::new(Memory::default());
    memory.sample(pid.clone());
    app.start().await;
    // A call that hangs fails the benchmark instead of stalling it.
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let api = Api { http, url: app.url.clone(), token };

    // 1. Import.
    memory.new_window();
    let started = Instant::now();
    let dataset = api
        .post(
            "/api/v1/datasets",
            &json!({"name": "seed prompts", "source": {"kind": "path", "path": parquet.to_string_lossy()}}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    loop {
        let d = api.get(&format!("/api/v1/datasets/{dataset}")).await;
        match d["summary"]["status"].as_str() {
            Some("ready") => break,
            Some("failed") => panic!("the import failed: {d}"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let import_secs = started.elapsed().as_secs_f64();
    println!(
        "- import: {prompts} rows in {import_secs:.1} s ({:.0} rows/s), app peak {:.0} MiB",
        prompts as f64 / import_secs,
        memory.window.load(Ordering::Relaxed) as f64 / (1 << 20) as f64
    );
    let mut endpoints = Vec::new();
    for (i, url) in sim_urls.iter().enumerate() {
        let e = api.post("/api/v1/endpoints", &json!({"name": format!("sim-{i}"), "base_url": url})).await;
        endpoints.push(e["id"].as_i64().unwrap());
    }

    // 2. The run, with faults.
    let run_body = |name: &str, concurrency: Value| {
        let mut body = json!({
            "name": name, "dataset_id": dataset, "endpoint_ids": endpoints, "model": "seed-model",
            "max_tokens": 8192,
        });
        body.as_object_mut().unwrap().extend(concurrency.as_object().unwrap().clone());
        body
    };
    memory.new_window();
    let run = api
        .post("/api/v1/runs", &run_body("seed run, adaptive", json!({"concurrency": "adaptive"})))
        .await["id"]
        .as_i64()
        .unwrap();
    let mut snapshot_ms = Vec::new();
    let mut faults_done = 0;
    let mut fault_log = Vec::new();
    let run_started = Instant::now();
    loop {
        let t = Instant::now();
        let snapshot = api.get(&format!("/api/v1/runs/{run}")).await;
        snapshot_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let counts = &snapshot["counts"];
        let finished: i64 = ["ok", "truncated", "timed_out", "failed", "empty"]
            .iter()
            .map(|k| counts[k].as_i64().unwrap_or(0))
            .sum();
        let share = finished as f64 / prompts as f64;
        let at = run_started.elapsed().as_secs_f64();
        if faults && faults_done == 0 && share >= 0.2 {
            app.kill();
            let down = Instant::now();
            app.start().await;
            fault_log.push(format!(
                "{at:.0} s, {finished} finished: app killed (SIGKILL) and started again ({:.1} s to healthy)",
                down.elapsed().as_secs_f64()
            ));
            faults_done = 1;
        } else if faults && faults_done == 1 && share >= 0.4 {
            api.http
                .post(format!("{}/sim/control", sim_urls[0]))
                .json(&json!({"unavailable_for_ms": outage_secs * 1000, "unavailable_status": 503}))
                .send()
                .await
                .unwrap();
            fault_log.push(format!(
                "{at:.0} s, {finished} finished: sim-0 answers 503 for {outage_secs} simulated s ({:.0} s)",
                outage_secs as f64 / time_scale
            ));
            faults_done = 2;
        } else if faults && faults_done == 2 && share >= 0.6 {
            let t = Instant::now();
            restart_postgres();
            fault_log.push(format!(
                "{at:.0} s, {finished} finished: PostgreSQL restarted ({:.1} s)",
                t.elapsed().as_secs_f64()
            ));
            faults_done = 3;
        }
        match snapshot["status"].as_str() {
            Some("completed") | Some("failed") | Some("cancelled") => break,
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    let run_memory = memory.window.load(Ordering::Relaxed);
    for line in &fault_log {
        println!("- fault at {line}");
    }
    let pool = PgPool::connect(&db_url).await.unwrap();
    let adaptive = RunResult::read(&pool, run).await;
    let answers = sim_answers(&api.http, &sim_urls).await;
    println!(
        "- run: {} samples in {:.0} s ({:.0} simulated), states {:?}; {} useful completion tokens",
        adaptive.samples,
        adaptive.secs,
        adaptive.secs * time_scale,
        adaptive.by_state,
        adaptive.useful_tokens
    );
    println!(
        "- **lost: {}**, **done twice: {}** (samples with two tries that ran to an answer); the simulators \
         answered {answers} requests for {} answers kept",
        adaptive.lost,
        adaptive.done_twice,
        adaptive.samples - adaptive.lost
    );
    println!("- app peak memory during the run: {:.0} MiB", run_memory as f64 / (1 << 20) as f64);
    let (db_bytes, sample_bytes): (i64, i64) = sqlx::query_as(
        "SELECT pg_database_size(current_database()),
                (SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
                 WHERE c.relkind = 'r' AND c.relname IN ('samples', 'sample_search', 'sample_attempts', 'sample_tokens', 'sample_tally', 'review_events'))",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    println!(
        "- PostgreSQL: {:.0} bytes per sample in the whole database (dataset rows included), {:.0} in the sample tables",
        db_bytes as f64 / adaptive.samples as f64,
        sample_bytes as f64 / adaptive.samples as f64
    );

    // 3. Pages, review, bulk approval, exports.
    let cookie = procs::login(&app.url, USER, PASSWORD).await;
    let sample: i64 = sqlx::query_scalar(
        "SELECT id FROM samples WHERE run_id = $1 AND state = 'ok' ORDER BY completion_tokens DESC LIMIT 1",
    )
    .bind(run)
    .fetch_one(&pool)
    .await
    .unwrap();
    let n = 30;
    // Each row is printed as soon as it is measured, so a failure later keeps what came before.
    println!(
        "\n| call ({prompts}-sample run; {n} calls each, one after another) | p50 ms | p95 ms | max ms |"
    );
    println!("| --- | ---: | ---: | ---: |");
    println!("{}", row("run page: snapshot during the run (API)", snapshot_ms));
    let samples = format!("/api/v1/runs/{run}/samples");
    for (name, query) in [
        ("review list: first page, no filter", ""),
        ("review list: outcome ok, longest first", "?outcome=ok&sort=longest"),
        ("review list: flag truncated", "?flag=truncated"),
        ("review list: unreviewed, category code", "?review=unreviewed&category=code"),
        ("review list: search a word", "?q=speculative"),
    ] {
        println!("{}", row(name, api.time(&format!("{samples}{query}"), None, n).await));
    }
    for (name, query) in [
        ("counts: no filter", ""),
        ("counts: outcome ok, category code", "?outcome=ok&category=code"),
        ("counts: search a word", "?q=speculative"),
        ("counts: completion 4,000–8,192 tokens", "?completion_min=4000&completion_max=8192"),
    ] {
        println!("{}", row(name, api.time(&format!("{samples}/counts{query}"), None, n).await));
    }
    println!(
        "{}",
        row(
            "sample (API), the longest answer",
            api.time(&format!("/api/v1/samples/{sample}"), None, n).await,
        )
    );
    for (name, path) in [
        ("page /", "/".to_string()),
        ("page /runs", "/runs".to_string()),
        ("page /runs/{id}", format!("/runs/{run}")),
        ("page /review?run={id}", format!("/review?run={run}")),
        ("page /review/samples/{id}", format!("/review/samples/{sample}")),
        ("page /datasets/{id}", format!("/datasets/{dataset}")),
        ("page /exports", "/exports".to_string()),
    ] {
        println!("{}", row(name, api.time(&path, Some(&cookie), n).await));
    }
    let bulk = format!("/api/v1/runs/{run}/samples/decision?outcome=ok");
    let started = Instant::now();
    let asked = api.post(&bulk, &json!({"decision": "approve"})).await;
    let matched = asked["matched"].as_i64().unwrap();
    let done = api.post(&bulk, &json!({"decision": "approve", "expected": matched})).await;
    let bulk_secs = started.elapsed().as_secs_f64();

    let mut export_lines = Vec::new();
    for (name, format) in [
        ("SpecForge JSONL", json!({"layout": "conversations", "file": "jsonl", "reasoning": "field"})),
        (
            "pre-tokenized Parquet",
            json!({"layout": "tokenized", "file": "parquet", "reasoning": "field",
                   "tokenization": {"tokenizer_dir": "tokenizers/qwen", "max_length": 16384, "overlong": "truncate"}}),
        ),
    ] {
        let spec = json!({
            "selection": {"run_ids": [run], "outcomes": ["ok", "truncated"], "review": "approved_only", "excluded_flags": [],
                          "categories": [], "min_completion_tokens": null, "max_completion_tokens": null,
                          "duplicates": "remove", "thinking": {"mode": "any"}, "seed": 1},
            "format": format,
            "destination": {"kind": "directory", "path": format!("scale-{}", name.split(' ').next_back().unwrap().to_lowercase())},
        });
        memory.new_window();
        let started = Instant::now();
        let export = api.post("/api/v1/exports", &json!({"spec": spec})).await["id"].as_i64().unwrap();
        let finished = loop {
            let e = api.get(&format!("/api/v1/exports/{export}")).await;
            if e["status"] != "running" && e["status"] != "pending" {
                break e;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(finished["status"], "completed", "{finished}");
        let secs = started.elapsed().as_secs_f64();
        let written = finished["counts"]["written"].as_i64().unwrap_or(0);
        export_lines.push(format!(
            "- export, {name}: {written} rows in {secs:.1} s ({:.0} rows/s), app peak {:.0} MiB",
            written as f64 / secs,
            memory.window.load(Ordering::Relaxed) as f64 / (1 << 20) as f64
        ));
    }

    println!(
        "\n- bulk approval of outcome ok: {matched} matched, {} approved in {bulk_secs:.1} s (ask, then confirm)",
        done["changed"]
    );
    for line in export_lines {
        println!("{line}");
    }

    // 4. The same prompts at the best fixed limit, no faults.
    if baseline {
        let run = api
            .post(
                "/api/v1/runs",
                &run_body("seed run, fixed", json!({"concurrency": "fixed", "concurrency_fixed": fixed})),
            )
            .await["id"]
            .as_i64()
            .unwrap();
        loop {
            let snapshot = api.get(&format!("/api/v1/runs/{run}")).await;
            match snapshot["status"].as_str() {
                Some("completed") | Some("failed") | Some("cancelled") => break,
                _ => tokio::time::sleep(Duration::from_secs(2)).await,
            }
        }
        let fixed_result = RunResult::read(&pool, run).await;
        let tps = |r: &RunResult| r.useful_tokens as f64 / (r.secs * time_scale);
        println!(
            "\n- fixed limit {fixed} per server, no faults: {:.0} s, {:.0} useful tok/s (simulated), lost {}; \
             adaptive with faults: {:.0} tok/s: **{:.3}× the fixed limit** over the whole run",
            fixed_result.secs,
            tps(&fixed_result),
            fixed_result.lost,
            tps(&adaptive),
            tps(&adaptive) / tps(&fixed_result)
        );
    }
    println!(
        "- app peak memory over the whole benchmark: {:.0} MiB",
        memory.peak.load(Ordering::Relaxed) as f64 / (1 << 20) as f64
    );
    app.kill();
    drop(sims);
    pool.close().await;
    if std::env::var("BENCH_KEEP_DB").is_err() {
        let _ = Postgres::drop_database(&db_url).await;
    }
}
