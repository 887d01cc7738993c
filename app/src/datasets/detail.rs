//! One dataset: source, mapping, counts, live import progress with cancel, rows per category,
//! histograms, rejected rows with their reasons, and a paged row browser with search.

use super::{
    api::{dataset_rows, fetch_dataset_detail, CancelImport},
    charts::{bucket_rows, Bars},
    list::StatusBadge,
};
use crate::components::{interval::every, time::RelativeTime};
use domain::dataset::{DatasetDetail, DatasetRow, DatasetStatus, DatasetSummary, SourceSpec};
use domain::units::{bytes, thousands};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use std::time::Duration;

#[component]
pub fn DatasetPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").and_then(|s| s.parse::<i64>().ok());
    let refresh = RwSignal::new(0u32);
    let cancel = ServerAction::<CancelImport>::new();
    let detail = Resource::new(
        move || (id(), refresh.get(), cancel.version().get()),
        |(id, _, _)| async move {
            match id {
                Some(id) => fetch_dataset_detail(id).await,
                None => Err(crate::AppError::NotFound("dataset not found".into())),
            }
        },
    );
    // Live progress while importing: poll once a second, stop once the import has ended. Read
    // with `try_get`: on the server the row browser's resource can run once more after the page
    // has been rendered and its values disposed (reading them then panicked the render task and
    // left the response hanging).
    let importing = Memo::new(move |_| {
        detail
            .try_get()
            .flatten()
            .is_some_and(|r| matches!(r, Ok(d) if d.summary.status == DatasetStatus::Importing))
    });
    every(Duration::from_secs(1), move || {
        if importing.get_untracked() {
            refresh.update(|n| *n += 1)
        }
    });
    view! {
        <Transition fallback=|| view! { <p class="muted">"Loading the dataset…"</p> }>
            {move || Suspend::new(async move {
                match detail.await {
                    Err(e) => view! { <h1>"Dataset"</h1><p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(d) => view! { <DatasetView d cancel/> }.into_any(),
                }
            })}
        </Transition>
        {move || id().map(|id| view! { <RowBrowser id importing/> })}
    }
}

#[component]
fn DatasetView(d: DatasetDetail, cancel: ServerAction<CancelImport>) -> impl IntoView {
    let s = d.summary.clone();
    let cancel_error = move || cancel.value().get().and_then(|r| r.err()).map(|e| e.to_string());
    view! {
        <Title text=s.name.clone()/>
        <div class="ds-head">
            <h1 data-testid="dataset-name">{s.name.clone()}</h1>
            <StatusBadge status=s.status/>
        </div>
        <section class="panel ds-facts">
            <dl>
                <dt>"Source"</dt><dd>{source_text(&s.source)}</dd>
                <dt>"Format"</dt><dd>{s.format.clone()}</dd>
                <dt>"Schema"</dt><dd>{mapping_text(&s)}</dd>
                <dt>"Added"</dt><dd><RelativeTime at=s.created_at/></dd>
            </dl>
            <div class="ds-counts">
                <Count label="rows" value=s.rows_imported testid="count-rows"/>
                <Count label="duplicates" value=s.rows_duplicate testid="count-duplicates"/>
                <Count label="rejected" value=s.rows_rejected testid="count-rejected"/>
            </div>
        </section>
        {(s.status == DatasetStatus::Importing).then(|| {
            let id = s.id;
            let on_cancel = move |_| {
                if crate::users::confirm("Cancel this import? The rows imported so far are removed.") {
                    cancel.dispatch(CancelImport { id });
                }
            };
            view! {
                <section class="panel" data-testid="import-progress">
                    <h2>"Importing"</h2>
                    <Progress s=s.clone()/>
                    <p class="muted">
                        {format!("{} rows read · {:.0} rows/s · {}", thousands(s.rows_imported + s.rows_duplicate + s.rows_rejected), s.rows_per_s, progress_bytes(&s))}
                    </p>
                    <button class="danger" on:click=on_cancel>"Cancel import"</button>
                    {move || cancel_error().map(|e| view! { <p class="error" role="alert">{e}</p> })}
                </section>
            }
        })}
        {s.error.clone().map(|e| view! {
            <section class="panel"><p class="error" role="alert" data-testid="dataset-error">{e}</p></section>
        })}
        {(s.status == DatasetStatus::Ready).then(|| {
            view! { <p class="muted">{format!("Imported at {:.0} rows/s.", s.rows_per_s)}</p> }
        })}
        {d.stats.clone().map(|stats| view! {
            <div class="ds-grid">
                <section class="panel">
                    <h2>"Rows per category"</h2>
                    {if stats.categories.len() == 1 && stats.categories[0].0.is_empty() {
                        view! { <p class="muted">"No category column was mapped."</p> }.into_any()
                    } else {
                        let rows = stats.categories.iter().map(|(c, n)| (if c.is_empty() { "(none)".to_string() } else { c.clone() }, *n)).collect();
                        view! { <Bars rows testid="categories"/> }.into_any()
                    }}
                </section>
                <section class="panel">
                    <h2>"Turns"</h2>
                    <Bars rows=bucket_rows(&stats.turns, "turns") testid="turns-histogram"/>
                </section>
                <section class="panel">
                    <h2>"Prompt length"</h2>
                    <Bars rows=bucket_rows(&stats.prompt_chars, "chars") testid="prompt-histogram"/>
                </section>
            </div>
        })}
        {(!d.rejections.is_empty()).then(|| view! { <Rejections d=d.clone()/> })}
    }
}

#[component]
fn Count(label: &'static str, value: i64, testid: &'static str) -> impl IntoView {
    view! {
        <div class="ds-count">
            <span class="num big" data-testid=testid>{thousands(value)}</span>
            <span class="muted">{label}</span>
        </div>
    }
}

#[component]
fn Progress(s: DatasetSummary) -> impl IntoView {
    let fraction = match s.bytes_total {
        Some(total) if total > 0 => (s.bytes_read as f64 / total as f64).clamp(0.0, 1.0),
        _ => 0.0,
    };
    view! {
        <div class="ds-progress" role="progressbar" aria-valuenow=format!("{:.0}", fraction * 100.0)>
            <span class="bar-fill" style=format!("width: {:.1}%", fraction * 100.0)></span>
        </div>
    }
}

fn progress_bytes(s: &DatasetSummary) -> String {
    match s.bytes_total {
        Some(total) => format!("{} of {}", bytes(s.bytes_read.max(0) as u64), bytes(total.max(0) as u64)),
        None => bytes(s.bytes_read.max(0) as u64),
    }
}

fn source_text(source: &SourceSpec) -> String {
    source.describe()
}

fn mapping_text(s: &DatasetSummary) -> String {
    let m = &s.mapping;
    let mut text = format!("{} (column `{}`)", m.schema, m.column);
    text.push_str(&match &m.id_column {
        Some(c) => format!(", id from `{c}`"),
        None => ", id = content hash".into(),
    });
    if let Some(c) = &m.category_column {
        text.push_str(&format!(", category from `{c}`"));
    }
    if let Some(c) = &m.tools_column {
        text.push_str(&format!(", tools from `{c}`"));
    }
    text
}

#[component]
fn Rejections(d: DatasetDetail) -> impl IntoView {
    let kept = d.rejections.len() as i64;
    let total = d.summary.rows_rejected;
    let shown: Vec<_> = d.rejections.into_iter().take(200).collect();
    let shown_count = shown.len();
    view! {
        <section class="panel" data-testid="rejections">
            <h2>"Rejected rows"</h2>
            <Bars rows=d.rejection_reasons testid="rejection-reasons"/>
            <p class="muted">
                {format!("Showing {} of {} rejected rows{}.", shown_count, thousands(total),
                    if total > kept { format!(" (the first {} are kept)", thousands(kept)) } else { String::new() })}
            </p>
            <table class="data ds-compact">
                <thead><tr><th>"Where"</th><th>"Reason"</th></tr></thead>
                <tbody>
                    {shown.into_iter().map(|r| view! { <tr><td class="mono">{r.location}</td><td>{r.reason}</td></tr> }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

/// Rows by key order, 25 at a time, with a search over the conversation text, id and category.
#[component]
fn RowBrowser(id: i64, importing: Memo<bool>) -> impl IntoView {
    let search = RwSignal::new(String::new());
    // The keys each page started after, so "Previous" can go back.
    let starts = RwSignal::new(vec![None::<i64>]);
    let page = Resource::new(
        // Reloaded when an import ends, so the rows appear without a page reload.
        move || {
            (search.get(), starts.with(|s| *s.last().unwrap_or(&None)), importing.try_get().unwrap_or(false))
        },
        move |(search, after, _)| dataset_rows(id, after, search),
    );
    let query = NodeRef::<leptos::html::Input>::new();
    let on_search = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let value = query.get().map(|i| i.value()).unwrap_or_default();
        starts.set(vec![None]);
        search.set(value);
    };
    view! {
        <section class="panel" data-testid="row-browser">
            <div class="ds-head">
                <h2>"Rows"</h2>
                <form class="inline-form" on:submit=on_search>
                    <input node_ref=query name="q" type="search" placeholder="Search text, id or category" aria-label="Search rows"/>
                    <button type="submit">"Search"</button>
                </form>
            </div>
            <Transition fallback=|| view! { <p class="muted">"Loading rows…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                        Ok(p) if p.rows.is_empty() => view! {
                            <p class="empty">{if search.get_untracked().is_empty() { "No rows." } else { "No row matches this search." }}</p>
                        }.into_any(),
                        Ok(p) => {
                            let next = p.next_after;
                            view! {
                                <table class="data" data-testid="rows-table">
                                    <thead><tr><th>"Key"</th><th>"Category"</th><th class="num">"Turns"</th><th class="num">"Prompt chars"</th><th>"First user message"</th></tr></thead>
                                    <tbody>{p.rows.into_iter().map(|row| view! { <RowLine row/> }).collect_view()}</tbody>
                                </table>
                                <div class="ds-pager">
                                    <button disabled=move || starts.with(|s| s.len() <= 1) on:click=move |_| starts.update(|s| { s.pop(); })>"Previous"</button>
                                    <button disabled=next.is_none() on:click=move |_| starts.update(|s| s.push(next))>"Next"</button>
                                </div>
                            }.into_any()
                        }
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn RowLine(row: DatasetRow) -> impl IntoView {
    let open = RwSignal::new(false);
    let first_user =
        row.messages.iter().find(|m| m.role == "user").map(|m| m.content.clone()).unwrap_or_default();
    let snippet: String = first_user.chars().take(140).collect();
    let messages = StoredValue::new(row.messages.clone());
    view! {
        <tr class="ds-clickable" on:click=move |_| open.update(|o| *o = !*o)>
            <td class="mono">{row.row_key.clone()}</td>
            <td>{row.category.clone().unwrap_or_default()}</td>
            <td class="num">{row.turn_count}</td>
            <td class="num">{thousands(row.prompt_chars as i64)}</td>
            <td>{snippet}</td>
        </tr>
        <Show when=move || open.get()>
            <tr class="expanded">
                <td colspan="5">
                    {messages.get_value().into_iter().map(|m| view! {
                        <div class="ds-message">
                            <span class="badge">{m.role}</span>
                            <pre class="mono wrap">{m.content}</pre>
                        </div>
                    }).collect_view()}
                </td>
            </tr>
        </Show>
    }
}
