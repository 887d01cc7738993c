//! Export benchmark (not a test): N samples of about 1,260 completion tokens exported as
//! SpecForge JSONL and as pre-tokenized Parquet, both re-tokenized and from captured token ids,
//! through the real job (plan, keyset reads,
//! writers, manifest, commit), with samples/s and peak memory of each, then the tokenizer's
//! throughput against the Python `tokenizers` package on the same texts.
//!
//!   cargo bench -p engine --bench export -- [SAMPLES] [TOKENIZER_TEXTS]
//!
//! Needs PostgreSQL (DATABASE_URL names the server; the benchmark uses its own database
//! `draft_studio_export_bench`, seeded once per sample count) and `pip install tokenizers`.
#![allow(clippy::unwrap_used)] // Benchmarks may unwrap: a failure there is a failure of the benchmark, with its message.

#[path = "../common/memory.rs"]
mod memory;

use domain::export::*;
use engine::export::conversation::Conversation;
use engine::export::tokenize::RowTokenizer;
use engine::export::{job, S3Options, Storage};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const CHUNK: i64 = 2_000;
const REASONING_WORDS: i32 = 900;
const ANSWER_WORDS: i32 = 360;

fn words() -> Vec<String> {
    let syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pe", "dra", "quo", "zen", "ba", "tel"];
    let mut words = Vec::new();
    for a in syllables {
        for b in syllables {
            words.push(format!("{a}{b}"));
            words.push(format!("{a}{b}s"));
        }
    }
    words.extend(["the", "of", "and", "to", "is", "in", "that", "it", "so", "then"].map(String::from));
    words
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/export/tokenizers_baseline.py")
}

async fn seed(pool: &sqlx::PgPool, n: i64) -> i64 {
    let name = format!("export-bench-{n}");
    if let Some(run) = sqlx::query_scalar::<_, i64>("SELECT id FROM runs WHERE name = $1")
        .bind(&name)
        .fetch_optional(pool)
        .await
        .unwrap()
    {
        println!("using the seeded run #{run} ({n} samples)");
        return run;
    }
    let started = Instant::now();
    let dataset: i64 = sqlx::query_scalar(
        "INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
         VALUES ($1, 'ready', '{\"kind\":\"bench\"}', 'jsonl', '{\"schema\":\"openai\"}', $2) RETURNING id",
    )
    .bind(&name)
    .bind(n)
    .fetch_one(pool)
    .await
    .unwrap();
    let mut settings = domain::generation::RunSettings::with_defaults("bench-model", vec![], 4096);
    settings.thinking = domain::generation::Thinking::On;
    let run: i64 = sqlx::query_scalar(
        "INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count, finished_at)
         VALUES ($1, $2, 'completed', $3, '{\"mode\":\"all\"}', $4, now()) RETURNING id",
    )
    .bind(&name)
    .bind(dataset)
    .bind(serde_json::to_value(settings).unwrap())
    .bind(n as i32)
    .fetch_one(pool)
    .await
    .unwrap();
    let words = words();
    let mut from = 1;
    while from <= n {
        let to = (from + CHUNK - 1).min(n);
        sqlx::query(
            "WITH w AS (SELECT $3::text[] AS w),
             src AS (
               SELECT i,
                 (SELECT string_agg(w[1 + ((i * 31 + j * 17 + (i * j) % 7) % cardinality(w))], ' ')
                    FROM generate_series(1, $6) j) AS reasoning,
                 (SELECT string_agg(w[1 + ((i * 13 + j * 29 + (i + j) % 11) % cardinality(w))], ' ')
                    FROM generate_series(1, $7) j) AS answer
               FROM generate_series($1::bigint, $2::bigint) i, w
             ),
             rows AS (
               INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
               SELECT $4, 'b' || i,
                      jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'Question ' || i || ': explain it.')),
                      sha256(convert_to('b' || i, 'UTF8')), 'bench', 1, 30
               FROM src RETURNING id, row_key
             )
             INSERT INTO samples (run_id, row_id, state, thinking, attempts, finish_reason, reasoning, content,
                                  messages, prompt_tokens, completion_tokens, reasoning_tokens, finished_at)
             SELECT $5, rows.id, 'ok', true, 1, 'stop', '', '',
                    jsonb_build_array(
                      jsonb_build_object('role', 'user', 'content', 'Question ' || src.i || ': explain it.'),
                      jsonb_build_object('role', 'assistant', 'content', src.answer, 'reasoning_content', src.reasoning)),
                    30, $6 + $7, $6, now()
             FROM rows JOIN src ON rows.row_key = 'b' || src.i",
        )
        .bind(from)
        .bind(to)
        .bind(&words)
        .bind(dataset)
        .bind(run)
        .bind(REASONING_WORDS)
        .bind(ANSWER_WORDS)
        .execute(pool)
        .await
        .unwrap();
        from = to + 1;
        print!("\rseeded {to}/{n}");
        std::io::stdout().flush().ok();
    }
    println!(" in {:.1} s", started.elapsed().as_secs_f64());
    run
}

/// Stores captured token ids for every sample of the run (once): 24 prompt ids and 1,300
/// completion ids of a 151,000-token vocabulary ending with an end-of-turn id, about what a Qwen3
/// server returns for the seeded texts, bit-packed as generation stores them.
async fn seed_captured(pool: &sqlx::PgPool, run: i64) {
    let have: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sample_tokens t JOIN samples s ON s.id = t.sample_id WHERE s.run_id = $1",
    )
    .bind(run)
    .fetch_one(pool)
    .await
    .unwrap();
    if have > 0 {
        return;
    }
    let started = Instant::now();
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM samples WHERE run_id = $1 ORDER BY id")
        .bind(run)
        .fetch_all(pool)
        .await
        .unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 151_000) as u32
    };
    for chunk in ids.chunks(CHUNK as usize) {
        let mut prompts = Vec::with_capacity(chunk.len());
        let mut completions = Vec::with_capacity(chunk.len());
        for _ in chunk {
            let prompt: Vec<u32> = (0..24).map(|_| next()).collect();
            let mut completion: Vec<u32> = (0..1_299).map(|_| next()).collect();
            completion.push(151_645);
            prompts.push(engine::generation::token_ids::pack(&prompt));
            completions.push(engine::generation::token_ids::pack(&completion));
        }
        sqlx::query(
            "WITH stored AS (
                 INSERT INTO sample_tokens (sample_id, turn, prompt_ids, completion_ids)
                 SELECT id, 0, p, c FROM unnest($1::bigint[], $2::bytea[], $3::bytea[]) AS x(id, p, c)
                 RETURNING sample_id)
             UPDATE samples SET captured_token_ids = true WHERE id IN (SELECT sample_id FROM stored)",
        )
        .bind(chunk)
        .bind(&prompts)
        .bind(&completions)
        .execute(pool)
        .await
        .unwrap();
    }
    println!("stored captured ids for {} samples in {:.1} s", ids.len(), started.elapsed().as_secs_f64());
}

/// Trains the benchmark's tokenizer (Python) on a slice of the seeded texts, with the
/// Qwen-style fixture template.
async fn tokenizer_dir(pool: &sqlx::PgPool, run: i64, root: &Path) -> PathBuf {
    let dir = root.join("tokenizer");
    std::fs::create_dir_all(&dir).unwrap();
    let texts: Vec<String> = sqlx::query_scalar(
        "SELECT messages -> 1 ->> 'reasoning_content' FROM samples WHERE run_id = $1 ORDER BY id LIMIT 500",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap();
    let corpus = root.join("corpus.txt");
    std::fs::write(&corpus, texts.join("\n")).unwrap();
    let status = Command::new("python3")
        .arg(script())
        .args(["train", dir.to_str().unwrap(), corpus.to_str().unwrap()])
        .status()
        .expect("python3 runs");
    assert!(status.success(), "training the tokenizer failed (pip install tokenizers)");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers/qwen/tokenizer_config.json");
    std::fs::copy(fixture, dir.join("tokenizer_config.json")).unwrap();
    dir
}

async fn timed_export(pool: &sqlx::PgPool, storage: &Storage, spec: &ExportSpec, label: &str, n: i64) {
    memory::reset_peak();
    let started = Instant::now();
    let id = job::create(pool, spec, None, None).await.unwrap();
    let status = job::run(pool, storage, id).await.unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let record = engine::export::store::get(pool, id).await.unwrap();
    assert_eq!(status, ExportStatus::Completed, "{:?}", record.error);
    let manifest: engine::export::manifest::Manifest =
        serde_json::from_value(record.manifest.unwrap()).unwrap();
    println!(
        "{label}: {} rows in {seconds:.1} s = {:.0} samples/s, {:.1} MiB written, peak RSS {:.0} MiB{}",
        manifest.counts.written,
        n as f64 / seconds,
        record.bytes.unwrap_or(0) as f64 / (1 << 20) as f64,
        memory::peak_rss_mib(),
        if manifest.counts.input_tokens > 0 {
            format!(
                ", {} tokens ({:.0} tokens/s end to end)",
                manifest.counts.input_tokens,
                manifest.counts.input_tokens as f64 / seconds
            )
        } else {
            String::new()
        }
    );
}

async fn compare_tokenizers(pool: &sqlx::PgPool, run: i64, dir: &Path, root: &Path, count: i64) {
    let tokenizer = RowTokenizer::from_dir(dir, 1 << 20, Overlong::Truncate).unwrap();
    let rows: Vec<(String, serde_json::Value)> =
        sqlx::query_as("SELECT 'b' || id, messages FROM samples WHERE run_id = $1 ORDER BY id LIMIT $2")
            .bind(run)
            .bind(count)
            .fetch_all(pool)
            .await
            .unwrap();
    let mut texts = Vec::with_capacity(rows.len());
    for (id, messages) in rows {
        let conversation = Conversation {
            id,
            thinking: Some(true),
            turns: serde_json::from_value(messages).unwrap(),
            tools: None,
        };
        texts.push(tokenizer.render(&conversation).unwrap().text);
    }
    let path = root.join("texts.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for t in &texts {
        serde_json::to_writer(&mut out, t).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
    drop(out);

    let started = Instant::now();
    let mut rust_tokens = 0usize;
    for chunk in texts.chunks(256) {
        let encodings = tokenizer.tokenizer().encode_batch(chunk.to_vec(), false).unwrap();
        rust_tokens += encodings.iter().map(|e| e.len()).sum::<usize>();
    }
    let rust_seconds = started.elapsed().as_secs_f64();

    let output = Command::new("python3")
        .arg(script())
        .args(["encode", dir.join("tokenizer.json").to_str().unwrap(), path.to_str().unwrap()])
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let python: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let py_tokens = python["tokens"].as_u64().unwrap() as usize;
    let py_seconds = python["seconds"].as_f64().unwrap();
    assert_eq!(rust_tokens, py_tokens, "both tokenize the same texts to the same number of tokens");
    let rust_rate = rust_tokens as f64 / rust_seconds;
    let py_rate = py_tokens as f64 / py_seconds;
    println!(
        "tokenization of {} texts ({rust_tokens} tokens): Rust {:.2} M tokens/s, Python tokenizers {:.2} M tokens/s, ratio {:.2}",
        texts.len(),
        rust_rate / 1e6,
        py_rate / 1e6,
        rust_rate / py_rate
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let n: i64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let text_count: i64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let server = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let mut url = url::Url::parse(&server).unwrap();
    url.set_path("/draft_studio_export_bench");
    engine::db::ensure_database(url.as_str()).await.unwrap();
    let pool = engine::db::connect(url.as_str(), 4).await.unwrap();
    engine::db::migrate(&pool).await.unwrap();

    let run = seed(&pool, n).await;
    let root = std::env::temp_dir().join(format!("draft-studio-export-bench-{}", std::process::id()));
    std::fs::create_dir_all(root.join("exports")).unwrap();
    let dir = tokenizer_dir(&pool, run, &root.join("exports")).await;
    let storage = Storage::new(vec![root.join("exports")], S3Options::default());

    let mut spec = ExportSpec {
        selection: ExportSelection::for_runs(vec![run]),
        format: ExportFormat { validation_share: 0.05, ..Default::default() },
        destination: Destination::Directory { path: "out".into() },
    };
    timed_export(&pool, &storage, &spec, "SpecForge JSONL", n).await;
    spec.format.layout = Layout::Tokenized;
    spec.format.file = FileFormat::Parquet;
    spec.format.tokenization = Some(Tokenization {
        tokenizer_dir: "tokenizer".into(),
        max_length: 4096,
        overlong: Overlong::Truncate,
        source: TokenSource::Retokenize,
        turn_rows: TurnRows::PerConversation,
        turn_end: TurnEnd::AsSampled,
    });
    timed_export(&pool, &storage, &spec, "pre-tokenized Parquet, re-tokenized", n).await;
    seed_captured(&pool, run).await;
    if let Some(t) = spec.format.tokenization.as_mut() {
        t.source = TokenSource::Captured;
    }
    timed_export(&pool, &storage, &spec, "pre-tokenized Parquet, captured ids", n).await;

    compare_tokenizers(&pool, run, &dir, &root, text_count.min(n)).await;
    std::fs::remove_dir_all(&root).ok();
}
