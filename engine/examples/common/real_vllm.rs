//! What the real-vLLM export examples share: their settings from the environment, a
//! pre-tokenized export of runs from the captured ids (one row per request), and each row
//! compared with what the server says of the same request. Their scratch database is
//! `scratch_database.rs`, which the acceptance check uses too.

use domain::export::*;
use domain::generation::SampleState;
use engine::export::{job, S3Options, Storage};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::path::PathBuf;

/// The server (`REAL_VLLM_URL`, else `default_url`) and the served model's folder
/// (`REAL_VLLM_MODEL_DIR`).
pub fn server(default_url: &str) -> anyhow::Result<(String, PathBuf)> {
    let base = std::env::var("REAL_VLLM_URL").unwrap_or_else(|_| default_url.into());
    let model_dir = PathBuf::from(std::env::var("REAL_VLLM_MODEL_DIR").map_err(|_| {
        anyhow::anyhow!(
            "set REAL_VLLM_MODEL_DIR to the served model's folder (tokenizer.json, tokenizer_config.json)"
        )
    })?);
    Ok((base, model_dir))
}

pub fn ids(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_u64()).map(|v| v as u32).collect())
        .unwrap_or_default()
}

/// Exports `runs` (ok and truncated samples: a random model is often cut) as pre-tokenized rows
/// from the captured ids, one row per request (duplicates kept), and returns the rows.
pub async fn export(pool: &PgPool, runs: &[i64]) -> anyhow::Result<Vec<Value>> {
    let root = tempfile::tempdir()?;
    let storage = Storage::new(vec![root.path().join("exports")], S3Options::default());
    let spec = ExportSpec {
        selection: ExportSelection {
            outcomes: vec![SampleState::Ok, SampleState::Truncated],
            excluded_flags: Vec::new(),
            // Every request its row, even where two prompts (and so their answers) are the same.
            duplicates: Duplicates::Keep,
            ..ExportSelection::for_runs(runs.to_vec())
        },
        format: ExportFormat {
            layout: Layout::Tokenized,
            tokenization: Some(Tokenization {
                tokenizer_dir: String::new(),
                max_length: 1 << 20,
                overlong: Overlong::Drop,
                source: TokenSource::Captured,
                turn_rows: TurnRows::PerTurn,
                turn_end: TurnEnd::AsSampled,
            }),
            ..Default::default()
        },
        destination: Destination::Directory { path: "out".into() },
    };
    let id = job::create(pool, &spec, None, None).await?;
    let status = job::run(pool, &storage, id).await?;
    let record = engine::export::store::get(pool, id).await?;
    anyhow::ensure!(status == ExportStatus::Completed, "the export failed: {:?}", record.error);
    let file = root.path().join(format!("exports/out/export-{id}/train.jsonl"));
    Ok(std::fs::read_to_string(&file)?.lines().map(serde_json::from_str).collect::<Result<_, _>>()?)
}

/// How one row compares with the server.
pub struct RowCheck {
    /// The row's prompt part equals the server's `/tokenize` of the same messages.
    pub prompt_equal: bool,
    /// The row's completion part equals the `token_ids` of the same request sent again.
    pub completion_equal: bool,
    /// The row's prompt part, for comparing with our own render.
    pub prompt: Vec<u32>,
}

/// Compares `row` with the server at `base`: `request` is the chat request that produced it
/// (model, messages and whatever else was sent), sent again at temperature 0 with token ids.
pub async fn check(
    http: &reqwest::Client,
    base: &str,
    row: &Value,
    request: &Value,
) -> anyhow::Result<RowCheck> {
    let input = ids(&row["input_ids"]);
    let mask = ids(&row["loss_mask"]);
    let split = mask.iter().position(|&m| m == 1).unwrap_or(input.len());
    let (prompt, completion) = input.split_at(split);
    let mut tokenize = json!({"add_generation_prompt": true});
    for key in ["model", "messages", "tools", "chat_template_kwargs"] {
        if let Some(value) = request.get(key) {
            tokenize[key] = value.clone();
        }
    }
    let tokenized: Value = http.post(format!("{base}/tokenize")).json(&tokenize).send().await?.json().await?;
    let mut again = request.clone();
    again["temperature"] = json!(0.0);
    again["return_token_ids"] = json!(true);
    let again: Value =
        http.post(format!("{base}/v1/chat/completions")).json(&again).send().await?.json().await?;
    Ok(RowCheck {
        prompt_equal: ids(&tokenized["tokens"]) == prompt,
        completion_equal: ids(&again["choices"][0]["token_ids"]) == completion,
        prompt: prompt.to_vec(),
    })
}

/// The rows checked so far and how many differ, each difference printed with its row.
#[derive(Default)]
pub struct Tally {
    pub checked: u32,
    pub prompt_diff: u32,
    pub completion_diff: u32,
    pub render_diff: u32,
}

impl Tally {
    /// A request with no exported row: counted as a completion that differs.
    pub fn missing(&mut self, row_id: &str) {
        println!("{row_id}: no exported row");
        self.completion_diff += 1;
    }

    /// Counts one row's check; `ours` is our own render of its prompt.
    pub fn add(&mut self, row_id: &str, check: &RowCheck, ours: Option<&[u32]>) {
        self.checked += 1;
        if !check.prompt_equal {
            self.prompt_diff += 1;
            println!("{row_id}: the prompt differs from the server's /tokenize");
        }
        if !check.completion_equal {
            self.completion_diff += 1;
            println!("{row_id}: the completion differs from the same request sent again");
        }
        if ours != Some(check.prompt.as_slice()) {
            self.render_diff += 1;
            println!("{row_id}: our render of the prompt differs from the server's");
        }
    }

    pub fn summary(&self) -> String {
        format!(
            "{} rows checked against the server: prompt ids differ in {}, completion ids in {}; our own render of \
             the prompt differs from the server's in {}",
            self.checked, self.prompt_diff, self.completion_diff, self.render_diff
        )
    }
}
