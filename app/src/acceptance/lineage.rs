//! `/acceptance/loop?draft=&dataset=`: the loop as one table. Each revision of a draft, the
//! export it was trained on (its selection in words), its acceptance on the held-out prompts
//! overall and per category, and under each figure its paired change from the revision before,
//! with the 95% interval; a change whose interval excludes zero is marked up or down.

use super::api::{get_loop, list_drafts};
use super::{format_difference, format_pooled};
use domain::acceptance::{PairedFigure, Pooled};
use domain::lineage::{LoopStep, LoopTable};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn LoopPage() -> impl IntoView {
    let query = use_query_map();
    let chosen = move || {
        query.with(|q| {
            let draft = q.get("draft").map(|d| d.trim().to_string()).filter(|d| !d.is_empty());
            let dataset = q.get("dataset").and_then(|v| v.trim().parse::<i64>().ok());
            (draft, dataset)
        })
    };
    let drafts = Resource::new(|| (), |_| list_drafts());
    let table = Resource::new(chosen, |(draft, dataset)| async move {
        match draft {
            None => Ok(None),
            Some(draft) => get_loop(draft, dataset).await.map(Some),
        }
    });
    view! {
        <Title text="The loop"/>
        <div class="page-head">
            <h1>"The loop"</h1>
            <a class="button" href="/acceptance">"Evaluations"</a>
        </div>
        <p class="muted">
            "Each revision of a draft, the export it was trained on, and how it accepts on the same held-out prompts: "
            "whether a curation choice made a better draft, as a measured figure. Register a revision with its export "
            "when you evaluate it (the new-run form's \u{201c}Trained on export\u{201d}, or "
            <code>"draft-studio acceptance register NAME@REV --trained-on EXPORT"</code> ")."
        </p>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                let names: Vec<String> = match drafts.await {
                    Ok(list) => {
                        let mut names: Vec<String> = list.into_iter().map(|r| r.draft.name).collect();
                        names.sort();
                        names.dedup();
                        names
                    }
                    Err(_) => Vec::new(),
                };
                let current = chosen().0.unwrap_or_default();
                view! {
                    <form class="inline-form" method="get" action="/acceptance/loop" data-testid="loop-form">
                        <label>"Draft "
                            <select name="draft">
                                {names.into_iter().map(|n| {
                                    let selected = n == current;
                                    view! { <option value=n.clone() selected=selected>{n.clone()}</option> }
                                }).collect_view()}
                            </select>
                        </label>
                        <button type="submit" class="primary">"Show"</button>
                    </form>
                }
            })}
        </Transition>
        <Suspense fallback=|| view! { <p class="muted">"Reading the evaluations…"</p> }>
            {move || Suspend::new(async move {
                match table.await {
                    Err(e) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
                    Ok(None) => view! { <p class="empty">"Choose a draft to see its revisions side by side."</p> }.into_any(),
                    Ok(Some(table)) => view! { <LoopView table/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn LoopView(table: LoopTable) -> impl IntoView {
    let categories = table.categories.clone();
    view! {
        <p data-testid="loop-held-out">
            {format!("{} on the held-out dataset ", table.draft)}
            <a href=format!("/datasets/{}", table.dataset_id)>{table.dataset.clone()}</a>
            ": each revision's newest completed evaluation there; changes are paired on the prompts both sent."
        </p>
        <div class="table-scroll">
            <table class="data loop" data-testid="loop-table">
                <thead><tr>
                    <th>"Revision"</th><th>"Trained on"</th><th>"Evaluation"</th><th class="num">"Overall"</th>
                    {categories.iter().map(|c| view! { <th class="num">{c.clone()}</th> }).collect_view()}
                </tr></thead>
                <tbody>
                    {table.steps.into_iter().map(|step| view! { <StepRow step columns=categories.len()/> }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

#[component]
fn StepRow(step: LoopStep, columns: usize) -> impl IntoView {
    let revision = if step.revision.is_empty() { "(no revision)".to_string() } else { step.revision.clone() };
    let trained_on = match &step.trained_on {
        Some(t) => view! {
            <a href=format!("/exports#export-{}", t.export_id) data-testid="loop-export">{format!("export {}", t.export_id)}</a>
            <div class="small muted">{t.selection.clone()}</div>
            {t.train_rows.map(|n| view! { <div class="small muted">{format!("{n} training rows")}</div> })}
        }
        .into_any(),
        None => view! { <span class="muted">"starting draft"</span> }.into_any(),
    };
    let Some(evaluation) = step.evaluation else {
        return view! {
            <tr data-revision=step.revision.clone()>
                <th scope="row">{revision}</th><td>{trained_on}</td>
                <td colspan=(columns + 2).to_string() class="muted">"not evaluated on this dataset yet"</td>
            </tr>
        }
        .into_any();
    };
    let change = step.change;
    let shared = change.as_ref().map(|c| (c.from_revision.clone(), c.shared_prompts));
    let overall_change = change.as_ref().and_then(|c| c.overall.clone());
    let category_changes: Vec<Option<PairedFigure>> =
        change.map(|c| c.by_category).unwrap_or_else(|| vec![None; columns]);
    view! {
        <tr data-revision=step.revision.clone()>
            <th scope="row">{revision}</th>
            <td>{trained_on}</td>
            <td>
                <a href=format!("/acceptance/runs/{}", evaluation.run_id)>{evaluation.name.clone()}</a>
                {shared.map(|(from, n)| view! { <div class="small muted">{format!("vs {from}: {n} shared prompts")}</div> })}
            </td>
            <Cell figure=evaluation.overall change=overall_change testid="loop-overall"/>
            {evaluation.by_category.into_iter().zip(category_changes).map(|(figure, change)| view! {
                <Cell figure change testid="loop-category"/>
            }).collect_view()}
        </tr>
    }
    .into_any()
}

/// A pooled figure, and under it the change from the revision before.
#[component]
fn Cell(figure: Option<Pooled>, change: Option<PairedFigure>, testid: &'static str) -> impl IntoView {
    let direction = change.as_ref().and_then(|c| c.interval).map(|i| {
        if i.low > 0.0 {
            "up"
        } else if i.high < 0.0 {
            "down"
        } else {
            "unclear"
        }
    });
    view! {
        <td class="num" data-testid=testid>
            {figure.as_ref().map_or_else(|| "—".to_string(), format_pooled)}
            {change.map(|c| view! {
                <div class=format!("small change {}", direction.unwrap_or("unclear")) data-testid="loop-change">
                    {format_difference(&c)}
                </div>
            })}
        </td>
    }
}
