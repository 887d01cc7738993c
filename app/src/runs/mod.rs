//! The Runs pages: the list, the new-run form, and the live run dashboard.
//!
//! - `api`: the server functions (namespace `runs/`, engineers and admins).
//! - `list`, `new`, `detail`: the three pages.
//! - `live`: follows a run's snapshots over server-sent events in the browser.
//! - `chart`, `bias`: the throughput chart, sparkline and the selection-bias view.

pub mod api;
pub mod bias;
pub mod chart;
pub mod detail;
pub mod list;
pub mod live;
pub mod new;

pub use detail::RunPage;
pub use list::RunsPage;
pub use new::NewRunPage;

/// "1 h 02 min", "3 min 05 s", "12 s".
pub fn duration_text(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

/// 1234567 → "1.23 M", 12345 → "12.3 k", 123 → "123".
pub fn compact(n: f64) -> String {
    match n.abs() {
        x if x >= 1e6 => format!("{:.2} M", n / 1e6),
        x if x >= 1e4 => format!("{:.1} k", n / 1e3),
        x if x >= 100.0 => format!("{n:.0}"),
        x if x >= 10.0 => format!("{n:.1}"),
        _ => format!("{n:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_numbers_read_at_a_glance() {
        assert_eq!(duration_text(12.4), "12 s");
        assert_eq!(duration_text(185.0), "3 min 05 s");
        assert_eq!(duration_text(3720.0), "1 h 02 min");
        assert_eq!(compact(1_234_567.0), "1.23 M");
        assert_eq!(compact(12_345.0), "12.3 k");
        assert_eq!(compact(123.4), "123");
        assert_eq!(compact(1.234), "1.23");
    }
}
