//! Draft Studio's server-side domain: database access, accounts, importers, the generation
//! engine and its vLLM client, the review queue and exporters. No UI code lives here.

pub mod acceptance;
pub mod auth;
pub mod dashboard;
#[cfg(feature = "test-support")]
pub mod dataset_files;
pub mod datasets;
pub mod db;
pub mod endpoints;
pub mod error;
pub mod export;
pub mod generation;
pub mod jobs;
pub mod metrics;
pub mod review;
pub mod runs;
pub mod samples;
pub mod services;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod vllm;

pub use db::MIGRATOR;
pub use error::{Error, Result};
pub use services::Services;
