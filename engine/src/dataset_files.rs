//! Writing dataset files in every supported format (feature `test-support`): used by the
//! engine's tests and the import benchmark.
#![allow(clippy::unwrap_used)] // Test fixtures may unwrap: a failure there fails the test that asked for them.

use arrow_json::reader::{infer_json_schema_from_seekable, ReaderBuilder};
use parquet::arrow::ArrowWriter;
use serde_json::Value;
use std::{
    fs::File,
    io::{BufReader, BufWriter, Seek, Write},
    path::Path,
    sync::Arc,
};

pub fn write_jsonl(path: &Path, records: impl IntoIterator<Item = Value>) -> std::io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    for record in records {
        serde_json::to_writer(&mut out, &record)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

pub fn write_jsonl_gz(path: &Path, records: impl IntoIterator<Item = Value>) -> std::io::Result<()> {
    let mut out =
        flate2::write::GzEncoder::new(BufWriter::new(File::create(path)?), flate2::Compression::fast());
    for record in records {
        serde_json::to_writer(&mut out, &record)?;
        out.write_all(b"\n")?;
    }
    out.finish()?.flush()
}

pub fn write_json_array(path: &Path, records: impl IntoIterator<Item = Value>) -> std::io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    out.write_all(b"[\n")?;
    for (i, record) in records.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n")?;
        }
        serde_json::to_writer_pretty(&mut out, &record)?;
    }
    out.write_all(b"\n]\n")?;
    out.flush()
}

/// Converts a JSON Lines file to Parquet (schema inferred from the first 1,000 lines), streaming.
pub fn jsonl_to_parquet(jsonl: &Path, parquet_path: &Path) -> anyhow::Result<()> {
    let mut input = BufReader::new(File::open(jsonl)?);
    let (schema, _) = infer_json_schema_from_seekable(&mut input, Some(1000))?;
    input.rewind()?;
    let schema = Arc::new(schema);
    let reader = ReaderBuilder::new(schema.clone()).with_batch_size(4096).build(input)?;
    let mut writer = ArrowWriter::try_new(File::create(parquet_path)?, schema, None)?;
    for batch in reader {
        writer.write(&batch?)?;
    }
    writer.close()?;
    Ok(())
}

pub fn write_parquet(path: &Path, records: impl IntoIterator<Item = Value>) -> anyhow::Result<()> {
    let staging = path.with_extension("staging.jsonl");
    write_jsonl(&staging, records)?;
    let result = jsonl_to_parquet(&staging, path);
    let _ = std::fs::remove_file(&staging);
    result
}
