//! The CLI's side of `/api/v1`: an HTTP client with a token, the `run` and `export` commands
//! built on it, and the exit codes a scheduler acts on.

mod acceptance;
pub mod commands;
mod http;
mod progress;

pub use commands::run;
pub use http::{ApiClient, ClientError};

/// Exit codes of `draft-studio run …` and `export …` (also listed in their `--help`).
pub mod exit {
    /// The run or export completed (or the command did what it was asked).
    pub const COMPLETED: u8 = 0;
    /// Something unexpected failed; the message says what.
    pub const ERROR: u8 = 1;
    /// The input was refused: a bad flag or settings file, a missing run, a stale state (4xx).
    pub const BAD_INPUT: u8 = 2;
    /// The token is missing, unknown, revoked or expired, or its role does not allow this.
    pub const UNAUTHORIZED: u8 = 3;
    /// The run or export was cancelled.
    pub const CANCELLED: u8 = 4;
    /// The export failed, or every sample of the run failed.
    pub const FAILED: u8 = 5;
    /// The server could not be reached or answered 5xx; retrying later may work.
    pub const UNAVAILABLE: u8 = 6;
}

/// The `--help` text that lists the exit codes.
pub const EXIT_CODES_HELP: &str = "Exit codes: 0 completed; 1 unexpected error; 2 bad input (flags, \
settings file, unknown id, refused by the server); 3 unauthorized (no, unknown, revoked or expired \
token, or a role too low); 4 cancelled; 5 failed (the export failed, or no sample of the run \
succeeded); 6 server unreachable or failing (try again later).";
