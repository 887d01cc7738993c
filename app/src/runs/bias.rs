//! The selection-bias view: outcomes by completion length, reasoning length, prompt length and
//! category.

use domain::{
    dashboard::{BandRow, BiasReport, StateCounts},
    generation::SampleState,
};
use leptos::prelude::*;

#[component]
pub fn BiasView(report: BiasReport) -> impl IntoView {
    let rate = format!("{:.1}%", report.failure_rate * 100.0);
    let categories: Vec<BandRow> =
        report.categories.into_iter().map(|c| BandRow { label: c.category, counts: c.counts }).collect();
    view! {
        <section class="panel" data-testid="bias">
            <h2>"Selection bias"</h2>
            <p class="muted">
                "Share of finished samples that did not end ok: " <strong>{rate}</strong>
                ". A group that fails far more often than this is under-represented in the training set."
            </p>
            {(!report.warnings.is_empty()).then(|| view! {
                <ul class="warnings" data-testid="bias-warnings">
                    {report.warnings.into_iter().map(|w| view! { <li>{w}</li> }).collect_view()}
                </ul>
            })}
            <div class="bias-tables">
                <OutcomeTable title="Completion length (tokens received)" rows=report.completion_bands/>
                <OutcomeTable title="Reasoning length (tokens)" rows=report.reasoning_bands/>
                <OutcomeTable title="Prompt length" rows=report.prompt_bands/>
                <OutcomeTable title="Category" rows=categories/>
            </div>
        </section>
    }
}

#[component]
fn OutcomeTable(title: &'static str, rows: Vec<BandRow>) -> impl IntoView {
    let rows: Vec<BandRow> = rows.into_iter().filter(|r| r.counts.finished() > 0).collect();
    view! {
        <table class="data compact">
            <caption>{title}</caption>
            <thead>
                <tr>
                    <th></th>
                    {SampleState::OUTCOMES.iter().map(|s| view! { <th class="num">{s.as_str()}</th> }).collect_view()}
                    <th class="num">"not ok"</th>
                </tr>
            </thead>
            <tbody>
                {rows.into_iter().map(|r| view! {
                    <tr>
                        <th scope="row">{r.label}</th>
                        {SampleState::OUTCOMES.iter().map(|s| view! { <td class="num">{r.counts.get(*s)}</td> }).collect_view()}
                        <td class="num">{failure_text(&r.counts)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

fn failure_text(counts: &StateCounts) -> String {
    match counts.finished() {
        0 => "—".into(),
        n => format!("{:.0}%", counts.not_ok() as f64 / n as f64 * 100.0),
    }
}
