//! Review: reviewers judge finished samples.
//!
//! - `auto_flags` (kept in `samples`, which sets them when a result is settled): flags found
//!   from the outcome and the text when a result arrives.
//! - `markdown`: the answer rendered and sanitized on the server.
//! - `reasons`: the configurable list of flag reasons.
//! - `decisions`: approve / reject / flag with a version check, undo, the audit log.
//! - `queue`: "next sample" under a lease, so two reviewers never get the same one.
//! - `list`: the filtered, keyset-paged sample list (the filter is a `SampleQuery`, turned
//!   into SQL by `samples::query`).
//! - `counts`: its counts per filter value, exact or, past a time, estimated.
//! - `detail`: everything the sample page shows.
//! - `bulk`: one decision for every sample of a filter (engineers and admins).
//! - `regenerate`: one sample back to the generation queue with its run's settings.

pub mod bulk;
pub mod counts;
pub mod decisions;
pub mod detail;
pub mod list;
pub mod markdown;
pub mod queue;
pub mod reasons;
pub mod regenerate;

pub use crate::samples::auto_flags::{auto_flags, has_repetition_loop};
pub use decisions::{decide, undo, DecisionInput};
