//! Export jobs: a row in `exports`, run in the background in batches with progress, cancellable,
//! committed at the end or removed entirely.

use super::conversation::{self, Conversation};
use super::destination::{Storage, Target};
use super::manifest::{self, Counts, FileEntry, Manifest};
use super::selection::{self, Split};
use super::tokenize::{Outcome, RowTokenizer};
use super::writer::DataWriter;
use crate::{Error, Result};
use domain::export::{ExportSpec, ExportStatus, Layout};
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Samples read, converted and written per step; bounds the job's memory.
const BATCH: usize = 256;

/// Records an export and returns its id; `run` carries it out.
pub async fn create(
    pool: &PgPool,
    spec: &ExportSpec,
    user_id: Option<i64>,
    preset_id: Option<i64>,
) -> Result<i64> {
    let problems = spec.problems();
    if !problems.is_empty() {
        return Err(Error::invalid(problems.join("; ")));
    }
    let spec_json = serde_json::to_value(spec).map_err(|e| Error::Internal(e.into()))?;
    let id = sqlx::query_scalar!(
        "INSERT INTO exports (spec, created_by, preset_id) VALUES ($1, $2, $3) RETURNING id",
        spec_json,
        user_id,
        preset_id
    )
    .fetch_one(pool)
    .await?;
    Ok(id)
}

/// Records an export and runs it in the background.
pub async fn start(
    pool: &PgPool,
    storage: Arc<Storage>,
    spec: &ExportSpec,
    user_id: Option<i64>,
    preset_id: Option<i64>,
) -> Result<i64> {
    let id = create(pool, spec, user_id, preset_id).await?;
    let pool = pool.clone();
    tokio::spawn(async move {
        if let Err(e) = run(&pool, &storage, id).await {
            tracing::warn!(export = id, error = %e, "export job ended with an error");
        }
    });
    Ok(id)
}

/// Asks a running export to stop; it removes what it wrote. False if it was not running.
pub async fn cancel(pool: &PgPool, id: i64) -> Result<bool> {
    let done =
        sqlx::query!("UPDATE exports SET cancel_requested = true WHERE id = $1 AND status = 'running'", id)
            .execute(pool)
            .await?;
    Ok(done.rows_affected() == 1)
}

/// Exports left running by a process that stopped are marked failed (their staging is gone
/// with the process's work; a folder destination keeps only a `.partial` folder, never an export).
pub async fn fail_interrupted(pool: &PgPool) -> Result<u64> {
    let done = sqlx::query!(
        "UPDATE exports SET status = 'failed', finished_at = now(),
                error = 'the server stopped while this export ran; start it again'
         WHERE status = 'running'"
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Carries out export `id` to the end and records the result.
pub async fn run(pool: &PgPool, storage: &Storage, id: i64) -> Result<ExportStatus> {
    match execute(pool, storage, id).await {
        Ok(Finished::Completed { location, bytes, manifest }) => {
            let manifest = serde_json::to_value(&manifest).map_err(|e| Error::Internal(e.into()))?;
            sqlx::query!(
                "UPDATE exports SET status = 'completed', finished_at = now(), location = $2, bytes = $3,
                        manifest = $4
                 WHERE id = $1",
                id,
                location,
                bytes as i64,
                manifest
            )
            .execute(pool)
            .await?;
            Ok(ExportStatus::Completed)
        }
        Ok(Finished::Cancelled) => {
            sqlx::query!("UPDATE exports SET status = 'cancelled', finished_at = now() WHERE id = $1", id)
                .execute(pool)
                .await?;
            Ok(ExportStatus::Cancelled)
        }
        Err(e) => {
            let message = if e.is_internal() {
                tracing::error!(export = id, error = %e, "export failed");
                "the export failed on the server; see the server log".to_string()
            } else {
                e.to_string()
            };
            sqlx::query!(
                "UPDATE exports SET status = 'failed', finished_at = now(), error = $2 WHERE id = $1",
                id,
                message
            )
            .execute(pool)
            .await?;
            Ok(ExportStatus::Failed)
        }
    }
}

enum Finished {
    Completed { location: String, bytes: u64, manifest: Manifest },
    Cancelled,
}

async fn cancel_requested(pool: &PgPool, id: i64) -> Result<bool> {
    Ok(sqlx::query_scalar!("SELECT cancel_requested FROM exports WHERE id = $1", id).fetch_one(pool).await?)
}

async fn execute(pool: &PgPool, storage: &Storage, id: i64) -> Result<Finished> {
    let job = sqlx::query!(
        r#"SELECT e.spec, e.created_at, u.username AS "user?"
           FROM exports e LEFT JOIN users u ON u.id = e.created_by WHERE e.id = $1"#,
        id
    )
    .fetch_one(pool)
    .await?;
    let spec: ExportSpec = serde_json::from_value(job.spec)
        .map_err(|e| Error::invalid(format!("the export's settings are not readable: {e}")))?;

    let tokenizer = match (&spec.format.layout, &spec.format.tokenization) {
        (Layout::Tokenized, Some(t)) => {
            let dir = storage.resolve(&t.tokenizer_dir, false)?;
            let (max, overlong) = (t.max_length, t.overlong);
            // Templates that stamp a date (strftime_now) get the export's own.
            let date = job.created_at.date();
            let loaded =
                tokio::task::spawn_blocking(move || RowTokenizer::from_dir_dated(&dir, date, max, overlong))
                    .await
                    .map_err(|e| Error::Internal(e.into()))??;
            Some(Arc::new(loaded))
        }
        _ => None,
    };

    let plan = selection::plan(pool, &spec.selection, spec.format.validation_share).await?;
    sqlx::query!("UPDATE exports SET rows_total = $2 WHERE id = $1", id, plan.samples.len() as i64)
        .execute(pool)
        .await?;

    let target = storage.prepare(&spec.destination, id)?;
    let tokenizer_date = tokenizer.as_ref().map(|t| t.template_date());
    match write_all(pool, id, &spec, &plan, tokenizer, &target).await {
        Ok(Some((files, counts))) => {
            let manifest = Manifest {
                export_id: id,
                created_at: job.created_at.format(&Rfc3339).unwrap_or_default(),
                finished_at: OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default(),
                user: job.user,
                app_version: env!("CARGO_PKG_VERSION").to_string(),
                runs: manifest::runs(pool, &spec.selection.run_ids).await?,
                template_date: tokenizer_date.map(|d| d.to_string()),
                spec,
                counts,
                files,
            };
            let bytes = manifest.files.iter().map(|f| f.bytes).sum::<u64>();
            let text = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Internal(e.into()))?;
            if let Err(e) = tokio::fs::write(target.staging().join(manifest::FILE_NAME), &text).await {
                target.discard().await;
                return Err(Error::Internal(e.into()));
            }
            if cancel_requested(pool, id).await? {
                target.discard().await;
                return Ok(Finished::Cancelled);
            }
            let mut names: Vec<String> = manifest.files.iter().map(|f| f.name.clone()).collect();
            names.push(manifest::FILE_NAME.to_string());
            let location = target.commit(&names).await?;
            Ok(Finished::Completed { location, bytes: bytes + text.len() as u64, manifest })
        }
        Ok(None) => {
            target.discard().await;
            Ok(Finished::Cancelled)
        }
        Err(e) => {
            target.discard().await;
            Err(e)
        }
    }
}

/// The open data files, one per split, and what has gone into them.
struct Sink {
    writers: BTreeMap<Split, (String, DataWriter, u64)>,
    tokenizer: Option<Arc<RowTokenizer>>,
    layout: Layout,
    counts: Counts,
}

impl Sink {
    /// Writes one batch (blocking work: tokenizing, encoding, file writes).
    fn write(&mut self, batch: Vec<(Split, Conversation)>) -> Result<()> {
        let mut by_split: BTreeMap<Split, Vec<Conversation>> = BTreeMap::new();
        for (split, c) in batch {
            by_split.entry(split).or_default().push(c);
        }
        for (split, conversations) in by_split {
            let (_, writer, rows) = self.writers.get_mut(&split).expect("a writer per split");
            match &self.tokenizer {
                None => {
                    writer.write_conversations(&conversations)?;
                    *rows += conversations.len() as u64;
                    self.counts.written += conversations.len() as u64;
                }
                Some(tokenizer) => {
                    let mut kept = Vec::with_capacity(conversations.len());
                    for outcome in tokenizer.tokenize_batch(&conversations)? {
                        match outcome {
                            Outcome::Row(row) => {
                                self.counts.truncated += u64::from(row.truncated);
                                self.counts.unsupervised_turns += u64::from(row.unsupervised_turns);
                                self.counts.input_tokens += row.input_ids.len() as u64;
                                self.counts.loss_tokens +=
                                    row.loss_mask.iter().map(|&m| m as u64).sum::<u64>();
                                kept.push(row);
                            }
                            Outcome::DroppedOverlong => self.counts.dropped_overlong += 1,
                            Outcome::DroppedNoLoss => self.counts.dropped_no_loss += 1,
                        }
                    }
                    writer.write_tokenized(&kept)?;
                    *rows += kept.len() as u64;
                    self.counts.written += kept.len() as u64;
                }
            }
        }
        debug_assert!(self.layout == Layout::Tokenized || self.tokenizer.is_none());
        Ok(())
    }

    fn finish(self, staging: PathBuf) -> Result<(Vec<FileEntry>, Counts)> {
        let mut files = Vec::new();
        for (_, (name, writer, rows)) in self.writers {
            writer.finish()?;
            let (sha256, bytes) = manifest::hash_file(&staging.join(&name))?;
            files.push(FileEntry { name, rows, bytes, sha256 });
        }
        Ok((files, self.counts))
    }
}

/// Writes every planned sample; `None` when cancelled.
async fn write_all(
    pool: &PgPool,
    id: i64,
    spec: &ExportSpec,
    plan: &selection::Plan,
    tokenizer: Option<Arc<RowTokenizer>>,
    target: &Target,
) -> Result<Option<(Vec<FileEntry>, Counts)>> {
    let staging = target.staging().to_path_buf();
    let format = &spec.format;
    let mut splits = vec![Split::Train];
    if format.validation_share > 0.0 {
        splits.push(Split::Validation);
    }
    let mut writers = BTreeMap::new();
    for split in splits {
        let name = format!("{}.{}", split.name(), format.file.extension());
        let writer = DataWriter::create(&staging.join(&name), format.layout, format.file)?;
        writers.insert(split, (name, writer, 0u64));
    }
    let mut sink = Sink {
        writers,
        tokenizer,
        layout: format.layout,
        counts: Counts { selection: plan.preview.clone(), ..Default::default() },
    };

    let mut done = 0i64;
    for chunk in plan.samples.chunks(BATCH) {
        if cancel_requested(pool, id).await? {
            return Ok(None);
        }
        let ids: Vec<i64> = chunk.iter().map(|s| s.id).collect();
        let rows = selection::fetch(pool, &ids).await?;
        let splits: BTreeMap<i64, Split> = chunk.iter().map(|s| (s.id, s.split)).collect();
        let mut batch = Vec::with_capacity(rows.len());
        for row in rows {
            let split = splits[&row.id];
            batch.push((split, conversation::from_row(row, format.reasoning)?));
        }
        let (returned, result) = tokio::task::spawn_blocking(move || {
            let result = sink.write(batch);
            (sink, result)
        })
        .await
        .map_err(|e| Error::Internal(e.into()))?;
        sink = returned;
        result?;
        done += chunk.len() as i64;
        sqlx::query!("UPDATE exports SET rows_done = $2 WHERE id = $1", id, done).execute(pool).await?;
    }
    let finished = tokio::task::spawn_blocking(move || sink.finish(staging))
        .await
        .map_err(|e| Error::Internal(e.into()))??;
    Ok(Some(finished))
}
