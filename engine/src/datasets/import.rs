//! The import job: read records on a blocking thread, normalize and encode them as COPY text,
//! and load each batch through a staging table so duplicates are counted, not stored twice.
//! Progress is written with every batch; a cancel is seen at the next batch; a failed or
//! cancelled import loses its rows and never reads as ready.
//!
//! The job runs under a lease (`lease`, held by `jobs::hold`) renewed while it reads, and
//! writes only while it holds it: the process that accepted the import runs it (`start`); when that process dies, another
//! takes it over and reads the source again from the start (`resume`, from `jobs`).

use super::{
    copy, hub,
    lease::{self, Claim, TakenOver},
    normalize::normalize,
    preview, reader, sources, store, uploads, DatasetSettings, KEPT_REJECTIONS,
};
use crate::jobs::{self, Held};
use crate::{error::OnConstraint, Error, Result};
use domain::dataset::{DatasetStatus, Format, Mapping, SourceSpec};
use sqlx::{PgConnection, PgPool};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// What to import.
#[derive(Clone, Debug)]
pub struct NewImport {
    pub name: String,
    pub source: SourceSpec,
    /// `None`: use the mapping detected from the file's columns.
    pub mapping: Option<Mapping>,
    pub created_by: Option<i64>,
}

/// A started import: its dataset id, and the job (awaited by the CLI and tests).
pub struct Started {
    pub id: i64,
    pub job: tokio::task::JoinHandle<()>,
}

/// Batches are flushed at this many rows or bytes of COPY text, whichever comes first.
const BATCH_ROWS: usize = 8192;
const BATCH_BYTES: usize = 8 << 20;
/// A file whose first this-many records are all refused is not taken for a dataset.
const REFUSED_BEFORE_ANY_GOOD: u64 = 1000;

/// Checks the source and mapping, records the dataset as importing and starts the job.
pub async fn start(
    pool: &PgPool,
    http: &reqwest::Client,
    settings: &DatasetSettings,
    new: NewImport,
) -> Result<Started> {
    let name = new.name.trim().to_string();
    if name.is_empty() {
        return Err(Error::invalid("give the dataset a name"));
    }
    if name.chars().count() > 200 {
        return Err(Error::invalid("the name is longer than 200 characters"));
    }
    if sqlx::query_scalar!("SELECT id FROM datasets WHERE name = $1", name)
        .fetch_optional(pool)
        .await?
        .is_some()
    {
        return Err(Error::conflict(format!("a dataset named `{name}` exists already; choose another name")));
    }
    let first = sources::fetch(settings, http, &new.source, true).await?;
    let max_row_bytes = settings.max_row_bytes;
    let sample_files = first.clone();
    let columns = tokio::task::spawn_blocking(move || preview::sample(&sample_files, max_row_bytes))
        .await
        .map_err(|e| Error::Internal(e.into()))??
        .0;
    let mapping = preview::choose_mapping(&columns, new.mapping)?;

    let source_json = serde_json::to_value(new.source.without_secrets()).expect("source serializes");
    let mapping_json = serde_json::to_value(&mapping).expect("mapping serializes");
    let owner = Uuid::new_v4();
    let id = sqlx::query_scalar!(
        "INSERT INTO datasets (name, source, format, mapping, created_by, bytes_total, lease_owner, lease_expires_at, claims)
         VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8), 1) RETURNING id",
        name,
        source_json,
        first.format.as_str(),
        mapping_json,
        new.created_by,
        first.bytes_total as i64,
        owner,
        settings.jobs.lease.as_secs_f64()
    )
    .fetch_one(pool)
    .await
    .on_constraint("datasets_name_key", || {
        format!("a dataset named `{name}` exists already; choose another name")
    })?;
    tracing::info!(dataset = id, %name, source = %new.source.describe(), format = %first.format, "import started");

    let job = Job {
        pool: pool.clone(),
        http: http.clone(),
        settings: settings.clone(),
        claim: Claim { id, owner, claims: 1 },
        halt: CancellationToken::new(),
        id,
        source: new.source,
        mapping,
    };
    let handle = tokio::spawn(job.carry_out(first, None));
    Ok(Started { id, job: handle })
}

/// Runs an import taken over from a process that stopped, from the start, in this process;
/// returns how it ended. Its source is read again from here: when it cannot be (an upload or a
/// path only the dead process's host had, a private hub dataset, whose token is never stored),
/// the import fails saying so.
pub async fn resume(
    pool: &PgPool,
    http: &reqwest::Client,
    settings: &DatasetSettings,
    taken: TakenOver,
    stop: Option<&CancellationToken>,
) -> Result<DatasetStatus> {
    let claim = taken.claim;
    let stored = serde_json::from_value::<SourceSpec>(taken.source)
        .map_err(|e| format!("its stored source is unreadable ({e})"))
        .and_then(|source| {
            let mapping = serde_json::from_value::<Mapping>(taken.mapping)
                .map_err(|e| format!("its stored mapping is unreadable ({e})"))?;
            Ok((source, mapping))
        });
    let (source, mapping) = match stored {
        Ok(read) => read,
        Err(why) => {
            store::fail(
                pool,
                &claim,
                &format!("the process importing this dataset stopped, and {why}; import it again"),
            )
            .await?;
            return store::status(pool, claim.id).await;
        }
    };
    let first = match sources::fetch(settings, http, &source, true).await {
        Ok(first) => first,
        Err(e) => {
            let message = format!(
                "the process importing this dataset stopped, and its source ({}) cannot be read again from this process: {e}. Import it again",
                source.describe()
            );
            store::fail(pool, &claim, &message).await?;
            return store::status(pool, claim.id).await;
        }
    };
    let job = Job {
        pool: pool.clone(),
        http: http.clone(),
        settings: settings.clone(),
        claim,
        halt: CancellationToken::new(),
        id: claim.id,
        source,
        mapping,
    };
    job.carry_out(first, stop).await;
    store::status(pool, claim.id).await
}

struct Job {
    pool: PgPool,
    http: reqwest::Client,
    settings: DatasetSettings,
    claim: Claim,
    /// Stops the job between batches: its lease is gone, or this process is stopping. (Dropping
    /// it mid-batch instead would return a connection cut in the middle of a COPY to the pool.)
    halt: CancellationToken,
    id: i64,
    source: SourceSpec,
    mapping: Mapping,
}

/// Why an import stopped before its end.
enum Ended {
    Completed,
    Cancelled,
    /// Another process holds it now (this one was away longer than the lease).
    TakenOver,
    /// Stopped between batches (`halt`); whoever holds the import next starts it again.
    Halted,
}

impl Job {
    /// Runs the import while renewing its lease (`jobs::hold`). When the lease is gone
    /// (cancelled, taken over) the job stops at its next batch; when this process is stopping
    /// (`stop`), it stops there too and the import is handed back for another process to take
    /// over at once.
    async fn carry_out(self, first: sources::LocalFiles, stop: Option<&CancellationToken>) {
        let (pool, claim, options, halt) =
            (self.pool.clone(), self.claim, self.settings.jobs, self.halt.clone());
        let span = tracing::info_span!("import", dataset.id = claim.id, start = claim.claims);
        let work = tracing::Instrument::instrument(self.run(first), span);
        let held = jobs::hold(&pool, lease::IMPORTS, claim, &options, stop, &halt, work).await;
        if held == Held::Stopping {
            match lease::release(&pool, &claim).await {
                Ok(true) => tracing::info!(
                    dataset = claim.id,
                    "import handed back: this process is stopping; another takes it over"
                ),
                Ok(false) => {} // it ended meanwhile
                Err(e) => {
                    tracing::warn!(dataset = claim.id, error = %e, "handing back an import failed; it is taken over when its lease runs out")
                }
            }
        }
    }

    async fn run(self, first: sources::LocalFiles) {
        let id = self.id;
        let outcome = match self.files(first).await {
            Ok(files) => self.load(files).await,
            Err(e) => Err(e),
        };
        let result = match outcome {
            Ok(Ended::Completed) => self.finish().await,
            Ok(Ended::Cancelled) => {
                tracing::info!(dataset = id, "import cancelled; its rows went with the cancel");
                Ok(())
            }
            Ok(Ended::TakenOver) => {
                tracing::warn!(dataset = id, "another process took this import over; this one stops");
                Ok(())
            }
            Ok(Ended::Halted) => Ok(()),
            Err(e) => {
                let message = if e.is_internal() {
                    tracing::error!(dataset = id, error = ?e, "import failed");
                    "the import failed on the server; the details are in its log".to_string()
                } else {
                    tracing::info!(dataset = id, error = %e, "import refused");
                    e.to_string()
                };
                store::fail(&self.pool, &self.claim, &message).await
            }
        };
        if let Err(e) = result {
            tracing::error!(dataset = id, error = ?e, "recording the end of an import failed");
        }
    }

    /// All the files: the hub's remaining shards are downloaded now.
    async fn files(&self, first: sources::LocalFiles) -> Result<sources::LocalFiles> {
        let SourceSpec::Hub { repo, config, split, token } = &self.source else { return Ok(first) };
        let client = hub::HubClient::new(self.http.clone(), &self.settings, token.clone());
        // Read before the files are listed, so it names the commit they came from (unless the
        // branch moves in between, which the hub does only when it re-converts the dataset).
        if let Some(revision) = client.parquet_revision(repo).await {
            sqlx::query!(
                "UPDATE datasets SET source = jsonb_set(source, '{revision}', to_jsonb($2::text)) WHERE id = $1",
                self.id,
                revision
            )
            .execute(&self.pool)
            .await?;
        }
        let files = client.download(repo, config, split, false).await?;
        let bytes_total: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
        sqlx::query!(
            "UPDATE datasets SET bytes_total = $2, progress_at = now() WHERE id = $1",
            self.id,
            bytes_total as i64
        )
        .execute(&self.pool)
        .await?;
        Ok(sources::LocalFiles { files, format: Format::Parquet, bytes_total })
    }

    async fn load(&self, files: sources::LocalFiles) -> Result<Ended> {
        let (tx, mut rx) = mpsc::channel::<Batch>(4);
        let mapping = self.mapping.clone();
        let max_row_bytes = self.settings.max_row_bytes;
        let producer = tokio::task::spawn_blocking(move || produce(&files, &mapping, max_row_bytes, tx));

        let mut conn = self.pool.acquire().await?;
        sqlx::query(
            "CREATE TEMP TABLE IF NOT EXISTS import_stage (
                 row_key text, messages jsonb, tools json, content_hash bytea, category text, turn_count int, prompt_chars int
             ) ON COMMIT DELETE ROWS",
        )
        .execute(&mut *conn)
        .await?;
        let mut kept = 0i64;
        while let Some(batch) = rx.recv().await {
            let stored = if self.halt.is_cancelled() {
                Some(Ended::Halted)
            } else {
                self.store_batch(&mut conn, batch, &mut kept).await?
            };
            if let Some(ended) = stored {
                // Dropping the receiver stops the producer at its next batch.
                drop(rx);
                let _ = producer.await;
                return Ok(ended);
            }
        }
        producer.await.map_err(|e| Error::Internal(e.into()))??;
        Ok(Ended::Completed)
    }

    /// One batch in one transaction; `Some` when this process no longer holds the import (it
    /// was cancelled or taken over), and the batch was not stored.
    async fn store_batch(
        &self,
        conn: &mut PgConnection,
        batch: Batch,
        kept: &mut i64,
    ) -> Result<Option<Ended>> {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        // No wait for the WAL flush at each batch's commit: a crash can lose only the last
        // batches of an import, and an import a crash interrupts is marked failed on restart
        // anyway (its counters and rows commit together, so they never disagree).
        sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *tx).await?;
        let mut inserted = 0u64;
        if batch.rows > 0 {
            let mut copy =
                tx.copy_in_raw(&format!("COPY import_stage ({}) FROM STDIN", copy::COLUMNS)).await?;
            copy.send(batch.data).await?;
            copy.finish().await?;
            inserted = sqlx::query(
                "INSERT INTO dataset_rows (dataset_id, row_key, messages, tools, content_hash, category, turn_count, prompt_chars)
                 SELECT $1, row_key, messages, tools, content_hash, category, turn_count, prompt_chars FROM import_stage
                 ON CONFLICT DO NOTHING",
            )
            .bind(self.id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        let room = (KEPT_REJECTIONS - *kept).max(0) as usize;
        if room > 0 && !batch.rejections.is_empty() {
            let (locations, reasons): (Vec<String>, Vec<String>) =
                batch.rejections.into_iter().take(room).unzip();
            *kept += locations.len() as i64;
            sqlx::query!(
                "INSERT INTO dataset_rejections (dataset_id, location, reason)
                 SELECT $1, l, r FROM UNNEST($2::text[], $3::text[]) AS t(l, r)",
                self.id,
                &locations[..],
                &reasons[..]
            )
            .execute(&mut *tx)
            .await?;
        }
        let still_importing = sqlx::query_scalar!(
            "UPDATE datasets SET rows_imported = rows_imported + $2, rows_duplicate = rows_duplicate + $3,
                 rows_rejected = rows_rejected + $4, bytes_read = $5, progress_at = now()
             WHERE id = $1 AND status = 'importing' AND lease_owner = $6 RETURNING id",
            self.id,
            inserted as i64,
            (batch.rows - inserted) as i64,
            batch.rejected as i64,
            batch.bytes_read as i64,
            self.claim.owner
        )
        .fetch_optional(&mut *tx)
        .await?;
        if still_importing.is_none() {
            tx.rollback().await?;
            return Ok(Some(self.why_not_held().await?));
        }
        tx.commit().await?;
        Ok(None)
    }

    /// Why a write this process made as the import's holder was refused.
    async fn why_not_held(&self) -> Result<Ended> {
        Ok(match store::status(&self.pool, self.id).await? {
            DatasetStatus::Cancelled => Ended::Cancelled,
            _ => Ended::TakenOver,
        })
    }

    async fn finish(&self) -> Result<()> {
        let counts = sqlx::query!(
            "SELECT rows_imported, rows_duplicate, rows_rejected FROM datasets WHERE id = $1",
            self.id
        )
        .fetch_one(&self.pool)
        .await?;
        if counts.rows_imported == 0 {
            let first = sqlx::query!(
                "SELECT location, reason FROM dataset_rejections WHERE dataset_id = $1 ORDER BY id LIMIT 1",
                self.id
            )
            .fetch_optional(&self.pool)
            .await?;
            let why = match (first, counts.rows_rejected, counts.rows_duplicate) {
                (_, 0, 0) => "the file holds no records".to_string(),
                (Some(f), rejected, _) if rejected > 0 => {
                    format!("all {rejected} records were refused (first, {}: {})", f.location, f.reason)
                }
                _ => "every record was refused or a duplicate".to_string(),
            };
            return store::fail(&self.pool, &self.claim, &format!("no row could be imported: {why}")).await;
        }
        let stats = store::compute_stats(&self.pool, self.id).await?;
        if !store::mark_ready(&self.pool, &self.claim, &stats).await? {
            // Cancelled (its rows went with the cancel) or taken over since the last batch.
            return Ok(());
        }
        if let SourceSpec::Upload { upload_id, .. } = &self.source {
            uploads::remove(&self.settings, upload_id);
        }
        tracing::info!(
            dataset = self.id,
            rows = counts.rows_imported,
            duplicates = counts.rows_duplicate,
            rejected = counts.rows_rejected,
            "import finished"
        );
        Ok(())
    }
}

/// Normalized rows as COPY text, the refusals among them, and how far into the source it got.
struct Batch {
    data: Vec<u8>,
    rows: u64,
    rejected: u64,
    rejections: Vec<(String, String)>,
    bytes_read: u64,
}

impl Batch {
    fn new() -> Self {
        Batch {
            data: Vec::with_capacity(BATCH_BYTES + (64 << 10)),
            rows: 0,
            rejected: 0,
            rejections: Vec::new(),
            bytes_read: 0,
        }
    }

    fn full(&self) -> bool {
        self.rows as usize >= BATCH_ROWS
            || self.data.len() >= BATCH_BYTES
            || self.rejected as usize >= BATCH_ROWS
    }
}

/// Reads every file in order and sends batches until done, the receiver goes away, or the
/// source turns out not to be a dataset.
fn produce(
    files: &sources::LocalFiles,
    mapping: &Mapping,
    max_row_bytes: usize,
    tx: mpsc::Sender<Batch>,
) -> Result<()> {
    let mut any_good = false;
    let mut refused_first: Option<(String, String)> = None;
    let mut refused = 0u64;
    let mut done_bytes = 0u64;
    let several = files.files.len() > 1;
    for (i, path) in files.files.iter().enumerate() {
        let mut source = reader::open(path, files.format, max_row_bytes)?;
        let mut batch = Batch::new();
        while let Some(next) = source.next_record() {
            let mut record = next?;
            if several {
                record.location.file = Some(i as u32 + 1);
            }
            match record.body.and_then(|body| normalize(&body, mapping)) {
                Ok(row) => {
                    copy::encode(&row, &mut batch.data);
                    batch.rows += 1;
                    any_good = true;
                }
                Err(reason) => {
                    let location = record.location.to_string();
                    batch.rejected += 1;
                    if batch.rejections.len() < KEPT_REJECTIONS as usize {
                        batch.rejections.push((location.clone(), reason.clone()));
                    }
                    if !any_good {
                        refused += 1;
                        let first = refused_first.get_or_insert((location, reason));
                        if refused >= REFUSED_BEFORE_ANY_GOOD {
                            return Err(Error::invalid(format!(
                                "not a dataset: the first {refused} records were all refused (first, {}: {})",
                                first.0, first.1
                            )));
                        }
                    }
                }
            }
            if batch.full() {
                batch.bytes_read = done_bytes + source.bytes_read();
                if tx.blocking_send(std::mem::replace(&mut batch, Batch::new())).is_err() {
                    return Ok(());
                }
            }
        }
        done_bytes += std::fs::metadata(path).map(|m| m.len()).unwrap_or_else(|_| source.bytes_read());
        batch.bytes_read = done_bytes;
        if tx.blocking_send(batch).is_err() {
            return Ok(());
        }
    }
    Ok(())
}
