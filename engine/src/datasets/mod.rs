//! Source datasets: reading JSONL, gzipped JSONL, JSON arrays and Parquet as a stream of
//! records, detecting and applying the schema mapping, and importing the normalized rows into
//! PostgreSQL as a cancellable background job under a lease (`lease`), taken over by another
//! process when the one reading it dies (`jobs`).

pub mod copy;
pub mod detect;
pub mod format;
pub mod hub;
pub mod import;
pub mod jobs;
pub mod lease;
pub mod normalize;
pub mod preview;
pub mod reader;
pub mod sources;
pub mod store;
pub mod uploads;

use std::path::PathBuf;

/// Where dataset files may come from and how big they may be.
#[derive(Clone, Debug)]
pub struct DatasetSettings {
    /// Server-side paths must resolve inside one of these folders.
    pub roots: Vec<PathBuf>,
    /// Where uploads and hub downloads are kept (`uploads/`, `hub/` below it).
    pub files_dir: PathBuf,
    /// Largest accepted upload and hub download, in bytes.
    pub upload_limit: u64,
    /// The Hugging Face hub (or a mirror) to fetch datasets from.
    pub hub_endpoint: url::Url,
    /// A record larger than this is refused (and the rest of the file still imports).
    pub max_row_bytes: usize,
    /// How imports are leased and taken over.
    pub jobs: jobs::ImportJobs,
}

impl Default for DatasetSettings {
    fn default() -> Self {
        DatasetSettings {
            roots: vec![PathBuf::from(".data/datasets"), PathBuf::from("demo")],
            files_dir: PathBuf::from(".data"),
            upload_limit: 10 << 30,
            hub_endpoint: url::Url::parse("https://huggingface.co").expect("valid URL"),
            max_row_bytes: DEFAULT_MAX_ROW_BYTES,
            jobs: jobs::ImportJobs::default(),
        }
    }
}

/// 16 MiB: far above any real conversation, low enough that one bad line cannot exhaust memory.
pub const DEFAULT_MAX_ROW_BYTES: usize = 16 << 20;

/// How many rejections are kept per dataset (all are counted).
pub const KEPT_REJECTIONS: i64 = 1000;
