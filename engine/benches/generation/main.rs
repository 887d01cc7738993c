//! Generation benchmark (issue 4). Not a test: prints figures for the README.
//!
//!   cargo build -p vllm-sim && cargo bench -p engine --bench generation   (same profile for both)
//!
//! Part 1 runs one prompt set against a simulator set up like the server that lost 8% of a
//! run (about 1,500 tokens/s, up to 200 running sequences, lengths up to 8,192 tokens, 20×
//! time) with: (a) 200 fixed non-streaming requests, 60 s timeout, no retry; (b) 128 fixed
//! with 600 s; a sweep of Draft Studio at fixed concurrencies; (c) Draft Studio adaptive.
//! Part 2 measures the engine's own cost per streamed token against a simulator with no delay.
//! The simulator runs as its own process so its CPU is not counted as the client's.
//!
//! Knobs: `BENCH_SAMPLES` (2000), `BENCH_ROUNDS` (3; each set-up runs that many times,
//! round-robin, and the table shows its median round with the spread), `BENCH_FIXED` (the
//! sweep, "16,24,32,48,64,128,200,300"). With the defaults it takes about 12 minutes.

mod baseline;
mod sim_process;

use domain::generation::{Concurrency, RunSettings};
use engine::{
    generation::{Worker, WorkerOptions},
    metrics::EngineMetrics,
    testing,
    vllm::http_client,
};
use sim_process::{Reading, SimProcess};
use sqlx::{migrate::MigrateDatabase, PgPool, Postgres};
use std::{
    sync::Arc,
    time::{Duration, Instant},
};
use tokio_util::sync::CancellationToken;

const TIME_SCALE: f64 = 20.0;
const CAPACITY: f64 = 1500.0; // simulated tokens/s
const MAX_TOKENS: u32 = 8192;
const LENGTHS: [&str; 6] =
    ["--median-completion-tokens", "120", "--completion-sigma", "1.2", "--completion-cap", "8192"];

fn overload_args() -> Vec<&'static str> {
    let mut args = vec!["--aggregate-tokens-per-s", "1500", "--max-num-seqs", "200", "--time-scale", "20"];
    args.extend(LENGTHS);
    args
}

/// Seconds of the simulator's clock in real time.
fn scaled(simulated_secs: f64) -> Duration {
    Duration::from_secs_f64(simulated_secs / TIME_SCALE)
}

struct Report {
    name: String,
    lost: usize,
    total: usize,
    /// Useful (successful) tokens per simulated second over the whole run.
    useful_tps: f64,
    /// Useful tokens per simulated second in the steady state, without the ramp-up and the
    /// tail of long generations (see `steady_state`).
    saturated_tps: f64,
    /// Mean running sequences on the simulator in the steady state.
    running: f64,
    /// Lowest and highest steady-state figure over the rounds.
    spread: String,
    /// Natural lengths of the lost samples.
    lost_lengths: Vec<u32>,
}

/// One client set-up of part 1.
enum Client {
    /// The plain script: fixed non-streaming requests with a total timeout, no retry.
    Script {
        name: &'static str,
        concurrency: usize,
        timeout_secs: f64,
    },
    DraftStudio {
        name: String,
        concurrency: Concurrency,
    },
}

#[tokio::main]
async fn main() {
    let samples: usize = env_or("BENCH_SAMPLES", 2000);
    // Each set-up runs this many times, round-robin; the table shows each one's median round.
    let rounds: usize = env_or("BENCH_ROUNDS", 3);
    let fixed: Vec<u32> = std::env::var("BENCH_FIXED")
        .map(|v| {
            v.split(',').map(|n| n.trim().parse().expect("BENCH_FIXED: numbers, comma-separated")).collect()
        })
        .unwrap_or_else(|_| vec![16, 24, 32, 48, 64, 128, 200, 300]);
    let pool = scratch_database().await;
    let by = testing::user(&pool).await;
    let prompts: Vec<String> = (0..samples).map(prompt).collect();
    println!("# Generation benchmark: {samples} prompts, {rounds} round(s)\n");

    let lengths = natural_lengths(&prompts).await;
    let mut clients = vec![
        Client::Script {
            name: "(a) 200 fixed, non-streaming, 60 s timeout, no retry",
            concurrency: 200,
            timeout_secs: 60.0,
        },
        Client::Script {
            name: "(b) 128 fixed, non-streaming, 600 s timeout, no retry",
            concurrency: 128,
            timeout_secs: 600.0,
        },
    ];
    clients.extend(fixed.iter().map(|&limit| Client::DraftStudio {
        name: format!("Draft Studio, fixed {limit}"),
        concurrency: Concurrency::Fixed { limit },
    }));
    clients.push(Client::DraftStudio {
        name: "(c) Draft Studio, adaptive (default bounds 4–512)".to_string(),
        concurrency: Concurrency::Adaptive { min: 4, max: 512 },
    });

    let mut results: Vec<Vec<Report>> = clients.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (client, results) in clients.iter().zip(&mut results) {
            let sim = SimProcess::start(&overload_args()).await;
            let report = match client {
                Client::Script { name, concurrency, timeout_secs } => {
                    baseline_report(name, &sim, &prompts, &lengths, *concurrency, *timeout_secs).await
                }
                Client::DraftStudio { name, concurrency } => {
                    engine_report(name, &pool, by, &sim, &prompts, &lengths, *concurrency).await
                }
            };
            results.push(report);
        }
    }
    let reports: Vec<Report> = results
        .into_iter()
        .map(|mut rounds| {
            rounds.sort_by(|a, b| a.saturated_tps.total_cmp(&b.saturated_tps));
            let spread =
                format!("{:.0}–{:.0}", rounds[0].saturated_tps, rounds[rounds.len() - 1].saturated_tps);
            let mut median = rounds.swap_remove(rounds.len() / 2);
            median.spread = spread;
            median
        })
        .collect();
    // The best fixed limit of the sweep, by each measure.
    let fixed_reports: Vec<&Report> = clients
        .iter()
        .zip(&reports)
        .filter(|(c, _)| matches!(c, Client::DraftStudio { concurrency: Concurrency::Fixed { .. }, .. }))
        .map(|(_, r)| r)
        .collect();
    let best = |measure: fn(&Report) -> f64| fixed_reports.iter().map(|r| measure(r)).fold(0.0, f64::max);
    let adaptive = reports.last().expect("adaptive ran");
    let (steady_ratio, whole_ratio) =
        (adaptive.saturated_tps / best(|r| r.saturated_tps), adaptive.useful_tps / best(|r| r.useful_tps));

    println!("| client | lost | useful tok/s (whole run) | useful tok/s, steady state (rounds) | % of capacity (steady) | running (steady) | lost by natural length |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for r in &reports {
        println!(
            "| {} | {} of {} ({:.1}%) | {:.0} | {:.0} ({}) | {:.1}% | {:.0} | {} |",
            r.name,
            r.lost,
            r.total,
            100.0 * r.lost as f64 / r.total as f64,
            r.useful_tps,
            r.saturated_tps,
            r.spread,
            100.0 * r.saturated_tps / CAPACITY,
            r.running,
            length_bands(&r.lost_lengths, &lengths)
        );
    }
    println!(
        "\nCapacity {CAPACITY} tok/s (simulated). Adaptive against the best fixed concurrency of the sweep: steady state {steady_ratio:.3}×, whole run {whole_ratio:.3}×.\n"
    );

    client_cost(&pool, by, false).await;
    client_cost(&pool, by, true).await;
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn prompt(i: usize) -> String {
    let topics = [
        "sorting algorithms",
        "the French revolution",
        "photosynthesis",
        "compound interest",
        "TCP congestion control",
        "a haiku about rain",
        "unit testing",
        "black holes",
    ];
    let detail = "Please be thorough and give examples. ".repeat(i % 5);
    format!("Request {i}: explain {} to a new colleague. {detail}", topics[i % topics.len()])
}

async fn scratch_database() -> PgPool {
    let server = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let url = format!("{}/draft_studio_bench", server.rsplit_once('/').unwrap().0);
    let _ = Postgres::drop_database(&url).await;
    Postgres::create_database(&url).await.unwrap();
    let pool = engine::db::connect(&url, 32).await.unwrap();
    engine::db::migrate(&pool).await.unwrap();
    pool
}

/// Each prompt's full completion length, asked of an unthrottled simulator with the same
/// length settings (lengths are fixed per prompt).
async fn natural_lengths(prompts: &[String]) -> Vec<u32> {
    let mut args =
        vec!["--aggregate-tokens-per-s", "0", "--per-seq-tokens-per-s", "0", "--prefill-tokens-per-s", "0"];
    args.extend(LENGTHS);
    let sim = SimProcess::start(&args).await;
    let outcomes =
        baseline::run(&sim.base_url, "sim-model", prompts, 64, Duration::from_secs(600), MAX_TOKENS).await;
    let mut lengths = vec![0; prompts.len()];
    for o in outcomes {
        lengths[o.prompt] = o.tokens.expect("the unthrottled simulator answers everything");
    }
    lengths
}

async fn baseline_report(
    name: &str,
    sim: &SimProcess,
    prompts: &[String],
    lengths: &[u32],
    concurrency: usize,
    timeout_secs: f64,
) -> Report {
    let recording = sim.record();
    let start = Instant::now();
    let outcomes =
        baseline::run(&sim.base_url, "sim-model", prompts, concurrency, scaled(timeout_secs), MAX_TOKENS)
            .await;
    let makespan = start.elapsed();
    let readings = recording.finish();
    let lost: Vec<u32> = outcomes.iter().filter(|o| o.tokens.is_none()).map(|o| lengths[o.prompt]).collect();
    let useful: u64 = outcomes.iter().filter_map(|o| o.tokens).map(u64::from).sum();
    let steady = steady_state(outcomes.iter().map(|o| o.finished).collect(), &readings, useful);
    Report {
        name: name.to_string(),
        lost: lost.len(),
        total: prompts.len(),
        useful_tps: per_simulated_second(useful, makespan),
        saturated_tps: steady.useful_tps,
        running: steady.running,
        spread: String::new(),
        lost_lengths: lost,
    }
}

async fn engine_report(
    name: &str,
    pool: &PgPool,
    by: i64,
    sim: &SimProcess,
    prompts: &[String],
    lengths: &[u32],
    concurrency: Concurrency,
) -> Report {
    let dataset = testing::dataset_of(pool, prompts).await;
    let endpoint = testing::endpoint_at(pool, &sim.base_url, by).await;
    let mut settings = RunSettings::with_defaults("sim-model", vec![endpoint], MAX_TOKENS);
    settings.concurrency = concurrency;
    // 120 s without a token, in the simulator's time.
    settings.idle_timeout_secs = scaled(120.0).as_secs().max(1) as u32;
    let run = testing::create_run(pool, dataset, settings, by).await;
    let stop = CancellationToken::new();
    // The controller's one-second tick, in the simulator's time.
    let options = WorkerOptions { tick: scaled(1.0), ..Default::default() };
    let worker = Worker::new(pool.clone(), http_client(), Arc::new(EngineMetrics::default()), options);
    let recording = sim.record();
    let start = Instant::now();
    let handle = tokio::spawn(worker.run(stop.clone()));
    testing::wait_for_status(pool, run, "completed", Duration::from_secs(3600)).await;
    let makespan = start.elapsed();
    let readings = recording.finish();
    stop.cancel();
    handle.await.unwrap().unwrap();
    let rows: Vec<(String, Option<i32>, f64)> = sqlx::query_as(
        "SELECT state::text, completion_tokens, extract(epoch FROM finished_at)::float8
         FROM samples WHERE run_id = $1 ORDER BY row_id",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap();
    let useful: u64 = rows.iter().filter(|r| r.0 == "ok").map(|r| r.1.unwrap_or(0) as u64).sum();
    let steady = steady_state(rows.iter().map(|r| r.2).collect(), &readings, useful);
    let lost: Vec<u32> =
        rows.iter().enumerate().filter(|(_, r)| r.0 != "ok").map(|(i, _)| lengths[i]).collect();
    let limit: (i32, String) =
        sqlx::query_as("SELECT concurrency_limit, limit_reason FROM run_endpoints WHERE run_id = $1")
            .bind(run)
            .fetch_one(pool)
            .await
            .unwrap();
    Report {
        name: format!("{name} (final limit {}: {})", limit.0, limit.1),
        lost: lost.len(),
        total: prompts.len(),
        useful_tps: per_simulated_second(useful, makespan),
        saturated_tps: steady.useful_tps,
        running: steady.running,
        spread: String::new(),
        lost_lengths: lost,
    }
}

/// The steady state: between the 10th and the 90th percentile of completion times.
struct Steady {
    useful_tps: f64,
    running: f64,
}

/// Tokens per simulated second the simulator generated in the steady state (its own counter,
/// read every 25 ms), times the run's useful share of everything it generated (below 1 when
/// samples were lost or tries thrown away). `finished` and the readings are wall-clock seconds.
///
/// Counting the tokens of the samples that finish inside the window instead is biased against
/// high concurrency (the samples still running at the window's end carry more unfinished work
/// the more there are, and none of it counts); spreading each sample's tokens evenly over its
/// lifetime is biased for it (at high concurrency a long sample gets most of its tokens after
/// the window, once the batch has thinned out). The server's counter has neither bias.
fn steady_state(mut finished: Vec<f64>, readings: &[Reading], useful: u64) -> Steady {
    finished.sort_by(f64::total_cmp);
    let (lo, hi) = (finished[finished.len() / 10], finished[finished.len() * 9 / 10]);
    let generated_at = |t: f64| {
        let after = readings.partition_point(|r| r.at < t).clamp(1, readings.len() - 1);
        let (a, b) = (readings[after - 1], readings[after]);
        let f = ((t - a.at) / (b.at - a.at).max(1e-9)).clamp(0.0, 1.0);
        a.generated + f * (b.generated - a.generated)
    };
    let generated = readings.last().map_or(0.0, |r| r.generated);
    let useful_share = if generated > 0.0 { (useful as f64 / generated).min(1.0) } else { 0.0 };
    let inside: Vec<&Reading> = readings.iter().filter(|r| (lo..=hi).contains(&r.at)).collect();
    Steady {
        useful_tps: (generated_at(hi) - generated_at(lo)) / ((hi - lo).max(1e-3) * TIME_SCALE) * useful_share,
        running: inside.iter().map(|r| r.running).sum::<f64>() / inside.len().max(1) as f64,
    }
}

fn per_simulated_second(tokens: u64, real: Duration) -> f64 {
    tokens as f64 / (real.as_secs_f64() * TIME_SCALE)
}

/// "lost / all" per band of natural completion length.
fn length_bands(lost: &[u32], all: &[u32]) -> String {
    let bands = [(0, 256), (256, 1024), (1024, 4096), (4096, u32::MAX)];
    let name =
        |(lo, hi): (u32, u32)| if hi == u32::MAX { format!("≥{lo}") } else { format!("{lo}–{}", hi - 1) };
    bands
        .iter()
        .map(|&(lo, hi)| {
            let in_band = |l: &&u32| **l >= lo && **l < hi;
            format!(
                "{}: {}/{}",
                name((lo, hi)),
                lost.iter().filter(in_band).count(),
                all.iter().filter(in_band).count()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Streams a large run from an unthrottled simulator and reports this process's CPU time.
async fn client_cost(pool: &PgPool, by: i64, per_token_chunks: bool) {
    let mut args = vec![
        "--aggregate-tokens-per-s",
        "0",
        "--per-seq-tokens-per-s",
        "0",
        "--prefill-tokens-per-s",
        "0",
        "--median-completion-tokens",
        "1000",
        "--completion-sigma",
        "0.3",
        "--completion-cap",
        "4000",
    ];
    if per_token_chunks {
        args.push("--ignore-stream-interval");
    }
    let sim = SimProcess::start(&args).await;
    let prompts: Vec<String> = (0..1500).map(|i| format!("cost probe {i}: {}", prompt(i))).collect();
    let dataset = testing::dataset_of(pool, &prompts).await;
    let endpoint = testing::endpoint_at(pool, &sim.base_url, by).await;
    let mut settings = RunSettings::with_defaults("sim-model", vec![endpoint], MAX_TOKENS);
    settings.concurrency = Concurrency::Fixed { limit: 64 };
    let run = testing::create_run(pool, dataset, settings, by).await;
    let stop = CancellationToken::new();
    let worker = Worker::new(
        pool.clone(),
        http_client(),
        Arc::new(EngineMetrics::default()),
        WorkerOptions::default(),
    );
    let cpu_before = cpu_time();
    let start = Instant::now();
    let handle = tokio::spawn(worker.run(stop.clone()));
    testing::wait_for_status(pool, run, "completed", Duration::from_secs(3600)).await;
    let wall = start.elapsed();
    let cpu = cpu_time() - cpu_before;
    stop.cancel();
    handle.await.unwrap().unwrap();
    let tokens: i64 =
        sqlx::query_scalar("SELECT sum(completion_tokens)::bigint FROM samples WHERE run_id = $1")
            .bind(run)
            .fetch_one(pool)
            .await
            .unwrap();
    let stats = sim.stats().await;
    let chunks = if per_token_chunks { "one chunk per token" } else { "stream_interval 16" };
    println!(
        "Client cost ({chunks}): {tokens} tokens in {:.1} s = {:.0} tok/s; engine CPU {:.2} s = {:.3} ms per 1,000 tokens (simulator generated {} tokens)",
        wall.as_secs_f64(),
        tokens as f64 / wall.as_secs_f64(),
        cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / tokens as f64,
        stats["generation_tokens"]
    );
}

/// User plus system CPU time of this process.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we hand it.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv =
        |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
