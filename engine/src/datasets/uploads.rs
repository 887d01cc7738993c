//! Browser uploads, streamed to disk under `<files_dir>/uploads/<id>/` within the size limit.

use super::DatasetSettings;
use crate::{Error, Result};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::path::PathBuf;
use tokio::io::AsyncWriteExt;

pub use domain::dataset::Uploaded;

fn uploads_dir(settings: &DatasetSettings) -> PathBuf {
    settings.files_dir.join("uploads")
}

/// Writes `body` to a new upload; over the limit, the partial file is removed and the upload refused.
pub async fn save<S, E>(settings: &DatasetSettings, filename: &str, mut body: S) -> Result<Uploaded>
where
    S: Stream<Item = std::result::Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let filename = sanitize(filename);
    let upload_id = uuid::Uuid::new_v4().to_string();
    let dir = uploads_dir(settings).join(&upload_id);
    tokio::fs::create_dir_all(&dir).await.map_err(|e| internal("creating the upload folder", e))?;
    let path = dir.join(&filename);
    let outcome = async {
        let mut file = tokio::fs::File::create(&path).await.map_err(|e| internal("creating the upload", e))?;
        let mut bytes = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| Error::invalid(format!("the upload was interrupted: {e}")))?;
            bytes += chunk.len() as u64;
            if bytes > settings.upload_limit {
                return Err(Error::invalid(format!(
                    "the file is larger than the upload limit of {} (DS_UPLOAD_LIMIT); put it under a dataset folder on the server and import it by path",
                    domain::units::bytes(settings.upload_limit)
                )));
            }
            file.write_all(&chunk).await.map_err(|e| internal("writing the upload", e))?;
        }
        file.flush().await.map_err(|e| internal("writing the upload", e))?;
        Ok::<u64, Error>(bytes)
    }
    .await;
    match outcome {
        Ok(bytes) => Ok(Uploaded { upload_id, filename, bytes }),
        Err(e) => {
            let _ = tokio::fs::remove_dir_all(&dir).await;
            Err(e)
        }
    }
}

/// The stored file of an upload, and its original name.
pub fn resolve(settings: &DatasetSettings, upload_id: &str) -> Result<(PathBuf, String)> {
    let id = uuid::Uuid::parse_str(upload_id).map_err(|_| Error::invalid("that upload id is not valid"))?;
    let dir = uploads_dir(settings).join(id.to_string());
    let entry = std::fs::read_dir(&dir)
        .ok()
        .and_then(|mut entries| entries.next())
        .and_then(|e| e.ok())
        .ok_or_else(|| Error::invalid("that upload is gone; upload the file again"))?;
    Ok((entry.path(), entry.file_name().to_string_lossy().into_owned()))
}

/// Removes an upload once its dataset is imported.
pub fn remove(settings: &DatasetSettings, upload_id: &str) {
    if let Ok(id) = uuid::Uuid::parse_str(upload_id) {
        let _ = std::fs::remove_dir_all(uploads_dir(settings).join(id.to_string()));
    }
}

/// Only the last path segment, with characters other than letters, digits, `.`, `-`, `_` replaced.
fn sanitize(filename: &str) -> String {
    let last = filename.rsplit(['/', '\\']).next().unwrap_or("");
    let clean: String = last
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect();
    let clean = clean.trim_start_matches('.').to_string();
    if clean.is_empty() {
        "upload".into()
    } else {
        clean
    }
}

fn internal(what: &str, e: std::io::Error) -> Error {
    Error::Internal(anyhow::anyhow!("{what}: {e}"))
}
