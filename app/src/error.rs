use serde::{Deserialize, Serialize};
use server_fn::{
    codec::JsonEncoding,
    error::{FromServerFnError, ServerFnErrorErr},
};

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

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        AppError::Transport(value.to_string())
    }
}

#[cfg(feature = "ssr")]
impl From<engine::Error> for AppError {
    fn from(error: engine::Error) -> Self {
        use engine::Error as E;
        match error {
            E::Invalid(message) => AppError::Invalid(message),
            E::NotFound(what) => AppError::NotFound(format!("{what} not found")),
            E::Conflict(message) => AppError::Conflict(message),
            E::BadCredentials => AppError::Invalid("wrong username or password".into()),
            e @ E::RateLimited(_) => AppError::RateLimited(e.to_string()),
            e @ (E::Database(_) | E::Internal(_)) => {
                tracing::error!(error = ?e, "server function failed");
                AppError::Internal
            }
        }
    }
}
