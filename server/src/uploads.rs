//! `POST /api/datasets/upload`: a dataset file from the browser, streamed to disk (multipart,
//! field `file`) within `DS_UPLOAD_LIMIT`. Guarded like the `datasets` server functions.

use crate::state::AppState;
use axum::{
    extract::{DefaultBodyLimit, Multipart, State},
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Json, Router,
};
use engine::datasets::uploads;

pub const PATH: &str = "/api/datasets/upload";

/// The route, without axum's default body limit (the upload enforces its own while streaming).
pub fn routes() -> Router<AppState> {
    Router::new().route(PATH, post(upload).layer(DefaultBodyLimit::disable()))
}

async fn upload(State(state): State<AppState>, headers: HeaderMap, mut multipart: Multipart) -> Response {
    let settings = state.services.datasets.clone();
    // Refuse at once what is announced as too large (multipart framing adds well under 4 KiB).
    let announced =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > settings.upload_limit.saturating_add(4 << 10)) {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the file is larger than the upload limit of {} (DS_UPLOAD_LIMIT); put it under a dataset folder on the server and import it by path",
                domain::units::bytes(settings.upload_limit)
            ),
        );
    }
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => {
                return refuse(StatusCode::UNPROCESSABLE_ENTITY, "the upload holds no `file` field".into())
            }
            Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("the upload could not be read: {e}")),
        };
        if field.name() != Some("file") {
            continue;
        }
        let filename = field.file_name().unwrap_or("upload").to_string();
        return match uploads::save(&settings, &filename, Box::pin(field)).await {
            Ok(saved) => {
                tracing::info!(upload = %saved.upload_id, file = %saved.filename, bytes = saved.bytes, "upload stored");
                Json(saved).into_response()
            }
            Err(e) if e.is_internal() => {
                tracing::error!(error = ?e, "storing an upload failed");
                (StatusCode::INTERNAL_SERVER_ERROR, Json(domain::error::AppError::Internal)).into_response()
            }
            // The engine reports an over-limit stream as an invalid input naming DS_UPLOAD_LIMIT;
            // HTTP has a status of its own for it.
            Err(e) if e.to_string().contains("(DS_UPLOAD_LIMIT)") => {
                refuse(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())
            }
            Err(e) => refuse(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
        };
    }
}

fn refuse(status: StatusCode, message: String) -> Response {
    (status, Json(domain::error::AppError::Invalid(message))).into_response()
}
