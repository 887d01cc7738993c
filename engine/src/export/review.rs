//! The review part of an export selection: which review states and which flags are kept.

use domain::export::ReviewFilter;

/// The SQL condition (on `samples s`) that keeps the samples `filter` allows. Each is served by
/// `samples_run_review_idx (run_id, review_state, id)` together with the run filter.
pub fn review_clause(filter: ReviewFilter) -> &'static str {
    match filter {
        ReviewFilter::All => "TRUE",
        ReviewFilter::ApprovedOnly => "s.review_state = 'approved'",
        ReviewFilter::NotRejected => "s.review_state <> 'rejected'",
        ReviewFilter::NotRejectedOrFlagged => "s.review_state NOT IN ('rejected', 'flagged')",
    }
}

/// Three SQL counts (on `samples s`, in this order: rejected, flagged, unreviewed) of the
/// candidates that `filter` and the excluded flags (text[] parameter `param`) leave out, each
/// sample counted under the first reason that applies, so that the kept ones and these add up
/// to every candidate.
pub fn removed_counts(filter: ReviewFilter, param: usize) -> String {
    let rejected = if filter.drops_rejected() { "s.review_state = 'rejected'" } else { "FALSE" };
    let flagged_state = if filter.drops_flagged() { "s.review_state = 'flagged'" } else { "FALSE" };
    let flagged = format!("({flagged_state} OR {})", has_flag(param));
    let unreviewed = if filter.drops_unreviewed() { "s.review_state = 'unreviewed'" } else { "FALSE" };
    format!(
        "count(*) FILTER (WHERE {rejected}), \
         count(*) FILTER (WHERE NOT ({rejected}) AND {flagged}), \
         count(*) FILTER (WHERE NOT ({rejected}) AND NOT {flagged} AND {unreviewed})"
    )
}

fn has_flag(param: usize) -> String {
    format!("(s.flags && ${param}::text[] OR s.auto_flags && ${param}::text[])")
}

/// The SQL expression (on `samples s`) naming a sample's review state, for the counts.
pub fn review_state_column() -> &'static str {
    "s.review_state::text"
}

/// The SQL condition that drops samples carrying any flag in the text[] parameter `param`,
/// whether a reviewer chose it or the engine set it when the result arrived.
pub fn flags_clause(param: usize) -> String {
    format!("NOT {}", has_flag(param))
}
