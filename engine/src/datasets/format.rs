//! Which format a file is in, judged by its first bytes (and its name where they agree).

use crate::{Error, Result};
use domain::dataset::Format;
use std::{io::Read, path::Path};

/// Reads the start of `path` and names its format, or says why it is not a dataset.
pub fn detect(path: &Path, display_name: &str) -> Result<Format> {
    let mut head = [0u8; 4096];
    let n = read_head(path, &mut head)?;
    let head = &head[..n];
    let lower = display_name.to_ascii_lowercase();
    if head.is_empty() {
        return Err(Error::invalid(format!("not a dataset: `{display_name}` is empty")));
    }
    if head.starts_with(b"PAR1") {
        return Ok(Format::Parquet);
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        if lower.ends_with(".json.gz") {
            return Err(Error::invalid(format!(
                "`{display_name}` is a gzipped JSON file; only gzipped JSON Lines (.jsonl.gz) is read: \
                 decompress it first"
            )));
        }
        return Ok(Format::JsonlGz);
    }
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(&b'[') => Ok(Format::Json),
        Some(&b'{') => Ok(Format::Jsonl),
        _ => Err(Error::invalid(not_a_dataset(display_name, text))),
    }
}

fn read_head(path: &Path, buf: &mut [u8]) -> Result<usize> {
    let mut file = std::fs::File::open(path)
        .map_err(|e| Error::invalid(format!("cannot open {}: {e}", path.display())))?;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) => return Err(Error::invalid(format!("cannot read {}: {e}", path.display()))),
        }
    }
    Ok(filled)
}

fn not_a_dataset(name: &str, head: &[u8]) -> String {
    let expected = "expected JSON Lines (.jsonl, .jsonl.gz), a JSON array of objects (.json) or Parquet";
    let binary = head.iter().take(512).any(|b| *b == 0 || (*b < 0x09))
        || std::str::from_utf8(&head[..head.len().min(512)]).is_err_and(|e| e.error_len().is_some());
    if binary {
        let magic: Vec<String> = head.iter().take(8).map(|b| format!("{b:02X}")).collect();
        format!(
            "not a dataset: `{name}` is a binary file (it starts with bytes {}); {expected}",
            magic.join(" ")
        )
    } else {
        let first_line = String::from_utf8_lossy(head);
        let first_line = first_line.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        let shown: String = first_line.chars().take(60).collect();
        format!("not a dataset: `{name}` is text that is not JSON (its first line is `{shown}`); {expected}")
    }
}
