//! What the real-vLLM examples share: a pre-tokenized export of runs from the captured ids, one
//! row per request, and each row compared with what the server says of the same request.

use domain::export::*;
use domain::generation::SampleState;
use engine::export::{job, S3Options, Storage};
use serde_json::{json, Value};
use sqlx::PgPool;

pub fn ids(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_u64()).map(|v| v as u32).collect())
        .unwrap_or_default()
}

/// Exports `runs` (ok and truncated samples: a random model is often cut) as pre-tokenized rows
/// from the captured ids, one row per request, and returns the rows.
pub async fn export(pool: &PgPool, runs: &[i64]) -> anyhow::Result<Vec<Value>> {
    let root = tempfile::tempdir()?;
    let storage = Storage::new(vec![root.path().join("exports")], S3Options::default());
    let spec = ExportSpec {
        selection: ExportSelection {
            outcomes: vec![SampleState::Ok, SampleState::Truncated],
            excluded_flags: Vec::new(),
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
