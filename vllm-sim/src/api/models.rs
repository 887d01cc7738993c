//! `GET /v1/models`: the one served model, with its context length.

use super::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::sync::Arc;

#[derive(Serialize)]
struct ModelList<'a> {
    object: &'static str,
    data: [ModelCard<'a>; 1],
}

#[derive(Serialize)]
struct ModelCard<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    owned_by: &'static str,
    /// The weights' path in vLLM; the simulator has none, so its name stands in.
    root: &'a str,
    parent: Option<&'a str>,
    max_model_len: u32,
    permission: [(); 0],
}

pub(super) async fn list(State(app): State<Arc<AppState>>) -> Response {
    let model = app.config.model.as_str();
    let card = ModelCard {
        id: model,
        object: "model",
        created: crate::clock::unix_seconds(),
        owned_by: "vllm",
        root: model,
        parent: None,
        max_model_len: app.config.max_model_len,
        permission: [],
    };
    Json(ModelList { object: "list", data: [card] }).into_response()
}
