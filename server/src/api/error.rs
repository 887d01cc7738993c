//! The API's one error shape: `{"error": {"status": 403, "message": "…what to do…"}}`.

use axum::{
    extract::rejection::{JsonRejection, PathRejection, QueryRejection},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An API failure: an HTTP status and a message written for the person running the script.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

/// The JSON body of every failed API call.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// The HTTP status, repeated for clients that only keep the body.
    pub status: u16,
    /// What went wrong and what to do about it.
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn unavailable() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "the database is not answering; try again shortly")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: ErrorDetail { status: self.status.as_u16(), message: self.message } };
        (self.status, Json(body)).into_response()
    }
}

/// The same mapping the server functions use (`domain::error::AppError`), so a page and a script see the
/// same status and message for the same failure.
impl From<engine::Error> for ApiError {
    fn from(error: engine::Error) -> Self {
        let app_error = domain::error::AppError::from(error);
        let status = StatusCode::from_u16(app_error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self::new(status, app_error.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let status = match rejection {
            JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        Self::new(
            status,
            format!(
                "the request body is not what this route takes ({}); see /api/v1/docs",
                rejection.body_text()
            ),
        )
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::invalid(format!("the query string cannot be used: {}", rejection.body_text()))
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::invalid(format!("the path cannot be used: {}; ids are whole numbers", rejection.body_text()))
    }
}

/// `axum::Json` whose rejections answer in the API's error shape.
#[derive(axum::extract::FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// `axum::extract::Path` whose rejections answer in the API's error shape.
#[derive(axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `axum::extract::Query` whose rejections answer in the API's error shape.
#[derive(axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

pub type ApiResult<T> = Result<Json<T>, ApiError>;
