//! Numbers and labels as the review pages show them.

use domain::{generation::SampleState, review::ReviewState, units::thousands};

/// 12345 → "12,345"; None → "–".
pub fn count(n: Option<i64>) -> String {
    n.map(thousands).unwrap_or_else(|| "–".into())
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
}
