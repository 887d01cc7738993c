//! `/review/queue`: one sample at a time, leased to this reviewer (renewed every minute while
//! the page is open), the next one as soon as a decision is saved, and the reviewer's progress.

use super::{
    api::{next_in_queue, release_lease, renew_lease, reviewer_progress},
    format,
    sample::{Mode, SampleView},
};
use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use std::time::Duration;

/// How often the open sample's lease is renewed (it lasts five minutes).
const RENEW_EVERY: Duration = Duration::from_secs(60);

#[component]
pub fn QueuePage() -> impl IntoView {
    let query = use_query_map();
    let run = Memo::new(move |_| query.with(|q| q.get("run").and_then(|r| r.parse::<i64>().ok())));
    let turn = RwSignal::new(0u32);
    // Taking the next sample leases it, a write: it happens in the browser only, so a server
    // render never leases a sample, and hydration never meets a different sample than the one
    // the server drew.
    let next = LocalResource::new(move || {
        let (run, _) = (run.get(), turn.get());
        next_in_queue(run)
    });
    let progress = Resource::new(move || (run.get(), turn.get()), |(run, _)| reviewer_progress(run));
    let current = RwSignal::new(None::<i64>);
    Effect::new(move |_| {
        if let Some(Ok(id)) = next.get() {
            current.set(id);
        }
    });
    // Effects run only in the browser: keep the lease while the page is open.
    Effect::new(move |_| {
        let renew = move || {
            if let Some(id) = current.get_untracked() {
                spawn_local(async move {
                    let _ = renew_lease(id).await;
                });
            }
        };
        if let Ok(handle) = set_interval_with_handle(renew, RENEW_EVERY) {
            on_cleanup(move || handle.clear());
        }
    });
    let skip = move |_| {
        if let Some(id) = current.get_untracked() {
            spawn_local(async move {
                let _ = release_lease(id).await;
            });
        }
    };
    view! {
        <Title text="Review queue"/>
        <div class="review-head">
            <h1>"Review queue"</h1>
            <a href=move || match run.get() { Some(r) => format!("/review?run={r}"), None => "/review".into() }>"← Sample list"</a>
        </div>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                progress.await.ok().map(|p| view! {
                    <p class="queue-progress" data-testid="queue-progress">
                        <strong>{format::count(Some(p.mine_today))}</strong> " decided by you today · "
                        {format::count(Some(p.mine_total))} " current decisions are yours · "
                        <strong>{format::count(Some(p.remaining))}</strong> " left to review"
                        {(p.held_by_others > 0).then(|| format!(" ({} open with other reviewers)", format::count(Some(p.held_by_others))))}
                    </p>
                })
            })}
        </Transition>
        // A local resource is empty during the server render and while hydrating, so both
        // render "Finding…"; the sample replaces it once the browser has leased one.
        {move || match next.get() {
            None => view! { <p class="muted">"Finding the next sample…"</p> }.into_any(),
            Some(Err(e)) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
            Some(Ok(None)) => view! {
                <section class="empty" data-testid="queue-empty">
                    <p>"Nothing left to review here: every finished sample is decided or open with another reviewer."</p>
                    <a href="/review">"Browse all samples"</a>
                </section>
            }.into_any(),
            Some(Ok(Some(id))) => view! {
                <p class="muted">
                    "This sample is yours for five minutes, renewed while this page is open. "
                    <a href="/review" on:click=skip>"Give it back and return to the list"</a>
                </p>
                <SampleView id mode=Mode::Queue on_decided=Callback::new(move |_| turn.update(|n| *n += 1))/>
            }.into_any(),
        }}
    }
    .into_any()
}
