//! Export jobs: a row in `exports`, run in batches with progress, cancellable, committed at the
//! end or removed entirely. Which process runs a job, under what lease, is `runner` and `lease`.

use super::captured::{self, Limit};
use super::conversation::{self, Conversation};
use super::destination::{Storage, Target};
use super::lease;
use super::manifest::{self, Counts, FileEntry, Manifest};
use super::provenance;
use super::runner::{self, JobOptions};
use super::selection::{self, Split};
use super::tokenize::{Outcome, RowTokenizer};
use super::turn_end::TurnTail;
use super::writer::{DataWriter, RowMetadata};
use crate::{Error, Result};
use domain::export::{
    ExportSpec, ExportStatus, Layout, Overlong, TokenSource, Tokenization, TurnEnd, TurnRows,
};
use domain::trainer::ToolsColumn;
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

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
    let spec_json = domain::stored::to_stored(spec);
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

/// Records an export, claims it for this process and runs it in the background (a worker
/// process takes it over if this one stops).
pub async fn start(
    pool: &PgPool,
    storage: Arc<Storage>,
    spec: &ExportSpec,
    user_id: Option<i64>,
    preset_id: Option<i64>,
) -> Result<i64> {
    let id = create(pool, spec, user_id, preset_id).await?;
    let options = JobOptions::default();
    // Claimed before answering, so the page sees it running; if another process claimed it
    // first, that one runs it.
    if let Some(claim) = runner::claim(pool, id, &options).await? {
        let pool = pool.clone();
        tokio::spawn(async move {
            if let Err(e) = runner::carry_out(&pool, &storage, claim, &options, None).await {
                tracing::warn!(export = id, error = %e, "export job ended with an error");
            }
        });
    }
    Ok(id)
}

/// Cancels an export that has not finished (see `lease::cancel`). False if it had finished.
pub async fn cancel(pool: &PgPool, id: i64) -> Result<bool> {
    lease::cancel(pool, id).await
}

/// Carries out export `id` in this process to the end and records the result (or returns the
/// status it has when it cannot be claimed: finished, or running elsewhere).
pub async fn run(pool: &PgPool, storage: &Storage, id: i64) -> Result<ExportStatus> {
    runner::run_export(pool, storage, id, &JobOptions::default()).await
}

/// How the writing of an export ended (recorded by `runner`). One per export, moved once:
/// boxing the manifest would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Finished {
    Completed {
        location: String,
        bytes: u64,
        manifest: Manifest,
    },
    Cancelled,
    /// Stopped at a batch because the job's hold ended (its lease was lost, or the process is
    /// stopping): what it staged is left for whoever holds the job next.
    Halted,
}

/// How writing the data files ended. Made once per export, like `Finished`.
#[allow(clippy::large_enum_variant)]
enum Written {
    Files(Vec<FileEntry>, Counts),
    Cancelled,
    Halted,
}

/// Which samples went into which split, so an evaluation can send an export's validation
/// prompts. A job taken over after its process died writes its batches again.
async fn record_samples(pool: &PgPool, id: i64, sample_ids: &[i64], splits: &[Split]) -> Result<()> {
    sqlx::query!(
        "INSERT INTO export_samples (export_id, sample_id, split)
         SELECT $1, x.sample_id, x.split FROM unnest($2::bigint[], $3::export_split[]) AS x(sample_id, split)
         ON CONFLICT (export_id, sample_id) DO UPDATE SET split = excluded.split",
        id,
        sample_ids,
        splits as &[Split]
    )
    .execute(pool)
    .await?;
    Ok(())
}

async fn cancel_requested(pool: &PgPool, id: i64) -> Result<bool> {
    Ok(sqlx::query_scalar!("SELECT cancel_requested FROM exports WHERE id = $1", id).fetch_one(pool).await?)
}

/// Writes export `id` until its end, or until `halt` at a batch boundary.
pub(super) async fn execute(
    pool: &PgPool,
    storage: &Storage,
    id: i64,
    halt: &CancellationToken,
) -> Result<Finished> {
    let job = sqlx::query!(
        r#"SELECT e.spec, e.created_at, u.username AS "user?"
           FROM exports e LEFT JOIN users u ON u.id = e.created_by WHERE e.id = $1"#,
        id
    )
    .fetch_one(pool)
    .await?;
    let spec: ExportSpec = domain::stored::from_stored(job.spec).map_err(Error::Invalid)?;

    let plan = selection::plan(pool, &spec.selection, spec.format.validation_share).await?;
    sqlx::query!("UPDATE exports SET rows_total = $2 WHERE id = $1", id, plan.samples.len() as i64)
        .execute(pool)
        .await?;
    let rows = RowMaker::choose(pool, storage, &spec, &plan, job.created_at.date()).await?;

    // The tokenizer and template that made the rows (rows from captured ids use none).
    let tokenizer_dir = match (&rows, &spec.format.tokenization) {
        (RowMaker::Retokenized(_), Some(t)) => Some(storage.resolve(&t.tokenizer_dir, false)?),
        _ => None,
    };
    let provenance = provenance::collect(pool, &spec.selection, &plan, tokenizer_dir.as_deref()).await?;

    let target = storage.prepare(&spec.destination, id)?;
    let tokenizer_date = match &rows {
        RowMaker::Retokenized(t) => Some(t.template_date()),
        _ => None,
    };
    let token_source = rows.token_source();
    match write_all(pool, id, &spec, &plan, rows, &target, halt).await {
        Ok(Written::Files(files, counts)) => {
            let manifest = Manifest {
                export_id: id,
                created_at: job.created_at.format(&Rfc3339).unwrap_or_default(),
                finished_at: OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default(),
                user: job.user,
                app_version: env!("CARGO_PKG_VERSION").to_string(),
                runs: manifest::runs(pool, &spec.selection.run_ids).await?,
                template_date: tokenizer_date.map(|d| d.to_string()),
                token_source,
                load: spec
                    .format
                    .trainer
                    .map(|t| t.how_to_load().iter().map(|l| l.to_string()).collect())
                    .unwrap_or_default(),
                spec,
                counts,
                files,
                provenance,
            };
            let bytes = manifest.files.iter().map(|f| f.bytes).sum::<u64>();
            let text = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Internal(e.into()))?;
            if let Err(e) = tokio::fs::write(target.staging().join(manifest::FILE_NAME), &text).await {
                target.discard().await;
                return Err(Error::Internal(e.into()));
            }
            if halt.is_cancelled() {
                return Ok(Finished::Halted);
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
        Ok(Written::Cancelled) => {
            target.discard().await;
            Ok(Finished::Cancelled)
        }
        Ok(Written::Halted) => Ok(Finished::Halted),
        Err(e) => {
            target.discard().await;
            Err(e)
        }
    }
}

/// How a sample becomes rows of the chosen layout.
enum RowMaker {
    /// Its conversation as it is stored.
    Conversations,
    /// Its conversation rendered and encoded again.
    Retokenized(Arc<RowTokenizer>),
    /// The ids its server reported, each row followed by the template's end of turn when the
    /// export asked for it (`TurnEnd::AsRendered`).
    Captured { limit: Limit, turn_rows: TurnRows, tail: Option<TurnTail> },
}

/// Samples per query when checking that every selected sample has captured ids.
const CHECK_BATCH: usize = 50_000;

impl RowMaker {
    /// Captured ids when the spec asks for them or (by default) when every selected sample has
    /// them; the tokenizer and template otherwise.
    async fn choose(
        pool: &PgPool,
        storage: &Storage,
        spec: &ExportSpec,
        plan: &selection::Plan,
        date: time::Date,
    ) -> Result<Self> {
        let t = match (&spec.format.layout, &spec.format.tokenization) {
            (Layout::Tokenized, Some(t)) => t,
            _ => return Ok(RowMaker::Conversations),
        };
        let limit = Limit { max_length: t.max_length as usize, overlong: t.overlong };
        // Read only where rows come from captured ids: re-tokenized rows end as rendered anyway.
        let captured = || async move {
            let tail = match t.turn_end {
                TurnEnd::AsSampled => None,
                TurnEnd::AsRendered => Some(turn_tail(storage, t, date).await?),
            };
            Ok::<_, Error>(RowMaker::Captured { limit, turn_rows: t.turn_rows, tail })
        };
        let mut missing = plan.samples.len() as u64;
        if t.source != TokenSource::Retokenize {
            missing = 0;
            for chunk in plan.samples.chunks(CHECK_BATCH) {
                let ids: Vec<i64> = chunk.iter().map(|s| s.id).collect();
                missing += captured::missing(pool, &ids).await?;
            }
            match t.source {
                TokenSource::Captured if missing > 0 => {
                    return Err(Error::invalid(format!(
                        "{missing} of the {} selected samples have no token ids from their server (it did \
                         not return them, or they were generated before Draft Studio kept them): choose \
                         \"re-tokenize\", or leave those samples out",
                        plan.samples.len()
                    )))
                }
                TokenSource::Captured => return captured().await,
                _ if missing == 0 && !plan.samples.is_empty() => return captured().await,
                _ => {}
            }
        }
        if t.tokenizer_dir.trim().is_empty() {
            return Err(Error::invalid(format!(
                "{missing} of the {} selected samples have no token ids from their server, so they must \
                 be re-tokenized: give the target model's tokenizer folder, or leave those samples out",
                plan.samples.len()
            )));
        }
        let dir = storage.resolve(&t.tokenizer_dir, false)?;
        let (max, overlong) = (t.max_length, t.overlong);
        // Templates that stamp a date (strftime_now) get the export's own.
        let turn_rows = t.turn_rows;
        let loaded = tokio::task::spawn_blocking(move || {
            RowTokenizer::from_dir_dated(&dir, date, max, overlong).map(|t| t.with_turn_rows(turn_rows))
        })
        .await
        .map_err(|e| Error::Internal(e.into()))??;
        Ok(RowMaker::Retokenized(Arc::new(loaded)))
    }

    /// What the manifest says the rows came from.
    fn token_source(&self) -> Option<manifest::TokenSourceUsed> {
        match self {
            RowMaker::Conversations => None,
            RowMaker::Retokenized(_) => Some(manifest::TokenSourceUsed::Retokenized),
            RowMaker::Captured { .. } => Some(manifest::TokenSourceUsed::Captured),
        }
    }
}

/// The end of turn the template of `t`'s tokenizer folder writes, for rows from captured ids.
async fn turn_tail(storage: &Storage, t: &Tokenization, date: time::Date) -> Result<TurnTail> {
    if t.tokenizer_dir.trim().is_empty() {
        return Err(Error::invalid(
            "give the tokenizer folder: ending rows as the template renders a turn reads the template from it",
        ));
    }
    let dir = storage.resolve(&t.tokenizer_dir, false)?;
    let tail = tokio::task::spawn_blocking(move || {
        let tokenizer = RowTokenizer::from_dir_dated(&dir, date, u32::MAX, Overlong::Drop)?;
        TurnTail::of(&tokenizer)
    })
    .await
    .map_err(|e| Error::Internal(e.into()))??;
    tail.ok_or_else(|| {
        Error::invalid(
            "the chat template does not end an assistant turn with one of the tokenizer's added tokens, so \
             what it writes after one cannot be added to the server's ids: choose rows that end as sampled",
        )
    })
}

/// One batch read from the database: conversations, and the captured ids when rows use them.
struct Batch {
    conversations: Vec<(Split, Conversation)>,
    captured: std::collections::HashMap<i64, Vec<captured::Request>>,
    sample_ids: Vec<i64>,
    /// Each sample's row metadata, in the order of `sample_ids`.
    metadata: Vec<Option<RowMetadata>>,
}

/// The open data files, one per split, and what has gone into them.
struct Sink {
    writers: BTreeMap<Split, (String, DataWriter, u64)>,
    rows: RowMaker,
    counts: Counts,
}

impl Sink {
    /// Writes one batch (blocking work: tokenizing, encoding, file writes).
    fn write(&mut self, batch: Batch) -> Result<()> {
        let Batch { conversations, mut captured, sample_ids, metadata } = batch;
        type Sample = (i64, Conversation, Option<RowMetadata>);
        let mut by_split: BTreeMap<Split, Vec<Sample>> = BTreeMap::new();
        for (((split, c), id), m) in conversations.into_iter().zip(sample_ids).zip(metadata) {
            by_split.entry(split).or_default().push((id, c, m));
        }
        for (split, samples) in by_split {
            let (_, writer, rows) = self.writers.get_mut(&split).expect("a writer per split");
            // Each outcome with its sample's metadata.
            let outcomes: Vec<(Outcome, Option<RowMetadata>)> = match &self.rows {
                RowMaker::Conversations => {
                    let (conversations, metadata): (Vec<Conversation>, Vec<Option<RowMetadata>>) =
                        samples.into_iter().map(|(_, c, m)| (c, m)).unzip();
                    writer.write_conversations(&conversations, &metadata)?;
                    *rows += conversations.len() as u64;
                    self.counts.written += conversations.len() as u64;
                    continue;
                }
                RowMaker::Retokenized(tokenizer) => {
                    let (conversations, metadata): (Vec<Conversation>, Vec<Option<RowMetadata>>) =
                        samples.into_iter().map(|(_, c, m)| (c, m)).unzip();
                    let made = tokenizer.tokenize_batch(&conversations)?;
                    made.into_iter()
                        .zip(metadata)
                        .flat_map(|(rows, m)| rows.into_iter().map(move |row| (row, m)))
                        .collect()
                }
                RowMaker::Captured { limit, turn_rows, tail } => {
                    let mut outcomes = Vec::with_capacity(samples.len());
                    for (id, c, m) in samples {
                        let requests = captured.remove(&id).ok_or_else(|| {
                            Error::invalid(format!(
                                "sample {id} lost its token ids while the export ran (was it regenerated?); \
                                 start the export again"
                            ))
                        })?;
                        let mut made = captured::rows(&c.id, &requests, *turn_rows);
                        if let Some(tail) = tail {
                            made.iter_mut().for_each(|row| tail.append(row));
                        }
                        self.counts.captured_requests += requests.len() as u64;
                        outcomes.extend(made.into_iter().map(|row| (limit.apply(row), m)));
                    }
                    outcomes
                }
            };
            let mut kept = Vec::with_capacity(outcomes.len());
            let mut kept_metadata = Vec::with_capacity(outcomes.len());
            for (outcome, metadata) in outcomes {
                match outcome {
                    Outcome::Row(row) => {
                        self.counts.truncated += u64::from(row.truncated);
                        self.counts.unsupervised_turns += u64::from(row.unsupervised_turns);
                        self.counts.input_tokens += row.input_ids.len() as u64;
                        self.counts.loss_tokens += row.loss_mask.iter().map(|&m| m as u64).sum::<u64>();
                        kept.push(row);
                        kept_metadata.push(metadata);
                    }
                    Outcome::DroppedOverlong => self.counts.dropped_overlong += 1,
                    Outcome::DroppedNoLoss => self.counts.dropped_no_loss += 1,
                }
            }
            writer.write_tokenized(&kept, &kept_metadata)?;
            *rows += kept.len() as u64;
            self.counts.written += kept.len() as u64;
        }
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

/// Writes every planned sample, stopping at a batch when cancelled or halted.
async fn write_all(
    pool: &PgPool,
    id: i64,
    spec: &ExportSpec,
    plan: &selection::Plan,
    rows: RowMaker,
    target: &Target,
    halt: &CancellationToken,
) -> Result<Written> {
    let staging = target.staging().to_path_buf();
    let format = &spec.format;
    let mut splits = vec![Split::Train];
    if format.validation_share > 0.0 {
        splits.push(Split::Validation);
    }
    let mut writers = BTreeMap::new();
    for split in splits {
        let name = format!("{}.{}", split.as_str(), format.file.extension());
        let tools = format.trainer.map_or(ToolsColumn::ListWhenOffered, |t| t.tools_column());
        let writer = DataWriter::create(&staging.join(&name), format.layout, format.file, tools)?;
        writers.insert(split, (name, writer, 0u64));
    }
    let mut sink =
        Sink { writers, rows, counts: Counts { selection: plan.preview.clone(), ..Default::default() } };

    let mut done = 0i64;
    for chunk in plan.samples.chunks(BATCH) {
        if halt.is_cancelled() {
            return Ok(Written::Halted);
        }
        if cancel_requested(pool, id).await? {
            return Ok(Written::Cancelled);
        }
        let ids: Vec<i64> = chunk.iter().map(|s| s.id).collect();
        let rows = selection::fetch(pool, &ids).await?;
        let captured = match sink.rows {
            RowMaker::Captured { .. } => captured::fetch(pool, &ids).await?,
            _ => Default::default(),
        };
        let splits: BTreeMap<i64, Split> = chunk.iter().map(|s| (s.id, s.split)).collect();
        let mut batch = Batch {
            conversations: Vec::with_capacity(rows.len()),
            captured,
            sample_ids: Vec::new(),
            metadata: Vec::with_capacity(rows.len()),
        };
        for row in rows {
            let split = splits[&row.id];
            batch.sample_ids.push(row.id);
            batch.metadata.push(row.metadata());
            batch.conversations.push((split, conversation::from_row(row, format.reasoning)?));
        }
        let written: Vec<Split> = batch.sample_ids.iter().map(|id| splits[id]).collect();
        record_samples(pool, id, &batch.sample_ids, &written).await?;
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
    let (files, counts) = tokio::task::spawn_blocking(move || sink.finish(staging))
        .await
        .map_err(|e| Error::Internal(e.into()))??;
    Ok(Written::Files(files, counts))
}
