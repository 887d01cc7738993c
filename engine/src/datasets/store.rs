//! Reading datasets for the pages, and recording how imports end.

use super::lease::Claim;
use crate::{Error, Result};
use domain::dataset::{
    Bucket, DatasetDetail, DatasetRow, DatasetStats, DatasetStatus, DatasetSummary, Mapping, Message,
    Rejection, RowPage, SourceSpec,
};
use sqlx::PgPool;
use time::OffsetDateTime;

/// Upper bounds (exclusive) of the histogram buckets.
const TURN_BOUNDS: &[i32] = &[2, 3, 5, 9, 17, 33];
const PROMPT_BOUNDS: &[i32] = &[100, 300, 1_000, 3_000, 10_000, 30_000];

/// Fails an import this process holds, and removes its rows (its record and rejections stay).
/// Does nothing when it no longer holds it (cancelled, or taken over by another process).
pub async fn fail(pool: &PgPool, claim: &Claim, message: &str) -> Result<()> {
    let failed = sqlx::query!(
        "UPDATE datasets SET status = 'failed', error = $3, finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
         WHERE id = $1 AND status = 'importing' AND lease_owner = $2",
        claim.id,
        claim.owner,
        message
    )
    .execute(pool)
    .await?;
    if failed.rows_affected() == 1 {
        sqlx::query!("DELETE FROM dataset_rows WHERE dataset_id = $1", claim.id).execute(pool).await?;
    }
    Ok(())
}

/// `false` when this process no longer holds the import (cancelled, or taken over).
pub async fn mark_ready(pool: &PgPool, claim: &Claim, stats: &DatasetStats) -> Result<bool> {
    let stats = serde_json::to_value(stats).expect("stats serialize");
    let updated = sqlx::query!(
        "UPDATE datasets SET status = 'ready', stats = $3, finished_at = now(), progress_at = now(),
                lease_owner = NULL, lease_expires_at = NULL
         WHERE id = $1 AND status = 'importing' AND lease_owner = $2",
        claim.id,
        claim.owner,
        stats
    )
    .execute(pool)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

pub async fn compute_stats(pool: &PgPool, id: i64) -> Result<DatasetStats> {
    let categories = sqlx::query!(
        r#"SELECT coalesce(category, '') AS "category!", count(*) AS "rows!" FROM dataset_rows
           WHERE dataset_id = $1 GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 100"#,
        id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.category, r.rows))
    .collect();
    let buckets = sqlx::query!(
        r#"SELECT width_bucket(turn_count, $2::int[]) AS "turns!", width_bucket(prompt_chars, $3::int[]) AS "chars!",
                  count(*) AS "rows!"
           FROM dataset_rows WHERE dataset_id = $1 GROUP BY 1, 2"#,
        id,
        TURN_BOUNDS,
        PROMPT_BOUNDS
    )
    .fetch_all(pool)
    .await?;
    let mut turns = vec![0i64; TURN_BOUNDS.len() + 1];
    let mut chars = vec![0i64; PROMPT_BOUNDS.len() + 1];
    for b in buckets {
        turns[b.turns as usize] += b.rows;
        chars[b.chars as usize] += b.rows;
    }
    Ok(DatasetStats {
        categories,
        turns: histogram(&turns, TURN_BOUNDS, 1),
        prompt_chars: histogram(&chars, PROMPT_BOUNDS, 0),
    })
}

fn histogram(counts: &[i64], bounds: &[i32], first_low: i64) -> Vec<Bucket> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &rows)| Bucket {
            low: if i == 0 { first_low } else { bounds[i - 1] as i64 },
            high: bounds.get(i).map(|b| *b as i64),
            rows,
        })
        .collect()
}

/// Cancels an import and removes its rows, in one transaction: a batch the importing process
/// writes meanwhile waits for it and is then refused, and the process stops at that batch (one
/// whose process died is ended all the same).
pub async fn cancel(pool: &PgPool, id: i64, by: &str) -> Result<()> {
    let mut tx = pool.begin().await?;
    let updated = sqlx::query!(
        "UPDATE datasets SET status = 'cancelled', finished_at = now(), error = $2, lease_owner = NULL, lease_expires_at = NULL
         WHERE id = $1 AND status = 'importing'",
        id,
        format!("cancelled by {by}")
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        let exists =
            sqlx::query_scalar!("SELECT id FROM datasets WHERE id = $1", id).fetch_optional(&mut *tx).await?;
        return match exists {
            None => Err(Error::NotFound("dataset")),
            Some(_) => Err(Error::conflict("the import has already ended; there is nothing to cancel")),
        };
    }
    sqlx::query!("DELETE FROM dataset_rows WHERE dataset_id = $1", id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

/// A dataset's status as it stands.
pub async fn status(pool: &PgPool, id: i64) -> Result<DatasetStatus> {
    sqlx::query_scalar!(r#"SELECT status AS "status: DatasetStatus" FROM datasets WHERE id = $1"#, id)
        .fetch_optional(pool)
        .await?
        .ok_or(Error::NotFound("dataset"))
}

pub async fn count(pool: &PgPool) -> Result<i64> {
    Ok(sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM datasets"#).fetch_one(pool).await?)
}

struct SummaryRow {
    id: i64,
    name: String,
    status: DatasetStatus,
    source: serde_json::Value,
    format: String,
    mapping: serde_json::Value,
    created_at: OffsetDateTime,
    progress_at: OffsetDateTime,
    finished_at: Option<OffsetDateTime>,
    rows_imported: i64,
    rows_duplicate: i64,
    rows_rejected: i64,
    bytes_read: i64,
    bytes_total: Option<i64>,
    error: Option<String>,
}

impl SummaryRow {
    fn into_summary(self) -> Result<DatasetSummary> {
        let source: SourceSpec = serde_json::from_value(self.source)
            .unwrap_or(SourceSpec::Path { path: "(unknown source)".into() });
        let mapping: Mapping = serde_json::from_value(self.mapping)
            .map_err(|e| Error::Internal(anyhow::anyhow!("stored mapping: {e}")))?;
        let end = self.finished_at.unwrap_or(self.progress_at);
        let secs = (end - self.created_at).as_seconds_f64();
        let rows = (self.rows_imported + self.rows_duplicate + self.rows_rejected) as f64;
        Ok(DatasetSummary {
            id: self.id,
            name: self.name,
            status: self.status,
            source,
            format: self.format,
            mapping,
            created_at: self.created_at,
            finished_at: self.finished_at,
            rows_imported: self.rows_imported,
            rows_duplicate: self.rows_duplicate,
            rows_rejected: self.rows_rejected,
            bytes_read: self.bytes_read,
            bytes_total: self.bytes_total,
            error: self.error,
            rows_per_s: if secs > 0.0 { rows / secs } else { 0.0 },
        })
    }
}

pub async fn list(pool: &PgPool) -> Result<Vec<DatasetSummary>> {
    sqlx::query_as!(
        SummaryRow,
        r#"SELECT id, name, status AS "status: DatasetStatus", source, format, mapping, created_at, progress_at,
                  finished_at, rows_imported, rows_duplicate, rows_rejected, bytes_read, bytes_total, error
           FROM datasets ORDER BY id DESC"#
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(SummaryRow::into_summary)
    .collect()
}

pub async fn summary(pool: &PgPool, id: i64) -> Result<DatasetSummary> {
    sqlx::query_as!(
        SummaryRow,
        r#"SELECT id, name, status AS "status: DatasetStatus", source, format, mapping, created_at, progress_at,
                  finished_at, rows_imported, rows_duplicate, rows_rejected, bytes_read, bytes_total, error
           FROM datasets WHERE id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await?
    .ok_or(Error::NotFound("dataset"))?
    .into_summary()
}

pub async fn detail(pool: &PgPool, id: i64) -> Result<DatasetDetail> {
    let summary = summary(pool, id).await?;
    let stats: Option<serde_json::Value> =
        sqlx::query_scalar!("SELECT stats FROM datasets WHERE id = $1", id).fetch_one(pool).await?;
    let stats = stats.and_then(|s| serde_json::from_value(s).ok());
    let rejections = sqlx::query_as!(
        Rejection,
        "SELECT location, reason FROM dataset_rejections WHERE dataset_id = $1 ORDER BY id LIMIT 1000",
        id
    )
    .fetch_all(pool)
    .await?;
    let mut reasons: Vec<(String, i64)> = Vec::new();
    for r in &rejections {
        let kind = reason_kind(&r.reason);
        match reasons.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => reasons.push((kind, 1)),
        }
    }
    reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
    Ok(DatasetDetail { summary, stats, rejections, rejection_reasons: reasons })
}

/// The general kind of a reason: its text before the first colon, with quoted names dropped.
fn reason_kind(reason: &str) -> String {
    let head = reason.split(':').next().unwrap_or(reason);
    let mut out = String::new();
    let mut quoted = false;
    for c in head.chars() {
        if c == '`' {
            quoted = !quoted;
            if quoted {
                out.push('…');
            }
        } else if !quoted {
            out.push(c);
        }
    }
    out.trim().to_string()
}

/// A page of rows after `after` (by id), optionally only those whose text contains `search`.
pub async fn rows(
    pool: &PgPool,
    id: i64,
    after: Option<i64>,
    search: Option<&str>,
    limit: i64,
) -> Result<RowPage> {
    let limit = limit.clamp(1, 200);
    let pattern = search.map(str::trim).filter(|s| !s.is_empty()).map(|s| {
        let escaped = s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        format!("%{escaped}%")
    });
    let rows = sqlx::query!(
        r#"SELECT id, row_key, category, turn_count, prompt_chars, messages FROM dataset_rows
           WHERE dataset_id = $1 AND id > $2
             AND ($3::text IS NULL OR messages::text ILIKE $3 OR row_key ILIKE $3 OR category ILIKE $3)
           ORDER BY id LIMIT $4"#,
        id,
        after.unwrap_or(0),
        pattern,
        limit + 1
    )
    .fetch_all(pool)
    .await?;
    let more = rows.len() as i64 > limit;
    let rows: Vec<DatasetRow> = rows
        .into_iter()
        .take(limit as usize)
        .map(|r| DatasetRow {
            id: r.id,
            row_key: r.row_key,
            category: r.category,
            turn_count: r.turn_count,
            prompt_chars: r.prompt_chars,
            messages: serde_json::from_value::<Vec<Message>>(r.messages).unwrap_or_default(),
        })
        .collect();
    let next_after = if more { rows.last().map(|r| r.id) } else { None };
    Ok(RowPage { rows, next_after })
}
