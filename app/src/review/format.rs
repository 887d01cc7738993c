//! Numbers and labels as the review pages show them.

use domain::{
    generation::SampleState,
    review::{Counted, ReviewState},
    units::thousands,
};

/// 12345 → "12,345"; None → "–".
pub fn count(n: Option<i64>) -> String {
    n.map(thousands).unwrap_or_else(|| "–".into())
}

/// A count of the counts panel: "12,345", or "≈ 12,345" when the panel's counts are estimates.
pub fn panel_count(n: i64, counted: Counted) -> String {
    if counted.is_estimate() {
        format!("≈ {}", thousands(n))
    } else {
        thousands(n)
    }
}

/// What the counts panel says under its total when its counts are estimates.
pub fn estimate_note(counted: Counted) -> Option<String> {
    match counted {
        Counted::Exact => None,
        Counted::Estimated { sampled, of } => Some(format!(
            "Estimated from {} of {} samples (random pages of the table): counting every sample the \
             filter matches would take seconds. The list shows every match.",
            thousands(sampled),
            thousands(of)
        )),
    }
}

pub fn tokens(n: Option<i32>) -> String {
    count(n.map(i64::from))
}

/// Milliseconds as "850 ms" or "12.4 s".
pub fn millis(ms: Option<i32>) -> String {
    match ms {
        None => "–".into(),
        Some(ms) if ms < 1000 => format!("{ms} ms"),
        Some(ms) => format!("{:.1} s", f64::from(ms) / 1000.0),
    }
}

pub fn outcome_class(state: SampleState) -> &'static str {
    match state {
        SampleState::Ok => "badge ok",
        SampleState::Truncated | SampleState::Empty | SampleState::TimedOut => "badge warn",
        SampleState::Failed => "badge bad",
        SampleState::Pending | SampleState::Running => "badge",
    }
}

pub fn review_class(state: ReviewState) -> &'static str {
    match state {
        ReviewState::Approved => "badge ok",
        ReviewState::Rejected => "badge bad",
        ReviewState::Flagged => "badge warn",
        ReviewState::Unreviewed => "badge",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_read_well() {
        assert_eq!(super::count(Some(1_234_567)), "1,234,567");
        assert_eq!(super::count(Some(999)), "999");
        assert_eq!(super::count(None), "–");
        assert_eq!(super::millis(Some(12_400)), "12.4 s");
        assert_eq!(super::millis(Some(85)), "85 ms");
    }

    #[test]
    fn estimated_counts_say_so() {
        use domain::review::Counted;
        let estimated = Counted::Estimated { sampled: 20_474, of: 1_000_000 };
        assert_eq!(super::panel_count(165_150, Counted::Exact), "165,150");
        assert_eq!(super::panel_count(165_150, estimated), "≈ 165,150");
        assert_eq!(super::estimate_note(Counted::Exact), None);
        let note = super::estimate_note(estimated).unwrap();
        assert!(note.starts_with("Estimated from 20,474 of 1,000,000 samples"), "{note}");
    }
}
