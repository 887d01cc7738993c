//! The error every server function and API route answers with, as the person in front of the
//! browser or the script reads it: one shape for the UI (`app`), the server's middleware and
//! the API (`server`), and the engine's errors mapped to it (`engine::Error`'s `From`).

use serde::{Deserialize, Serialize};

/// The error every server function returns. Messages are written for the person in front of
/// the browser; internal details stay in the server log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    #[error("your session has ended: sign in again")]
    Unauthorized,
    #[error("your role does not allow this; ask an admin if you need it")]
    Forbidden,
    #[error("{0}")]
    NotFound(String),
    /// The input cannot be used as given; the message says what to change.
    #[error("{0}")]
    Invalid(String),
    /// The action clashes with the current state (a taken name, a stale version).
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    RateLimited(String),
    #[error("the server failed to do this; the details are in its log")]
    Internal,
    /// The request did not reach the server or its answer could not be read.
    #[error("could not talk to the server: {0}")]
    Transport(String),
}

impl AppError {
    pub fn status(&self) -> u16 {
        match self {
            AppError::Unauthorized => 401,
            AppError::Forbidden => 403,
            AppError::NotFound(_) => 404,
            AppError::Invalid(_) => 422,
            AppError::Conflict(_) => 409,
            AppError::RateLimited(_) => 429,
            AppError::Internal => 500,
            AppError::Transport(_) => 502,
        }
    }
}

/// Server functions return it as their error (`app`, with the `server_fn` feature).
#[cfg(feature = "server_fn")]
impl server_fn::error::FromServerFnError for AppError {
    type Encoder = server_fn::codec::JsonEncoding;

    fn from_server_fn_error(value: server_fn::error::ServerFnErrorErr) -> Self {
        AppError::Transport(value.to_string())
    }
}
