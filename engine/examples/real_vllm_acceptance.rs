//! Checks the acceptance capture of draft evaluations against two real vLLM servers (not a test:
//! CI has no vLLM; run by `scripts/real-vllm-acceptance.sh`). Both serve the same target with a
//! draft (`--speculative-config` with `draft_model`, `--per-request-spec-decode-metrics
//! summary`): REAL_VLLM_SELF_URL with the target itself as its draft, REAL_VLLM_OTHER_URL with a
//! worse one (a perturbed copy of the target). On PROMPTS short questions:
//!
//! - evaluation A on the self-draft server (every prompt, temperature 0, thinking on for half of
//!   them): every finished sample has a figure, and every figure is the full length
//!   (`num_speculative_tokens + 1`: each draft token accepted);
//! - evaluation B of A's prompts (each in its own thinking mode) on the other server;
//! - for each, the app's pooled figure (`acceptance::report`, 1 + Σ accepted ÷ Σ steps over the
//!   samples) equals the server's own over the run: `1 + Δaccepted ÷ Δdrafts` of its `/metrics`
//!   counters, read after the run's creation (which sends one probe request) and after the run
//!   completed; the samples' step and token sums equal the counters' changes;
//! - the comparison of A and B (`acceptance::compare`, paired per prompt) finds B measurably
//!   lower: the 95% interval of the difference lies below zero.
//!
//! Prints the figures as a table and exits non-zero when a check fails.
//!
//!   REAL_VLLM_SELF_URL=http://127.0.0.1:8021 REAL_VLLM_OTHER_URL=http://127.0.0.1:8022 \
//!   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo run -p engine --features engine/test-support --example real_vllm_acceptance -- [PROMPTS]
//!
//! Optional: REAL_VLLM_SPEC_TOKENS (the servers' `num_speculative_tokens`, 3),
//! REAL_VLLM_TEMPERATURE (0), REAL_VLLM_MAX_TOKENS (96), REAL_VLLM_OTHER_DRAFT (the worse
//! draft's name in the app, `tiny-perturbed`).
#![allow(clippy::unwrap_used)] // Examples may unwrap: a failure there is a failure of the example, with its message.

#[path = "common/scratch_database.rs"]
mod scratch_database;

use domain::acceptance::{DraftRef, Pooled, RunAcceptance};
use domain::generation::{Selection, Thinking};
use engine::acceptance::{compare, report};
use engine::runs::{self, NewRun};
use engine::testing::*;
use engine::vllm::{http_client, SpecCounters, VllmClient};
use sqlx::PgPool;
use std::time::{Duration, Instant};

const MODEL: &str = "tiny";
const DATABASE: &str = "draft_studio_real_vllm_acceptance";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The server's counters once they stand still: vLLM records a step's figures right after it
/// streams the step's tokens, so a scrape straight after a response may miss its last step.
async fn settled_counters(client: &VllmClient) -> anyhow::Result<SpecCounters> {
    let mut last: Option<SpecCounters> = None;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let load = client.load().await.map_err(anyhow::Error::msg)?;
        let spec = load
            .ok_or_else(|| anyhow::anyhow!("the server's /metrics has no vLLM metrics"))?
            .spec
            .ok_or_else(|| anyhow::anyhow!("the server's /metrics has no spec_decode counters"))?;
        if last == Some(spec) {
            return Ok(spec);
        }
        last = Some(spec);
    }
    anyhow::bail!("the server's spec_decode counters did not settle within 20 s")
}

/// The samples' figures, summed in SQL (independently of the report's own reading).
#[derive(Debug, Default, sqlx::FromRow)]
struct Sums {
    samples: i64,
    finished: i64,
    with_figure: i64,
    steps: i64,
    accepted: i64,
    drafted: i64,
    /// Samples whose figure is not the full length (`spec_accepted = K · spec_steps`).
    not_full: i64,
    /// Samples whose `spec_tokens` is not the servers' K.
    other_k: i64,
    /// Samples whose histogram does not add up to their steps and accepted tokens.
    bad_histogram: i64,
    min_milli: Option<i32>,
    max_milli: Option<i32>,
}

async fn sums(pool: &PgPool, run: i64, k: i64) -> anyhow::Result<Sums> {
    Ok(sqlx::query_as(
        "SELECT count(*) AS samples,
                count(*) FILTER (WHERE state NOT IN ('pending', 'running')) AS finished,
                count(spec_steps) AS with_figure,
                COALESCE(sum(spec_steps), 0)::bigint AS steps,
                COALESCE(sum(spec_accepted), 0)::bigint AS accepted,
                COALESCE(sum(spec_drafted), 0)::bigint AS drafted,
                count(*) FILTER (WHERE spec_accepted <> $2 * spec_steps) AS not_full,
                count(*) FILTER (WHERE spec_tokens <> $2) AS other_k,
                count(*) FILTER (WHERE spec_steps IS NOT NULL AND (
                    (SELECT sum(h) FROM unnest(spec_histogram) h) <> spec_steps OR
                    (SELECT sum(h * (i - 1)) FROM unnest(spec_histogram) WITH ORDINALITY AS t(h, i)) <> spec_accepted
                )) AS bad_histogram,
                min(acceptance_milli) AS min_milli, max(acceptance_milli) AS max_milli
         FROM samples WHERE run_id = $1",
    )
    .bind(run)
    .bind(k)
    .fetch_one(pool)
    .await?)
}

/// The run's tries by result ("ok 64, truncated 0, ..."): a retried sample sent more requests
/// than it keeps figures for.
async fn tries(pool: &PgPool, run: i64) -> anyhow::Result<(i64, String)> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT a.result, count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 GROUP BY a.result ORDER BY a.result",
    )
    .bind(run)
    .fetch_all(pool)
    .await?;
    let total = rows.iter().map(|(_, n)| n).sum();
    Ok((total, rows.iter().map(|(r, n)| format!("{r} {n}")).collect::<Vec<_>>().join(", ")))
}

/// One evaluation run and what the app and the server say about it.
struct Evaluation {
    label: &'static str,
    draft: String,
    run: i64,
    report: RunAcceptance,
    sums: Sums,
    states: String,
    tries: (i64, String),
    /// What the creation's probe request added to the counters.
    probe: SpecCounters,
    before: SpecCounters,
    after: SpecCounters,
    wall: Duration,
}

impl Evaluation {
    fn delta(&self) -> SpecCounters {
        SpecCounters {
            drafts: self.after.drafts - self.before.drafts,
            draft_tokens: self.after.draft_tokens - self.before.draft_tokens,
            accepted: self.after.accepted - self.before.accepted,
        }
    }

    fn server_length(&self) -> Option<f64> {
        self.after.length_since(&self.before)
    }

    fn pooled(&self) -> Option<&Pooled> {
        self.report.overall.as_ref()
    }
}

/// The checks made so far, and those that failed.
#[derive(Default)]
struct Checks {
    made: usize,
    failed: Vec<String>,
}

impl Checks {
    fn check(&mut self, ok: bool, what: impl Into<String>) {
        let what = what.into();
        println!("  [{}] {what}", if ok { "ok" } else { "FAIL" });
        self.made += 1;
        if !ok {
            self.failed.push(what);
        }
    }
}

struct Target<'a> {
    pool: &'a PgPool,
    by: i64,
    dataset: i64,
    endpoint: i64,
    client: VllmClient,
}

async fn evaluate(
    target: &Target<'_>,
    label: &'static str,
    draft: &str,
    selection: Selection,
    thinking: Thinking,
    temperature: f64,
    max_tokens: u32,
) -> anyhow::Result<Evaluation> {
    let pool = target.pool;
    let mut settings = settings(vec![target.endpoint]);
    settings.model = MODEL.into();
    settings.max_tokens = max_tokens;
    settings.temperature = Some(temperature);
    settings.thinking = thinking;
    settings.idle_timeout_secs = 120;
    let started = Instant::now();
    let before_creation = settled_counters(&target.client).await?;
    let run = runs::create(
        pool,
        &http_client(),
        NewRun {
            name: format!("evaluation {label}: {draft}"),
            dataset_id: target.dataset,
            selection,
            settings,
            draft: Some(DraftRef { name: draft.into(), revision: String::new() }),
            trained_on: None,
        },
        target.by,
    )
    .await?;
    // After the creation's probe request, before the first sample is sent.
    let before = settled_counters(&target.client).await?;
    let probe = SpecCounters {
        drafts: before.drafts - before_creation.drafts,
        draft_tokens: before.draft_tokens - before_creation.draft_tokens,
        accepted: before.accepted - before_creation.accepted,
    };
    let (stop, worker) = start_worker(pool);
    wait_for_status(pool, run, "completed", Duration::from_secs(4 * 3600)).await;
    stop.cancel();
    worker.await??;
    let after = settled_counters(&target.client).await?;
    let wall = started.elapsed();
    let report = report::run(pool, run).await?;
    let k = i64::from(report.spec_tokens.unwrap_or(0));
    let states = state_counts(pool, run)
        .await
        .iter()
        .map(|(state, n)| format!("{} {n}", state.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Evaluation {
        label,
        draft: draft.into(),
        run,
        sums: sums(pool, run, k).await?,
        tries: tries(pool, run).await?,
        report,
        states,
        probe,
        before,
        after,
        wall,
    })
}

/// The checks both evaluations share: every finished sample has a figure, and the app's pooled
/// figure is the server's own over the run.
fn check_against_counters(e: &Evaluation, k: u32, checks: &mut Checks) {
    let s = &e.sums;
    let delta = e.delta();
    println!(
        "evaluation {} ({}, run {}): {} samples ({}), {} tries ({}), {:.0} s",
        e.label,
        e.draft,
        e.run,
        s.samples,
        e.states,
        e.tries.0,
        e.tries.1,
        e.wall.as_secs_f64()
    );
    println!(
        "  the creation's probe request: {} drafts, {} accepted, {} draft tokens (read before and after \
         runs::create, left out of the run's change)",
        e.probe.drafts, e.probe.accepted, e.probe.draft_tokens
    );
    println!(
        "  samples: {} steps, {} accepted, {} drafted; counters' change: {} drafts, {} accepted, {} draft tokens",
        s.steps, s.accepted, s.drafted, delta.drafts, delta.accepted, delta.draft_tokens
    );
    let app = e.pooled().map(|p| p.length);
    let server = e.server_length();
    println!(
        "  pooled length: app {}, counters 1 + {} / {} = {}",
        fmt6(app),
        delta.accepted,
        delta.drafts,
        fmt6(server)
    );
    checks.check(s.finished == s.samples && s.samples > 0, format!("{}: every sample finished", e.label));
    checks.check(
        s.with_figure == s.finished && e.report.finished == s.finished as u64,
        format!("{}: every finished sample has a figure ({} of {})", e.label, s.with_figure, s.finished),
    );
    checks.check(
        e.pooled().map(|p| p.samples) == Some(s.with_figure as u64),
        format!("{}: the report pools every sample with a figure", e.label),
    );
    checks.check(
        e.report.spec_tokens == Some(k) && s.other_k == 0,
        format!("{}: every sample reports num_spec_tokens {k} ({:?})", e.label, e.report.spec_tokens),
    );
    checks
        .check(s.bad_histogram == 0, format!("{}: every histogram adds up to its steps and tokens", e.label));
    checks.check(
        matches!((app, server), (Some(a), Some(b)) if (a - b).abs() <= 1e-9),
        format!(
            "{}: the app's pooled length equals the counters' ({} vs {})",
            e.label,
            fmt6(app),
            fmt6(server)
        ),
    );
    checks.check(
        s.steps as f64 == delta.drafts
            && s.accepted as f64 == delta.accepted
            && s.drafted as f64 == delta.draft_tokens,
        format!("{}: the samples' steps, accepted and drafted tokens equal the counters' change", e.label),
    );
}

/// A row of the closing table: its name and how to tell it for an evaluation.
type Line = (&'static str, fn(&Evaluation) -> String);

fn fmt6(value: Option<f64>) -> String {
    value.map_or_else(|| "none".into(), |v| format!("{v:.6}"))
}

fn interval(p: Option<&Pooled>) -> String {
    p.and_then(|p| p.interval).map_or_else(|| "none".into(), |i| format!("{:.4} – {:.4}", i.low, i.high))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let prompts: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let self_url = std::env::var("REAL_VLLM_SELF_URL").unwrap_or_else(|_| "http://127.0.0.1:8021".into());
    let other_url = std::env::var("REAL_VLLM_OTHER_URL").unwrap_or_else(|_| "http://127.0.0.1:8022".into());
    let other_draft = std::env::var("REAL_VLLM_OTHER_DRAFT").unwrap_or_else(|_| "tiny-perturbed".into());
    let k: u32 = env_or("REAL_VLLM_SPEC_TOKENS", 3);
    let temperature: f64 = env_or("REAL_VLLM_TEMPERATURE", 0.0);
    let max_tokens: u32 = env_or("REAL_VLLM_MAX_TOKENS", 96);

    let pool = scratch_database::scratch_database(DATABASE).await?;

    let by = user(&pool).await;
    let kinds = [
        "what is {i} times 7?",
        "explain topic number {i} in a few sentences, please.",
        "write a short poem about the number {i}.",
        "list three facts about item {i} and say why each matters.",
    ];
    let questions: Vec<String> = (0..prompts)
        .map(|i| format!("Question {i}: {}", kinds[i % kinds.len()].replace("{i}", &i.to_string())))
        .collect();
    let dataset = dataset_of(&pool, &questions).await;
    let target = |url: &str, endpoint| -> anyhow::Result<Target> {
        Ok(Target {
            pool: &pool,
            by,
            dataset,
            endpoint,
            client: VllmClient::new(http_client(), url, None).map_err(anyhow::Error::msg)?,
        })
    };
    let self_target = target(&self_url, endpoint_at(&pool, &self_url, by).await)?;
    let other_target = target(&other_url, endpoint_at(&pool, &other_url, by).await)?;
    println!(
        "{prompts} prompts, temperature {temperature}, max_tokens {max_tokens}, num_speculative_tokens {k}; \
         A: tiny-self at {self_url}, B: {other_draft} at {other_url}"
    );

    let mut checks = Checks::default();
    // Half of the prompts think (the tiny model's template answers the others after an empty
    // think block): B sends each in the mode A did.
    let a = evaluate(
        &self_target,
        "A",
        "tiny-self",
        Selection::All,
        Thinking::Mix { on_ratio: 0.5 },
        temperature,
        max_tokens,
    )
    .await?;
    check_against_counters(&a, k, &mut checks);
    let full = 1000 * (i64::from(k) + 1) as i32;
    checks.check(
        a.sums.not_full == 0
            && a.sums.with_figure > 0
            && a.sums.min_milli == Some(full)
            && a.sums.max_milli == Some(full),
        format!(
            "A: every figure is exactly {} (spec_accepted = {k} × spec_steps; {} are not; lengths {:?}–{:?} thousandths)",
            k + 1,
            a.sums.not_full,
            a.sums.min_milli,
            a.sums.max_milli
        ),
    );

    let b = evaluate(
        &other_target,
        "B",
        &other_draft,
        Selection::Run { run_id: a.run },
        Thinking::AsSource,
        temperature,
        max_tokens,
    )
    .await?;
    check_against_counters(&b, k, &mut checks);

    let comparison = compare::compare(&pool, a.run, b.run).await?;
    let paired = comparison.overall.as_ref();
    println!(
        "comparison A → B: {} shared prompts, {} sent in another thinking mode",
        comparison.shared_prompts, comparison.mode_mismatches
    );
    if let Some(p) = paired {
        println!(
            "  pooled A {:.6}, B {:.6}; difference B − A {:+.6}, 95% interval {}; B lower on {} of {} prompts, \
             higher on {}, equal on {}",
            p.a.length,
            p.b.length,
            p.difference,
            p.interval.map_or_else(|| "none".into(), |i| format!("{:+.6} to {:+.6}", i.low, i.high)),
            p.a_higher,
            p.pairs,
            p.b_higher,
            p.pairs - p.a_higher - p.b_higher
        );
    }
    checks.check(
        comparison.shared_prompts == prompts as u64 && comparison.mode_mismatches == 0,
        "B sent every prompt of A, each in A's thinking mode",
    );
    checks.check(paired.is_some_and(|p| p.pairs == prompts as u64), "the comparison pairs every prompt");
    checks.check(
        paired.is_some_and(|p| {
            Some(p.a.length) == a.pooled().map(|x| x.length)
                && Some(p.b.length) == b.pooled().map(|x| x.length)
        }),
        "the comparison's pooled lengths are the reports'",
    );
    checks.check(
        paired.and_then(|p| p.interval).is_some_and(|i| i.high < 0.0),
        "B is measurably lower: the difference's 95% interval lies below zero",
    );

    let row = |name: &str, fa: String, fb: String| println!("{name:<34} {fa:>22} {fb:>22}");
    println!();
    row("", format!("A {}", a.draft), format!("B {}", b.draft));
    let lines: [Line; 12] = [
        ("samples", |e| e.sums.samples.to_string()),
        ("tries", |e| e.tries.0.to_string()),
        ("samples with a figure", |e| e.sums.with_figure.to_string()),
        ("verify steps: samples", |e| e.sums.steps.to_string()),
        ("verify steps: counters' change", |e| e.delta().drafts.to_string()),
        ("accepted: samples", |e| e.sums.accepted.to_string()),
        ("accepted: counters' change", |e| e.delta().accepted.to_string()),
        ("drafted: samples / counters", |e| format!("{} / {}", e.sums.drafted, e.delta().draft_tokens)),
        ("pooled length (app)", |e| fmt6(e.pooled().map(|p| p.length))),
        ("length from counters", |e| fmt6(e.server_length())),
        ("pooled 95% interval", |e| interval(e.pooled())),
        ("wall time", |e| format!("{:.0} s", e.wall.as_secs_f64())),
    ];
    for (name, figure) in lines {
        row(name, figure(&a), figure(&b));
    }
    if let Some(p) = paired {
        row("difference B − A", String::new(), format!("{:+.6}", p.difference));
        row(
            "95% interval",
            String::new(),
            p.interval.map_or_else(|| "none".into(), |i| format!("{:+.4} to {:+.4}", i.low, i.high)),
        );
        row("prompts B lower / higher / equal", String::new(), {
            format!("{} / {} / {}", p.a_higher, p.b_higher, p.pairs - p.a_higher - p.b_higher)
        });
    }
    println!();
    if checks.failed.is_empty() {
        println!("PASS: all {} checks", checks.made);
        Ok(())
    } else {
        for failure in &checks.failed {
            println!("FAIL: {failure}");
        }
        std::process::exit(1);
    }
}
