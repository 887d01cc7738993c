//! Import benchmark (not a test): generates ShareGPT rows (about 1 KB each) as JSONL and
//! Parquet, imports each through the engine in a child process (for its own peak RSS), and
//! loads the same normalized rows with `psql \copy` as the baseline, side by side.
//!
//!     DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!       cargo bench -p engine --bench import -- [ROWS]
//!
//! ROWS defaults to 1,000,000. A scratch database `draft_studio_bench_import` is (re)created.
#![allow(clippy::unwrap_used)] // Benchmarks may unwrap: a failure there is a failure of the benchmark, with its message.

#[path = "../common/memory.rs"]
mod memory;

use engine::{
    dataset_files::jsonl_to_parquet,
    datasets::{import, store, DatasetSettings},
};
use serde_json::json;
use sqlx::PgPool;
use std::{
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

const DB_NAME: &str = "draft_studio_bench_import";

fn base_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn bench_url() -> String {
    let mut url = url::Url::parse(&base_url()).expect("DATABASE_URL is a URL");
    url.set_path(DB_NAME);
    url.to_string()
}

const TOPICS: &[&str] =
    &["scheduling", "caching", "parsing", "indexing", "retries", "batching", "sharding", "logging"];

fn write_rows(path: &Path, rows: usize) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let filler =
        "The answer walks through the trade-offs, gives an example and ends with a short checklist. ";
    for i in 0..rows {
        let topic = TOPICS[i % TOPICS.len()];
        let question = format!(
            "Question {i}: how should a small team approach {topic} in a service that handles about {} requests per second, and what should they measure first?",
            (i * 37) % 5000 + 100
        );
        let answer = format!("Answer {i} about {topic}. {}", filler.repeat(6));
        let row = json!({
            "id": format!("row-{i}"),
            "category": topic,
            "conversations": [
                {"from": "human", "value": question},
                {"from": "gpt", "value": answer},
            ]
        });
        serde_json::to_writer(&mut out, &row)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Child mode: import one file, print `rows seconds peak_rss_mib dataset_id`.
async fn child(path: &str) {
    let pool = PgPool::connect(&bench_url()).await.expect("bench database");
    let file = PathBuf::from(path);
    let settings = DatasetSettings {
        roots: vec![file.parent().unwrap().to_path_buf()],
        files_dir: std::env::temp_dir().join("ds-bench-files"),
        ..Default::default()
    };
    let started_at = Instant::now();
    let started = import::start(
        &pool,
        &reqwest::Client::new(),
        &settings,
        import::NewImport {
            name: format!("bench {}", file.file_name().unwrap().to_string_lossy()),
            source: domain::dataset::SourceSpec::Path { path: path.into() },
            mapping: None,
            created_by: None,
        },
    )
    .await
    .expect("import starts");
    started.job.await.unwrap();
    let secs = started_at.elapsed().as_secs_f64();
    let s = store::summary(&pool, started.id).await.unwrap();
    assert_eq!(s.status, domain::dataset::DatasetStatus::Ready, "{:?}", s.error);
    println!("{} {secs} {} {}", s.rows_imported, memory::peak_rss_mib(), started.id);
}

struct Measured {
    rows: u64,
    secs: f64,
    rss_mib: f64,
    dataset: i64,
}

fn run_child(path: &Path) -> Measured {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe).arg("--child").arg(path).output().expect("child runs");
    assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    let parts: Vec<&str> = line.split_whitespace().collect();
    Measured {
        rows: parts[0].parse().unwrap(),
        secs: parts[1].parse().unwrap(),
        rss_mib: parts[2].parse().unwrap(),
        dataset: parts[3].parse().unwrap(),
    }
}

fn psql(args: &[&str]) -> std::process::Output {
    let out = Command::new("psql")
        .arg(bench_url())
        .args(["-v", "ON_ERROR_STOP=1", "-q"])
        .args(args)
        .output()
        .expect("psql runs");
    assert!(out.status.success(), "psql failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1]).await;
    }
    let rows: usize = args.first().and_then(|a| a.replace('_', "").parse().ok()).unwrap_or(1_000_000);

    // A fresh scratch database.
    let admin = PgPool::connect(&base_url()).await.expect("PostgreSQL at DATABASE_URL");
    sqlx::query(&format!("DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")).execute(&admin).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {DB_NAME}")).execute(&admin).await.unwrap();
    let pool = PgPool::connect(&bench_url()).await.unwrap();
    engine::MIGRATOR.run(&pool).await.unwrap();

    let dir = std::env::temp_dir().join("ds-bench-import");
    std::fs::create_dir_all(&dir).unwrap();
    let jsonl = dir.join("rows.jsonl");
    let parquet = dir.join("rows.parquet");
    let t = Instant::now();
    write_rows(&jsonl, rows).unwrap();
    jsonl_to_parquet(&jsonl, &parquet).unwrap();
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as f64 / (1 << 20) as f64;
    eprintln!(
        "generated {rows} rows in {:.1} s: JSONL {:.0} MiB, Parquet {:.0} MiB",
        t.elapsed().as_secs_f64(),
        size(&jsonl),
        size(&parquet)
    );

    let from_jsonl = run_child(&jsonl);
    let from_parquet = run_child(&parquet);

    // Baseline: the normalized rows of the JSONL import, loaded by psql \copy into a new dataset.
    let normalized = dir.join("normalized.copy");
    let baseline_id: i64 = sqlx::query_scalar(
        "INSERT INTO datasets (name, status, source, format, mapping) VALUES ('bench psql', 'ready', '{\"kind\":\"path\",\"path\":\"copy\"}', 'jsonl', '{\"schema\":\"sharegpt\",\"column\":\"conversations\"}') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    psql(&[
        "-c",
        &format!(
            "\\copy (SELECT {baseline_id}, row_key, messages, content_hash, category, turn_count, prompt_chars FROM dataset_rows WHERE dataset_id = {}) TO '{}'",
            from_jsonl.dataset,
            normalized.display()
        ),
    ]);
    let t = Instant::now();
    psql(&[
        "-c",
        &format!(
            "\\copy dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars) FROM '{}'",
            normalized.display()
        ),
    ]);
    let copy_secs = t.elapsed().as_secs_f64();
    let copy_rate = rows as f64 / copy_secs;

    println!("\n{rows} rows, ~1 KB each\n");
    println!("| import | rows | seconds | rows/s | vs psql \\copy | peak RSS |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (name, m) in [("JSONL", &from_jsonl), ("Parquet", &from_parquet)] {
        let rate = m.rows as f64 / m.secs;
        println!(
            "| {name} (draft-studio) | {} | {:.1} | {:.0} | {:.2} | {:.0} MiB |",
            m.rows,
            m.secs,
            rate,
            rate / copy_rate,
            m.rss_mib
        );
    }
    println!("| normalized rows (psql \\copy) | {rows} | {copy_secs:.1} | {copy_rate:.0} | 1.00 | (psql) |");
    let _ = std::fs::remove_dir_all(&dir);
}
