//! The home page: a live overview of the work. Runs in progress with their progress, rate and
//! ETA; endpoints up or down with their load; review progress per run and the caller's own
//! queue; recent exports. Every empty section says what to do next. Refreshed every 5 s.

pub mod api;

use crate::{
    components::{interval::every, time::RelativeTime},
    endpoints::{CheckStatus, Load, Serving},
    exports::{api::ExportItem, history::status_class},
    runs::{chart::ProgressBar, duration_text},
};
use api::{get_overview, Overview, Work};
use domain::{
    dashboard::{ReviewProgress, RunInProgress},
    review::QueueProgress,
    units::thousands,
    EndpointSummary,
};
use leptos::prelude::*;
use leptos_meta::Title;
use std::time::Duration;

#[component]
pub fn OverviewPage() -> impl IntoView {
    let refresh = RwSignal::new(0u32);
    let overview = Resource::new(move || refresh.get(), |_| get_overview());
    every(Duration::from_secs(5), move || refresh.update(|n| *n += 1));
    view! {
        <Title text="Overview"/>
        <h1>"Overview"</h1>
        <Transition fallback=|| view! { <p class="muted">"Loading the overview…"</p> }>
            {move || Suspend::new(async move {
                match overview.await {
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(o) => view! { <Sections o/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Sections(o: Overview) -> impl IntoView {
    let Overview { queue, review, work } = o;
    match work {
        Some(work) => {
            let Work { runs, endpoints, exports, datasets_ready } = work;
            let has_endpoints = !endpoints.is_empty();
            view! {
                <RunsSection runs datasets_ready has_endpoints/>
                <div class="two-col">
                    <EndpointsSection endpoints/>
                    <ReviewSection queue review/>
                </div>
                <ExportsSection exports/>
            }
            .into_any()
        }
        None => view! { <ReviewSection queue review/> }.into_any(),
    }
}

/// One section of the overview: a titled panel with a link to the page it summarises.
#[component]
fn Panel(
    testid: &'static str,
    title: &'static str,
    href: &'static str,
    link: &'static str,
    children: Children,
) -> impl IntoView {
    view! {
        <section class="panel" data-testid=testid>
            <div class="panel-head"><h2>{title}</h2> <a href=href>{link}</a></div>
            {children()}
        </section>
    }
}

#[component]
fn RunsSection(runs: Vec<RunInProgress>, datasets_ready: i64, has_endpoints: bool) -> impl IntoView {
    let body = if !runs.is_empty() {
        view! {
            <table class="data" data-testid="overview-runs-table">
                <thead>
                    <tr><th>"Run"</th><th>"Status"</th><th>"Progress"</th><th class="num">"tok/s"</th><th class="num">"ETA"</th></tr>
                </thead>
                <tbody>{runs.into_iter().map(|run| view! { <RunRow run/> }).collect_view()}</tbody>
            </table>
        }
        .into_any()
    } else if datasets_ready == 0 {
        view! { <p class="empty">"No dataset yet. " <a href="/datasets/new">"Import one"</a> " to generate from."</p> }.into_any()
    } else if !has_endpoints {
        view! { <p class="empty">"No vLLM server yet. " <a href="/endpoints">"Register one"</a> " to send prompts to."</p> }.into_any()
    } else {
        view! { <p class="empty">"Nothing is generating. " <a href="/runs/new">"Start a run"</a> " from a dataset."</p> }.into_any()
    };
    view! { <Panel testid="overview-runs" title="Runs in progress" href="/runs" link="All runs">{body}</Panel> }
}

#[component]
fn RunRow(run: RunInProgress) -> impl IntoView {
    let counts = run.counts.clone();
    let done = format!("{} / {}", thousands(counts.finished()), thousands(counts.total()));
    view! {
        <tr data-run=run.id>
            <td>
                <a href=format!("/runs/{}", run.id)>{run.name.clone()}</a>
                <div class="small muted">{run.dataset.clone()}</div>
            </td>
            <td><span class=format!("badge status-{}", run.status.as_str())>{run.status.as_str()}</span></td>
            <td class="progress-cell"><ProgressBar counts=Signal::stored(counts)/> <span class="small">{done}</span></td>
            <td class="num" data-testid="run-tps">{thousands(run.tokens_per_s.round() as i64)}</td>
            <td class="num">{run.eta_secs.map(duration_text).unwrap_or_else(|| "—".into())}</td>
        </tr>
    }
}

#[component]
fn EndpointsSection(endpoints: Vec<EndpointSummary>) -> impl IntoView {
    let body = if endpoints.is_empty() {
        view! { <p class="empty">"No endpoints yet. " <a href="/endpoints">"Add the base URL"</a> " of a vLLM server."</p> }.into_any()
    } else {
        let rows = endpoints
            .into_iter()
            .map(|e| {
                let (name, label) = (e.name.clone(), e.name.clone());
                let capacity = e.capacity.clone();
                let limit = capacity.as_ref().map(|c| format!("limit {}", thousands(i64::from(c.limit))));
                let state = match &capacity {
                    Some(_) => view! { <Serving capacity=capacity.clone()/> }.into_any(),
                    None => view! { <CheckStatus endpoint=e/> }.into_any(),
                };
                view! {
                    <li data-endpoint=name>
                        <strong>{label}</strong> " " {state}
                        <div class="small muted">{limit} " " <Load capacity/></div>
                    </li>
                }
            })
            .collect_view();
        view! { <ul class="plain" data-testid="overview-endpoint-list">{rows}</ul> }.into_any()
    };
    view! { <Panel testid="overview-endpoints" title="Endpoints" href="/endpoints" link="Manage">{body}</Panel> }
}

#[component]
fn ReviewSection(queue: QueueProgress, review: Vec<ReviewProgress>) -> impl IntoView {
    let free = queue.remaining - queue.held_by_others;
    let queue_line = if queue.remaining == 0 {
        view! { <p class="empty">"Nothing waits for review. Samples show up here as runs finish them."</p> }
            .into_any()
    } else {
        view! {
            <p>
                <strong>{thousands(queue.remaining)}</strong> " samples wait for review"
                {(queue.held_by_others > 0).then(|| format!(" ({} open with other reviewers)", thousands(queue.held_by_others)))}
                ". " {(free > 0).then(|| view! { <a class="button primary" href="/review/queue">"Review next"</a> })}
            </p>
        }
        .into_any()
    };
    let has_runs = !review.is_empty();
    let rows = review
        .into_iter()
        .map(|r| {
            let href = format!("/review?run={}", r.run_id);
            let decided = format!("{} of {}", thousands(r.decided()), thousands(r.total()));
            view! {
                <tr data-run=r.run_id>
                    <td><a href=href>{r.run_name.clone()}</a> <div class="small muted">{decided} " decided"</div></td>
                    <td class="num" data-testid="to-review">{thousands(r.to_review)}</td>
                    <td class="num" data-testid="approved">{thousands(r.approved)}</td>
                    <td class="num" data-testid="rejected">{thousands(r.rejected)}</td>
                    <td class="num" data-testid="flagged">{thousands(r.flagged)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <Panel testid="overview-review" title="Review" href="/review" link="All samples">
            <div data-testid="my-queue">
                {queue_line}
                <p class="small muted">
                    {format!("You decided {} today, {} in all.", thousands(queue.mine_today), thousands(queue.mine_total))}
                </p>
            </div>
            {has_runs.then(|| view! {
                <table class="data" data-testid="review-progress">
                    <thead>
                        <tr><th>"Run"</th><th class="num">"To review"</th><th class="num">"Approved"</th><th class="num">"Rejected"</th><th class="num">"Flagged"</th></tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            })}
        </Panel>
    }
}

#[component]
fn ExportsSection(exports: Vec<ExportItem>) -> impl IntoView {
    let body = if exports.is_empty() {
        view! { <p class="empty">"No exports yet. Once samples are reviewed, " <a href="/exports">"export the training set"</a> "."</p> }.into_any()
    } else {
        let rows = exports
            .into_iter()
            .map(|e| {
                let progress = match e.rows_total {
                    Some(total) => format!("{} / {}", thousands(e.rows_done), thousands(total)),
                    None => thousands(e.rows_done),
                };
                view! {
                    <tr data-export=e.id>
                        <td class="num">{e.id}</td>
                        <td>{e.preset_name.clone().map(|p| view! { <strong>{p}</strong> " " })} <span class="small">{e.summary.clone()}</span></td>
                        <td><span class=status_class(e.status) title=e.error.clone()>{e.status.as_str()}</span></td>
                        <td class="num">{progress}</td>
                        <td><RelativeTime at=e.created_at/></td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <table class="data" data-testid="overview-exports-table">
                <thead><tr><th class="num">"#"</th><th>"Export"</th><th>"Status"</th><th class="num">"Samples"</th><th>"Started"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
        .into_any()
    };
    view! { <Panel testid="overview-exports" title="Recent exports" href="/exports" link="All exports">{body}</Panel> }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    fn render(o: Overview) -> String {
        Owner::new().with(|| view! { <Sections o/> }.to_html())
    }

    fn empty(datasets_ready: i64, endpoints: Vec<EndpointSummary>) -> Overview {
        Overview {
            queue: QueueProgress { mine_today: 0, mine_total: 0, remaining: 0, held_by_others: 0 },
            review: vec![],
            work: Some(Work { runs: vec![], endpoints, exports: vec![], datasets_ready }),
        }
    }

    fn endpoint() -> EndpointSummary {
        EndpointSummary {
            id: 1,
            name: "gpu-a".into(),
            base_url: "http://gpu-a:8000".into(),
            has_api_key: false,
            models: vec![],
            checked_at: None,
            check_error: Some("connection refused".into()),
            created_at: time::OffsetDateTime::UNIX_EPOCH,
            runs_draft: None,
            draft_acceptance: None,
            capacity: None,
            runs: vec![],
        }
    }

    #[test]
    fn each_empty_section_says_what_to_do_next_in_workflow_order() {
        let html = render(empty(0, vec![]));
        assert!(html.contains("No dataset yet.") && html.contains("href=\"/datasets/new\""), "{html}");
        assert!(html.contains("No endpoints yet."), "{html}");
        assert!(html.contains("Nothing waits for review."), "{html}");
        assert!(html.contains("No exports yet."), "{html}");
        assert!(!html.contains("data-testid=\"review-progress\""), "no table without runs: {html}");

        let html = render(empty(3, vec![]));
        assert!(html.contains("No vLLM server yet.") && html.contains("href=\"/endpoints\""), "{html}");

        let html = render(empty(3, vec![endpoint()]));
        assert!(html.contains("Nothing is generating.") && html.contains("href=\"/runs/new\""), "{html}");
        // A server no run has used yet shows its last connection test.
        assert!(html.contains("unreachable") && html.contains("connection refused"), "{html}");
    }

    #[test]
    fn a_reviewer_sees_review_only_and_a_way_into_their_queue() {
        let html = render(Overview {
            queue: QueueProgress { mine_today: 2, mine_total: 9, remaining: 40, held_by_others: 3 },
            review: vec![ReviewProgress {
                run_id: 7,
                run_name: "math-r1".into(),
                to_review: 40,
                approved: 5,
                rejected: 3,
                flagged: 1,
            }],
            work: None,
        });
        assert!(!html.contains("overview-runs") && !html.contains("overview-exports"), "{html}");
        assert!(html.contains("40</strong> samples wait for review"), "{html}");
        assert!(html.contains("3 open with other reviewers"), "{html}");
        assert!(html.contains("href=\"/review/queue\""), "{html}");
        assert!(html.contains("You decided 2 today, 9 in all."), "{html}");
        assert!(html.contains("9 of 49"), "decided of total: {html}");
    }
}
