//! `manifest.json`, written beside the data: what was exported, from what, by whom, and the
//! sha256 of every data file.

use crate::{Error, Result};
use domain::export::{ExportPreview, ExportSpec};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use std::io::Read;
use std::path::Path;

pub const FILE_NAME: &str = "manifest.json";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub export_id: i64,
    /// RFC 3339.
    pub created_at: String,
    pub finished_at: String,
    pub user: Option<String>,
    pub app_version: String,
    pub spec: ExportSpec,
    pub runs: Vec<RunProvenance>,
    /// The date tokenized rows' templates rendered for `strftime_now` (YYYY-MM-DD); none
    /// without tokenized rows.
    #[serde(default)]
    pub template_date: Option<String>,
    /// Where tokenized rows' ids came from; none for conversation layouts.
    #[serde(default)]
    pub token_source: Option<TokenSourceUsed>,
    /// How the trainer the export was made for loads it (`domain::trainer`), one step a line,
    /// `{export}` standing for this folder; none without a trainer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load: Vec<String>,
    pub counts: Counts,
    pub files: Vec<FileEntry>,
    /// Sources, endpoints, tokenizer, reviewers and filters (absent from manifests written
    /// before it was recorded).
    #[serde(default)]
    pub provenance: super::provenance::Provenance,
}

/// A run's identity and the settings it generated with (model, sampling, template kwargs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunProvenance {
    pub id: i64,
    pub name: String,
    pub dataset: String,
    pub settings: serde_json::Value,
}

/// What tokenized rows were made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSourceUsed {
    /// The ids the server reported for each request: exactly what the target model saw and wrote.
    Captured,
    /// The stored conversation rendered with the chat template and encoded with the tokenizer.
    Retokenized,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Counts {
    /// What the selection chose (filters, duplicates, mix, split, token totals, outcomes and
    /// review states).
    pub selection: ExportPreview,
    /// Rows written to the data files.
    pub written: u64,
    /// Tokenized rows left out for being longer than the maximum length.
    pub dropped_overlong: u64,
    /// Tokenized rows left out because no assistant token remained.
    pub dropped_no_loss: u64,
    /// Tokenized rows cut at the maximum length.
    pub truncated: u64,
    /// Assistant turns of tokenized rows left unsupervised because the template renders them
    /// differently once later turns follow (Qwen3 drops earlier reasoning; see docs/export.md).
    #[serde(default)]
    pub unsupervised_turns: u64,
    /// Requests whose captured ids became rows (a sample regenerated turn by turn has several).
    #[serde(default)]
    pub captured_requests: u64,
    /// Tokens in the tokenized rows, and those under the loss mask.
    pub input_tokens: u64,
    pub loss_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub name: String,
    pub rows: u64,
    pub bytes: u64,
    pub sha256: String,
}

/// The sha256 (hex) and size of a file, read in blocks.
pub fn hash_file(path: &Path) -> Result<(String, u64)> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::Internal(e.into()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|e| Error::Internal(e.into()))?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((hex::encode(hasher.finalize()), bytes))
}

pub async fn runs(pool: &PgPool, run_ids: &[i64]) -> Result<Vec<RunProvenance>> {
    let rows = sqlx::query!(
        r#"SELECT r.id, r.name, d.name AS dataset, r.settings
           FROM runs r JOIN datasets d ON d.id = r.dataset_id
           WHERE r.id = ANY($1) ORDER BY r.id"#,
        run_ids
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| RunProvenance { id: r.id, name: r.name, dataset: r.dataset, settings: r.settings })
        .collect())
}
