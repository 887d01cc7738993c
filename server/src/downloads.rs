//! `GET /api/exports/{id}/files/{name}`: one file of a completed folder export, streamed from
//! disk in bounded memory. Guarded like the `exports` server functions (engineers and admins).
//! Only the files the export's manifest lists (and the manifest itself) are served, so no name
//! can reach outside the export's folder.

use crate::state::AppState;
use axum::{
    body::Body,
    extract::{Path, State},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use domain::export::{Destination, ExportSpec, ExportStatus};
use engine::export::manifest::{self, Manifest};
use tokio_util::io::ReaderStream;

pub const PATH: &str = "/api/exports/{id}/files/{name}";

/// Read size per chunk of the stream.
const CHUNK: usize = 64 << 10;

/// The route, outside the page timeout: a large file takes as long as the network needs.
pub fn routes() -> Router<AppState> {
    Router::new().route(PATH, get(download))
}

fn refuse(status: StatusCode, message: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message).into_response()
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("jsonl") => "application/x-ndjson",
        Some("json") => "application/json",
        Some("parquet") => "application/vnd.apache.parquet",
        _ => "application/octet-stream",
    }
}

pub async fn download(State(state): State<AppState>, Path((id, name)): Path<(i64, String)>) -> Response {
    let record = match engine::export::store::get(&state.services.pool, id).await {
        Ok(record) => record,
        Err(engine::Error::NotFound(_)) => {
            return refuse(StatusCode::NOT_FOUND, format!("there is no export {id}"))
        }
        Err(e) => {
            tracing::error!(export = id, error = %e, "looking up an export for a download failed");
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database is not answering; try again shortly".into(),
            );
        }
    };
    if record.status != ExportStatus::Completed {
        return refuse(
            StatusCode::NOT_FOUND,
            format!("export {id} is {}: only a completed export's files can be downloaded", record.status),
        );
    }
    let spec: Option<ExportSpec> = domain::stored::from_stored(record.spec).ok();
    if let Some(Destination::S3 { .. }) = spec.map(|s| s.destination) {
        return refuse(
            StatusCode::NOT_FOUND,
            format!(
                "export {id} was written to S3 ({}); download it from the bucket with your S3 tools",
                record.location.as_deref().unwrap_or("the bucket")
            ),
        );
    }
    let files: Vec<String> = match record.manifest.map(serde_json::from_value::<Manifest>) {
        Some(Ok(m)) => m.files.into_iter().map(|f| f.name).collect(),
        _ => {
            tracing::error!(export = id, "a completed export has no readable manifest");
            return refuse(StatusCode::NOT_FOUND, format!("export {id} has no readable manifest"));
        }
    };
    let listed = files.contains(&name) || name == manifest::FILE_NAME;
    // Manifest names are plain file names; the checks on separators guard against a manifest
    // edited by hand.
    if !listed || name.contains(['/', '\\']) || name.starts_with('.') {
        return refuse(
            StatusCode::NOT_FOUND,
            format!(
                "export {id} has no file named {name:?}; its files are {}, {}",
                files.join(", "),
                manifest::FILE_NAME
            ),
        );
    }
    let Some(folder) = record.location else {
        return refuse(StatusCode::NOT_FOUND, format!("export {id} has no location on the server"));
    };
    let path = std::path::Path::new(&folder).join(&name);
    let file = match tokio::fs::File::open(&path).await {
        Ok(file) => file,
        Err(e) => {
            tracing::warn!(export = id, path = %path.display(), error = %e, "an export's file cannot be opened");
            return refuse(
                StatusCode::NOT_FOUND,
                format!("{name} of export {id} is no longer on the server (it was moved or deleted from {folder})"),
            );
        }
    };
    let length = match file.metadata().await {
        Ok(meta) => meta.len(),
        Err(e) => {
            tracing::error!(export = id, path = %path.display(), error = %e, "reading an export file's size failed");
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the file cannot be read; see the server log".into(),
            );
        }
    };
    let attachment = format!("attachment; filename=\"export-{id}-{name}\"");
    (
        [
            (header::CONTENT_TYPE, content_type(&name).to_string()),
            (header::CONTENT_LENGTH, length.to_string()),
            (header::CONTENT_DISPOSITION, attachment),
            // Served as stored: keeps Content-Length, and the compression layer leaves it alone.
            (header::CONTENT_ENCODING, "identity".to_string()),
        ],
        Body::from_stream(ReaderStream::with_capacity(file, CHUNK)),
    )
        .into_response()
}
