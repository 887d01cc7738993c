//! The review-state part of an export selection, kept apart so it can be wired to the review
//! columns in one place.
//!
//! MERGE NOTE (review, issue 6): samples have no review columns yet. When the review migration
//! lands, `review_clause` must become the SQL condition on the review state (for example
//! `s.review_state = 'approved'` and `s.review_state IS DISTINCT FROM 'rejected'`) and
//! `review_state_column` the expression naming a sample's state (`s.review_state::text`).
//! Until then only `ReviewFilter::All` can be exported: the other filters are refused rather
//! than silently ignored.

use crate::{Error, Result};
use domain::export::ReviewFilter;

/// The SQL condition (on `samples s`) that keeps the samples `filter` allows.
pub fn review_clause(filter: ReviewFilter) -> Result<&'static str> {
    match filter {
        ReviewFilter::All => Ok("TRUE"),
        ReviewFilter::ApprovedOnly | ReviewFilter::NotRejected => {
            Err(Error::invalid("samples have no review states yet: choose \"all review states\" to export"))
        }
    }
}

/// The SQL expression (on `samples s`) naming a sample's review state, for the counts.
pub fn review_state_column() -> &'static str {
    "'unreviewed'::text"
}
