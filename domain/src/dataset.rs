//! Source datasets: how a file's records map to conversations, and what the UI shows of them.

use serde::{Deserialize, Serialize};
use std::fmt;
use time::OffsetDateTime;

/// Where an import stands. Only `Ready` datasets can feed a run; `Failed` and `Cancelled` keep
/// their record and reason but none of their rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "dataset_status", rename_all = "snake_case"))]
#[serde(rename_all = "snake_case")]
pub enum DatasetStatus {
    Importing,
    Ready,
    Failed,
    Cancelled,
}

impl DatasetStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DatasetStatus::Importing => "importing",
            DatasetStatus::Ready => "ready",
            DatasetStatus::Failed => "failed",
            DatasetStatus::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for DatasetStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The file formats an import reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Format {
    #[serde(rename = "jsonl")]
    Jsonl,
    #[serde(rename = "jsonl.gz")]
    JsonlGz,
    #[serde(rename = "json")]
    Json,
    #[serde(rename = "parquet")]
    Parquet,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Jsonl, Format::JsonlGz, Format::Json, Format::Parquet];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::JsonlGz => "jsonl.gz",
            Format::Json => "json",
            Format::Parquet => "parquet",
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the records of a file hold a conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schema {
    /// `conversations: [{from, value}]` (human/user, gpt/assistant/..., system).
    Sharegpt,
    /// `messages: [{role, content}]`.
    Openai,
    /// `instruction`, optional `input`, optional `output`.
    Alpaca,
    /// One text column holding the user's prompt.
    Prompt,
}

impl Schema {
    pub const ALL: [Schema; 4] = [Schema::Sharegpt, Schema::Openai, Schema::Alpaca, Schema::Prompt];

    pub fn as_str(self) -> &'static str {
        match self {
            Schema::Sharegpt => "sharegpt",
            Schema::Openai => "openai",
            Schema::Alpaca => "alpaca",
            Schema::Prompt => "prompt",
        }
    }

    pub fn parse(s: &str) -> Option<Schema> {
        Schema::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// The column the schema reads its conversation from, unless the user names another.
    pub fn default_column(self) -> &'static str {
        match self {
            Schema::Sharegpt => "conversations",
            Schema::Openai => "messages",
            Schema::Alpaca => "instruction",
            Schema::Prompt => "prompt",
        }
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which columns become the conversation, its stable id and its category. Stored with the
/// dataset so its provenance is on record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub schema: Schema,
    /// The column holding the conversation (or the prompt, or the instruction for Alpaca).
    pub column: String,
    /// The column whose value becomes the row key; without one the content hash is the key.
    #[serde(default)]
    pub id_column: Option<String>,
    /// The column whose value becomes the row's category (open-perfectblend's `source`).
    #[serde(default)]
    pub category_column: Option<String>,
    /// The column listing the functions a row offers (`tools`), as a list or a JSON string.
    #[serde(default)]
    pub tools_column: Option<String>,
}

impl Mapping {
    pub fn new(schema: Schema) -> Self {
        Mapping {
            schema,
            column: schema.default_column().to_string(),
            id_column: None,
            category_column: None,
            tools_column: None,
        }
    }
}

/// Where a dataset's file(s) came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceSpec {
    /// A file on the server, under one of the configured dataset roots.
    Path { path: String },
    /// A file the browser uploaded (its id names the stored upload).
    Upload { upload_id: String, filename: String },
    /// A Hugging Face dataset, read from the hub's parquet conversion of a config and split.
    Hub {
        repo: String,
        config: String,
        split: String,
        /// Sent with the request only; [`SourceSpec::without_secrets`] drops it before storing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
    },
}

impl SourceSpec {
    /// The source as it may be stored and shown: without an access token.
    pub fn without_secrets(&self) -> SourceSpec {
        match self {
            SourceSpec::Hub { repo, config, split, .. } => SourceSpec::Hub {
                repo: repo.clone(),
                config: config.clone(),
                split: split.clone(),
                token: None,
            },
            other => other.clone(),
        }
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            SourceSpec::Path { path } => format!("server file {path}"),
            SourceSpec::Upload { filename, .. } => format!("upload {filename}"),
            SourceSpec::Hub { repo, config, split, .. } => format!("hub {repo} ({config}/{split})"),
        }
    }
}

/// What a file looks like before it is imported: detected format and mapping, columns, and a
/// few normalized rows (or why they failed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Preview {
    pub format: Format,
    pub columns: Vec<String>,
    /// The mapping detected from the columns; `None` when nothing matched (the user picks one).
    pub detected: Option<Mapping>,
    /// The mapping the sample below was normalized with.
    pub mapping: Option<Mapping>,
    pub sample: Vec<PreviewRow>,
    pub bytes_total: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreviewRow {
    pub location: String,
    /// The normalized conversation, or why the row would be refused.
    pub result: Result<Vec<Message>, String>,
    pub row_key: Option<String>,
    pub category: Option<String>,
}

/// One normalized message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
    /// The calls an assistant message makes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<crate::conversation::ToolCall>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// A line of the datasets list (and the head of the dataset page).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetSummary {
    pub id: i64,
    pub name: String,
    pub status: DatasetStatus,
    pub source: SourceSpec,
    pub format: String,
    pub mapping: Mapping,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
    pub rows_imported: i64,
    pub rows_duplicate: i64,
    pub rows_rejected: i64,
    pub bytes_read: i64,
    pub bytes_total: Option<i64>,
    pub error: Option<String>,
    /// Rows read per second since the import started (to its end, once finished).
    pub rows_per_s: f64,
}

/// Counts computed when an import finishes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DatasetStats {
    /// (category or "" for none, rows), largest first.
    pub categories: Vec<(String, i64)>,
    pub turns: Vec<Bucket>,
    pub prompt_chars: Vec<Bucket>,
}

/// A histogram bar: rows with `low <= value < high` (`high` `None`: no upper bound).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub low: i64,
    pub high: Option<i64>,
    pub rows: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub location: String,
    pub reason: String,
}

/// Everything the dataset page shows above the row browser.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetDetail {
    pub summary: DatasetSummary,
    pub stats: Option<DatasetStats>,
    /// The first rejections (up to 1,000 are kept per dataset).
    pub rejections: Vec<Rejection>,
    /// Rejections grouped by reason kind, most frequent first (over the kept ones).
    pub rejection_reasons: Vec<(String, i64)>,
}

/// One row in the row browser.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetRow {
    pub id: i64,
    pub row_key: String,
    pub category: Option<String>,
    pub turn_count: i32,
    pub prompt_chars: i32,
    pub messages: Vec<Message>,
}

/// A page of rows, with the key to ask for the next one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowPage {
    pub rows: Vec<DatasetRow>,
    pub next_after: Option<i64>,
}

/// A stored browser upload, named by its id in a [`SourceSpec::Upload`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Uploaded {
    pub upload_id: String,
    pub filename: String,
    pub bytes: u64,
}
