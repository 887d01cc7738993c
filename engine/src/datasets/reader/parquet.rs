//! Parquet, read a batch of rows at a time through Arrow and turned into JSON objects.

use super::{oversize, parse_object, Location, Record, RecordSource, Unit};
use crate::{Error, Result};
use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use std::{collections::VecDeque, fs::File, path::Path};

/// Rows per Arrow batch: large enough to amortize decoding, small enough for bounded memory.
const BATCH_ROWS: usize = 1024;

pub struct ParquetReader {
    batches: ParquetRecordBatchReader,
    pending: VecDeque<Vec<u8>>,
    row: u64,
    total_rows: u64,
    file_bytes: u64,
    max_row_bytes: usize,
}

impl ParquetReader {
    pub fn open(file: File, path: &Path, max_row_bytes: usize) -> Result<Self> {
        let file_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
            Error::invalid(format!("not a dataset: {} is not a readable Parquet file ({e})", path.display()))
        })?;
        let total_rows = builder.metadata().file_metadata().num_rows().max(0) as u64;
        let batches = builder
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| Error::invalid(format!("cannot read the Parquet file: {e}")))?;
        Ok(ParquetReader { batches, pending: VecDeque::new(), row: 0, total_rows, file_bytes, max_row_bytes })
    }

    fn refill(&mut self) -> Option<Result<()>> {
        let batch = match self.batches.next()? {
            Ok(batch) => batch,
            Err(e) => {
                return Some(Err(Error::invalid(format!(
                    "reading the Parquet file failed after row {}: {e}",
                    self.row
                ))))
            }
        };
        Some(to_json_lines(&batch).map(|lines| self.pending.extend(lines)))
    }
}

/// Each row of the batch as one JSON object (nested lists and structs included).
fn to_json_lines(batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(batch.get_array_memory_size());
    {
        let mut writer = arrow_json::LineDelimitedWriter::new(&mut out);
        writer
            .write(batch)
            .and_then(|_| writer.finish())
            .map_err(|e| Error::invalid(format!("a Parquet column cannot be read as JSON: {e}")))?;
    }
    Ok(out.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect())
}

impl RecordSource for ParquetReader {
    fn next_record(&mut self) -> Option<Result<Record>> {
        while self.pending.is_empty() {
            if let Err(e) = self.refill()? {
                return Some(Err(e));
            }
        }
        let line = self.pending.pop_front()?;
        self.row += 1;
        let location = Location { file: None, unit: Unit::Row, number: self.row };
        let body = if line.len() > self.max_row_bytes {
            Err(oversize(self.max_row_bytes))
        } else {
            parse_object(&line)
        };
        Some(Ok(Record { location, body }))
    }

    fn bytes_read(&self) -> u64 {
        if self.total_rows == 0 {
            return 0;
        }
        (self.file_bytes as f64 * (self.row as f64 / self.total_rows as f64)) as u64
    }
}
