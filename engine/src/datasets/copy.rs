//! PostgreSQL COPY text format for normalized rows (`row_key, messages, tools, content_hash,
//! category, turn_count, prompt_chars`).

use super::normalize::Normalized;
use std::io::Write;

/// The columns, in the order `encode` writes them.
pub const COLUMNS: &str = "row_key, messages, tools, content_hash, category, turn_count, prompt_chars";

pub fn encode(row: &Normalized, out: &mut Vec<u8>) {
    escape(row.row_key.as_bytes(), out);
    out.push(b'\t');
    escape(row.messages_json.as_bytes(), out);
    out.push(b'\t');
    match &row.tools_json {
        Some(tools) => escape(tools.as_bytes(), out),
        None => out.extend_from_slice(b"\\N"),
    }
    out.extend_from_slice(b"\t\\\\x");
    let start = out.len();
    out.resize(start + 64, 0);
    hex::encode_to_slice(row.content_hash, &mut out[start..]).expect("64 hex digits fit");
    out.push(b'\t');
    match &row.category {
        Some(c) => escape(c.as_bytes(), out),
        None => out.extend_from_slice(b"\\N"),
    }
    let _ = writeln!(out, "\t{}\t{}", row.turn_count, row.prompt_chars);
}

/// Backslash, newline, carriage return and tab are the only bytes COPY text needs escaped.
fn escape(text: &[u8], out: &mut Vec<u8>) {
    let mut rest = text;
    while let Some(i) = rest.iter().position(|b| matches!(b, b'\\' | b'\n' | b'\r' | b'\t')) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(match rest[i] {
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            _ => b"\\t",
        });
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
}

#[cfg(test)]
mod tests {
    #[test]
    fn special_bytes_are_escaped() {
        let mut out = Vec::new();
        super::escape(b"a\\b\tc\nd", &mut out);
        assert_eq!(out, b"a\\\\b\\tc\\nd");
    }
}
