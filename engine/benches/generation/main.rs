//! Generation benchmark (issue 13). Not a test: prints the figures in the README.
//!
//!   scripts/bench-generation.sh    (builds the simulator, serves the real vLLM server, runs this)
//!
//! Part 1 runs adaptive concurrency against a sweep of fixed limits on three servers, each
//! client on the same prompts one after another, and reports useful tokens per second over
//! the whole run (first request to last answer) and the samples lost:
//! - `real`: the real vLLM 0.32 CPU server of `shared/tools/real-vllm` at `BENCH_REAL_VLLM_URL`
//!   (skipped when unset), beside a sweep of the plain Python script an ML engineer would
//!   write (`plain_client.py`, run by `BENCH_PLAIN_PYTHON`: a Python with aiohttp);
//! - `seed`: the simulator's `seed-deployment` profile (the rate still rises at 200 running);
//! - `flat`: the simulator's `flat-knee` profile (flat past 25 running), beside the two plain
//!   scripts of issue 4 that lose long samples to their total timeouts.
//!
//! Part 2 measures the engine's own CPU cost per streamed token against a simulator with no
//! delay. Simulators run as their own processes so their CPU is not counted as the client's.
//!
//! Each round runs every client once, the order turned by one client a round; ratios are taken
//! within a round (median over rounds), as the same client moves by up to 30% between rounds on
//! a shared machine. On the real server the targets are then judged on confirmation pairs: each
//! target's two clients run one after the other, which goes first alternating, and the median of
//! the pairs' ratios is judged. The sweep only picks the best fixed limit: judged on the sweep's
//! own rounds, the best of five noisy medians is flattered by the noise that made it the best.
//!
//! Knobs: `BENCH_SERVERS` (`real,seed,flat`), `BENCH_ROUNDS` (2 for the simulators; the table
//! shows each client's median round), `BENCH_REAL_ROUNDS` (3), `BENCH_REAL_CONFIRM` (4 pairs
//! a target; 0 judges on the sweep's rounds), `BENCH_REAL_PROMPTS` (512),
//! `BENCH_REAL_PLAIN` (the plain clients on the real server: `64` whole answers, `64s` streamed,
//! `64i` streamed with token ids, a chunk every 16 tokens, or every 256 with `64i256`; default
//! `64,128,256,64i`),
//! `BENCH_REAL_ENDPOINT` (`each-run`: every engine run registers the real server anew and
//! starts cold, its first wave streamed at the run's interval and an adaptive limit at its
//! starting value; `kept`: one registration for the benchmark, as a team keeps a server, so
//! each run starts from the pace and the limit the last one left), `BENCH_SEED_PROMPTS`
//! (1000), `BENCH_FLAT_PROMPTS` (2000), `BENCH_COST` (1: part 2),
//! `BENCH_CHECK` (1: exit non-zero unless every server meets the targets: adaptive ≥ 0.98× the
//! best fixed limit, nothing lost, and on the real server fixed 64 ≥ the plain client at 64).
#![allow(clippy::unwrap_used)] // Benchmarks may unwrap: a failure there is a failure of the benchmark, with its message.

mod baseline;
mod sim_process;

use domain::generation::{Concurrency, RunSettings};
use engine::{
    generation::{Worker, WorkerOptions},
    metrics::EngineMetrics,
    testing,
    vllm::http_client,
};
use sim_process::{epoch_now, SimProcess};
use sqlx::{migrate::MigrateDatabase, PgPool, Postgres};
use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};
use tokio_util::sync::CancellationToken;

/// How the simulators' clocks run: 20× real time.
const TIME_SCALE: f64 = 20.0;

/// One server of part 1 and how to measure against it.
struct Server {
    name: &'static str,
    kind: ServerKind,
    prompts: Vec<String>,
    max_tokens: u32,
    fixed: Vec<u32>,
    plain: Vec<Plain>,
    adaptive: Concurrency,
    /// The endpoint every run on the real server uses, registered by the first of them, with
    /// `BENCH_REAL_ENDPOINT=kept`.
    kept_endpoint: Option<tokio::sync::OnceCell<i64>>,
    rounds: usize,
    /// Pairs of runs after the sweep that judge the targets (none: the sweep's rounds judge).
    confirm: usize,
}

enum ServerKind {
    Real { url: String, model: String },
    Sim { args: Vec<&'static str> },
}

/// A plain client of the sweep.
#[derive(Clone, Copy)]
enum Plain {
    /// The Python script: fixed concurrency, no timeout.
    Python { concurrency: usize, shape: Shape },
    /// The script of issue 4 (Rust, same behaviour): non-streaming with a total timeout.
    TimedOut { concurrency: usize, timeout_secs: f64 },
}

/// What the plain Python client asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Whole answers, no streaming: what a script usually does.
    Whole,
    /// Streamed, a chunk every `interval` tokens; with `token_ids`, the ids as well, as Draft
    /// Studio asks (a chunk every few seconds: 256 tokens on the real CPU server), so that what
    /// the server spends on the request is told apart from what the client spends.
    Streamed { interval: u32, token_ids: bool },
}

impl Shape {
    fn flags(self) -> Vec<String> {
        match self {
            Shape::Whole => vec![],
            Shape::Streamed { interval, token_ids } => {
                let mut flags = vec!["--stream".into(), "--stream-interval".into(), interval.to_string()];
                if token_ids {
                    flags.push("--token-ids".into());
                }
                flags
            }
        }
    }
}

/// A client of part 1.
#[derive(Clone, Copy)]
enum Client {
    Plain(Plain),
    Engine(Concurrency),
}

impl Client {
    fn name(&self) -> String {
        match *self {
            Client::Plain(Plain::Python { concurrency, shape }) => match shape {
                Shape::Whole => format!("plain Python, {concurrency} at once, whole answers"),
                Shape::Streamed { interval, token_ids } => {
                    let ids = if token_ids { " with token ids" } else { "" };
                    format!("plain Python, {concurrency} at once, streamed{ids} (interval {interval})")
                }
            },
            Client::Plain(Plain::TimedOut { concurrency, timeout_secs }) => {
                format!("plain script, {concurrency} at once, {timeout_secs:.0} s timeout, no retry")
            }
            Client::Engine(Concurrency::Fixed { limit }) => format!("Draft Studio, fixed {limit}"),
            Client::Engine(Concurrency::Adaptive { min, max }) => {
                format!("Draft Studio, adaptive {min}–{max}")
            }
        }
    }
}

/// What one client did in one round.
#[derive(Clone)]
struct Outcome {
    lost: usize,
    total: usize,
    /// Completion tokens of the answers that came back, per second of the run (for simulators,
    /// per simulated second).
    useful_tps: f64,
    /// Requests in flight on average over the run: the sum of their durations over the run's
    /// span (`None` for the simulators' timed-out script). A client behind the plain one at
    /// the same limit shows here whether it kept its slots full.
    in_flight: Option<f64>,
    /// The engine's limit at the end and why.
    limit: Option<String>,
    /// What the server sent back, by outcome (the engine's runs on the real server).
    details: Option<String>,
}

#[tokio::main]
async fn main() {
    // `RUST_LOG=engine::generation=debug` shows every change of the adaptive limit.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    let servers: Vec<String> = std::env::var("BENCH_SERVERS")
        .unwrap_or_else(|_| "real,seed,flat".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let pool = scratch_database().await;
    let by = testing::user(&pool).await;
    println!("# Generation benchmark\n");
    let mut missed = Vec::new();
    for name in &servers {
        let Some(server) = server(name) else { continue };
        missed.extend(measure(&pool, by, &server).await);
    }
    if env_or("BENCH_COST", 1) == 1 {
        println!("## Client cost per streamed token\n");
        client_cost(&pool, by, false).await;
        client_cost(&pool, by, true).await;
    }
    if env_or("BENCH_CHECK", 0) == 1 {
        if missed.is_empty() {
            println!("Every target met.");
        } else {
            println!("Targets missed:\n- {}", missed.join("\n- "));
            std::process::exit(1);
        }
    }
}

fn server(name: &str) -> Option<Server> {
    // BENCH_<SERVER>_FIXED (e.g. BENCH_SEED_FIXED=256,512) replaces a server's sweep.
    let engine_sweep = |fixed: &[u32]| -> Vec<u32> {
        let key = format!("BENCH_{}_FIXED", name.to_uppercase());
        env_list(&key, |s| s.parse().unwrap_or_else(|_| panic!("{key}: `{s}` is not a whole number")))
            .unwrap_or_else(|| fixed.to_vec())
    };
    match name {
        "real" => {
            let Ok(url) = std::env::var("BENCH_REAL_VLLM_URL") else {
                println!(
                    "(real vLLM skipped: set BENCH_REAL_VLLM_URL, or run scripts/bench-generation.sh)\n"
                );
                return None;
            };
            let model = std::env::var("BENCH_REAL_VLLM_MODEL").unwrap_or_else(|_| "tiny".into());
            let prompts = (0..env_or("BENCH_REAL_PROMPTS", 512)).map(short_prompt).collect();
            let plain = env_list("BENCH_REAL_PLAIN", plain_client)
                .unwrap_or_else(|| ["64", "128", "256", "64i"].into_iter().map(plain_client).collect());
            Some(Server {
                name: "real vLLM 0.32 (CPU, tiny random model, --max-num-seqs 64)",
                kind: ServerKind::Real { url, model },
                prompts,
                max_tokens: 512,
                fixed: engine_sweep(&[32, 64, 96, 128, 256]),
                plain,
                adaptive: Concurrency::Adaptive { min: 4, max: 512 },
                rounds: env_or("BENCH_REAL_ROUNDS", 3),
                confirm: env_or("BENCH_REAL_CONFIRM", 4),
                kept_endpoint: match std::env::var("BENCH_REAL_ENDPOINT").as_deref() {
                    Ok("kept") => Some(tokio::sync::OnceCell::new()),
                    Ok("each-run") | Err(_) => None,
                    Ok(other) => panic!("BENCH_REAL_ENDPOINT: `{other}` is neither `kept` nor `each-run`"),
                },
            })
        }
        "seed" => Some(Server {
            name: "simulator, seed-deployment profile (rate still rising at 256 running)",
            kind: ServerKind::Sim { args: vec!["--profile", "seed-deployment", "--time-scale", "20"] },
            prompts: (0..env_or("BENCH_SEED_PROMPTS", 1000)).map(long_prompt).collect(),
            max_tokens: 8192,
            fixed: engine_sweep(&[32, 64, 128, 192, 256, 384, 512]),
            plain: vec![],
            adaptive: Concurrency::Adaptive { min: 4, max: 1024 },
            rounds: env_or("BENCH_ROUNDS", 2),
            confirm: 0,
            kept_endpoint: None,
        }),
        "flat" => Some(Server {
            name: "simulator, flat-knee profile (rate flat past 25 running)",
            kind: ServerKind::Sim { args: vec!["--profile", "flat-knee", "--time-scale", "20"] },
            prompts: (0..env_or("BENCH_FLAT_PROMPTS", 2000)).map(short_prompt).collect(),
            max_tokens: 8192,
            fixed: engine_sweep(&[16, 24, 32, 48, 64, 128, 200]),
            plain: vec![
                Plain::TimedOut { concurrency: 200, timeout_secs: 60.0 },
                Plain::TimedOut { concurrency: 128, timeout_secs: 600.0 },
            ],
            adaptive: Concurrency::Adaptive { min: 4, max: 512 },
            rounds: env_or("BENCH_ROUNDS", 2),
            confirm: 0,
            kept_endpoint: None,
        }),
        other => panic!("BENCH_SERVERS: unknown server `{other}` (real, seed, flat)"),
    }
}

/// Runs every client against the server, prints the table, and returns the targets missed.
async fn measure(pool: &PgPool, by: i64, server: &Server) -> Vec<String> {
    // Adaptive first: the figure the benchmark is for comes out before the sweep's.
    let mut clients: Vec<Client> = vec![Client::Engine(server.adaptive)];
    clients.extend(server.plain.iter().map(|&p| Client::Plain(p)));
    clients.extend(server.fixed.iter().map(|&limit| Client::Engine(Concurrency::Fixed { limit })));
    println!(
        "## {}: {} prompts, max_tokens {}, {} round(s)\n",
        server.name,
        server.prompts.len(),
        server.max_tokens,
        server.rounds
    );
    // Set by scripts/bench-generation.sh, which pins the processes.
    if matches!(server.kind, ServerKind::Real { .. }) {
        if let Ok(cores) = std::env::var("REAL_VLLM_SERVER_CPUS") {
            println!(
                "The server ran on core(s) {cores} alone; the clients, this benchmark and PostgreSQL on the others.\n"
            );
        } else if let Ok(cores) = std::env::var("REAL_VLLM_MODEL_CPUS") {
            println!(
                "The server's model worker ran on core(s) {cores} alone; its API process, the clients, this benchmark and PostgreSQL on the others.\n"
            );
        }
    }
    if server.kept_endpoint.is_some() {
        println!(
            "Every engine run used one registration of the server, as a team keeps one: each started from the streams' pace and the adaptive limit the last one left.\n"
        );
    }
    // Each round runs every client once; the order turns by one client a round, so no client
    // always runs first (after an idle server) or always after the same neighbour. On a shared
    // machine the same client moves by up to 30% between rounds, so ratios are taken within a
    // round, between runs minutes apart, and their median is what the targets are judged on.
    let mut results: Vec<Vec<Outcome>> = vec![Vec::new(); clients.len()];
    for round in 0..server.rounds {
        for i in 0..clients.len() {
            let at = (i + round) % clients.len();
            let outcome = run_reported(pool, by, server, clients[at], &format!("round {}", round + 1)).await;
            results[at].push(outcome);
        }
    }
    let medians: Vec<Outcome> = results
        .iter()
        .map(|rounds| {
            let mut sorted = rounds.clone();
            sorted.sort_by(|a, b| a.useful_tps.total_cmp(&b.useful_tps));
            sorted.swap_remove(sorted.len() / 2)
        })
        .collect();
    // The best fixed limit is the one with the best median; the adaptive run is compared with it
    // round by round, and in the confirmation pairs when there are any.
    let best_fixed = clients
        .iter()
        .zip(&medians)
        .enumerate()
        .filter(|(_, (c, _))| matches!(c, Client::Engine(Concurrency::Fixed { .. })))
        .max_by(|(_, (_, a)), (_, (_, b))| a.useful_tps.total_cmp(&b.useful_tps))
        .map(|(i, _)| i)
        .expect("the sweep has a fixed limit");
    let best_plain = clients
        .iter()
        .zip(&medians)
        .filter(|(c, _)| matches!(c, Client::Plain(Plain::Python { .. })))
        .map(|(_, o)| o.useful_tps)
        .fold(0.0, f64::max);
    let ratio = |a: usize, b: usize| paired_ratio(&results[a], &results[b]);
    let unit = if matches!(server.kind, ServerKind::Sim { .. }) { " (simulated s)" } else { "" };
    println!(
        "| client | lost | useful tok/s{unit}, whole run (median) | each round | × best fixed (median of rounds) | final limit |"
    );
    println!("| --- | ---: | ---: | --- | ---: | --- |");
    for (i, (client, o)) in clients.iter().zip(&medians).enumerate() {
        let rounds: Vec<String> = results[i].iter().map(|o| format!("{:.0}", o.useful_tps)).collect();
        println!(
            "| {} | {} of {} | {:.0} | {} | {:.3} | {} |",
            client.name(),
            o.lost,
            o.total,
            o.useful_tps,
            rounds.join(", "),
            ratio(i, best_fixed),
            o.limit.clone().unwrap_or_else(|| "–".into())
        );
    }
    let mut missed = Vec::new();
    let adaptive = medians.first().expect("adaptive ran");
    let at = |wanted: &dyn Fn(&Client) -> bool| clients.iter().position(wanted);
    let plain_pair = match (
        at(&|c| matches!(c, Client::Engine(Concurrency::Fixed { limit: 64 }))),
        at(&|c| matches!(c, Client::Plain(Plain::Python { concurrency: 64, shape: Shape::Whole }))),
    ) {
        (Some(fixed), Some(plain)) => Some((fixed, plain)),
        _ => None,
    };
    // The targets: each a pair of clients, judged on the median of their ratios.
    let mut targets = vec![Target {
        name: format!("adaptive × the best fixed limit ({})", clients[best_fixed].name()),
        a: 0,
        b: best_fixed,
        at_least: 0.98,
    }];
    if let Some((fixed, plain)) = plain_pair {
        targets.push(Target {
            name: "fixed 64 × the plain client at 64, whole answers".into(),
            a: fixed,
            b: plain,
            at_least: 1.0,
        });
    }
    let judged: Vec<Vec<f64>> = if server.confirm == 0 {
        targets.iter().map(|t| vec![ratio(t.a, t.b)]).collect()
    } else {
        confirm(pool, by, server, &clients, &targets, &mut missed).await
    };
    print!(
        "\nAdaptive: {:.3}× the best fixed limit of the sweep ({}; median of the sweep's rounds)",
        ratio(0, best_fixed),
        clients[best_fixed].name()
    );
    if best_plain > 0.0 {
        print!(", {:.3}× the best plain client of its sweep (medians)", adaptive.useful_tps / best_plain);
        if let Some((fixed, plain)) = plain_pair {
            print!(
                "; fixed 64 against the plain client at 64, whole answers: {:.3}× (median of the sweep's rounds)",
                ratio(fixed, plain)
            );
        }
    }
    println!(".\n");
    for (target, ratios) in targets.iter().zip(&judged) {
        let judged = median(ratios);
        if server.confirm > 0 {
            let each: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
            println!(
                "Target, {}: **{judged:.3}×** over {} confirmation pairs ({}; target {})\n",
                target.name,
                ratios.len(),
                each.join(", "),
                target.at_least
            );
        }
        if judged < target.at_least {
            missed.push(format!("{}: {} {judged:.3} (target {})", server.name, target.name, target.at_least));
        }
    }
    for (client, o) in clients.iter().zip(&medians) {
        if o.lost > 0 && matches!(client, Client::Engine(_)) {
            missed.push(format!("{}: {} lost {} of {}", server.name, client.name(), o.lost, o.total));
        }
    }
    if let Some(details) = &adaptive.details {
        println!("{details}\n");
    }
    missed
}

/// A target: `a`'s rate at least `at_least` times `b`'s.
struct Target {
    name: String,
    a: usize,
    b: usize,
    at_least: f64,
}

/// Runs each target's two clients `server.confirm` more times, in pairs one after the other,
/// which of the two goes first alternating, and returns each target's ratios, one a pair. The
/// sweep picks the best fixed limit as the best of several noisy medians, which flatters it by
/// the noise itself (the winner's curse); fresh pairs of just the two clients judge without
/// that bias, and with the pair's runs minutes apart instead of a round's half hour.
async fn confirm(
    pool: &PgPool,
    by: i64,
    server: &Server,
    clients: &[Client],
    targets: &[Target],
    missed: &mut Vec<String>,
) -> Vec<Vec<f64>> {
    let mut ratios = vec![Vec::new(); targets.len()];
    for pair in 0..server.confirm {
        for (t, target) in targets.iter().enumerate() {
            let order = if pair % 2 == 0 { [target.a, target.b] } else { [target.b, target.a] };
            let mut tps = [0.0; 2];
            for i in order {
                let outcome = run_reported(pool, by, server, clients[i], &format!("pair {}", pair + 1)).await;
                if outcome.lost > 0 && matches!(clients[i], Client::Engine(_)) {
                    missed.push(format!(
                        "{}: {} lost {} of {} (confirmation pair {})",
                        server.name,
                        clients[i].name(),
                        outcome.lost,
                        outcome.total,
                        pair + 1
                    ));
                }
                tps[usize::from(i == target.b)] = outcome.useful_tps;
            }
            ratios[t].push(tps[0] / tps[1]);
        }
    }
    ratios
}

/// The median over rounds of `a`'s rate over `b`'s in the same round.
fn paired_ratio(a: &[Outcome], b: &[Outcome]) -> f64 {
    median(&a.iter().zip(b).map(|(a, b)| a.useful_tps / b.useful_tps).collect::<Vec<_>>())
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// One run of `client`, its rate and losses printed under `label` as it ends.
async fn run_reported(pool: &PgPool, by: i64, server: &Server, client: Client, label: &str) -> Outcome {
    let outcome = run_client(pool, by, server, client).await;
    let in_flight = outcome.in_flight.map(|n| format!(", {n:.1} in flight on average")).unwrap_or_default();
    eprintln!(
        "  {label}: {}: {:.0} tok/s{in_flight}, {} lost",
        client.name(),
        outcome.useful_tps,
        outcome.lost
    );
    outcome
}

async fn run_client(pool: &PgPool, by: i64, server: &Server, client: Client) -> Outcome {
    match &server.kind {
        ServerKind::Real { url, model } => match client {
            Client::Plain(Plain::Python { concurrency, shape }) => {
                python_client(url, model, &server.prompts, concurrency, shape, server.max_tokens)
            }
            Client::Plain(Plain::TimedOut { .. }) => unreachable!("the timed-out script runs on simulators"),
            Client::Engine(concurrency) => {
                engine_run(pool, by, url, model, server, concurrency, 1.0, Duration::from_secs(1)).await
            }
        },
        ServerKind::Sim { args } => {
            let sim = SimProcess::start(args).await;
            match client {
                Client::Plain(Plain::TimedOut { concurrency, timeout_secs }) => {
                    let start = Instant::now();
                    let timeout = Duration::from_secs_f64(timeout_secs / TIME_SCALE);
                    let outcomes = baseline::run(
                        &sim.base_url,
                        "sim-model",
                        &server.prompts,
                        concurrency,
                        timeout,
                        server.max_tokens,
                    )
                    .await;
                    let seconds = start.elapsed().as_secs_f64() * TIME_SCALE;
                    let useful: u64 = outcomes.iter().filter_map(|o| o.tokens).map(u64::from).sum();
                    Outcome {
                        lost: outcomes.iter().filter(|o| o.tokens.is_none()).count(),
                        total: outcomes.len(),
                        useful_tps: useful as f64 / seconds,
                        in_flight: None,
                        limit: None,
                        details: None,
                    }
                }
                Client::Plain(Plain::Python { .. }) => {
                    unreachable!("the Python client runs against the real server")
                }
                Client::Engine(concurrency) => {
                    let tick = Duration::from_secs_f64(1.0 / TIME_SCALE);
                    engine_run(pool, by, &sim.base_url, "sim-model", server, concurrency, TIME_SCALE, tick)
                        .await
                }
            }
        }
    }
}

/// One run of the engine; `scale` converts real seconds into the server's seconds.
#[allow(clippy::too_many_arguments)]
async fn engine_run(
    pool: &PgPool,
    by: i64,
    url: &str,
    model: &str,
    server: &Server,
    concurrency: Concurrency,
    scale: f64,
    tick: Duration,
) -> Outcome {
    let dataset = testing::dataset_of(pool, &server.prompts).await;
    let endpoint = match &server.kept_endpoint {
        Some(kept) => *kept.get_or_init(|| testing::endpoint_at(pool, url, by)).await,
        None => testing::endpoint_at(pool, url, by).await,
    };
    let mut settings = RunSettings::with_defaults(model, vec![endpoint], server.max_tokens);
    settings.concurrency = concurrency;
    // 120 s without a token, in the server's time.
    settings.idle_timeout_secs = (120.0 / scale).ceil().max(1.0) as u32;
    let run = testing::create_run(pool, dataset, settings, by).await;
    let stop = CancellationToken::new();
    let options = WorkerOptions { tick, ..Default::default() };
    let worker = Worker::new(pool.clone(), http_client(), Arc::new(EngineMetrics::default()), options);
    let started = epoch_now();
    let handle = tokio::spawn(worker.run(stop.clone()));
    // Twice a second: the figures come from the samples' own times.
    testing::wait_for_status_every(
        pool,
        run,
        "completed",
        Duration::from_secs(7200),
        Duration::from_millis(500),
    )
    .await;
    stop.cancel();
    handle.await.unwrap().unwrap();
    let (useful, lost, total, last): (i64, i64, i64, f64) = sqlx::query_as(
        "SELECT COALESCE(sum(completion_tokens) FILTER (WHERE state IN ('ok', 'truncated', 'empty')), 0)::bigint,
                count(*) FILTER (WHERE state IN ('failed', 'timed_out')), count(*),
                extract(epoch FROM max(finished_at))::float8
         FROM samples WHERE run_id = $1",
    )
    .bind(run)
    .fetch_one(pool)
    .await
    .unwrap();
    // From the first request sent, as the plain clients time themselves; with the tries' time
    // at the server.
    let (first, busy): (f64, f64) = sqlx::query_as(
        "SELECT extract(epoch FROM min(a.started_at))::float8, COALESCE(sum(a.duration_ms), 0)::float8 / 1000
         FROM sample_attempts a JOIN samples s ON s.id = a.sample_id WHERE s.run_id = $1",
    )
    .bind(run)
    .fetch_one(pool)
    .await
    .unwrap();
    assert!(
        first >= started - 1.0,
        "a try started {:.1} s before the worker did: clocks disagree",
        started - first
    );
    // The endpoint's limit (the run's own share shrinks to what it has left as it drains).
    let limit: (i32, String) = sqlx::query_as(
        "SELECT concurrency_limit, limit_reason FROM endpoint_capacity WHERE endpoint_id = $1",
    )
    .bind(endpoint)
    .fetch_one(pool)
    .await
    .unwrap();
    let adaptive = matches!(concurrency, Concurrency::Adaptive { .. });
    let details = if adaptive && scale == 1.0 { Some(what_came_back(pool, run).await) } else { None };
    // The endpoint's capacity and its streams' pace are kept for the next run on it; each run
    // here gets a new endpoint unless `BENCH_REAL_ENDPOINT=kept`.
    Outcome {
        lost: lost as usize,
        total: total as usize,
        useful_tps: useful as f64 / ((last - first) * scale),
        in_flight: Some(busy / (last - first)),
        limit: adaptive.then(|| format!("{}: {}", limit.0, limit.1)),
        details,
    }
}

/// What a real server sent back: outcomes by finish reason, reasoning kept, tries by result,
/// and how often its `/metrics` was read.
async fn what_came_back(pool: &PgPool, run: i64) -> String {
    let rows: Vec<(String, Option<String>, i64, i64, i64)> = sqlx::query_as(
        "SELECT state::text, finish_reason, count(*), count(*) FILTER (WHERE reasoning <> ''),
                count(*) FILTER (WHERE reasoning_tokens IS NOT NULL)
         FROM samples WHERE run_id = $1 GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut out = String::from(
        "| outcome (adaptive run) | finish_reason | samples | with reasoning text | with reasoning_tokens |\n| --- | --- | ---: | ---: | ---: |\n",
    );
    for (state, finish, count, reasoning, reasoning_tokens) in rows {
        let finish = finish.unwrap_or_else(|| "–".into());
        out.push_str(&format!("| {state} | {finish} | {count} | {reasoning} | {reasoning_tokens} |\n"));
    }
    let tries: Vec<(String, bool, i64)> = sqlx::query_as(
        "SELECT a.result, a.counted, count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 GROUP BY 1, 2 ORDER BY 3 DESC",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap();
    let tries: Vec<String> = tries
        .iter()
        .map(|(r, counted, n)| format!("{n} {r}{}", if *counted { "" } else { " (uncounted)" }))
        .collect();
    let (seconds, scraped): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(server_generation_tps) FROM run_metrics WHERE run_id = $1")
            .bind(run)
            .fetch_one(pool)
            .await
            .unwrap();
    out.push_str(&format!(
        "\nTries: {}. The server's /metrics carried a rate in {scraped} of {seconds} recorded seconds.",
        tries.join(", ")
    ));
    out
}

fn python_client(
    url: &str,
    model: &str,
    prompts: &[String],
    concurrency: usize,
    shape: Shape,
    max_tokens: u32,
) -> Outcome {
    let python = std::env::var("BENCH_PLAIN_PYTHON").expect(
        "BENCH_PLAIN_PYTHON: a Python with aiohttp for the plain client (the real-vLLM venv's has it)",
    );
    let file = std::env::temp_dir().join(format!("bench-prompts-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec(prompts).unwrap()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/generation/plain_client.py");
    let mut command = std::process::Command::new(python);
    command
        .arg(script)
        .arg(url)
        .arg(model)
        .arg(&file)
        .arg(concurrency.to_string())
        .arg(max_tokens.to_string());
    command.args(shape.flags());
    let output = command.output().expect("the plain client runs");
    assert!(output.status.success(), "plain client failed: {}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the plain client prints JSON");
    Outcome {
        lost: report["lost"].as_u64().unwrap() as usize,
        total: prompts.len(),
        useful_tps: report["tokens"].as_f64().unwrap() / report["seconds"].as_f64().unwrap(),
        in_flight: report["busy_seconds"].as_f64().map(|busy| busy / report["seconds"].as_f64().unwrap()),
        limit: None,
        details: None,
    }
}

/// `64` (whole answers), `64s` (streamed) or `64i` (streamed with token ids), a chunk every 16
/// tokens or every N with a number after the letter (`64i256`), as in `BENCH_REAL_PLAIN`.
fn plain_client(spec: &str) -> Plain {
    let bad = || -> ! {
        panic!(
            "BENCH_REAL_PLAIN: `{spec}` is not a concurrency with an optional s (streamed) or i (with token ids), \
             and after the letter an optional chunk interval in tokens (64, 64s, 64i, 64i256)"
        )
    };
    let (digits, shape) = match spec.find(['s', 'i']) {
        None => (spec, Shape::Whole),
        Some(at) => {
            let interval = match &spec[at + 1..] {
                "" => 16,
                n => n.parse().ok().filter(|&n| n > 0).unwrap_or_else(|| bad()),
            };
            (&spec[..at], Shape::Streamed { interval, token_ids: spec.as_bytes()[at] == b'i' })
        }
    };
    let concurrency = digits.parse().unwrap_or_else(|_| bad());
    Plain::Python { concurrency, shape }
}

/// The comma-separated items of `key`, trimmed and parsed; `None` when it is unset.
fn env_list<T>(key: &str, parse: impl Fn(&str) -> T) -> Option<Vec<T>> {
    let list = std::env::var(key).ok()?;
    Some(list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(parse).collect())
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn short_prompt(i: usize) -> String {
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

/// A prompt of a few hundred tokens, as the seed's prompt set had: waves of them dip the rate.
fn long_prompt(i: usize) -> String {
    let context = "Here is the background you need, in full detail, before answering. ".repeat(20 + i % 40);
    format!("{context}{}", short_prompt(i))
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
    let prompts: Vec<String> = (0..1500).map(|i| format!("cost probe {i}: {}", short_prompt(i))).collect();
    let dataset = testing::dataset_of(pool, &prompts).await;
    let endpoint = testing::endpoint_at(pool, &sim.base_url, by).await;
    let mut settings = RunSettings::with_defaults("sim-model", vec![endpoint], 8192);
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
    let chunks = if per_token_chunks { "one chunk per token" } else { "stream_interval 16" };
    println!(
        "Client cost ({chunks}): {tokens} tokens in {:.1} s = {:.0} tok/s; engine CPU {:.2} s = {:.3} ms per 1,000 tokens\n",
        wall.as_secs_f64(),
        tokens as f64 / wall.as_secs_f64(),
        cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / tokens as f64,
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
