//! `POST /tokenize`: the simulator's token ids for a raw prompt or chat messages.

use super::error::ApiError;
use super::AppState;
use crate::prompt::{self, TemplateOptions, Token};
use crate::wire::TokenizeRequest;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::sync::Arc;

#[derive(Serialize)]
struct TokenizeResponse<'a> {
    count: usize,
    max_model_len: u32,
    tokens: Vec<u32>,
    token_strs: Option<Vec<&'a str>>,
}

pub(super) async fn tokenize(State(app): State<Arc<AppState>>, body: Bytes) -> Response {
    let legacy = app.config.legacy_error_shape;
    let request: TokenizeRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return ApiError::bad_request(error.to_string(), None).render(legacy),
    };
    if let Some(model) = request.model.as_deref().filter(|&model| model != app.config.model) {
        return ApiError::model_not_found(model).render(legacy);
    }
    let tokens: Vec<Token<'_>> = match (&request.prompt, &request.messages) {
        (Some(text), None) => prompt::raw_prompt_tokens(text),
        (None, Some(messages)) => {
            let options = TemplateOptions {
                add_generation_prompt: request.add_generation_prompt.unwrap_or(true),
                thinking: request.thinking_enabled(),
            };
            prompt::template_tokens(messages, options).collect()
        }
        _ => {
            return ApiError::bad_request("Provide exactly one of `prompt` or `messages`.", None)
                .render(legacy)
        }
    };
    let token_strs =
        request.return_token_strs.unwrap_or(false).then(|| tokens.iter().map(|t| t.text).collect());
    Json(TokenizeResponse {
        count: tokens.len(),
        max_model_len: app.config.max_model_len,
        tokens: tokens.iter().map(|t| t.id).collect(),
        token_strs,
    })
    .into_response()
}
