//! A look at a file before importing it: its columns, the detected mapping and a few rows as
//! they would be stored.

use super::{detect, normalize::normalize, reader, sources::LocalFiles};
use crate::{Error, Result};
use domain::dataset::{Mapping, Message, Preview, PreviewRow};

/// Records read to find the columns.
const SAMPLE_RECORDS: usize = 50;
/// Rows shown in the preview.
const SHOWN_ROWS: usize = 5;

/// Column names in order of first appearance over the first records, and those records.
pub fn sample(files: &LocalFiles, max_row_bytes: usize) -> Result<(Vec<String>, Vec<reader::Record>)> {
    let first = files.files.first().ok_or_else(|| Error::invalid("the source has no files"))?;
    let mut source = reader::open(first, files.format, max_row_bytes)?;
    let mut records = Vec::new();
    let mut columns: Vec<String> = Vec::new();
    while records.len() < SAMPLE_RECORDS {
        match source.next_record() {
            None => break,
            Some(Err(e)) if records.is_empty() => return Err(e),
            Some(Err(_)) => break,
            Some(Ok(record)) => {
                if let Ok(map) = &record.body {
                    for key in map.keys() {
                        if !columns.contains(key) {
                            columns.push(key.clone());
                        }
                    }
                }
                records.push(record);
            }
        }
    }
    if records.is_empty() {
        return Err(Error::invalid("not a dataset: the file holds no records"));
    }
    if records.iter().all(|r| r.body.is_err()) {
        let first = &records[0];
        return Err(Error::invalid(format!(
            "not a dataset: none of the first {} records can be read ({}: {})",
            records.len(),
            first.location,
            first.body.as_ref().err().map(String::as_str).unwrap_or("")
        )));
    }
    Ok((columns, records))
}

/// The mapping to import with: the user's (checked against the columns) or the detected one.
pub fn choose_mapping(columns: &[String], requested: Option<Mapping>) -> Result<Mapping> {
    let mapping = match requested {
        Some(m) => m,
        None => detect::mapping_for(columns).ok_or_else(|| {
            Error::invalid(format!(
                "no known schema fits the columns ({}); choose a schema and name the column that holds the conversation or prompt",
                columns.join(", ")
            ))
        })?,
    };
    detect::check(&mapping, columns).map_err(Error::Invalid)?;
    Ok(mapping)
}

pub fn preview(files: &LocalFiles, requested: Option<Mapping>, max_row_bytes: usize) -> Result<Preview> {
    let (columns, records) = sample(files, max_row_bytes)?;
    let detected = detect::mapping_for(&columns);
    let mapping = match &requested {
        Some(m) => {
            detect::check(m, &columns).map_err(Error::Invalid)?;
            Some(m.clone())
        }
        None => detected.clone(),
    };
    let rows = records.iter().take(SHOWN_ROWS).map(|record| preview_row(record, mapping.as_ref())).collect();
    Ok(Preview {
        format: files.format,
        columns,
        detected,
        mapping,
        sample: rows,
        bytes_total: Some(files.bytes_total),
    })
}

fn preview_row(record: &reader::Record, mapping: Option<&Mapping>) -> PreviewRow {
    let location = record.location.to_string();
    let body = match &record.body {
        Err(reason) => {
            return PreviewRow { location, result: Err(reason.clone()), row_key: None, category: None }
        }
        Ok(map) => map,
    };
    let Some(mapping) = mapping else {
        return PreviewRow {
            location,
            result: Err("choose a schema to see this row".into()),
            row_key: None,
            category: None,
        };
    };
    match normalize(body, mapping) {
        Ok(n) => PreviewRow {
            location,
            result: Ok(n
                .messages
                .into_iter()
                .map(|m| Message {
                    role: m.role.to_string(),
                    content: m.content,
                    tool_calls: m.tool_calls,
                    tool_call_id: m.tool_call_id,
                })
                .collect()),
            row_key: Some(n.row_key),
            category: n.category,
        },
        Err(reason) => PreviewRow { location, result: Err(reason), row_key: None, category: None },
    }
}

/// Fetches the source's first file (downloading a hub dataset's first shard) and previews it.
pub async fn preview_source(
    settings: &super::DatasetSettings,
    http: &reqwest::Client,
    source: &domain::dataset::SourceSpec,
    mapping: Option<Mapping>,
) -> Result<Preview> {
    let files = super::sources::fetch(settings, http, source, true).await?;
    let max_row_bytes = settings.max_row_bytes;
    tokio::task::spawn_blocking(move || preview(&files, mapping, max_row_bytes))
        .await
        .map_err(|e| Error::Internal(e.into()))?
}
