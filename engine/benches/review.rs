//! Review benchmark (issue 6). Not a test: prints figures for the README.
//!
//!   REVIEW_BENCH_SAMPLES=1000000 cargo bench -p engine --bench review
//!
//! Seeds a database `draft_studio_review_bench` (kept between runs; set REVIEW_BENCH_RESEED=1
//! to build it again) with samples spread over ten runs: texts drawn from a skewed vocabulary so
//! that search words range from common to rare, outcomes, flags and decisions in realistic
//! shares. Then times, one call after another, the sample list for common filters (full-text
//! search included), its counts per filter value, queue claims and the sample page's server work
//! (load + markdown render), and prints p50/p95/max per case.
#![allow(clippy::unwrap_used)] // Benchmarks may unwrap: a failure there is a failure of the benchmark, with its message.

use domain::{
    generation::SampleState,
    review::{ReviewState, SampleFilter, SortKey, TokenRange},
    Role, Viewer,
};
use engine::review::counts::{self, Counting};
use engine::review::{detail, list, queue};
use sqlx::{migrate::MigrateDatabase, PgPool, Postgres};
use std::time::{Duration, Instant};

const RUNS: i64 = 10;
const ITERATIONS: usize = 40;

#[tokio::main]
async fn main() {
    let samples: i64 =
        std::env::var("REVIEW_BENCH_SAMPLES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let reseed = std::env::var("REVIEW_BENCH_RESEED").is_ok_and(|v| v == "1");
    let pool = database(reseed).await;
    let have: i64 = sqlx::query_scalar("SELECT count(*) FROM samples").fetch_one(&pool).await.unwrap();
    if have != samples {
        seed(&pool, samples).await;
    }
    let viewer = bench_user(&pool).await;
    let runs: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM runs ORDER BY id").fetch_all(&pool).await.unwrap();
    println!("# Review benchmark: {samples} samples in {} runs, {ITERATIONS} calls per case\n", runs.len());
    println!("| case | rows | p50 ms | p95 ms | max ms |");
    println!("| --- | ---: | ---: | ---: | ---: |");

    let run = |i: usize| runs[i % runs.len()];
    let common = ["answer", "number", "check", "value", "result"];
    let rare = ["zebra", "quartz", "violin", "glacier", "saffron"];
    type Case<'a> = (&'a str, Box<dyn Fn(usize) -> SampleFilter + 'a>);
    let cases: Vec<Case<'_>> = vec![
        ("first page, no filter", Box::new(|_| SampleFilter::default())),
        (
            "one run, newest first",
            Box::new(move |i| SampleFilter {
                run: Some(run(i)),
                sort: SortKey::Newest,
                ..Default::default()
            }),
        ),
        (
            "one run, unreviewed",
            Box::new(move |i| SampleFilter {
                run: Some(run(i)),
                review: Some(ReviewState::Unreviewed),
                ..Default::default()
            }),
        ),
        (
            "outcome truncated",
            Box::new(|_| SampleFilter { outcome: Some(SampleState::Truncated), ..Default::default() }),
        ),
        (
            "one run, timed_out",
            Box::new(move |i| SampleFilter {
                run: Some(run(i)),
                outcome: Some(SampleState::TimedOut),
                ..Default::default()
            }),
        ),
        (
            "flag repetition",
            Box::new(|_| SampleFilter { flag: Some("repetition".into()), ..Default::default() }),
        ),
        (
            "finish_reason length",
            Box::new(|_| SampleFilter { finish_reason: Some("length".into()), ..Default::default() }),
        ),
        (
            "review flagged",
            Box::new(|_| SampleFilter { review: Some(ReviewState::Flagged), ..Default::default() }),
        ),
        (
            "completion 4000–6000 tokens, longest first",
            Box::new(|_| SampleFilter {
                completion_tokens: TokenRange { min: Some(4000), max: Some(6000) },
                sort: SortKey::LongestCompletion,
                ..Default::default()
            }),
        ),
        (
            "longest completion first",
            Box::new(|_| SampleFilter { sort: SortKey::LongestCompletion, ..Default::default() }),
        ),
        (
            "category",
            Box::new(|i| SampleFilter { category: Some(format!("cat{}", i % 8)), ..Default::default() }),
        ),
        (
            "search, rare word",
            Box::new(move |i| SampleFilter { q: Some(rare[i % rare.len()].into()), ..Default::default() }),
        ),
        (
            "search, common word",
            Box::new(move |i| SampleFilter {
                q: Some(common[i % common.len()].into()),
                ..Default::default()
            }),
        ),
        (
            "search, two words + run",
            Box::new(move |i| SampleFilter {
                run: Some(run(i)),
                q: Some(format!("{} {}", common[i % common.len()], rare[(i + 1) % rare.len()])),
                ..Default::default()
            }),
        ),
        (
            "search, rare word + outcome ok",
            Box::new(move |i| SampleFilter {
                q: Some(rare[i % rare.len()].into()),
                outcome: Some(SampleState::Ok),
                ..Default::default()
            }),
        ),
    ];
    let mut worst_list_p95 = 0.0f64;
    for (name, make) in &cases {
        let mut times = Vec::new();
        let mut rows = 0;
        for i in 0..ITERATIONS {
            let filter = make(i);
            let start = Instant::now();
            let page = list::page(&pool, &filter, None, None).await.unwrap();
            times.push(start.elapsed());
            rows = page.rows.len();
        }
        let (p50, p95, max) = stats(&mut times);
        worst_list_p95 = worst_list_p95.max(p95);
        println!("| list: {name} | {rows} | {p50:.1} | {p95:.1} | {max:.1} |");
    }

    // Deep paging by key: the 20th page costs what the first does.
    {
        let filter =
            SampleFilter { run: Some(run(3)), sort: SortKey::LongestCompletion, ..Default::default() };
        let mut after: Option<String> = None;
        let mut times = Vec::new();
        for _ in 0..ITERATIONS {
            let start = Instant::now();
            let page = list::page(&pool, &filter, after.as_deref(), None).await.unwrap();
            times.push(start.elapsed());
            after = page.next;
        }
        let (p50, p95, max) = stats(&mut times);
        worst_list_p95 = worst_list_p95.max(p95);
        println!("| list: pages 1–{ITERATIONS} by key, one run, longest first | 50 | {p50:.1} | {p95:.1} | {max:.1} |");
    }

    // The counts panel: from the stored tally for the first four, grouped from the samples that
    // pass a search or a length range for the rest. REVIEW_BENCH_SKIP_COUNTS=1 leaves them out.
    let counts = if std::env::var("REVIEW_BENCH_SKIP_COUNTS").is_ok_and(|v| v == "1") {
        vec![]
    } else {
        vec![
            ("counts per value: no filter", SampleFilter::default()),
            ("counts per value: one run", SampleFilter { run: Some(run(0)), ..Default::default() }),
            (
                "counts per value: one run, unreviewed, category",
                SampleFilter {
                    run: Some(run(0)),
                    review: Some(ReviewState::Unreviewed),
                    category: Some("cat3".into()),
                    ..Default::default()
                },
            ),
            (
                "counts per value: flag repetition",
                SampleFilter { flag: Some("repetition".into()), ..Default::default() },
            ),
            ("counts per value: rare word", SampleFilter { q: Some("zebra".into()), ..Default::default() }),
            (
                "counts per value: common word",
                SampleFilter { q: Some(common[0].into()), ..Default::default() },
            ),
            (
                "counts per value: one run, common word",
                SampleFilter { run: Some(run(0)), q: Some(common[0].into()), ..Default::default() },
            ),
            (
                "counts per value: completion 4000–6000 tokens",
                SampleFilter {
                    completion_tokens: TokenRange { min: Some(4000), max: Some(6000) },
                    ..Default::default()
                },
            ),
        ]
    };
    // As the review page counts (exact, or estimated past a quarter second), and, where that
    // estimated, exactly as the API's `exact=true` does.
    let mut counts_p95 = 0.0_f64;
    for (name, filter) in counts {
        let mut panel_total = None;
        for counting in [Counting::PANEL, Counting::Exact] {
            let mut times = Vec::new();
            let mut facets = domain::review::Facets::default();
            for _ in 0..(ITERATIONS / 4) {
                let start = Instant::now();
                facets = counts::count(&pool, &filter, counting).await.unwrap();
                times.push(start.elapsed());
            }
            let (p50, p95, max) = stats(&mut times);
            let label = match (counting, panel_total) {
                (Counting::Exact, Some(estimate)) => {
                    let off = 100.0 * (estimate - facets.total) as f64 / facets.total.max(1) as f64;
                    format!("exact=true: {} (the estimate {off:+.1}%)", facets.total)
                }
                _ if facets.counted.is_estimate() => format!("≈ {}", facets.total),
                _ => format!("{}", facets.total),
            };
            if counting == Counting::PANEL {
                counts_p95 = counts_p95.max(p95);
            }
            println!("| {name} | {label} | {p50:.1} | {p95:.1} | {max:.1} |");
            if !facets.counted.is_estimate() || counting == Counting::Exact {
                break; // Exact as the page counts: `exact=true` is the same statement.
            }
            panel_total = Some(facets.total);
        }
    }

    {
        let mut times = Vec::new();
        for i in 0..ITERATIONS {
            let start = Instant::now();
            let id =
                queue::next(&pool, viewer.id, Some(run(i))).await.unwrap().expect("unreviewed samples left");
            queue::release(&pool, viewer.id, id).await.unwrap();
            times.push(start.elapsed());
        }
        let (p50, p95, max) = stats(&mut times);
        println!("| queue: next + release | 1 | {p50:.1} | {p95:.1} | {max:.1} |");
    }

    let mut page_p95 = 0.0;
    {
        let max_id: i64 = sqlx::query_scalar("SELECT max(id) FROM samples").fetch_one(&pool).await.unwrap();
        let mut times = Vec::new();
        for i in 0..ITERATIONS {
            let id = 1 + (i as i64 * 7919 * 131) % max_id;
            let start = Instant::now();
            detail::load(&pool, &viewer, id).await.unwrap();
            times.push(start.elapsed());
        }
        let (p50, p95, max) = stats(&mut times);
        page_p95 = p95.max(page_p95);
        println!("| sample page: load + markdown render | 1 | {p50:.1} | {p95:.1} | {max:.1} |");
    }
    {
        // The worst case the page has: a 100,000-character markdown answer.
        let id: i64 = sqlx::query_scalar("SELECT min(id) FROM samples").fetch_one(&pool).await.unwrap();
        let long = "## Step\n\nSome *markdown* with `code`, a [link](https://example.com) and $x^2$.\n\n```rust\nfn f() {}\n```\n\n"
            .repeat(1200);
        let long: String = long.chars().take(99_000).collect();
        sqlx::query("UPDATE samples SET content = $2 WHERE id = $1")
            .bind(id)
            .bind(&long)
            .execute(&pool)
            .await
            .unwrap();
        let mut times = Vec::new();
        for _ in 0..(ITERATIONS / 2) {
            let start = Instant::now();
            detail::load(&pool, &viewer, id).await.unwrap();
            times.push(start.elapsed());
        }
        let (p50, p95, max) = stats(&mut times);
        page_p95 = p95.max(page_p95);
        println!(
            "| sample page with a 99,000-character markdown answer | 1 | {p50:.1} | {p95:.1} | {max:.1} |"
        );
    }
    println!("\nworst list p95: {worst_list_p95:.1} ms (target ≤ 50 ms); worst sample page p95: {page_p95:.1} ms (target ≤ 100 ms); worst counts p95 as the page counts: {counts_p95:.1} ms (target ≤ 500 ms)");
}

fn stats(times: &mut [Duration]) -> (f64, f64, f64) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| ms(times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1]);
    (at(0.5), at(0.95), ms(*times.last().unwrap()))
}

async fn database(reseed: bool) -> PgPool {
    let server = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let url = format!("{}/draft_studio_review_bench", server.rsplit_once('/').unwrap().0);
    if reseed {
        let _ = Postgres::drop_database(&url).await;
    }
    if !Postgres::database_exists(&url).await.unwrap() {
        Postgres::create_database(&url).await.unwrap();
    }
    let pool = engine::db::connect(&url, 16).await.unwrap();
    engine::db::migrate(&pool).await.unwrap();
    pool
}

async fn bench_user(pool: &PgPool) -> Viewer {
    let id: i64 =
        sqlx::query_scalar("SELECT id FROM users WHERE username = 'bench'").fetch_one(pool).await.unwrap();
    Viewer { id, username: "bench".into(), role: Role::Engineer }
}

async fn exec(pool: &PgPool, sql: &str) {
    sqlx::query(sql).execute(pool).await.unwrap_or_else(|e| panic!("{e}: {sql}"));
}

/// Writes `samples` samples with SQL (fast enough for a million): indexes are dropped during
/// the load and built again after it, as any bulk load would.
async fn seed(pool: &PgPool, samples: i64) {
    let started = Instant::now();
    println!("seeding {samples} samples…");
    for table in ["review_events", "samples", "runs", "dataset_rows", "datasets"] {
        exec(pool, &format!("TRUNCATE {table} CASCADE")).await;
    }
    if sqlx::query("SELECT 1 FROM users WHERE username = 'bench'")
        .fetch_optional(pool)
        .await
        .unwrap()
        .is_none()
    {
        engine::auth::create_user(
            pool,
            engine::auth::NewUser { username: "bench", password: "bench-password", role: Role::Engineer },
        )
        .await
        .unwrap();
    }
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT i.indexname, i.indexdef FROM pg_indexes i
         WHERE i.tablename IN ('samples', 'sample_search') AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (name, _) in &indexes {
        exec(pool, &format!("DROP INDEX {name}")).await;
    }
    let per_run = samples / RUNS;
    // A vocabulary where low indices are drawn far more often (random() * random()).
    exec(
        pool,
        "CREATE TABLE IF NOT EXISTS bench_vocab AS SELECT ARRAY[
            'the','answer','is','we','number','so','check','value','result','then','first','let','me','think',
            'because','sum','product','equation','solve','step','therefore','wait','actually','again','total',
            'function','return','list','string','code','python','rust','example','case','error','test','data',
            'model','token','train','loss','layer','vector','matrix','prime','integer','divide','multiply',
            'history','river','mountain','city','language','science','energy','light','water','plant','cell',
            'planet','orbit','gravity','market','price','cost','profit','zebra','quartz','violin','glacier',
            'saffron','lantern','meadow','harbor','compass','falcon'] AS words",
    )
    .await;
    let dataset: i64 = sqlx::query_scalar(
        "INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
         VALUES ('bench', 'ready', '{\"kind\":\"bench\"}', 'jsonl', '{\"schema\":\"openai\"}', $1) RETURNING id",
    )
    .bind(per_run)
    .fetch_one(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
         SELECT $1, 'row-' || g,
                jsonb_build_array(jsonb_build_object('role', 'user', 'content',
                    'Question ' || g || ': ' || array_to_string(ARRAY(
                        SELECT v.words[1 + floor(random() * random() * array_length(v.words, 1))::int]
                        FROM bench_vocab v, generate_series(1, 12 + g % 5)), ' '))),
                decode(md5(g::text), 'hex'), 'cat' || (g % 8), 1, 80
         FROM generate_series(1, $2) g",
    )
    .bind(dataset)
    .bind(per_run)
    .execute(pool)
    .await
    .unwrap();
    let reviewer: i64 =
        sqlx::query_scalar("SELECT id FROM users WHERE username = 'bench'").fetch_one(pool).await.unwrap();
    for r in 0..RUNS {
        let run: i64 = sqlx::query_scalar(
            "INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count, finished_at)
             VALUES ('bench run ' || $1, $2, 'completed',
                     '{\"model\":\"m\",\"endpoint_ids\":[],\"max_tokens\":8192,\"temperature\":null,\"top_p\":null,\"seed\":null,\"system_prompt\":null,\"thinking\":{\"mode\":\"on\"},\"turns\":\"last_assistant\",\"concurrency\":{\"mode\":\"adaptive\",\"min\":4,\"max\":512},\"idle_timeout_secs\":120,\"deadline_secs\":null,\"max_attempts\":5,\"stream_interval\":16}',
                     '{\"mode\":\"all\"}', $3, now()) RETURNING id",
        )
        .bind(r)
        .bind(dataset)
        .bind(per_run as i32)
        .fetch_one(pool)
        .await
        .unwrap();
        // Shares per 100: 75 ok, 12 truncated, 3 timed_out, 3 failed, 2 empty, 5 ok with a loop.
        sqlx::query(
            "WITH base AS (
                 SELECT d.id AS row_id, d.messages, g,
                        CASE WHEN g % 100 < 75 THEN 'ok' WHEN g % 100 < 87 THEN 'truncated'
                             WHEN g % 100 < 90 THEN 'timed_out' WHEN g % 100 < 93 THEN 'failed'
                             WHEN g % 100 < 95 THEN 'empty' ELSE 'ok' END::sample_state AS state,
                        (20 + (g * 37) % 1500) AS prompt_tokens,
                        (50 + ((g * 7919) % 8000) * ((g * 13) % 8000) / 8000) AS completion_tokens
                 FROM dataset_rows d, LATERAL (SELECT d.id - (SELECT min(id) FROM dataset_rows WHERE dataset_id = $2) + 1 AS g) gg
                 WHERE d.dataset_id = $2),
             texts AS (
                 SELECT b.*,
                        array_to_string(ARRAY(SELECT v.words[1 + floor(random() * random() * array_length(v.words, 1))::int]
                                              FROM bench_vocab v, generate_series(1, 60 + b.g % 7)), ' ') AS reasoning,
                        CASE WHEN b.state IN ('empty', 'failed') THEN ''
                             ELSE array_to_string(ARRAY(SELECT v.words[1 + floor(random() * random() * array_length(v.words, 1))::int]
                                                        FROM bench_vocab v, generate_series(1, 25 + b.g % 5)), ' ') END AS content
                 FROM base b)
             INSERT INTO samples (run_id, row_id, state, finish_reason, reasoning, content, messages, prompt_tokens,
                                  completion_tokens, reasoning_tokens, ttft_ms, duration_ms, finished_at, attempts,
                                  auto_flags, review_state, flags, reviewed_by, reviewed_at, review_version)
             SELECT $1, row_id, state,
                    CASE state WHEN 'ok' THEN 'stop' WHEN 'truncated' THEN 'length' WHEN 'empty' THEN 'stop' END,
                    reasoning, content,
                    messages || jsonb_build_array(jsonb_build_object('role', 'assistant', 'content', content, 'reasoning_content', reasoning)),
                    prompt_tokens, completion_tokens, completion_tokens * 3 / 4, 100 + g % 900, completion_tokens * 12, now(), 1,
                    CASE WHEN state = 'truncated' THEN ARRAY['truncated'] WHEN state = 'timed_out' THEN ARRAY['timed_out']
                         WHEN state = 'failed' THEN ARRAY['failed'] WHEN state = 'empty' THEN ARRAY['empty_answer']
                         WHEN g % 100 >= 95 THEN ARRAY['repetition'] ELSE '{}' END,
                    CASE WHEN g % 10 < 2 THEN 'approved' WHEN g % 10 = 2 THEN 'rejected' WHEN g % 30 = 3 THEN 'flagged'
                         ELSE 'unreviewed' END::review_state,
                    CASE WHEN g % 30 = 3 AND g % 10 <> 2 THEN ARRAY['formatting'] ELSE '{}' END,
                    CASE WHEN g % 10 < 3 OR g % 30 = 3 THEN $3::bigint END,
                    CASE WHEN g % 10 < 3 OR g % 30 = 3 THEN now() END,
                    CASE WHEN g % 10 < 3 OR g % 30 = 3 THEN 1 ELSE 0 END
             FROM texts",
        )
        .bind(run)
        .bind(dataset)
        .bind(reviewer)
        .execute(pool)
        .await
        .unwrap();
        println!("  run {} of {RUNS} written ({:.0} s)", r + 1, started.elapsed().as_secs_f64());
    }
    for (name, def) in &indexes {
        let t = Instant::now();
        sqlx::raw_sql(&format!("SET maintenance_work_mem = '512MB'; {def}")).execute(pool).await.unwrap();
        println!("  index {name} built ({:.0} s)", t.elapsed().as_secs_f64());
    }
    exec(pool, "VACUUM ANALYZE samples").await;
    exec(pool, "VACUUM ANALYZE sample_search").await;
    exec(pool, "ANALYZE dataset_rows").await;
    println!("seeded in {:.0} s\n", started.elapsed().as_secs_f64());
}
