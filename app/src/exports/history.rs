//! Past exports: status, progress while running, size, counts, where they landed, a cancel
//! button while running and a download link per file of a completed folder export.

use super::api::{download_url, CancelExport, ExportItem};
use super::confirm::ConfirmButton;
use crate::components::time::RelativeTime;
use crate::AppError;
use domain::export::ExportStatus;
use domain::units::{bytes, thousands};
use leptos::prelude::*;

#[component]
pub fn History(
    exports: Resource<Result<Vec<ExportItem>, AppError>>,
    cancel: ServerAction<CancelExport>,
) -> impl IntoView {
    let cancel_error = move || cancel.value().get().and_then(|r| r.err()).map(|e| e.to_string());
    view! {
        <section class="panel" data-testid="past-exports">
            <h2>"Past exports"</h2>
            {move || cancel_error().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <Transition fallback=|| view! { <p class="muted">"Loading exports…"</p> }>
                {move || Suspend::new(async move {
                    match exports.await {
                        Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                        Ok(list) if list.is_empty() => view! {
                            <p class="empty">"No exports yet. Export a preset in one click above, or build one with the form."</p>
                        }.into_any(),
                        Ok(list) => view! {
                            <table class="data exports" data-testid="exports-table">
                                <thead>
                                    <tr>
                                        <th class="num">"#"</th><th>"Export"</th><th>"Status"</th><th>"Progress"</th>
                                        <th class="num">"Samples"</th><th class="num">"Size"</th><th>"Files"</th><th>"Started"</th><th class="actions"></th>
                                    </tr>
                                </thead>
                                <tbody>{list.into_iter().map(|e| view! { <ExportRow e cancel/> }).collect_view()}</tbody>
                            </table>
                        }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

pub(crate) fn status_class(status: ExportStatus) -> &'static str {
    match status {
        ExportStatus::Queued => "badge status-paused",
        ExportStatus::Running => "badge status-running",
        ExportStatus::Completed => "badge status-completed",
        ExportStatus::Failed => "badge bad",
        ExportStatus::Cancelled => "badge status-cancelled",
    }
}

#[component]
fn ExportRow(e: ExportItem, cancel: ServerAction<CancelExport>) -> impl IntoView {
    let id = e.id;
    let running = matches!(e.status, ExportStatus::Running | ExportStatus::Queued);
    let progress = if running {
        let total = e.rows_total.unwrap_or(0);
        let share = if total > 0 { e.rows_done as f64 / total as f64 * 100.0 } else { 0.0 };
        let text = match e.rows_total {
            Some(total) => format!("{} / {}", thousands(e.rows_done), thousands(total)),
            None if e.status == ExportStatus::Queued => {
                "queued: waiting for a server or `draft-studio worker` to take it".to_string()
            }
            None => "choosing samples…".to_string(),
        };
        view! {
            <div class="ds-progress" role="progressbar" aria-valuemin="0" aria-valuemax=total aria-valuenow=e.rows_done>
                <span class="bar-fill" style=format!("width: {share:.1}%")></span>
            </div>
            <span class="small">{text}</span>
        }
        .into_any()
    } else {
        let text = match (&e.finished_at, e.status) {
            (_, ExportStatus::Completed) => "done".to_string(),
            (_, ExportStatus::Cancelled) => "cancelled; nothing was left behind".to_string(),
            _ => String::new(),
        };
        view! {
            <span class="small muted">{text}</span>
            {e.finished_at.map(|at| view! { <div class="small muted">"ended " <RelativeTime at/></div> })}
        }
        .into_any()
    };
    let samples = match &e.counts {
        Some(c) => {
            let mut detail = vec![format!(
                "train {} · validation {}",
                thousands(c.train as i64),
                thousands(c.validation as i64)
            )];
            if c.duplicates_removed > 0 {
                detail.push(format!("{} duplicates removed", thousands(c.duplicates_removed as i64)));
            }
            if c.dropped > 0 {
                detail.push(format!("{} dropped as too long", thousands(c.dropped as i64)));
            }
            if c.truncated > 0 {
                detail.push(format!("{} truncated", thousands(c.truncated as i64)));
            }
            detail.push(format!("{} completion tokens", thousands(c.completion_tokens as i64)));
            view! {
                <span data-testid="export-written">{thousands(c.written as i64)}</span>
                <div class="small muted">{detail.join(" · ")}</div>
            }
            .into_any()
        }
        None => e
            .rows_total
            .map(|t| view! { <span class="muted">{thousands(t)}</span> }.into_any())
            .unwrap_or_else(|| ().into_any()),
    };
    let files = if e.status == ExportStatus::Completed && !e.to_s3 {
        e.files
            .iter()
            .map(|f| {
                let rows = f.rows.map(|r| format!(" · {} rows", thousands(r as i64))).unwrap_or_default();
                view! {
                    <li>
                        <a href=download_url(id, &f.name) download=format!("export-{id}-{}", f.name) data-testid="download-file">{f.name.clone()}</a>
                        <span class="small muted">{format!(" {}{rows}", bytes(f.bytes))}</span>
                    </li>
                }
            })
            .collect_view()
            .into_any()
    } else {
        ().into_any()
    };
    let location = e.location.clone();
    let title = e.preset_name.clone().unwrap_or_else(|| "custom export".to_string());
    view! {
        <tr id=format!("export-{id}") data-export=id data-status=e.status.as_str()>
            <td class="num">{id}</td>
            <td>
                <strong>{title}</strong>
                <div class="small muted">{e.summary.clone()}</div>
                {e.created_by.clone().map(|by| view! { <div class="small muted">{format!("by {by}")}</div> })}
                <TrainedDrafts drafts=e.trained.clone()/>
            </td>
            <td>
                <span class=status_class(e.status) data-testid="export-status">{e.status.as_str()}</span>
                {e.error.clone().map(|err| view! { <div class="error small" data-testid="export-error">{err}</div> })}
            </td>
            <td class="progress-cell">{progress}</td>
            <td class="num">{samples}</td>
            <td class="num nowrap">{e.bytes.map(|b| bytes(b.max(0) as u64))}</td>
            <td class="files">
                {location.map(|l| view! { <div class="mono small location" title=l.clone()>{l.clone()}</div> })}
                <ul class="file-list">{files}</ul>
                {(e.to_s3 && e.status == ExportStatus::Completed).then(|| view! {
                    <div class="small muted">"In the bucket: download it with your S3 tools."</div>
                })}
            </td>
            <td><RelativeTime at=e.created_at/></td>
            <td class="actions">
                {running.then(|| view! {
                    <ConfirmButton label="Cancel" confirm="Stop it"
                        question=format!("Stop export {id}? What it wrote so far is removed.")
                        on_confirm=move || { cancel.dispatch(CancelExport { id }); }/>
                })}
            </td>
        </tr>
    }
}

/// The drafts trained on an export, each with its evaluations and their pooled acceptance, and
/// a link to the draft's loop.
#[component]
fn TrainedDrafts(drafts: Vec<domain::lineage::TrainedDraft>) -> impl IntoView {
    (!drafts.is_empty()).then(|| {
        view! {
            <ul class="trained small" data-testid="export-drafts">
                {drafts.into_iter().map(|d| {
                    let loop_url = format!("/acceptance/loop?draft={}", crate::components::layout::encode(&d.draft.name));
                    view! {
                        <li>
                            "trained " <a href=loop_url data-testid="export-draft"><code>{d.draft.describe()}</code></a>
                            {d.evaluations.into_iter().map(|e| view! {
                                " · " <a href=format!("/acceptance/runs/{}", e.run_id)>{e.name.clone()}</a>
                                {e.overall.as_ref().map(|p| format!(" {}", crate::acceptance::format_pooled(p)))}
                            }).collect_view()}
                        </li>
                    }
                }).collect_view()}
            </ul>
        }
    })
}
