//! `/acceptance/runs/:id`: one run's acceptance pooled by verify steps with its interval, broken
//! down by category, prompt and completion length, thinking mode and user turns, and the samples
//! the draft did worst on, one click from review.

use super::{api::get_run_acceptance, format_pooled, interval_note};
use domain::acceptance::{Dimension, GroupFigure, RunAcceptance, SampleFigure};
use domain::units::thousands;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn RunAcceptancePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|id| id.parse::<i64>().ok()));
    let report = Resource::new(id, |id| async move {
        get_run_acceptance(id.ok_or_else(|| crate::AppError::NotFound("run not found".into()))?).await
    });
    view! {
        <Title text="Acceptance"/>
        <Suspense fallback=|| view! { <p class="muted">"Pooling the run's acceptance…"</p> }>
            {move || Suspend::new(async move {
                match report.await {
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(report) => view! { <Report report/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Report(report: RunAcceptance) -> impl IntoView {
    let run_id = report.run_id;
    let title = match &report.draft {
        Some(draft) => format!("{}: draft {}", report.run_name, draft.describe()),
        None => report.run_name.clone(),
    };
    let measured = report.overall.as_ref().map_or(0, |p| p.samples);
    let most = report
        .spec_tokens
        .map(|k| format!(" (at most {} a step: {k} draft tokens and the target's own)", k + 1));
    view! {
        <div class="page-head">
            <h1>{title}</h1>
            <a class="button" href=format!("/runs/{run_id}")>"Run page"</a>
            <a class="button" data-testid="weakest-in-review" href=format!("/review?run={run_id}&sort=lowest_acceptance")>
                "Weakest first in review →"
            </a>
        </div>
        {match &report.overall {
            None => view! {
                <p class="empty" data-testid="no-acceptance">
                    {format!("No acceptance figure among the run's {} finished samples: its server runs no draft, \
                              or does not report each request's acceptance (start vLLM with \
                              --per-request-spec-decode-metrics summary).", thousands(report.finished as i64))}
                </p>
            }.into_any(),
            Some(pooled) => view! {
                <div class="kpis">
                    <div class="kpi">
                        <span class="value" data-testid="acceptance-overall">{format!("{:.2}", pooled.length)}</span>
                        <span class="label">{format!("acceptance length{}{}", interval_note(pooled), most.clone().unwrap_or_default())}</span>
                    </div>
                    <div class="kpi">
                        <span class="value">{format!("{} / {}", thousands(measured as i64), thousands(report.finished as i64))}</span>
                        <span class="label">"samples measured / finished"</span>
                    </div>
                    <div class="kpi">
                        <span class="value">{thousands(pooled.steps as i64)}</span>
                        <span class="label">"verify steps"</span>
                    </div>
                </div>
            }.into_any(),
        }}
        <p class="muted small">
            "Pooled by verify steps: 1 + accepted draft tokens ÷ steps over all samples, as vLLM's counters give it, "
            "not a mean of per-sample means. Intervals are 95%, over samples."
        </p>
        <div class="bias-tables" data-testid="acceptance-breakdowns">
            {report.breakdowns.into_iter().map(|(dimension, groups)| view! { <Breakdown dimension groups/> }).collect_view()}
        </div>
        <Weakest samples=report.weakest/>
    }
}

#[component]
fn Breakdown(dimension: Dimension, groups: Vec<GroupFigure>) -> impl IntoView {
    view! {
        <table class="data compact" data-dimension=format!("{dimension:?}")>
            <caption>{dimension.label()}</caption>
            <thead><tr><th></th><th class="num">"samples"</th><th class="num">"acceptance"</th></tr></thead>
            <tbody>
                {groups.into_iter().map(|g| view! {
                    <tr data-group=g.group.clone()>
                        <th scope="row">{g.group.clone()}</th>
                        <td class="num">{thousands(g.samples as i64)}</td>
                        <td class="num">{g.pooled.as_ref().map_or_else(|| "—".to_string(), format_pooled)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn Weakest(samples: Vec<SampleFigure>) -> impl IntoView {
    (!samples.is_empty()).then(|| view! {
        <section class="panel">
            <h2>"Where the draft does worst"</h2>
            <table class="data" data-testid="weakest-samples">
                <thead><tr><th>"Prompt"</th><th>"Category"</th><th class="num">"Completion tokens"</th><th class="num">"Verify steps"</th><th class="num">"Acceptance"</th></tr></thead>
                <tbody>
                    {samples.into_iter().map(|s| view! {
                        <tr>
                            <td><a href=format!("/review/samples/{}", s.sample_id)>{s.preview.clone()}</a></td>
                            <td>{s.category.clone().unwrap_or_else(|| "—".into())}</td>
                            <td class="num">{s.completion_tokens.map_or_else(|| "—".into(), |t| thousands(i64::from(t)))}</td>
                            <td class="num">{thousands(i64::from(s.steps))}</td>
                            <td class="num">{format!("{:.2}", s.length)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    })
}
