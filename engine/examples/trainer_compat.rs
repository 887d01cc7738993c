//! Exports a fixed set in each trainer preset, with the tokenized rows each preset's trainer
//! should build from it, for `scripts/trainer-compat.sh` to feed through the trainers' own data
//! code (not a test: the trainers are Python, installed by that script).
//!
//! The fixed set: a plain question, a reasoning answer, a system prompt and two user turns, a tool
//! call answered by its result then a text answer, two parallel calls with reasoning, and a final
//! call; tools whose `parameters` nest objects with keys out of alphabetical order. Each sample
//! holds the server's ids for every assistant turn, as a server that regenerated them turn by turn
//! with the target's own tokens reports them (prompt as the template renders it, answer up to the
//! end-of-turn token): the ids the target saw.
//!
//! Writes, under OUT (a storage root):
//! - `speculators/`, `specforge_offline/`: the conversation presets' JSONL;
//! - `speculators_rows/`: the server's ids per turn ending as the template renders a turn (what
//!   speculators must build from `speculators/`);
//! - `specforge_rows/`: the same per conversation (the ids SpecForge must build from
//!   `specforge_offline/`);
//! - `specforge_online/`: SpecForge's online preset, pre-tokenized (loaded as written);
//! - `parquet/`: conversations as Parquet, for `datasets.load_dataset("parquet", …)`;
//! - `folders.json`: each one's `export-<id>` folder.
//!
//!   REAL_VLLM_MODEL_DIR=~/.cache/real-vllm/tiny-tools-model DATABASE_URL=postgres://… \
//!   cargo run -p engine --example trainer_compat -- OUT
#![allow(clippy::unwrap_used)] // Examples may unwrap: a failure there is a failure of the example, with its message.

#[path = "common/scratch_database.rs"]
mod scratch_database;

use domain::export::*;
use domain::trainer::Trainer;
use engine::export::tokenize::RowTokenizer;
use engine::export::{job, S3Options, Storage};
use engine::testing::{finished_run, SeedSample};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A tool whose schema is written as people write it: `type`, `properties`, `required`; each
/// property's `type` before its `description`; a nested object.
fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "description": "The city"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "when": {"type": "object", "properties": {"hour": {"type": "integer"}, "day": {"type": "string"}}}},
                "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
    ])
}

fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// The fixed set: (category, thinking, messages, offers tools).
fn fixed_set() -> Vec<(&'static str, Option<bool>, Value, bool)> {
    vec![
        (
            "plain",
            None,
            json!([
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": "Paris."}]),
            false,
        ),
        (
            "reasoning",
            Some(true),
            json!([
            {"role": "user", "content": "What is 6 times 7?"},
            {"role": "assistant", "content": "The answer is 42.", "reasoning_content": "Six sevens: 7, 14, 21, 28, 35, 42."}]),
            false,
        ),
        (
            "multi_turn",
            Some(true),
            json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Capital of Italy?"},
            {"role": "assistant", "content": "Rome.", "reasoning_content": "Italy's capital."},
            {"role": "user", "content": "And of Spain?"},
            {"role": "assistant", "content": "Madrid.", "reasoning_content": "Spain's capital."}]),
            false,
        ),
        (
            "tool_result",
            Some(true),
            json!([
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [call("c1", "get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}")]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"temperature\": 18}"},
            {"role": "assistant", "content": "It is 18 °C in Paris."}]),
            true,
        ),
        (
            "parallel_calls",
            Some(true),
            json!([
            {"role": "user", "content": "Weather in Lima and Tokyo tomorrow at noon?"},
            {"role": "assistant", "content": "", "reasoning_content": "Two cities: two calls.", "tool_calls": [
                call("a", "get_weather", "{\"when\": {\"hour\": 12, \"day\": \"tomorrow\"}, \"city\": \"Lima\"}"),
                call("b", "get_weather", "{\"city\": \"Tokyo\", \"when\": {\"hour\": 12, \"day\": \"tomorrow\"}}")]},
            {"role": "tool", "tool_call_id": "a", "content": "{\"temperature\": 21}"},
            {"role": "tool", "tool_call_id": "b", "content": "{\"temperature\": 9}"},
            {"role": "assistant", "content": "Lima 21 °C, Tokyo 9 °C."}]),
            true,
        ),
        (
            "final_call",
            None,
            json!([
            {"role": "user", "content": "What time is it?"},
            {"role": "assistant", "content": "", "tool_calls": [call("t", "get_time", "{}")]}]),
            true,
        ),
    ]
}

async fn export(pool: &sqlx::PgPool, storage: &Storage, spec: &ExportSpec) -> anyhow::Result<PathBuf> {
    let id = job::create(pool, spec, None, None).await?;
    let status = job::run(pool, storage, id).await?;
    let record = engine::export::store::get(pool, id).await?;
    anyhow::ensure!(status == ExportStatus::Completed, "export {id} failed: {:?}", record.error);
    Ok(PathBuf::from(record.location.unwrap_or_default()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let out =
        PathBuf::from(std::env::args().nth(1).ok_or_else(|| anyhow::anyhow!("usage: trainer_compat OUT"))?);
    let model = PathBuf::from(std::env::var("REAL_VLLM_MODEL_DIR")?);
    std::fs::create_dir_all(out.join("tokenizer"))?;
    let out = out.canonicalize()?;
    for file in ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"] {
        if model.join(file).is_file() {
            std::fs::copy(model.join(file), out.join("tokenizer").join(file))?;
        }
    }
    let tokenizer = RowTokenizer::from_dir(&out.join("tokenizer"), 1 << 20, Overlong::Drop)?;
    let pool = scratch_database::scratch_database("draft_studio_trainer_compat").await?;
    engine::testing::user(&pool).await;

    let args: Vec<String> = std::env::args().collect();
    let run = match args.get(2).map(String::as_str) {
        Some("--generate") => {
            let (Some(url), Some(prompts)) = (args.get(3), args.get(4)) else {
                anyhow::bail!("usage: trainer_compat OUT --generate URL PROMPTS.jsonl");
            };
            generated_run(&pool, &out, url, Path::new(prompts)).await?
        }
        _ => seeded_run(&pool, &tokenizer).await?,
    };
    let finished: i64 = sqlx::query_scalar("SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'")
        .bind(run)
        .fetch_one(&pool)
        .await?;
    println!("run {run}: {finished} samples finished ok");
    export_presets(&pool, &out, run).await
}

/// The fixed set, seeded with the ids a server writing the tokenizer's own tokens reports.
async fn seeded_run(pool: &sqlx::PgPool, tokenizer: &RowTokenizer) -> anyhow::Result<i64> {
    let set = fixed_set();
    let seeds: Vec<SeedSample> = set
        .iter()
        .map(|(category, thinking, messages, _)| SeedSample {
            thinking: *thinking,
            messages: messages.clone(),
            category,
            ..SeedSample::answered("", "", "")
        })
        .collect();
    let run = finished_run(pool, &seeds).await;
    let samples: Vec<(i64, i64)> =
        sqlx::query_as("SELECT id, row_id FROM samples WHERE run_id = $1 ORDER BY id")
            .bind(run)
            .fetch_all(pool)
            .await?;
    for ((_, row), (_, _, _, tools)) in samples.iter().zip(&set) {
        // As text: a bound Value is jsonb, which would sort the keys.
        sqlx::query("UPDATE dataset_rows SET tools = $2::json WHERE id = $1")
            .bind(row)
            .bind(tools.then(weather_tools).as_ref().map(Value::to_string))
            .execute(pool)
            .await?;
    }
    engine::testing::seed_rendered_ids(pool, run, tokenizer, "<|im_end|>").await;
    Ok(run)
}

/// `prompts` imported and answered by the server at `url`.
async fn generated_run(pool: &sqlx::PgPool, out: &Path, url: &str, prompts: &Path) -> anyhow::Result<i64> {
    use domain::generation::{Concurrency, Thinking, ToolChoice};
    use engine::datasets::{import, DatasetSettings};
    std::fs::create_dir_all(out.join("datasets"))?;
    let file = out.join("datasets/prompts.jsonl");
    std::fs::copy(prompts, &file)?;
    let settings = DatasetSettings {
        roots: vec![out.join("datasets")],
        files_dir: out.join("files"),
        ..DatasetSettings::default()
    };
    let new = import::NewImport {
        name: "prompts".into(),
        source: domain::dataset::SourceSpec::Path { path: file.display().to_string() },
        mapping: None,
        created_by: None,
    };
    let started = import::start(pool, &reqwest::Client::new(), &settings, new).await?;
    started.job.await?;
    let by: i64 = sqlx::query_scalar("SELECT id FROM users LIMIT 1").fetch_one(pool).await?;
    let endpoint = engine::testing::endpoint_at(pool, url, by).await;
    let mut s = engine::testing::settings(vec![endpoint]);
    s.model = "tiny".into();
    s.max_tokens = 512;
    s.temperature = Some(0.0);
    s.thinking = Thinking::On;
    s.tool_choice = ToolChoice::Auto;
    s.concurrency = Concurrency::Fixed { limit: 16 };
    s.idle_timeout_secs = 300;
    let run = engine::testing::create_run(pool, started.id, s, by).await;
    let (stop, worker) = engine::testing::start_worker(pool);
    engine::testing::wait_for_status(pool, run, "completed", std::time::Duration::from_secs(3600)).await;
    stop.cancel();
    worker.await??;
    Ok(run)
}

/// Exports `run` in each preset, with the rows each preset's trainer must build.
async fn export_presets(pool: &sqlx::PgPool, out: &Path, run: i64) -> anyhow::Result<()> {
    let storage = Storage::new(vec![out.to_path_buf()], S3Options::default());
    let spec = |trainer: Option<Trainer>, tokenization: Option<(TurnRows, TurnEnd)>, dir: &str| {
        let base = ExportFormat {
            layout: if tokenization.is_some() { Layout::Tokenized } else { Layout::Conversations },
            tokenization: tokenization.map(|(turn_rows, turn_end)| Tokenization {
                tokenizer_dir: "tokenizer".into(),
                max_length: 1 << 20,
                overlong: Overlong::Drop,
                source: TokenSource::Captured,
                turn_rows,
                turn_end,
            }),
            ..ExportFormat::default()
        };
        ExportSpec {
            selection: ExportSelection::for_runs(vec![run]),
            format: trainer.map_or(base.clone(), |t| t.shape(&base)),
            destination: Destination::Directory { path: dir.into() },
        }
    };
    let mut folders = serde_json::Map::new();
    for (name, spec) in [
        ("speculators", spec(Some(Trainer::Speculators), None, "speculators")),
        ("speculators_rows", spec(None, Some((TurnRows::PerTurn, TurnEnd::AsRendered)), "speculators_rows")),
        ("specforge_offline", spec(Some(Trainer::SpecforgeOffline), None, "specforge_offline")),
        (
            "specforge_rows",
            spec(None, Some((TurnRows::PerConversation, TurnEnd::AsRendered)), "specforge_rows"),
        ),
        (
            "specforge_online",
            spec(
                Some(Trainer::SpecforgeOnline),
                Some((TurnRows::PerConversation, TurnEnd::AsSampled)),
                "specforge_online",
            ),
        ),
        ("parquet", {
            let mut parquet = spec(None, None, "parquet");
            parquet.format.file = FileFormat::Parquet;
            parquet
        }),
    ] {
        let problems = spec.problems();
        anyhow::ensure!(problems.is_empty(), "{name}: {problems:?}");
        let folder = export(pool, &storage, &spec).await?;
        println!("{name}: {}", folder.display());
        folders.insert(name.into(), json!(folder));
    }
    std::fs::write(out.join("folders.json"), serde_json::to_vec_pretty(&folders)?)?;
    let rows = |dir: &Path| std::fs::read_to_string(dir.join("train.jsonl")).map(|t| t.lines().count());
    println!(
        "exported: {} rows per turn, {} per conversation",
        rows(Path::new(folders["speculators_rows"].as_str().unwrap()))?,
        rows(Path::new(folders["specforge_rows"].as_str().unwrap()))?
    );
    Ok(())
}
