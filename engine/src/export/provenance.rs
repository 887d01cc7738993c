//! Where an export's samples came from, recorded in its manifest: the source datasets (with a
//! content hash, and the hub repository when imported from the hub), the endpoints each run
//! generated with (served model, server version), the tokenizer and chat template of tokenized
//! rows, who reviewed the exported samples, and what each filter removed.

use super::{manifest, selection::Plan, template};
use crate::{Error, Result};
use domain::export::{ExportPreview, ExportSelection};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use std::path::Path;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub datasets: Vec<DatasetProvenance>,
    pub endpoints: Vec<EndpointProvenance>,
    /// For tokenized rows only.
    pub tokenizer: Option<TokenizerProvenance>,
    /// Current decisions on the exported samples, per reviewer.
    pub reviewers: Vec<ReviewerDecisions>,
    /// Exported samples nobody has decided on.
    pub unreviewed: u64,
    /// Every filter of the selection with its setting and how many samples it removed.
    pub filters: Vec<FilterApplied>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetProvenance {
    pub id: i64,
    pub name: String,
    /// As imported: `{"kind": "path" | "upload" | "hub", ...}` (never a token).
    pub source: serde_json::Value,
    pub format: String,
    pub rows: i64,
    /// sha256 (hex) over the rows' content hashes in import order: equal for the same rows.
    pub content_sha256: String,
    pub hub: Option<HubSource>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HubSource {
    pub repo: String,
    pub config: String,
    pub split: String,
    /// The hub revision the rows were read at: the commit of the hub's Parquet conversion
    /// (`refs/convert/parquet`) when the import listed its files; `None` when the hub did not
    /// say, or for datasets imported before revisions were recorded.
    pub revision: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointProvenance {
    pub run_id: i64,
    pub endpoint_id: i64,
    pub name: String,
    pub base_url: String,
    /// The run's model as the endpoint listed it at its last check (`None`: not listed).
    pub served_model: Option<String>,
    pub max_model_len: Option<u64>,
    /// What `GET /version` answered at its last check (vLLM's release).
    pub server_version: Option<String>,
    /// RFC 3339.
    pub checked_at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenizerProvenance {
    /// sha256 (hex) of `tokenizer.json`.
    pub tokenizer_sha256: String,
    /// sha256 (hex) of the chat template's text.
    pub template_sha256: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewerDecisions {
    pub reviewer: String,
    pub approved: u64,
    pub rejected: u64,
    pub flagged: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterApplied {
    pub filter: String,
    pub setting: String,
    pub removed: u64,
}

pub async fn collect(
    pool: &PgPool,
    selection: &ExportSelection,
    plan: &Plan,
    tokenizer_dir: Option<&Path>,
) -> Result<Provenance> {
    let ids: Vec<i64> = plan.samples.iter().map(|s| s.id).collect();
    let tokenizer = match tokenizer_dir {
        Some(dir) => Some(tokenizer(dir)?),
        None => None,
    };
    let (reviewers, unreviewed) = reviewers(pool, &ids).await?;
    Ok(Provenance {
        datasets: datasets(pool, &selection.run_ids).await?,
        endpoints: endpoints(pool, &selection.run_ids).await?,
        tokenizer,
        reviewers,
        unreviewed,
        filters: filters(selection, &plan.preview),
    })
}

async fn datasets(pool: &PgPool, run_ids: &[i64]) -> Result<Vec<DatasetProvenance>> {
    let rows = sqlx::query!(
        r#"SELECT d.id, d.name, d.source, d.format, d.rows_imported,
                  (SELECT sha256(string_agg(r.content_hash, ''::bytea ORDER BY r.id))
                   FROM dataset_rows r WHERE r.dataset_id = d.id) AS content_hash
           FROM datasets d
           WHERE d.id IN (SELECT dataset_id FROM runs WHERE id = ANY($1))
           ORDER BY d.id"#,
        run_ids
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|d| {
            let text = |key: &str| d.source.get(key).and_then(|v| v.as_str()).unwrap_or_default().to_string();
            let hub = (d.source.get("kind").and_then(|k| k.as_str()) == Some("hub")).then(|| HubSource {
                repo: text("repo"),
                config: text("config"),
                split: text("split"),
                revision: d.source.get("revision").and_then(|v| v.as_str()).map(str::to_string),
            });
            DatasetProvenance {
                id: d.id,
                name: d.name,
                content_sha256: hex::encode(d.content_hash.unwrap_or_else(|| Sha256::digest([]).to_vec())),
                source: d.source,
                format: d.format,
                rows: d.rows_imported,
                hub,
            }
        })
        .collect())
}

async fn endpoints(pool: &PgPool, run_ids: &[i64]) -> Result<Vec<EndpointProvenance>> {
    let rows = sqlx::query!(
        r#"SELECT re.run_id, e.id, e.name, e.base_url, e.models, e.server_version, e.checked_at,
                  r.settings ->> 'model' AS model
           FROM run_endpoints re
           JOIN endpoints e ON e.id = re.endpoint_id
           JOIN runs r ON r.id = re.run_id
           WHERE re.run_id = ANY($1)
           ORDER BY re.run_id, e.id"#,
        run_ids
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|e| {
            let listed = e.models.as_ref().and_then(|m| m.as_array()).and_then(|models| {
                models.iter().find(|m| m.get("id").and_then(|id| id.as_str()) == e.model.as_deref()).cloned()
            });
            EndpointProvenance {
                run_id: e.run_id,
                endpoint_id: e.id,
                name: e.name,
                base_url: e.base_url,
                served_model: listed.as_ref().and_then(|m| m.get("id")?.as_str().map(str::to_string)),
                max_model_len: listed.as_ref().and_then(|m| m.get("max_model_len")?.as_u64()),
                server_version: e.server_version,
                checked_at: e
                    .checked_at
                    .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok()),
            }
        })
        .collect())
}

fn tokenizer(dir: &Path) -> Result<TokenizerProvenance> {
    let (tokenizer_sha256, _) = manifest::hash_file(&dir.join("tokenizer.json"))?;
    let template = template::source_in(dir)?;
    Ok(TokenizerProvenance {
        tokenizer_sha256,
        template_sha256: hex::encode(Sha256::digest(template.as_bytes())),
    })
}

async fn reviewers(pool: &PgPool, ids: &[i64]) -> Result<(Vec<ReviewerDecisions>, u64)> {
    let rows = sqlx::query!(
        r#"SELECT u.username AS "reviewer?",
                  count(*) FILTER (WHERE s.review_state = 'approved') AS "approved!",
                  count(*) FILTER (WHERE s.review_state = 'rejected') AS "rejected!",
                  count(*) FILTER (WHERE s.review_state = 'flagged') AS "flagged!",
                  count(*) FILTER (WHERE s.review_state = 'unreviewed') AS "unreviewed!"
           FROM samples s LEFT JOIN users u ON u.id = s.reviewed_by
           WHERE s.id = ANY($1)
           GROUP BY u.username ORDER BY u.username"#,
        ids
    )
    .fetch_all(pool)
    .await
    .map_err(Error::from)?;
    let unreviewed = rows.iter().map(|r| r.unreviewed as u64).sum();
    let reviewers = rows
        .into_iter()
        .filter_map(|r| {
            Some(ReviewerDecisions {
                reviewer: r.reviewer?,
                approved: r.approved as u64,
                rejected: r.rejected as u64,
                flagged: r.flagged as u64,
            })
        })
        .filter(|r| r.approved + r.rejected + r.flagged > 0)
        .collect();
    Ok((reviewers, unreviewed))
}

fn filters(s: &ExportSelection, p: &ExportPreview) -> Vec<FilterApplied> {
    let applied = |filter: &str, setting: String, removed: u64| FilterApplied {
        filter: filter.to_string(),
        setting,
        removed,
    };
    let flags = if s.excluded_flags.is_empty() { "none".to_string() } else { s.excluded_flags.join(", ") };
    let names =
        |v: &[domain::generation::SampleState]| v.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(", ");
    vec![
        applied("review: rejected", s.review.as_str().to_string(), p.rejected_removed),
        applied(
            "review: flagged, or an excluded flag",
            format!("{}; excluded flags: {flags}", s.review.as_str()),
            p.flagged_removed,
        ),
        applied("review: unreviewed", s.review.as_str().to_string(), p.unreviewed_removed),
        applied("duplicates", format!("{:?}", s.duplicates).to_lowercase(), p.duplicates_removed),
        applied("thinking mix", serde_json::to_string(&s.thinking).unwrap_or_default(), p.mix_removed),
        // Applied before counting: the candidates are the samples these let through.
        applied("outcomes", names(&s.outcomes), 0),
        applied(
            "categories",
            if s.categories.is_empty() { "all".to_string() } else { s.categories.join(", ") },
            0,
        ),
        applied(
            "completion tokens",
            format!("{:?}..={:?}", s.min_completion_tokens, s.max_completion_tokens),
            0,
        ),
    ]
}
