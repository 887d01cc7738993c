//! Charts as plain SVG drawn by Leptos: the throughput chart, the runs-list sparkline and the
//! progress bar. Hand-written rather than a charting library: a few polylines render on the
//! server too (the page shows the history before the wasm loads), weigh nothing in the bundle,
//! and follow the page's CSS colours in light and dark mode.

use domain::dashboard::{ChartPoint, StateCounts};
use domain::generation::SampleState;
use leptos::prelude::*;

const W: f64 = 800.0;
const H: f64 = 180.0;
const PAD_LEFT: f64 = 56.0;
const PAD_BOTTOM: f64 = 20.0;

/// A series of the chart: its label, CSS class and how to read it from a point.
struct Line {
    label: &'static str,
    class: &'static str,
    value: fn(&ChartPoint) -> Option<f64>,
}

const TOKEN_LINES: [Line; 3] = [
    Line { label: "server generation tok/s", class: "s-gen", value: |p| p.generation_tps },
    Line { label: "server prompt tok/s", class: "s-prompt", value: |p| p.prompt_tps },
    Line { label: "client tok/s", class: "s-client", value: |p| Some(p.client_tps) },
];
const LOAD_LINES: [Line; 2] = [
    Line { label: "in flight", class: "s-inflight", value: |p| Some(p.in_flight) },
    Line { label: "errors/s", class: "s-errors", value: |p| Some(p.errors) },
];

/// SVG polyline points for `values` over times `ts`, scaled into the plot area.
pub fn polyline(ts: &[i64], values: &[Option<f64>], t0: i64, t1: i64, max: f64) -> String {
    let span = (t1 - t0).max(1) as f64;
    let plot_w = W - PAD_LEFT;
    let plot_h = H - PAD_BOTTOM;
    ts.iter()
        .zip(values)
        .filter_map(|(t, v)| v.map(|v| (t, v)))
        .map(|(t, v)| {
            let x = PAD_LEFT + (*t - t0) as f64 / span * plot_w;
            let y = plot_h - (v / max).clamp(0.0, 1.0) * (plot_h - 4.0);
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A round axis maximum at or above `max`: 1, 2 or 5 times a power of ten.
pub fn nice_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|v| *v >= max).unwrap_or(10.0 * magnitude)
}

#[component]
pub fn ThroughputChart(#[prop(into)] points: Signal<Vec<ChartPoint>>) -> impl IntoView {
    view! {
        <div class="chart" data-testid="throughput-chart">
            <Panel points title="Tokens per second" lines=&TOKEN_LINES/>
            <Panel points title="Requests in flight and errors" lines=&LOAD_LINES/>
        </div>
    }
}

#[component]
fn Panel(points: Signal<Vec<ChartPoint>>, title: &'static str, lines: &'static [Line]) -> impl IntoView {
    let drawn = move || {
        let points = points.get();
        let ts: Vec<i64> = points.iter().map(|p| p.t).collect();
        let (t0, t1) = (ts.first().copied().unwrap_or(0), ts.last().copied().unwrap_or(1));
        let max = nice_max(lines.iter().flat_map(|l| points.iter().filter_map(l.value)).fold(0.0, f64::max));
        let polylines = lines
            .iter()
            .map(|l| {
                let values: Vec<Option<f64>> = points.iter().map(l.value).collect();
                let coords = polyline(&ts, &values, t0, t1, max);
                view! { <polyline class=l.class points=coords/> }
            })
            .collect_view();
        let span = super::duration_text((t1 - t0) as f64);
        (polylines, super::compact(max), span, points.len())
    };
    view! {
        <figure class="chart-panel">
            <figcaption>
                {title}
                <span class="legend">
                    {lines.iter().map(|l| view! { <span class=format!("key {}", l.class)>{l.label}</span> }).collect_view()}
                </span>
            </figcaption>
            {move || {
                let (polylines, max, span, n) = drawn();
                view! {
                    <svg viewBox=format!("0 0 {W} {H}") role="img" aria-label=title data-points=n preserveAspectRatio="none">
                        <line class="axis" x1=PAD_LEFT y1="0" x2=PAD_LEFT y2=H - PAD_BOTTOM/>
                        <line class="axis" x1=PAD_LEFT y1=H - PAD_BOTTOM x2=W y2=H - PAD_BOTTOM/>
                        <text class="tick" x=PAD_LEFT - 6.0 y="12" text-anchor="end">{max}</text>
                        <text class="tick" x=PAD_LEFT - 6.0 y=H - PAD_BOTTOM text-anchor="end">"0"</text>
                        <text class="tick" x=W y=H - 4.0 text-anchor="end">{format!("last {span}")}</text>
                        {polylines}
                    </svg>
                }
            }}
        </figure>
    }
}

/// Client tokens/s of a run's last half hour, one point a minute.
#[component]
pub fn Sparkline(values: Vec<f64>) -> impl IntoView {
    if values.len() < 2 {
        return view! { <span class="muted small">"—"</span> }.into_any();
    }
    let max = values.iter().copied().fold(0.0, f64::max).max(1e-9);
    let step = 100.0 / (values.len() - 1) as f64;
    let coords = values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{:.1},{:.1}", i as f64 * step, 22.0 - v / max * 20.0))
        .collect::<Vec<_>>()
        .join(" ");
    let last = super::compact(*values.last().unwrap_or(&0.0));
    view! {
        <svg class="sparkline" viewBox="0 0 100 24" preserveAspectRatio="none" role="img"
            aria-label=format!("client tokens/s, last {last}")>
            <polyline points=coords/>
        </svg>
    }
    .into_any()
}

/// Share of each outcome in the run, as one bar.
#[component]
pub fn ProgressBar(#[prop(into)] counts: Signal<StateCounts>) -> impl IntoView {
    view! {
        <div class="progress" role="progressbar" aria-valuemin="0"
            aria-valuemax=move || counts.get().total() aria-valuenow=move || counts.get().finished()>
            {move || {
                let counts = counts.get();
                let total = counts.total().max(1) as f64;
                SampleState::ALL
                    .into_iter()
                    .filter(|s| !matches!(s, SampleState::Pending))
                    .map(|s| {
                        let width = counts.get(s) as f64 / total * 100.0;
                        view! { <span class=format!("seg {}", s.as_str()) style=format!("width:{width:.2}%")
                            title=format!("{}: {}", s.as_str(), counts.get(s))></span> }
                    })
                    .collect_view()
            }}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(3.2), 5.0);
        assert_eq!(nice_max(1_480.0), 2_000.0);
        assert_eq!(nice_max(100.0), 100.0);
    }

    #[test]
    fn lines_span_the_plot_and_skip_missing_values() {
        let coords = polyline(&[0, 5, 10], &[Some(0.0), None, Some(10.0)], 0, 10, 10.0);
        assert_eq!(coords, format!("{PAD_LEFT:.1},{:.1} {W:.1},4.0", H - PAD_BOTTOM));
    }
}
