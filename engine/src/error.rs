use domain::error::AppError;
use std::time::Duration;

/// Every failure the engine reports. Variants other than `Database` and `Internal` carry a
/// message meant for the user; those two are logged and shown only as a generic failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request cannot be carried out as given; the message says what to change.
    #[error("{0}")]
    Invalid(String),
    /// The named thing does not exist (or the caller may not know it exists).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The request clashes with the current state (a name taken, a stale version).
    #[error("{0}")]
    Conflict(String),
    /// Username and password do not match an enabled account.
    #[error("wrong username or password")]
    BadCredentials,
    /// Too many attempts; the caller may try again after the given time.
    #[error("too many attempts; try again in {} s", .0.as_secs().max(1))]
    RateLimited(Duration),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Error::Conflict(message.into())
    }

    /// True for failures whose details must stay in the server log.
    pub fn is_internal(&self) -> bool {
        matches!(self, Error::Database(_) | Error::Internal(_))
    }
}

/// Turns a unique-constraint violation on `constraint` into a user-facing conflict.
pub trait OnConstraint<T> {
    fn on_constraint(self, constraint: &str, message: impl FnOnce() -> String) -> Result<T>;
}

impl<T> OnConstraint<T> for std::result::Result<T, sqlx::Error> {
    fn on_constraint(self, constraint: &str, message: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| match &e {
            sqlx::Error::Database(db) if db.constraint() == Some(constraint) => Error::Conflict(message()),
            _ => Error::Database(e),
        })
    }
}

/// What the user is told: the message of an error meant for them, a generic failure (logged
/// here with its details) for a database or internal one.
impl From<Error> for AppError {
    fn from(error: Error) -> Self {
        use Error as E;
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
