//! Streaming record readers: each yields one JSON object per record with where it was found,
//! holding at most one record (or one Parquet batch) in memory.

mod json_array;
mod jsonl;
mod parquet;

use crate::{Error, Result};
use domain::dataset::Format;
use serde_json::{Map, Value};
use std::{fmt, fs::File, io::BufReader, path::Path};

pub use json_array::JsonArrayReader;
pub use jsonl::JsonlReader;
pub use parquet::ParquetReader;

/// Where a record was found: its line (JSONL), item (JSON array) or row (Parquet) number,
/// 1-based, and the file's number when a dataset has several files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: Option<u32>,
    pub unit: Unit,
    pub number: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Line,
    Item,
    Row,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = self.file {
            write!(f, "file {file}, ")?;
        }
        let unit = match self.unit {
            Unit::Line => "line",
            Unit::Item => "item",
            Unit::Row => "row",
        };
        write!(f, "{unit} {}", self.number)
    }
}

/// One record, or why it could not be read as a JSON object.
#[derive(Debug)]
pub struct Record {
    pub location: Location,
    pub body: Result<Map<String, Value>, String>,
}

/// Something that yields records until the file ends. `Err` is fatal for the whole file (an
/// I/O failure, or a file that is not a dataset); a bad record is an `Ok(Record)` with an error body.
pub trait RecordSource: Send {
    fn next_record(&mut self) -> Option<Result<Record>>;
    /// Bytes of the file consumed so far (estimated for Parquet).
    fn bytes_read(&self) -> u64;
}

/// Opens `path` as `format`.
pub fn open(path: &Path, format: Format, max_row_bytes: usize) -> Result<Box<dyn RecordSource>> {
    let file =
        File::open(path).map_err(|e| Error::invalid(format!("cannot open {}: {e}", path.display())))?;
    Ok(match format {
        Format::Jsonl => Box::new(JsonlReader::new(file, max_row_bytes)),
        Format::JsonlGz => Box::new(JsonlReader::gzip(file, max_row_bytes)),
        Format::Json => {
            Box::new(JsonArrayReader::new(BufReader::with_capacity(1 << 20, file), max_row_bytes)?)
        }
        Format::Parquet => Box::new(ParquetReader::open(file, path, max_row_bytes)?),
    })
}

/// Parses one record's bytes: UTF-8, JSON, an object.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("invalid UTF-8 at byte {} of the record", e.valid_up_to()))?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("expected a JSON object, found {}", kind_of(&other))),
        Err(e) => Err(format!("malformed JSON: {e}")),
    }
}

/// "a string", "an array", ... for messages.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn oversize(limit: usize) -> String {
    format!("the record is larger than the limit of {} per row", domain::units::bytes(limit as u64))
}
