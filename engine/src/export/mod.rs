//! Exports: curated samples written as EAGLE-3 training sets.
//!
//! - `selection`: which samples (the selection's `SampleQuery`, then duplicates, thinking mix
//!   and split, the export's own) and the preview.
//! - `conversation`: a sample's conversation shaped for export (reasoning style, stable id).
//! - `template`, `spans` and `tokenize`: the target's chat template rendered as transformers
//!   renders it, what the loss mask supervises, and the tokenized rows.
//! - `captured`: tokenized rows from the ids the server reported, the default when every
//!   selected sample has them.
//! - `training_view`: a sample's tokenized row decoded for the review page.
//! - `writer`: JSONL and Parquet data files.
//! - `destination`: storage roots, S3, staging and the atomic commit.
//! - `manifest`: counts and file hashes; `provenance`: where the samples came from.
//! - `job`: an export's writing, with progress and cancellation.
//! - `lease`: an export job's states, claimed under a lease like generation samples.
//! - `runner`: running jobs in any process, taking over or ending those of dead processes.
//! - `store`: listing exports and saved presets.

pub mod captured;
pub mod conversation;
pub mod destination;
pub mod job;
pub mod lease;
pub mod manifest;
pub mod provenance;
pub mod runner;
pub mod selection;
pub mod spans;
pub mod store;
pub mod template;
pub mod tokenize;
pub mod training_view;
pub mod turn_end;
pub mod writer;

pub use destination::{S3Options, Storage};
pub use object_store;
