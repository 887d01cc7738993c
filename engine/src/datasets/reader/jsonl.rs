//! JSON Lines, plain or gzipped: one object per line, blank lines skipped.

use super::{oversize, parse_object, Location, Record, RecordSource, Unit};
use crate::{Error, Result};
use std::{
    fs::File,
    io::{BufRead, BufReader, Read},
};

pub struct JsonlReader<R> {
    input: R,
    line: u64,
    max_row_bytes: usize,
    buf: Vec<u8>,
    /// Bytes read from the file (compressed bytes for gzip).
    counter: ByteCounter,
}

/// Counts bytes pulled from the file itself, under any decompression.
#[derive(Clone, Default)]
pub struct ByteCounter(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl ByteCounter {
    fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
    fn add(&self, n: usize) {
        self.0.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

pub struct Counted<R> {
    inner: R,
    counter: ByteCounter,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.add(n);
        Ok(n)
    }
}

impl<R: Read> JsonlReader<BufReader<Counted<R>>> {
    pub fn new(input: R, max_row_bytes: usize) -> Self {
        let counter = ByteCounter::default();
        let counted = Counted { inner: input, counter: counter.clone() };
        JsonlReader {
            input: BufReader::with_capacity(1 << 20, counted),
            line: 0,
            max_row_bytes,
            buf: Vec::new(),
            counter,
        }
    }
}

impl JsonlReader<BufReader<flate2::read::MultiGzDecoder<Counted<BufReader<File>>>>> {
    pub fn gzip(file: File, max_row_bytes: usize) -> Self {
        let counter = ByteCounter::default();
        let counted = Counted { inner: BufReader::with_capacity(1 << 20, file), counter: counter.clone() };
        JsonlReader {
            input: BufReader::with_capacity(1 << 20, flate2::read::MultiGzDecoder::new(counted)),
            line: 0,
            max_row_bytes,
            buf: Vec::new(),
            counter,
        }
    }
}

enum Line {
    End,
    Fits,
    TooLong,
}

impl<R: BufRead> JsonlReader<R> {
    /// Reads the next line into `buf` without ever holding more than `max_row_bytes` of it.
    fn read_line(&mut self) -> std::io::Result<Line> {
        self.buf.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let chunk = self.input.fill_buf()?;
            if chunk.is_empty() {
                return Ok(if !any {
                    Line::End
                } else if too_long {
                    Line::TooLong
                } else {
                    Line::Fits
                });
            }
            any = true;
            let (take, done) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            if !too_long {
                if self.buf.len() + take > self.max_row_bytes {
                    too_long = true;
                    self.buf.clear();
                } else {
                    self.buf.extend_from_slice(&chunk[..take]);
                }
            }
            self.input.consume(if done { take + 1 } else { take });
            if done {
                return Ok(if too_long { Line::TooLong } else { Line::Fits });
            }
        }
    }
}

impl<R: BufRead + Send> RecordSource for JsonlReader<R> {
    fn next_record(&mut self) -> Option<Result<Record>> {
        loop {
            let line = match self.read_line() {
                Ok(line) => line,
                Err(e) => {
                    return Some(Err(Error::invalid(format!(
                        "reading stopped after line {}: {e}{}",
                        self.line,
                        if e.kind() == std::io::ErrorKind::InvalidInput {
                            " (is the gzip file damaged?)"
                        } else {
                            ""
                        }
                    ))))
                }
            };
            self.line += 1;
            let location = Location { file: None, unit: Unit::Line, number: self.line };
            match line {
                Line::End => return None,
                Line::TooLong => {
                    return Some(Ok(Record { location, body: Err(oversize(self.max_row_bytes)) }))
                }
                Line::Fits => {
                    let trimmed = self.buf.trim_ascii();
                    if trimmed.is_empty() {
                        continue;
                    }
                    return Some(Ok(Record { location, body: parse_object(trimmed) }));
                }
            }
        }
    }

    fn bytes_read(&self) -> u64 {
        self.counter.get()
    }
}
