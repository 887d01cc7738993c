//! The Acceptance pages: how a draft trained on this data accepts on the target's samples.
//!
//! - `api`: the server functions (namespace `acceptance/`, engineers and admins).
//! - `list`: the evaluation runs, and two of them picked to compare.
//! - `report`: one run's acceptance, pooled and broken down, and its weakest samples.
//! - `compare`: two evaluations of the same prompts, prompt by prompt.
//! - `lineage`: the loop, a draft's revisions with the exports they were trained on.

pub mod api;
pub mod compare;
pub mod lineage;
pub mod list;
pub mod report;

pub use compare::ComparePage;
pub use lineage::LoopPage;
pub use list::AcceptancePage;
pub use report::RunAcceptancePage;

use domain::acceptance::{Interval, PairedFigure, Pooled};

/// "2.41 (95% 2.35–2.47)", or the figure alone below two samples.
pub fn format_pooled(p: &Pooled) -> String {
    match p.interval {
        Some(i) => format!("{:.2} (95% {:.2}–{:.2})", p.length, i.low, i.high),
        None => format!("{:.2}", p.length),
    }
}

/// " · 95% 2.35–2.47" for a KPI's label; empty below two samples.
pub fn interval_note(p: &Pooled) -> String {
    p.interval.map(|i| format!(" · 95% {:.2}–{:.2}", i.low, i.high)).unwrap_or_default()
}

/// "−0.42", signed, with a real minus.
pub fn signed(v: f64) -> String {
    if v < 0.0 {
        format!("−{:.2}", -v)
    } else {
        format!("+{v:.2}")
    }
}

/// "−0.42 (95% −0.51 to −0.33)"; signed, with a real minus.
pub fn format_difference(f: &PairedFigure) -> String {
    match f.interval {
        Some(Interval { low, high }) => {
            format!("{} (95% {} to {})", signed(f.difference), signed(low), signed(high))
        }
        None => signed(f.difference),
    }
}

/// What a paired difference lets one say: lower, higher, or no difference shown.
pub fn verdict(f: &PairedFigure) -> &'static str {
    match f.interval {
        Some(i) if i.high < 0.0 => "B accepts less",
        Some(i) if i.low > 0.0 => "B accepts more",
        Some(_) => "no difference shown",
        None => "too few prompts to tell",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pooled(length: f64, interval: Option<(f64, f64)>) -> Pooled {
        Pooled {
            samples: 10,
            steps: 100,
            accepted: 50,
            length,
            interval: interval.map(|(low, high)| Interval { low, high }),
        }
    }

    #[test]
    fn figures_read_with_their_interval_and_a_verdict() {
        assert_eq!(format_pooled(&pooled(2.4123, Some((2.35, 2.47)))), "2.41 (95% 2.35–2.47)");
        assert_eq!(format_pooled(&pooled(2.0, None)), "2.00");
        let f = PairedFigure {
            pairs: 40,
            a: pooled(3.0, None),
            b: pooled(2.58, None),
            difference: -0.42,
            interval: Some(Interval { low: -0.51, high: -0.33 }),
            b_higher: 2,
            a_higher: 38,
        };
        assert_eq!(format_difference(&f), "−0.42 (95% −0.51 to −0.33)");
        assert_eq!(verdict(&f), "B accepts less");
        let unclear = PairedFigure { interval: Some(Interval { low: -0.1, high: 0.2 }), ..f };
        assert_eq!(verdict(&unclear), "no difference shown");
    }
}
