//! `/acceptance`: the evaluation runs, each linking to its report, and two of them picked to
//! compare on the prompts they share.

use super::api::list_evaluations;
use crate::components::time::RelativeTime;
use domain::acceptance::EvaluationSummary;
use domain::units::thousands;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn AcceptancePage() -> impl IntoView {
    let evaluations = Resource::new(|| (), |_| list_evaluations());
    view! {
        <Title text="Acceptance"/>
        <div class="page-head">
            <h1>"Acceptance"</h1>
            <span>
                <a class="button" href="/acceptance/loop" data-testid="loop-link">"The loop"</a>
                " "
                <a class="button primary" href="/runs/new?purpose=evaluation">"Evaluate a draft"</a>
            </span>
        </div>
        <p class="muted">
            "How a speculative-decoding draft accepts on the target's own answers, per sample, pooled by verify "
            "steps. An evaluation sends prompts (an earlier run's, an export's validation split, or a dataset's) to "
            "a server running the target with the draft; see docs/acceptance.md."
        </p>
        <Transition fallback=|| view! { <p class="muted">"Loading evaluations…"</p> }>
            {move || Suspend::new(async move {
                match evaluations.await {
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(list) if list.is_empty() => view! {
                        <p class="empty">
                            "No evaluation yet. Serve the target with the draft (vLLM's --speculative-config and "
                            "--per-request-spec-decode-metrics summary), register it on " <a href="/endpoints">"Endpoints"</a>
                            ", then " <a href="/runs/new?purpose=evaluation">"evaluate the draft"</a> " on a run's prompts."
                        </p>
                    }.into_any(),
                    Ok(list) => view! { <Evaluations list/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Evaluations(list: Vec<EvaluationSummary>) -> impl IntoView {
    let first = list.first().map(|e| e.run_id).unwrap_or_default();
    let second = list.get(1).map(|e| e.run_id).unwrap_or(first);
    let options = StoredValue::new(list.clone());
    let pick = move |name: &'static str, chosen: i64| {
        view! {
            <select name=name>
                {options.get_value().into_iter().map(|e| view! {
                    <option value=e.run_id selected=e.run_id == chosen>
                        {format!("#{} {} ({})", e.run_id, e.name, e.draft.describe())}
                    </option>
                }).collect_view()}
            </select>
        }
    };
    view! {
        <section class="panel">
            <h2>"Compare two drafts"</h2>
            <form class="inline-form" method="get" action="/acceptance/compare" data-testid="compare-form">
                <label>"A (baseline)" {pick("a", second)}</label>
                <label>"B" {pick("b", first)}</label>
                <button type="submit" class="primary">"Compare"</button>
            </form>
            <p class="muted small">"The two runs are paired prompt by prompt; B's second evaluation should send A's prompts (start it from A's run)."</p>
        </section>
        <table class="data" data-testid="evaluations-table">
            <thead><tr>
                <th>"Evaluation"</th><th>"Draft"</th><th>"Dataset"</th><th>"Status"</th><th class="num">"Samples"</th><th>"Started"</th>
            </tr></thead>
            <tbody>
                {list.into_iter().map(|e| view! {
                    <tr data-run=e.run_id>
                        <td><a href=format!("/acceptance/runs/{}", e.run_id)>{e.name.clone()}</a></td>
                        <td><code>{e.draft.describe()}</code></td>
                        <td>{e.dataset.clone()}</td>
                        <td><span class=format!("badge status-{}", e.status.as_str())>{e.status.as_str()}</span></td>
                        <td class="num">{thousands(e.samples)}</td>
                        <td><RelativeTime at=e.created_at/></td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}
