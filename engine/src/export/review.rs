//! The review part of an export selection: which review states and which flags are kept.

use domain::export::ReviewFilter;

/// The SQL condition (on `samples s`) that keeps the samples `filter` allows. Each is served by
/// `samples_run_review_idx (run_id, review_state, id)` together with the run filter.
pub fn review_clause(filter: ReviewFilter) -> &'static str {
    match filter {
        ReviewFilter::All => "TRUE",
        ReviewFilter::ApprovedOnly => "s.review_state = 'approved'",
        ReviewFilter::NotRejected => "s.review_state <> 'rejected'",
    }
}

/// The SQL expression (on `samples s`) naming a sample's review state, for the counts.
pub fn review_state_column() -> &'static str {
    "s.review_state::text"
}

/// The SQL condition that drops samples carrying any flag in the text[] parameter `param`,
/// whether a reviewer chose it or the engine set it when the result arrived.
pub fn flags_clause(param: usize) -> String {
    format!("NOT (s.flags && ${param}::text[] OR s.auto_flags && ${param}::text[])")
}
