//! The runs list: status, progress, throughput sparkline, who started it and when.

use super::{
    api::list_runs,
    chart::{ProgressBar, Sparkline},
};
use crate::components::{interval::every, time::RelativeTime};
use domain::dashboard::RunListItem;
use leptos::prelude::*;
use leptos_meta::Title;
use std::time::Duration;

#[component]
pub fn RunsPage() -> impl IntoView {
    let refresh = RwSignal::new(0u32);
    let runs = Resource::new(move || refresh.get(), |_| list_runs());
    every(Duration::from_secs(5), move || refresh.update(|n| *n += 1));
    view! {
        <Title text="Runs"/>
        <div class="page-head">
            <h1>"Runs"</h1>
            <a class="button primary" href="/runs/new">"New run"</a>
        </div>
        <Transition fallback=|| view! { <p class="muted">"Loading runs…"</p> }>
            {move || Suspend::new(async move {
                match runs.await {
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(list) if list.is_empty() => view! {
                        <p class="empty">"No runs yet. " <a href="/runs/new">"Start one"</a> " from a dataset and an endpoint."</p>
                    }.into_any(),
                    Ok(list) => view! {
                        <table class="data" data-testid="runs-table">
                            <thead>
                                <tr><th>"Run"</th><th>"Status"</th><th>"Progress"</th><th>"Client tok/s (30 min)"</th><th>"Started by"</th><th>"Started"</th></tr>
                            </thead>
                            <tbody>{list.into_iter().map(|run| view! { <RunRow run/> }).collect_view()}</tbody>
                        </table>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn RunRow(run: RunListItem) -> impl IntoView {
    let counts = run.counts.clone();
    let done = format!("{} / {}", counts.finished(), counts.total());
    view! {
        <tr data-run=run.id>
            <td>
                <a href=format!("/runs/{}", run.id)>{run.name.clone()}</a>
                <div class="small muted">{format!("{} · {}", run.dataset, run.model)}</div>
            </td>
            <td><span class=format!("badge status-{}", run.status.as_str())>{run.status.as_str()}</span></td>
            <td class="progress-cell"><ProgressBar counts=Signal::stored(counts)/> <span class="small">{done}</span></td>
            <td><Sparkline values=run.sparkline/></td>
            <td>{run.created_by.unwrap_or_else(|| "—".into())}</td>
            <td><RelativeTime at=run.created_at/></td>
        </tr>
    }
}
