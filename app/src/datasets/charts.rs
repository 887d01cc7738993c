//! Horizontal bars drawn with plain CSS widths: category counts and histograms.

use domain::dataset::Bucket;
use domain::units::thousands;
use leptos::prelude::*;

/// One bar per (label, rows), widths relative to the largest.
#[component]
pub fn Bars(rows: Vec<(String, i64)>, #[prop(into)] testid: String) -> impl IntoView {
    let max = rows.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    view! {
        <div class="ds-bars" data-testid=testid>
            {rows.into_iter().map(|(label, n)| {
                let width = format!("width: {:.1}%", n as f64 * 100.0 / max as f64);
                view! {
                    <div class="bar-row">
                        <span class="bar-label" title=label.clone()>{label.clone()}</span>
                        <span class="bar-track"><span class="bar-fill" style=width></span></span>
                        <span class="num">{thousands(n)}</span>
                    </div>
                }
            }).collect_view()}
        </div>
    }
}

/// Histogram buckets as bars labelled by their range.
pub fn bucket_rows(buckets: &[Bucket], unit: &str) -> Vec<(String, i64)> {
    buckets
        .iter()
        .map(|b| {
            let label = match b.high {
                Some(high) if high == b.low + 1 => format!("{} {unit}", thousands(b.low)),
                Some(high) => format!("{}–{} {unit}", thousands(b.low), thousands(high - 1)),
                None => format!("≥ {} {unit}", thousands(b.low)),
            };
            (label, b.rows)
        })
        .collect()
}
