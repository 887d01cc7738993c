//! The error of every server function: `domain::error::AppError`, shared with the server's
//! middleware and API so a page and a script see the same status and message.

pub use domain::error::AppError;
