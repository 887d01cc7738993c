//! Error responses in vLLM's shapes (nested, or flat with `--legacy-error-shape`).

use crate::wire::ErrorBody;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    param: Option<&'static str>,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>, param: Option<&'static str>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, kind: "BadRequestError", message: message.into(), param }
    }

    pub fn model_not_found(model: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            kind: "NotFoundError",
            message: format!("The model `{model}` does not exist."),
            param: Some("model"),
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            kind: "InternalServerError",
            message: message.into(),
            param: None,
        }
    }

    pub fn body(&self, legacy_shape: bool) -> ErrorBody<'_> {
        ErrorBody::new(legacy_shape, &self.message, self.kind, self.param, self.status.as_u16())
    }

    pub fn render(&self, legacy_shape: bool) -> Response {
        (self.status, Json(self.body(legacy_shape))).into_response()
    }
}
