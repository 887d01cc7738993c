//! A JSON array of objects, read one element at a time.
//!
//! Hand-rolled rather than serde's `SeqAccess`: scanning element boundaries ourselves lets one
//! over-size or malformed element be refused while the rest of the array still imports, and
//! keeps memory to one element whatever the file size.

use super::{oversize, parse_object, Location, Record, RecordSource, Unit};
use crate::{Error, Result};
use std::io::BufRead;

pub struct JsonArrayReader<R> {
    input: R,
    item: u64,
    max_row_bytes: usize,
    buf: Vec<u8>,
    consumed: u64,
    finished: bool,
}

impl<R: BufRead + Send> JsonArrayReader<R> {
    /// Checks that the input opens a JSON array.
    pub fn new(input: R, max_row_bytes: usize) -> Result<Self> {
        let mut reader =
            JsonArrayReader { input, item: 0, max_row_bytes, buf: Vec::new(), consumed: 0, finished: false };
        match reader.skip_whitespace().map_err(io_error)? {
            Some(b'[') => {
                reader.bump();
                Ok(reader)
            }
            Some(other) => Err(Error::invalid(format!(
                "not a dataset: a .json dataset must be an array of objects (`[{{...}}, ...]`), but this file starts with `{}`",
                other.escape_ascii()
            ))),
            None => Err(Error::invalid("not a dataset: the file is empty")),
        }
    }

    fn peek(&mut self) -> std::io::Result<Option<u8>> {
        Ok(self.input.fill_buf()?.first().copied())
    }

    fn bump(&mut self) {
        self.input.consume(1);
        self.consumed += 1;
    }

    fn skip_whitespace(&mut self) -> std::io::Result<Option<u8>> {
        loop {
            let chunk = self.input.fill_buf()?;
            if chunk.is_empty() {
                return Ok(None);
            }
            // A UTF-8 byte order mark before the array is tolerated.
            let skip = chunk
                .iter()
                .position(|b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0xEF | 0xBB | 0xBF))
                .unwrap_or(chunk.len());
            let found = chunk.get(skip).copied();
            self.input.consume(skip);
            self.consumed += skip as u64;
            if found.is_some() {
                return Ok(found);
            }
        }
    }

    /// Copies one element into `buf` (unless it outgrows the limit); returns whether it fit.
    fn scan_element(&mut self) -> std::io::Result<std::result::Result<bool, &'static str>> {
        self.buf.clear();
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut fits = true;
        loop {
            let chunk = self.input.fill_buf()?;
            if chunk.is_empty() {
                return Ok(Err("the file ends in the middle of this item"));
            }
            let mut end = None;
            for (i, &b) in chunk.iter().enumerate() {
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_string = false;
                    }
                    continue;
                }
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth > 0 => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    b',' | b']' if depth == 0 => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let take = end.unwrap_or(chunk.len());
            if fits {
                if self.buf.len() + take > self.max_row_bytes {
                    fits = false;
                    self.buf = Vec::new();
                } else {
                    self.buf.extend_from_slice(&chunk[..take]);
                }
            }
            self.input.consume(take);
            self.consumed += take as u64;
            if end.is_some() {
                return Ok(Ok(fits));
            }
        }
    }
}

fn io_error(e: std::io::Error) -> Error {
    Error::invalid(format!("reading the file failed: {e}"))
}

impl<R: BufRead + Send> RecordSource for JsonArrayReader<R> {
    fn next_record(&mut self) -> Option<Result<Record>> {
        if self.finished {
            return None;
        }
        let next = match self.skip_whitespace() {
            Ok(next) => next,
            Err(e) => return Some(Err(io_error(e))),
        };
        match next {
            None => {
                self.finished = true;
                return Some(Err(Error::invalid(format!(
                    "the file ends after item {} without closing the array (`]`); is it truncated?",
                    self.item
                ))));
            }
            Some(b']') => {
                self.finished = true;
                return None;
            }
            Some(b',') if self.item > 0 => {
                self.bump();
                return self.next_record();
            }
            Some(_) => {}
        }
        self.item += 1;
        let location = Location { file: None, unit: Unit::Item, number: self.item };
        let body = match self.scan_element() {
            Err(e) => return Some(Err(io_error(e))),
            Ok(Err(reason)) => {
                self.finished = true;
                Err(reason.to_string())
            }
            Ok(Ok(false)) => Err(oversize(self.max_row_bytes)),
            Ok(Ok(true)) => parse_object(&self.buf),
        };
        // A stray character after an element (`{...} x`) would otherwise loop; step over it.
        if let Ok(Some(b)) = self.peek() {
            if !matches!(b, b',' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                self.bump();
            }
        }
        Some(Ok(Record { location, body }))
    }

    fn bytes_read(&self) -> u64 {
        self.consumed
    }
}
