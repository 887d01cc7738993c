//! The datasets list.

use super::api::list_datasets;
use crate::components::interval::every;
use crate::components::time::RelativeTime;
use domain::dataset::{DatasetStatus, DatasetSummary};
use domain::units::thousands;
use leptos::prelude::*;
use leptos_meta::Title;
use std::time::Duration;

#[component]
pub fn DatasetsPage() -> impl IntoView {
    let refresh = RwSignal::new(0u32);
    let datasets = Resource::new(move || refresh.get(), |_| list_datasets());
    every(Duration::from_secs(3), move || refresh.update(|n| *n += 1));
    view! {
        <Title text="Datasets"/>
        <div class="ds-head">
            <h1>"Datasets"</h1>
            <a class="button primary" href="/datasets/new" data-testid="new-dataset">"New dataset"</a>
        </div>
        <Transition fallback=|| view! { <p class="muted">"Loading datasets…"</p> }>
            {move || Suspend::new(async move {
                match datasets.await {
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(list) if list.is_empty() => view! {
                        <p class="empty">
                            "No datasets yet. " <a href="/datasets/new">"Import one"</a>
                            " from a file on the server, an upload or the Hugging Face hub."
                        </p>
                    }.into_any(),
                    Ok(list) => view! {
                        <table class="data" data-testid="datasets-table">
                            <thead>
                                <tr>
                                    <th>"Dataset"</th><th>"Status"</th><th>"Source"</th><th>"Schema"</th>
                                    <th class="num">"Rows"</th><th class="num">"Duplicates"</th><th class="num">"Rejected"</th><th>"Added"</th>
                                </tr>
                            </thead>
                            <tbody>{list.into_iter().map(|d| view! { <DatasetRow d/> }).collect_view()}</tbody>
                        </table>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn DatasetRow(d: DatasetSummary) -> impl IntoView {
    view! {
        <tr data-dataset=d.name.clone()>
            <td><a href=format!("/datasets/{}", d.id)>{d.name.clone()}</a></td>
            <td><StatusBadge status=d.status/></td>
            <td class="muted">{d.source.describe()}</td>
            <td>{format!("{} · {}", d.mapping.schema, d.format)}</td>
            <td class="num">{thousands(d.rows_imported)}</td>
            <td class="num">{thousands(d.rows_duplicate)}</td>
            <td class="num">{thousands(d.rows_rejected)}</td>
            <td><RelativeTime at=d.created_at/></td>
        </tr>
    }
}

#[component]
pub fn StatusBadge(status: DatasetStatus) -> impl IntoView {
    let class = match status {
        DatasetStatus::Ready => "badge ok",
        DatasetStatus::Importing => "badge",
        DatasetStatus::Cancelled => "badge warn",
        DatasetStatus::Failed => "badge bad",
    };
    view! { <span class=class data-testid="dataset-status">{status.as_str()}</span> }
}
